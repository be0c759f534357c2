"""Row 9 of the reliability plan: a parser worker that really dies (SIGSEGV, SIGKILL, abort) or
hangs. tests/ingest/test_parse.py::test_worker_deaths_are_one_line_errors feeds `_result` the exit
codes; here a real child process dies, through `parse_file` and through the whole ingest."""

from __future__ import annotations

import sys
import time

import pytest

from ingest.errors import ParseCrashed, ParseOutOfMemory, ParseTimeout
from ingest.parse import ParseLimits, parse_file
from tests.ingest.conftest import snapshot
from tests.reliability.conftest import make_pdf

_WORKERS = {
    # what the child does instead of parsing (it reads the request first, like the real one)
    "segv": "import os, signal, sys; sys.stdin.read(); os.kill(os.getpid(), signal.SIGSEGV)",
    "kill": "import os, signal, sys; sys.stdin.read(); os.kill(os.getpid(), signal.SIGKILL)",
    "abort": "import os, sys; sys.stdin.read(); sys.stderr.write(\"terminate called after throwing an "
    "instance of 'std::bad_alloc'\\n\"); sys.stderr.flush(); os.abort()",
    "garbage": "import sys; sys.stdin.read(); sys.stdout.write('{not json'); sys.exit(3)",
    "hang": "import sys, time; sys.stdin.read(); time.sleep(600)",
}


@pytest.fixture
def fake_worker(tmp_path, monkeypatch):
    """Replace the interpreter that `parse_file` starts with a script that misbehaves."""

    def use(kind: str) -> None:
        exe = tmp_path / f"python-{kind}"
        exe.write_text(f"#!{sys.executable}\n{_WORKERS[kind]}\n")
        exe.chmod(0o755)
        monkeypatch.setattr(sys, "executable", str(exe))

    return use


@pytest.mark.parametrize(
    "kind, error, says",
    [
        ("segv", ParseCrashed, "crashed on doc.pdf \\(signal SIGSEGV\\)"),
        ("kill", ParseTimeout, "stopped"),
        ("abort", ParseOutOfMemory, "out of memory"),
        ("garbage", ParseCrashed, "exit status 3"),
    ],
)
def test_a_dying_worker_is_a_one_line_error(tmp_path, fake_worker, kind, error, says):
    path = tmp_path / "doc.pdf"
    make_pdf(path, ["Some text."])
    fake_worker(kind)
    with pytest.raises(error, match=says) as e:
        parse_file(path)
    assert "\n" not in str(e.value)


def test_a_hanging_worker_is_killed_at_the_deadline(tmp_path, fake_worker):
    path = tmp_path / "doc.pdf"
    make_pdf(path, ["Some text."])
    fake_worker("hang")
    t0 = time.monotonic()
    with pytest.raises(ParseTimeout, match="longer than 1 s"):
        parse_file(path, limits=ParseLimits(timeout_s=1))
    assert time.monotonic() - t0 < 8


def test_a_crash_during_ingest_leaves_the_library_unchanged_and_a_retry_works(
    tmp_path, fake_worker, library, drt_home, monkeypatch
):
    from ingest.pipeline import ingest

    path = tmp_path / "doc.pdf"
    make_pdf(path, ["Some text that will be stored on the second try."])
    real = sys.executable
    fake_worker("segv")
    before = snapshot(drt_home)
    with pytest.raises(ParseCrashed):
        ingest(path, library=library, engine=None, prefill=False)
    assert snapshot(drt_home) == before
    monkeypatch.setattr(sys, "executable", real)
    assert ingest(path, library=library, engine=None, prefill=False).status == "stored"
