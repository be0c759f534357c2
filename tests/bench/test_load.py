"""Issue 30, item 2, the suite's short version of `drt-reader bench load`: the served app on the
shipped model under two simultaneous gradio_client clients (each uploads its own copy of a 3-page
PDF, then asks and summarizes) gives no error but "queue full", and leaves a library where every
document is whole and complete or resumable (the bench runs N = 1, 4 and 16 for minutes on a
20-page PDF; RESULTS §7)."""

from __future__ import annotations

from pathlib import Path

from bench.faults import cut_pdf
from bench.load import client_copies, run

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_two_clients_upload_ask_and_summarize(tmp_path):
    pdf = cut_pdf(ASSETS / "emma-pp2-21.pdf", 3, tmp_path)
    (tmp_path / "run").mkdir()
    r = run(clients=2, minutes=0.1, max_actions=2, work=tmp_path / "run", threads=1, doc=pdf)
    assert r["other_errors"] == [] and r["stuck_clients"] == 0, r
    assert r["actions"]["ingest"]["ok"] == 2 and r["actions"]["ask"]["ok"] >= 1, r
    assert r["actions"]["summarize"]["ok"] >= 1, r
    lib = r["library"]
    assert lib["integrity"] == "ok" and lib["half_written"] == [] and lib["documents"] == 2
    assert lib["prefill_done"] + lib["prefill_resumable"] == lib["prefill_rows"] == 2
    assert r["rss_peak_mb"] >= r["rss_idle_mb"] > 0


def test_client_copies_differ_in_bytes_not_in_text(tmp_path):
    import hashlib

    import pymupdf

    pdf = cut_pdf(ASSETS / "emma-pp2-21.pdf", 2, tmp_path)
    (tmp_path / "c").mkdir()
    a, b = client_copies(pdf, 2, tmp_path / "c")
    assert hashlib.sha256(a.read_bytes()).digest() != hashlib.sha256(b.read_bytes()).digest()
    assert [p.get_text() for p in pymupdf.open(a)] == [p.get_text() for p in pymupdf.open(b)]
