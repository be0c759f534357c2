"""qa.summary and qa.narrate: whole sentences from every part that tell what happens in it."""

from __future__ import annotations

import json
import re

import pytest

from ingest.errors import IngestError
from ingest.parts import document_text
from qa.errors import QAError
from qa.summary import (abstractive_allowed, extractive, in_degree, parse_pages, per_part_budget,
                            sentence_rows, summary_check, whole_sentences)
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


def test_every_chapter_is_told_from_its_start_to_its_end(library):
    text = "".join(chapter(r, 12) for r in ("I", "II", "III", "IV"))
    doc = store_text(library, text)
    full = document_text(library, doc)
    out = extractive(library, doc, [], per_part=3)
    rows = out["trace"]["sentences"]
    assert [s["part"] for s in rows] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    for part in range(1, 5):  # the opening, then one sentence from each later stretch, in order
        mine = [s["char_start"] for s in rows if s["part"] == part]
        assert mine == sorted(mine) and len(set(mine)) == 3
    assert rows[0]["text"].startswith(("Sentence 0 of chapter I ", "Sentence 1 of chapter I "))  # the opening
    for s in rows:
        assert s["text"] in " ".join(full.split()) and s["text"].endswith(".") and s["pages"]
    assert "## CHAPTER III" in out["summary"] and out["trace"]["parts"][0]["source"] == "headings"


def test_the_summary_names_where_its_parts_come_from_not_the_front_matter(library):
    """A paper's long front matter is part 0: the head line said "32 of 32 part(s) (front matter)"."""
    front = " ".join(f"Preface sentence {i} says what the reader will find in the long book." for i in range(20))
    doc = store_text(library, front + "".join(chapter(r, 12) for r in ("I", "II", "III")))
    out = extractive(library, doc, [], per_part=2)
    assert out["trace"]["parts"][0]["source"] == "front matter"
    assert out["summary"].startswith("Extractive summary: ") and "part(s) (headings)," in out["summary"].split("\n")[0]


def test_the_models_centrality_breaks_ties(library):
    text = "".join(chapter(r, 12) for r in ("I", "II", "III", "IV"))
    doc = store_text(library, text)
    full = document_text(library, doc)
    chunks = library.chunks(doc)
    target = full.index("Sentence 10 of chapter III")
    hub = next(c["idx"] for c in chunks if c["char_start"] <= target < c["char_end"])
    dep = [{"chunk": c, "retrieved": [hub], "weights": [1.0]} for c in range(hub + 1, len(chunks))]
    # sentences alike but for the day: without the encoder the plain signals tie, and the model decides
    third = [s for s in extractive(library, doc, dep, per_part=2, embed=None)["trace"]["sentences"] if s["part"] == 3]
    assert hub in third[1]["chunks"]  # the second half's pick lies on what the rest retrieved
    plain = [s for s in extractive(library, doc, [], per_part=2, embed=None)["trace"]["sentences"] if s["part"] == 3]
    assert plain[1]["text"] != third[1]["text"]  # without the map: the stretch's first sentence


def test_sentence_rows_average_what_the_sentences_chunks_retrieved():
    dep = [{"chunk": 1, "retrieved": [0], "weights": [1.0]},
           {"chunk": 4, "retrieved": [0, 2], "weights": [0.75, 0.25],
            "groups": [{"retrieved": [0, 2], "weights": [0.75, 0.25]}, {"retrieved": [3], "weights": [1.0]}]},
           {"chunk": 5, "retrieved": [2, 9], "weights": [0.5, 0.5]}]  # 9: past the columns, dropped
    rows = sentence_rows(dep, [[0], [4, 5], [1]], n_doc_chunks=6)
    assert [r["sentence"] for r in rows] == [0, 1, 2]
    assert rows[0] == {"sentence": 0, "reading": [], "topk": [], "weights": [], "scores": None,
                       "effects": None}
    # sentence 1 is read with three selections: chunk 4's two groups and chunk 5's one
    assert rows[1]["reading"] == [4, 5] and rows[1]["topk"] == [3, 0, 2]  # heaviest first, then by chunk
    assert rows[1]["weights"] == [round(1 / 3, 6), 0.25, 0.25]  # 0.75 / 3 for chunk 0, (0.25 + 0.5) / 3 for 2
    assert rows[2]["topk"] == [0] and rows[2]["weights"] == [1.0]


def test_the_heatmap_has_a_row_per_sentence_and_a_column_per_chunk_from_the_dependency_map(library):
    text = "".join(chapter(r, 12) for r in ("I", "II", "III"))
    doc = store_text(library, text)
    n = library.document(doc)["n_chunks"]
    # every chunk c >= 1 retrieved chunk 0 and the chunk two before it, in two groups
    dep = [{"chunk": c, "retrieved": [0], "weights": [1.0],
            "groups": [{"retrieved": [0], "weights": [1.0]},
                       {"retrieved": [max(c - 2, 0)], "weights": [1.0]}]}
           for c in range(1, n)]
    out = extractive(library, doc, dep, per_part=3, embed=None)
    tr = out["trace"]
    sents, rows = tr["sentences"], tr["chunks"]
    assert len(sents) == 9 and len(rows) == len(sents) and tr["n_doc_chunks"] == n
    assert tr["effects"] is None and "not measured" in tr["effects_note"]
    by_chunk = {r["chunk"]: r for r in dep}
    for i, (s, row) in enumerate(zip(sents, rows)):
        assert row["sentence"] == i and row["reading"] == [c for c in s["chunks"] if c >= 1]
        want: dict[int, float] = {}
        sels = [g for c in row["reading"] for g in by_chunk[c]["groups"]]
        for g in sels:
            for j, w in zip(g["retrieved"], g["weights"]):
                want[j] = want.get(j, 0.0) + w / len(sels)
        assert dict(zip(row["topk"], row["weights"])) == pytest.approx(want, abs=1e-6)  # rounded to 6 places
        assert all(0 <= j < n for j in row["topk"]) and row["scores"] is None
    # ui.plots draws it: one row per sentence, one column per document chunk
    from ui import plots

    svg = plots.retrieval_heatmap_svg(tr, [library.chunks(doc, [c])[0]["page_first"] for c in range(n)])
    assert f'data-rows="{len(sents)}" data-cols="{n}"' in svg
    marked = {int(m) for m in re.findall(r'data-mark="(\d+)"', svg)}
    assert marked == {j for r in rows for j in r["topk"]}


def test_narrative_pick_prefers_names_and_events_to_speech():
    from qa import narrate

    sents = ["The storm broke over the bay at dawn and the fishermen ran for the boats on the shore.",
             "\u201cI will not go,\u201d said he, \u201cnot today, nor tomorrow, nor any day at all.\u201d",
             "Anne walked with Wentworth to the harbour, where Louisa fell from the steps of the Cobb.",
             "It was a grey day and nothing much could be seen from the windows of the house at all.",
             "Then Anne sent for the surgeon, and Wentworth carried Louisa to the inn near the harbour."]
    starts = [0, 100, 200, 300, 400]
    assert narrate.narrative(sents, starts, (0, 500), 1) == [0]  # one stretch: the opening
    got = narrate.narrative(sents, starts, (0, 500), 2, w=narrate.Weights(opening=0.0))
    assert got == [2, 4]  # names and a sentence that moves the story on; never the speech
    assert narrate.dialogue_share(sents[1]) > 0.8 and narrate.dialogue_share(sents[0]) == 0.0
    assert narrate.recurring_names(sents) == {"Wentworth", "Louisa"}
    speech = ["\u201cYes,\u201d he said, \u201cwe shall go to Lyme in the morning, all of us together.\u201d"] * 3
    assert narrate.narrative(speech + [sents[3]], [0, 10, 20, 30], (0, 40), 2) != [0, 2]  # never speech alone


def test_chapter_and_pages_and_boilerplate(library):
    licence = ("The Project Gutenberg License: donations to the Project Gutenberg Literary Archive Foundation "
               "and its trademark terms apply to electronic works. " * 8)
    doc = store_text(library, "".join(chapter(r, 10) for r in ("I", "II", "III")) + "\n\n" + licence)
    out = extractive(library, doc, [], chapter=2)
    assert {s["part"] for s in out["trace"]["sentences"]} == {2} and len(out["trace"]["sentences"]) == 5
    # (pages may split a word)
    assert all("chapterIItells" in s["text"].replace(" ", "") for s in out["trace"]["sentences"])
    every = extractive(library, doc, [], per_part=50)
    assert every["trace"]["sentences"] and not any("Gutenberg" in s["text"] for s in every["trace"]["sentences"])
    ranged = extractive(library, doc, [], pages=(2, 2))
    assert ranged["trace"]["sentences"] and all(2 in s["pages"] for s in ranged["trace"]["sentences"])
    with pytest.raises(IngestError, match="no chapter 7"):
        extractive(library, doc, [], chapter=7)


def test_budget_and_pages_parsing():
    assert per_part_budget(1) == 5 and per_part_budget(6) == 5 and per_part_budget(7) == 3 and per_part_budget(60) == 3
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


def test_a_summary_sentence_gives_its_own_pages_not_its_chunks(library):
    """Walk 11 (The Time Machine): "I felt a peculiar shrinking ..." is printed wholly on p. 46 and was
    shown as pp. 45-46, the pages of the chunks it lies in."""
    text = "".join(chapter(r, 12) for r in ("I", "II", "III"))
    doc = store_text(library, text, page_chars=333, chunk_chars=60)
    pages = library.pages(doc)
    for s in extractive(library, doc, [], per_part=3)["trace"]["sentences"]:
        own = [p["number"] for p in pages if p["char_end"] > s["char_start"] and p["char_start"] < s["char_end"]]
        assert s["pages"] == own
    chunks = library.chunks(doc)
    rows = extractive(library, doc, [], per_part=3)["trace"]["sentences"]
    by_chunks = [sorted({q for i in s["chunks"] for q in range(chunks[i]["page_first"], chunks[i]["page_last"] + 1)})
                 for s in rows]
    assert any(s["pages"] != pg for s, pg in zip(rows, by_chunks))  # (the case arises: a chunk over two pages)


def test_a_text_page_cut_after_a_heading_keeps_the_heading_out_of_the_next_sentence():
    """A text file's page is cut at a paragraph break: the page before keeps its line end, and the
    joined text keeps the break, so a chapter's first sentence does not open with the heading (walk 12,
    Under the Greenwood Tree: "CHAPTER II: THE TRANTER'S It was a long low cottage ..." in the
    summary, the heading ending p. 3 and the sentence opening p. 4). A PDF page (no line end) runs on."""
    from ingest.parts import joined_text

    pages, at = [], 0
    for t in ["and they proceeded up the path to Dick's house.\n\n\n\nCHAPTER II: THE TRANTER'S\n",
              "It was a long low cottage with a hipped roof of thatch, having dormer windows breaking up into "
              "the eaves, a chimney standing in the middle of the ridge and another at each end."]:
        pages.append({"text": t, "char_start": at, "char_end": at + len(t)})
        at += len(t) + 2
    text = joined_text(pages)
    assert len(text) == pages[-1]["char_end"]  # the chunks' char spans still index it
    got = [text[a:b] for a, b in whole_sentences(text)]
    assert got[-1].startswith("It was a long low cottage") and not any("TRANTER'S" in s for s in got)
    pdf = [{"text": "We end the section", "char_start": 0}, {"text": "here.", "char_start": 20}]
    assert joined_text(pdf) == "We end the section  here."
