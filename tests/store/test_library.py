"""store.library: one transaction per document, same file = same id, prefixes, threads, cascade."""

from __future__ import annotations

import hashlib
import sqlite3
import threading

import pytest

from store.errors import AmbiguousDocument, UnknownDocument
from store.library import Library, blob_to_ids, ids_to_blob


def _doc(doc_id: str, n_chunks: int = 3, title: str = "T") -> tuple[dict, list, list, list]:
    doc = {
        "id": doc_id,
        "title": title,
        "kind": "text",
        "source_name": "x.txt",
        "n_bytes": 10,
        "n_pages": 2,
        "n_chars": 100,
        "n_tokens": n_chunks * 63,
        "n_chunks": n_chunks,
        "chunk_tokens": 63,
        "tokenizer_fp": "tok",
        "warnings": ["a warning"],
    }
    pages = [
        {"number": 1, "label": "i", "char_start": 0, "char_end": 50, "text": "a" * 50},
        {"number": 2, "label": "ii", "char_start": 52, "char_end": 100, "text": "b" * 48},
    ]
    chunks = [
        {
            "idx": i,
            "tok_start": 63 * i,
            "tok_end": 63 * i + 63,
            "char_start": i,
            "char_end": i + 1,
            "page_first": 1,
            "page_last": 2,
            "text": f"chunk {i} about lemmas and morphisms" if i % 2 else f"chunk {i} about sheaves",
        }
        for i in range(n_chunks)
    ]
    return doc, pages, chunks, list(range(n_chunks * 63))


PARTIAL = {"n_tokens_done": 63, "n_chunks_done": 1, "n_tokens_total": 189, "state_dir": "/s"}


def _id(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def _counts(lib: Library) -> dict:
    tables = ["documents", "pages", "chunks", "tokens", "prefill_states", "traces", "questions", "answers"]
    return {t: lib._w.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_add_document_once(library):
    d = _doc(_id("a"))
    assert library.add_document(*d) is True
    assert library.add_document(*d) is False  # the same file twice is the same document
    doc = library.document(_id("a"))
    assert doc["warnings"] == ["a warning"] and doc["n_chunks"] == 3
    assert [p["label"] for p in library.pages(_id("a"))] == ["i", "ii"]
    assert [c["idx"] for c in library.chunks(_id("a"), [2, 0, 7])] == [0, 2]
    assert library.token_ids(_id("a")) == list(range(189))
    assert _counts(library)["documents"] == 1


def test_add_document_is_all_or_nothing(library):
    doc, pages, chunks, ids = _doc(_id("b"))
    chunks[2]["text"] = None  # NOT NULL: fails in the middle of the transaction
    with pytest.raises(sqlite3.IntegrityError):
        library.add_document(doc, pages, chunks, ids)
    assert all(v == 0 for v in _counts(library).values())
    assert library.add_document(*_doc(_id("b"))) is True


def test_resolve_prefixes(library):
    a, b = "abc1" + "0" * 60, "abc2" + "0" * 60
    library.add_document(*_doc(a))
    library.add_document(*_doc(b))
    assert library.resolve("ABC1") == a
    assert library.resolve(b) == b
    with pytest.raises(AmbiguousDocument):
        library.resolve("abc")
    with pytest.raises(UnknownDocument):
        library.resolve("ffff")
    with pytest.raises(UnknownDocument, match="hexadecimal"):
        library.resolve("../etc")
    with pytest.raises(UnknownDocument):
        library.resolve("")


def test_resolve_by_title_or_file_name(library):
    """`drt-reader ask emma "..."`: a document is named by its title or file name as well as its id;
    the whole name wins over a part of another, and a name that fits several is refused, naming them."""
    emma, emma2, prose = "e" * 64, "d" * 64, "0" * 64
    for i, t, src in ((emma, "Emma", "158-pdf.pdf"), (emma2, "Emma and Her Friends", "emma-friends.txt"),
                      (prose, "Pride and  Prejudice", "1342.txt")):
        d = _doc(i, title=t)
        d[0]["source_name"] = src
        library.add_document(*d)
    assert library.resolve("EMMA") == emma  # whole title, though "Emma and Her Friends" holds it too
    assert library.resolve("158-pdf") == emma  # file name without its extension
    assert library.resolve("158-pdf.pdf") == emma
    assert library.resolve("friends") == emma2  # a part of one name
    assert library.resolve("pride and prejudice") == prose  # spaces normalised
    assert library.resolve("eee") == emma  # hexadecimal: the id first
    with pytest.raises(AmbiguousDocument, match="2 documents"):
        library.resolve("and")
    with pytest.raises(UnknownDocument, match="no document 'Middlemarch'"):
        library.resolve("Middlemarch")


def test_delete_cascades(library):
    d = _id("c")
    library.add_document(*_doc(d))
    library.set_prefill_state(d, "fp", status="partial", **PARTIAL)
    library.add_trace(d, "fp", "dependency_map", [{"chunk": 2, "retrieved": [0], "weights": [1.0]}])
    library.record_answer(d, "What?", "fp", "That.", [{"chunk": 1}], {"chunks": []}, 0.5)
    assert library.conversation(d)[0]["answer"] == "That."
    assert library.delete_document(d) is True
    assert all(v == 0 for v in _counts(library).values())
    assert library.delete_document(d) is False


def test_prefill_state_and_completion(library):
    d = _id("d")
    library.add_document(*_doc(d))
    assert library.prefill_state(d, "fp") is None
    library.set_prefill_state(d, "fp", status="partial", **PARTIAL)
    assert library.prefill_state(d, "fp")["status"] == "partial"
    with pytest.raises(ValueError):
        library.set_prefill_state(d, "fp", status="weird", **PARTIAL)
    dep = [{"chunk": 2, "retrieved": [0], "weights": [1.0]}]
    library.complete_prefill(d, "fp", n_tokens_total=189, n_chunks=3, state_dir="/s", dependency_map=dep)
    row = library.prefill_state(d, "fp")
    assert (row["status"], row["n_tokens_done"], row["n_chunks_done"]) == ("done", 189, 3)
    assert library.latest_trace(d, "fp", "dependency_map")["data"] == dep
    assert library.documents()[0]["prefill"][0]["model_fp"] == "fp"


def test_token_blob_roundtrip():
    ids = [0, 1, 2, 8191, 2**31 + 5]
    assert blob_to_ids(ids_to_blob(ids)) == ids
    assert len(ids_to_blob(ids)) == 4 * len(ids)


def test_threads_read_while_one_writer_writes(library):
    """Gradio calls handlers from threads: per-thread readers, one serialised writer."""
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(5):
                library.add_document(*_doc(_id(f"w{k}-{i}")))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        try:
            for _ in range(20):
                for doc in library.documents():
                    library.chunks(doc["id"])
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)] + [
        threading.Thread(target=reader) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(library.documents()) == 15


def test_two_processes_worth_of_connections(drt_home):
    """A second Library on the same file (the CLI beside the UI) sees committed writes."""
    a, b = Library(drt_home), Library(drt_home)
    try:
        a.add_document(*_doc(_id("p")))
        assert b.has_document(_id("p"))
        assert b.add_document(*_doc(_id("p"))) is False
    finally:
        a.close()
        b.close()
