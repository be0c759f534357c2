"""qa.rerank: the cross-encoder's pool, windows, selection term, quote and calibrated decisions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from qa import rerank
from qa.cross_encoder import Read, best_span, passage_window


def _library(texts: list[str]):
    rows, pos = [], 0
    for i, t in enumerate(texts):
        rows.append({"idx": i, "char_start": pos, "char_end": pos + len(t), "text": t, "page_first": i + 1,
                     "page_last": i + 1})
        pos += len(t)
    return SimpleNamespace(chunks=lambda doc_id, idx=None: rows if idx is None
                           else [r for r in rows if r["idx"] in idx])


def test_pool_takes_the_introduction_then_the_models_then_bm25s_best_and_never_a_barred_chunk():
    scores = np.array([0.0, 5.0, -np.inf, 3.0, 4.0, 1.0])
    bm = np.array([9.0, 0.0, 8.0, 0.0, 0.0, 7.0])
    got = rerank.pool(scores, bm, frozenset({4}), first=[5], n_chunks=6)
    assert got[0] == 5 and 4 not in got and 2 in got  # BM25 brings chunk 2, which the model barred from nothing
    assert got.index(1) < got.index(3)  # the model's order
    assert rerank.pool(None, None, frozenset(), [], 3) == []


def test_windows_never_hold_a_barred_neighbours_text():
    texts = ["Alpha one two three. ", "Beta four five six. ", "Gamma seven eight nine. "]
    lib = _library(texts)
    w = rerank.windows(lib, "d", [1], frozenset())[1]
    assert "Alpha" in w.text and "Gamma" in w.text and w.base == 0
    w = rerank.windows(lib, "d", [1], frozenset({0, 2}))[1]
    assert w.text == texts[1] and w.base == len(texts[0])
    assert w.pages(w.base, w.base + 5) == [2]


def test_terms_weight_each_read_chunk_by_its_probability():
    w = {2: rerank.Window(2, "x", 0, Read(0.0, None, 0.0)), 4: rerank.Window(4, "y", 0, Read(100.0, None, 0.0))}
    t = rerank.terms(w, 6, 10.0)
    assert t.tolist() == [0.0, 0.0, 5.0, 0.0, 10.0, 0.0]


def test_quote_holds_the_spans_sentence_is_never_cut_inside_a_word_and_short_follows_calibration():
    text = "First sentence here. The answer is forty two pistoles, said he. " + "word " * 120
    span = (text.index("forty"), text.index("forty") + len("forty two"))
    win = rerank.Window(7, text, 1000, Read(2.0, span, 3.5), rows=[{"char_start": 1000, "char_end": 1000 + len(text),
                                                                     "page_first": 4, "page_last": 4}])
    q = rerank.quote_of(win)
    assert "The answer is forty two pistoles, said he." in q["text"] and q["span_text"] == "forty two"
    assert q["chunk"] == 7 and q["pages"] == [4] and q["char_start"] >= 1000
    assert not q["text"].endswith("wor") and len(q["text"]) <= rerank.QUOTE_MAX
    assert rerank.short_shown(q, rerank.Calibration(short_above=None)) is None
    assert rerank.short_shown(q, rerank.Calibration(short_above=3.0)) == "forty two"
    assert rerank.short_shown(q, rerank.Calibration(short_above=4.0)) is None


def test_a_quote_starts_at_its_sentences_start_in_the_neighbour_but_never_in_a_barred_one():
    """The window holds 150 characters of its neighbour, cut anywhere: a sentence begun before that
    was quoted from the cut ("server, the Corresponding Source may be..."). The quote now starts at
    the sentence's start, in the neighbour's text; a barred (masked) neighbour is never shown."""
    opening = ("If the place to copy the object code is a network server, and the offer is made in writing to "
               "every party who asks for it at the time of the transfer, ")
    texts = ["Filler sentence one. " * 8 + opening, "the Corresponding Source may be on a different server. "
             "Another sentence follows here. " + "More words. " * 10, "Tail sentence. " * 5]
    lib = _library(texts)
    win = rerank.windows(lib, "d", [1], frozenset())[1]
    assert not win.text.startswith("If the place")  # the window's head was cut inside the sentence
    at = win.text.index("different server")
    win.read = Read(2.0, (at, at + len("different server")), 1.0)
    q = rerank.quote_of(win)
    assert q["sentence"].startswith("If the place to copy the object code") and q["span_text"] == "different server"
    whole = "".join(texts)
    assert " ".join(whole[q["char_start"]:q["char_end"]].split()) == q["text"] and q["pages"] == [1, 2]
    barred = rerank.windows(lib, "d", [1], frozenset({0}))[1]
    barred.read = Read(2.0, (0, 3), 1.0)
    q = rerank.quote_of(barred)
    assert q["text"].startswith("the Corresponding Source") and "If the place" not in q["text"]
    assert q["char_start"] >= len(texts[0])


def test_decide_abstains_below_the_calibrated_probability():
    w = {1: rerank.Window(1, "x", 0, Read(-3.0, None, 0.0)), 2: rerank.Window(2, "y", 0, Read(-2.0, None, 0.0))}
    unsure, best = rerank.decide(w, rerank.Calibration(abstain_below=0.5))
    assert unsure and abs(best - 1 / (1 + np.exp(2.0))) < 1e-9
    assert not rerank.decide(w, rerank.Calibration(abstain_below=None))[0]


def test_shown_puts_the_retrieved_chunks_first_by_probability():
    w = {c: rerank.Window(c, str(c), 0, Read(float(r), None, 0.0)) for c, r in ((1, 0.0), (2, 3.0), (3, 1.0), (4, 9.0))}
    assert [x.chunk for x in rerank.shown(w, [1, 2, 3])] == [2, 3, 1]
    assert [x.chunk for x in rerank.shown(w, [1])] == [1, 4, 2]  # too few retrieved: the pool's best fill in


def test_best_span_and_window_cut_at_whitespace():
    import torch

    offsets = [(1, 0, 3), (2, 4, 9), (3, 10, 12)]
    start = torch.tensor([0.0, 0.0, 5.0, 1.0])
    end = torch.tensor([0.0, 0.0, 0.0, 4.0])
    (a, b), s = best_span(start, end, offsets)
    assert (a, b) == (4, 12) and s == 9.0
    text = "aaaa bbbb cccc dddd eeee"
    a, b = passage_window(text, 10, 14, context=7)
    assert text[a:b] == "bbbb cccc dddd"
