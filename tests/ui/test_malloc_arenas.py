"""`drt-reader serve` caps glibc's malloc arenas (issue 30 item 2: at 16 load-test clients the
server's RSS grew with the number of worker threads that had run a job, 1.73x that at 1 client in
one run; with two arenas the same calls stay near the 1-client figure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import ctypes, re, sys, tempfile, threading
sys.path.insert(0, sys.argv[1])
from ui.cli import limit_malloc_arenas
applied = limit_malloc_arenas(2) if sys.argv[2] == "1" else None
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
gate = threading.Barrier(8)
def work():
    gate.wait()
    for _ in range(200):
        libc.malloc(512)  # small blocks come from the thread's arena (kept: the probe exits)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
path = tempfile.mktemp()
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
print(applied, len(re.findall(r'<heap nr="\d+">', open(path).read())))
"""


def arenas(limit: bool) -> tuple[str, int]:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_ARENA_MAX from the caller
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), "1" if limit else "0"], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_serve_caps_malloc_arenas():
    applied, n = arenas(limit=True)
    _, n_default = arenas(limit=False)
    if n_default <= 2:
        pytest.skip(f"this libc made {n_default} arenas for 8 threads anyway")
    assert applied == "True" and n <= 2 < n_default, (n, n_default)


def test_malloc_arena_max_from_the_environment_wins(monkeypatch):
    from ui.cli import limit_malloc_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_serve_calls_it_first(monkeypatch):
    import ui.cli as cli
    from cli_io import UserError

    calls = []
    monkeypatch.setattr(cli, "limit_malloc_arenas", lambda *a: calls.append(a) or True)
    with pytest.raises(UserError):  # a bad port: it stops before anything starts
        cli.cmd_serve(type("A", (), {"port": 0, "host": "127.0.0.1"})())
    assert calls == [()]
