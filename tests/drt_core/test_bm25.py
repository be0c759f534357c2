"""drt_core.bm25: the textbook BM25 the engine's question-time selection adds (config bm25_weight)."""

import math

import numpy as np
import pytest

from drt_core.bm25 import BM25, STOP, stem, terms

DOCS = [
    "The cottage was called Barton Cottage, and the cottage stood in a valley.",
    "Colonel Brandon was a man of fortune; the Colonel was silent.",
    "Elinor rode to the village on a horse.",
    "Nothing of note happened here at all, none whatsoever, for many long days and nights.",
]


def test_terms_drop_question_words_and_conflate_inflections():
    assert terms("What is the name of the Dashwoods' cottage?") == ["dashwood", "cottag"]
    assert stem("cottages") == stem("cottage") and stem("horses") == stem("horse")
    assert stem("married") == stem("marries")
    assert {"what", "who", "name", "called", "mr", "the"} <= STOP
    assert terms("Who is Mr. Darcy?") == ["darcy"]


def _textbook(docs_terms, q_terms, k1=1.2, b=0.75):
    n = len(docs_terms)
    avg = sum(len(d) for d in docs_terms) / n
    out = []
    for d in docs_terms:
        s = 0.0
        for t in dict.fromkeys(q_terms):
            df = sum(t in x for x in docs_terms)
            tf = d.count(t)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return np.array(out)


@pytest.mark.parametrize("window", [0, 1])
def test_scores_are_textbook_bm25(window):
    q = "Which colonel owned the cottage and a horse?"
    dt = [terms(d) for d in DOCS]
    units = [sum(dt[max(0, i - window): i + window + 1], []) for i in range(len(DOCS))]
    np.testing.assert_allclose(BM25(DOCS, window=window).scores(q), _textbook(units, terms(q)), rtol=1e-12)


def test_saturation_and_length_normalisation():
    once, twice = "tiger lamp", "tiger tiger lamp"
    s = BM25([once, twice, "lamp lamp", "lamp"]).scores("tiger")
    assert s[1] > s[0] and s[1] < 2 * s[0]  # a repeat counts, less than twice
    short, long = "tiger", "tiger " + " ".join(f"word{i}" for i in range(30))
    s = BM25([short, long, "lamp"]).scores("tiger")
    assert s[0] > s[1] > 0  # the same term in a longer unit weighs less


def test_search_ranks_and_leaves_out_zero_scores():
    ix = BM25(DOCS)
    hits = ix.search("What is the name of the Dashwoods' cottage?", 4)
    assert [i for i, _ in hits] == [0]
    assert ix.search("What is it?", 4) == []  # stop-words only
    assert BM25([]).scores("cottage").shape == (0,)


@pytest.mark.parametrize("window", [0, 1])
def test_a_saved_index_loads_with_the_same_scores(tmp_path, window):
    """A stored document's index is built once and loaded by each new process (BM25.save / load):
    the same scores, idf and chunks; a damaged or foreign file is None (the caller builds again)."""
    ix = BM25(DOCS, window=window)
    ix.save(tmp_path / "ix.npz")
    back = BM25.load(tmp_path / "ix.npz")
    for q in ("Which colonel owned the cottage and a horse?", "village horse days", "absent words only"):
        np.testing.assert_array_equal(back.scores(q), ix.scores(q))
    assert (back.n, back.window, back.idf("cottag")) == (4, window, ix.idf("cottag"))
    assert back.chunks_of("colonel") == ix.chunks_of("colonel") == ([1] if window == 0 else [0, 1, 2])
    (tmp_path / "bad.npz").write_bytes(b"not a zip file")
    assert BM25.load(tmp_path / "bad.npz") is None and BM25.load(tmp_path / "missing.npz") is None
    empty = BM25([])
    empty.save(tmp_path / "empty.npz")
    assert BM25.load(tmp_path / "empty.npz").scores("cottage").shape == (0,)
