"""Row 24 of the reliability plan: pip-audit on the pinned set (pyproject.toml's `==` pins).

Fails on any known advisory not in .ci/audit-allow.txt (advisories without a fixed version, each
with its reason). Skips, saying why, when pip-audit is not installed (`pip install pip-audit`) or
when no vulnerability service answers (offline machines: PyPI's JSON API and api.osv.dev)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pinned() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    return re.findall(r'"([A-Za-z0-9_.-]+==[^"]+)"', deps)


def allowed() -> set[str]:
    lines = (ROOT / ".ci" / "audit-allow.txt").read_text().splitlines()
    return {ln.split()[0] for ln in lines if ln.strip() and not ln.startswith("#")}


def test_pins_are_read():
    pins = pinned()
    assert "gradio==6.31.0" in pins and "torch==2.13.0" in pins


def test_pip_audit_on_the_pinned_set(tmp_path):
    exe = shutil.which("pip-audit") or str(Path(sys.executable).with_name("pip-audit"))
    if not Path(exe).exists():
        pytest.skip("pip-audit is not installed (pip install pip-audit)")
    req = tmp_path / "pins.txt"
    req.write_text("\n".join(pinned()) + "\n")
    r = subprocess.run([exe, "-r", str(req), "--no-deps", "-f", "json", "--progress-spinner", "off"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        pytest.skip(f"pip-audit could not reach a vulnerability service: {r.stderr.strip().splitlines()[-1:]}")
    deps = report.get("dependencies", [])
    audited = [d for d in deps if "skip_reason" not in d]
    if not audited:
        why = deps[0]["skip_reason"] if deps else "nothing audited"
        pytest.skip(f"no vulnerability service answered for any pin ({why})")
    found = [(d["name"], d["version"], v["id"]) for d in audited for v in d.get("vulns", [])]
    assert [f for f in found if f[2] not in allowed()] == []
