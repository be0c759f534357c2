"""qa.summary: whole sentences from every part, ranked by what the document retrieved."""

from __future__ import annotations

import json

import pytest

from ingest.errors import IngestError
from ingest.parts import document_text
from qa.errors import QAError
from qa.summary import (abstractive_allowed, extractive, in_degree, parse_pages, per_part_budget,
                            summary_check, whole_sentences)
from tests.ingest.docstore import store_text


def chapter(r: str, n: int) -> str:
    sents = " ".join(f"Sentence {i} of chapter {r} tells what happened on day {i} in the long story." for i in range(n))
    return f"\n\nCHAPTER {r}\n\n{sents}"


def test_in_degree_weights_skips_boilerplate_and_bad_ids():
    dep = [
        {"chunk": 2, "retrieved": [0], "weights": [1.0]},
        {"chunk": 3, "retrieved": [0, 1], "weights": [0.75, 0.25]},
        {"chunk": 4, "retrieved": [1, 4, 99], "weights": [0.5, 0.3, 0.2]},  # itself and out of range: ignored
    ]
    assert in_degree(dep, 5) == [1.75, 0.75, 0.0, 0.0, 0.0]
    assert in_degree(dep, 5, skip={1}) == [1.75, 0.0, 0.0, 0.0, 0.0]  # neither gives nor receives
    assert in_degree(dep, 5, skip={3}) == [1.0, 0.5, 0.0, 0.0, 0.0]


def test_whole_sentences_only():
    text = ("heriting the estate, he left. The old man walked to the river every morning of his life. "
            "THE GODS IN COUNCIL AND THE VISIT OF MINERVA TO ITHACA. \"Alas,\" he said, \"what will become of me? "
            "She said \"yes\" and went home to her mother at once that night. A short one. "
            "It ran on; and on it ran until the evening came down over the hills")
    got = [text[a:b] for a, b in whole_sentences(text)]
    assert got == ["The old man walked to the river every morning of his life.",
                   "She said \"yes\" and went home to her mother at once that night."]


def test_every_chapter_is_represented_by_its_most_retrieved_sentences(library):
    text = "".join(chapter(r, 12) for r in ("I", "II", "III", "IV"))
    doc = store_text(library, text)
    full = document_text(library, doc)
    chunks = library.chunks(doc)
    target = full.index("Sentence 7 of chapter III")
    hub = next(c["idx"] for c in chunks if c["char_start"] <= target < c["char_end"])
    dep = [{"chunk": c, "retrieved": [hub], "weights": [1.0]} for c in range(hub + 1, len(chunks))]
    out = extractive(library, doc, dep, per_part=1)
    assert [s["part"] for s in out["trace"]["sentences"]] == [1, 2, 3, 4]
    third = out["trace"]["sentences"][2]
    assert hub in third["chunks"] and third["text"].startswith(("Sentence 6 of chapter III", "Sentence 7 of chapter III"))
    for s in out["trace"]["sentences"]:
        assert s["text"] in " ".join(full.split()) and s["text"].endswith(".") and s["pages"]
    assert "## CHAPTER III" in out["summary"] and out["trace"]["parts"][0]["source"] == "headings"


def test_chapter_and_pages_and_boilerplate(library):
    licence = ("The Project Gutenberg License: donations to the Project Gutenberg Literary Archive Foundation "
               "and its trademark terms apply to electronic works. " * 8)
    doc = store_text(library, "".join(chapter(r, 10) for r in ("I", "II", "III")) + "\n\n" + licence)
    out = extractive(library, doc, [], chapter=2)
    assert {s["part"] for s in out["trace"]["sentences"]} == {2} and len(out["trace"]["sentences"]) == 5
    assert all("chapter II " in s["text"] for s in out["trace"]["sentences"])
    every = extractive(library, doc, [], per_part=50)
    assert every["trace"]["sentences"] and not any("Gutenberg" in s["text"] for s in every["trace"]["sentences"])
    ranged = extractive(library, doc, [], pages=(2, 2))
    assert ranged["trace"]["sentences"] and all(2 in s["pages"] for s in ranged["trace"]["sentences"])
    with pytest.raises(IngestError, match="no chapter 7"):
        extractive(library, doc, [], chapter=7)


def test_budget_and_pages_parsing():
    assert per_part_budget(1) == 5 and per_part_budget(4) == 3 and per_part_budget(20) == 2 and per_part_budget(60) == 1
    assert parse_pages("12-30") == (12, 30) and parse_pages("7") == (7, 7)
    for bad in ("x", "30-12", "0-3"):
        with pytest.raises(QAError):
            parse_pages(bad)


def test_abstractive_is_offered_only_when_it_beat_the_extractive(tmp_path):
    assert summary_check(tmp_path) is None
    assert abstractive_allowed(None)[0] is False
    (tmp_path / "summary_check.json").write_text(json.dumps({"abstractive_rouge_l": 0.06, "extractive_rouge_l": 0.13}))
    ok, why = abstractive_allowed(summary_check(tmp_path))
    assert not ok and "0.06" in why and "0.13" in why and "\n" not in why
    assert abstractive_allowed({"abstractive_rouge_l": 0.2, "extractive_rouge_l": 0.13}) == (True, "")
