"""ingest.summary: the extractive summary follows the dependency map, honestly labelled."""

from __future__ import annotations

import hashlib

from ingest.summary import _ranks, default_k, extractive, in_degree


def _store(library, n_chunks: int) -> str:
    doc_id = hashlib.sha256(str(n_chunks).encode()).hexdigest()
    doc = {
        "id": doc_id, "title": "T", "kind": "text", "source_name": "t.txt", "n_bytes": 1, "n_pages": n_chunks,
        "n_chars": 10 * n_chunks, "n_tokens": 63 * n_chunks, "n_chunks": n_chunks, "chunk_tokens": 63,
        "tokenizer_fp": "t", "warnings": [],
    }  # fmt: skip
    pages = [
        {"number": i + 1, "label": f"p{i + 1}", "char_start": 10 * i, "char_end": 10 * i + 9, "text": "pg"}
        for i in range(n_chunks)
    ]
    chunks = [
        {"idx": i, "tok_start": 63 * i, "tok_end": 63 * i + 63, "char_start": 10 * i, "char_end": 10 * i + 9,
         "page_first": i + 1, "page_last": min(i + 2, n_chunks), "text": f"passage number {i}"}
        for i in range(n_chunks)
    ]  # fmt: skip
    library.add_document(doc, pages, chunks, list(range(63 * n_chunks)))
    return doc_id


def test_in_degree_weights_and_ignores_bad_ids():
    dep = [
        {"chunk": 2, "retrieved": [0], "weights": [1.0]},
        {"chunk": 3, "retrieved": [0, 1], "weights": [0.75, 0.25]},
        {"chunk": 4, "retrieved": [1, 4, 99], "weights": [0.5, 0.3, 0.2]},  # itself and out of range: ignored
    ]
    assert in_degree(dep, 5) == [1.75, 0.75, 0.0, 0.0, 0.0]


def test_extractive_picks_the_most_retrieved_in_document_order(library):
    doc_id = _store(library, 16)
    dep = [{"chunk": c, "retrieved": [9, 2], "weights": [0.6, 0.4]} for c in range(11, 16)]
    dep += [{"chunk": c, "retrieved": [5], "weights": [1.0]} for c in range(7, 10)]
    out = extractive(library, doc_id, dep, k=3)
    assert out["summary"].startswith("Extractive summary")
    assert [e["chunk"] for e in out["evidence"]] == [2, 5, 9]
    assert out["evidence"][2]["weight"] == 1.0 and out["evidence"][2]["pages"] == [10, 11]
    assert "(pp. p10-p11) passage number 9" in out["summary"]
    assert out["summary"].index("passage number 2") < out["summary"].index("passage number 9")
    assert out["trace"]["mode"] == "extractive" and out["trace"]["selected"] == [2, 5, 9]


def test_losses_are_blended_when_the_engine_has_them(library):
    doc_id = _store(library, 6)
    dep = [{"chunk": c, "retrieved": [0, 1], "weights": [0.5, 0.5]} for c in range(3, 6)]
    out = extractive(library, doc_id, dep, losses=[0.1, 5.0, 0.1, 0.1, 0.1, 0.1], k=1)
    assert [e["chunk"] for e in out["evidence"]] == [1] and "loss" in out["trace"]["method"]


def test_short_document_says_so(library):
    doc_id = _store(library, 2)
    out = extractive(library, doc_id, [])
    assert "too short" in out["summary"] and [e["chunk"] for e in out["evidence"]] == [0, 1]


def test_helpers():
    assert _ranks([3.0, 1.0, 3.0]) == [0.75, 0.0, 0.75]
    assert default_k(4) == 3 and default_k(100) == 10 and default_k(10**6) == 12
