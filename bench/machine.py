"""The machine a benchmark ran on, for the tables in docs/RESULTS.md."""

from __future__ import annotations

import platform


def cpu_model(fallback: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo; `fallback` (default platform.machine()) elsewhere."""
    name = fallback if fallback is not None else platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name
