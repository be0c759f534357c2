"""`drt-reader serve` (ui.cli): listens on 127.0.0.1, prints its JSON line, stops on Ctrl-C;
bad options are one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def test_serve_command(drt_home, tiny_model, free_port, capsys):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, str(ROOT / "app.py"), "--home", str(drt_home), "--model", str(tiny_model),
           "serve", "--port", str(free_port), "--max-file-size", "2mb", "--json"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        assert info["url"] == f"http://127.0.0.1:{free_port}/" and info["max_file_size"] == 2 * 1024**2
        r = httpx.get(info["url"], timeout=30)
        assert r.status_code == 200 and "drt-reader" in r.text
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # bad input: one line, exit 2
    import app

    capsys.readouterr()
    for bad in (["--max-file-size", "lots"], ["--port", "0"]):
        assert app.main(["--home", str(drt_home), "serve", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("drt-reader: error:"), err
