"""Issue 30, item 2, the suite's short version of `drt-reader bench load`: the served app on the
shipped model under two simultaneous gradio_client clients (upload, ask, summarize) gives no error
but "queue full", and leaves a library where every document is whole and complete or resumable
(the bench runs N = 1, 4 and 16 for minutes; RESULTS §7)."""

from __future__ import annotations

from bench.load import run


def test_two_clients_upload_ask_and_summarize(tmp_path):
    r = run(clients=2, minutes=0.1, max_actions=2, work=tmp_path, threads=1)
    assert r["other_errors"] == [] and r["stuck_clients"] == 0, r
    assert r["actions"]["ingest"]["ok"] == 2 and r["actions"]["ask"]["ok"] >= 1, r
    lib = r["library"]
    assert lib["integrity"] == "ok" and lib["half_written"] == [] and lib["documents"] == 2
    assert lib["prefill_done"] + lib["prefill_resumable"] == lib["prefill_rows"] == 2
    assert r["rss_peak_mb"] >= r["rss_idle_mb"] > 0
