#!/bin/sh
# Install what the browser test (tests/ui/test_browser.py) and `python -m ui.screenshots` need:
# Debian's chromium (system package; Playwright is pointed at /usr/bin/chromium, it downloads
# no browser). The Python side is the `playwright` package (pinned in pyproject's dev extras).
# Usage: tests/ui/install_browser.sh [PYTHON]   (PYTHON: also pip-install playwright into it)
set -eu
if [ -x /usr/bin/chromium ]; then
    echo "install_browser: chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || true)"
else
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation fonts-dejavu-core
fi
if [ "$#" -ge 1 ]; then
    "$1" -c "import playwright" 2>/dev/null || "$1" -m pip install -q "playwright==1.65.2"
fi
