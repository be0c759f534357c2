"""qa.reader (the trained answer reader), qa.abstain_model, and how ask uses them."""

import json
from pathlib import Path

import numpy as np
import pytest

from qa.reader import (SENTENCE_FEATURES, SPAN_FEATURES, DocStats, Passage, QuestionInfo, Reader, Scorer,
                           candidates, question_kind, quote_bounds, restates, sentence_unit, span_candidates,
                           standardise)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "drt-tiny"

TEXTS = [
    "It was a cold spring. ",
    "Who is Colonel Brandon? Is he a man of fortune? asked Marianne. ",
    "Colonel Brandon, the friend of Sir John, was a silent man of thirty-five. He lived at Delaford. ",
    "The cottage was called Barton Cottage; it stood in a valley. ",
    "Nothing happened for many days. ",
]


def _passages(order):
    starts = np.concatenate([[0], np.cumsum([len(t) for t in TEXTS])])
    out = []
    for r, c in enumerate(order):
        lo, hi = max(c - 1, 0), min(c + 1, len(TEXTS) - 1)
        base = int(starts[lo])
        out.append(Passage(c, r, 1.0 / (1 + r), "".join(TEXTS[lo: hi + 1]), base, int(starts[c] - base),
                           int(starts[c + 1] - base)))
    return out


def _linear(feature: str, names=SENTENCE_FEATURES, weight=1.0):
    """A Scorer that is `weight` x one feature (mean 0, std 1)."""
    F = len(names)
    w = np.zeros(F, np.float32)
    w[names.index(feature)] = weight
    return Scorer({"mean": np.zeros(F, np.float32), "std": np.ones(F, np.float32), "W1": np.zeros((1, F), np.float32),
                   "b1": np.zeros(1, np.float32), "w2": np.zeros(1, np.float32), "w": w})


def test_question_kinds():
    assert question_kind("Who is Colonel Brandon?") == "who"
    assert question_kind("Where does Athos live?") == "where"
    assert question_kind("How many pistoles did it cost?") == "number"
    assert question_kind("In what year was it built?") == "when"
    assert question_kind("What is a divided power structure?") == "what"
    assert question_kind("Find the passage where the ship sinks.") == "find"


def test_candidates_are_the_sentences_of_each_chunk_once():
    ps = _passages([2, 3])
    cands = candidates(ps)
    texts = [c.passage.text[c.a:c.b] for c in cands]
    assert any(t.startswith("Colonel Brandon, the friend") for t in texts)
    assert any(t.startswith("The cottage was called") for t in texts)
    keys = [(c.passage.base + c.a, c.passage.base + c.b) for c in cands]
    assert len(keys) == len(set(keys))  # a sentence of two passages is a candidate once
    for c in cands:  # each overlaps its own passage's chunk
        assert c.b > c.passage.lo and c.a < c.passage.hi


def test_a_sentence_restating_the_question_is_never_the_answer():
    stats = DocStats(TEXTS)
    q = QuestionInfo("Who is Colonel Brandon?", stats)
    assert restates(q, "Who is Colonel Brandon?")
    assert not restates(q, "Colonel Brandon, the friend of Sir John, was a silent man of thirty-five.")
    # a reader that prefers question marks and the question's words still cannot pick the question
    reader = Reader(_linear("qmark", weight=5.0), _linear("len", SPAN_FEATURES), {})
    r = reader.read("Who is Colonel Brandon?", _passages([1, 2]), stats)
    picked = r.sentence.passage.text[r.sentence.a:r.sentence.b]
    assert r is not None and "Who is Colonel Brandon" not in picked


def test_reader_picks_the_best_scored_sentence_and_a_span_without_question_words():
    stats = DocStats(TEXTS)
    reader = Reader(_linear("cov"), _linear("cap_frac", SPAN_FEATURES), {})
    r = reader.read("What was the cottage called?", _passages([0, 3, 4]), stats)
    sent = r.sentence.passage.text[r.sentence.a:r.sentence.b]
    assert sent.startswith("The cottage was called Barton Cottage")
    short = r.sentence.passage.text[r.span[0]:r.span[1]]
    assert short == "Barton" and 0 < r.prob <= 1  # "Cottage" is a question word: never inside the span
    for a, b, *_ in span_candidates(sent, QuestionInfo("What was the cottage called?", stats)):
        assert "cottage" not in sent[a:b].lower().split()


def test_the_cross_encoder_weighs_in_on_the_sentence_only_with_a_weight():
    """Reader.read's `relevance`: z(reader) + weight z(cross-encoder) over the candidates; weight 0
    leaves the reader's pick; each candidate is read with the sentence before it (sentence_unit)."""
    stats = DocStats(TEXTS)
    reader = Reader(_linear("cov"), _linear("cap_frac", SPAN_FEATURES), {})
    seen = []

    def relevance(units):  # a cross-encoder sure the answer is where Delaford is named
        seen.extend(units)
        return [5.0 if u.endswith("Delaford.") else 0.0 for u in units]

    q, ps = "What was the cottage called?", _passages([0, 3, 2])
    alone = reader.read(q, ps, stats)
    assert alone.sentence.passage.text[alone.sentence.a:alone.sentence.b].startswith("The cottage was called")
    same = reader.read(q, ps, stats, relevance, weight=0.0)
    assert (same.sentence.a, same.sentence.passage.chunk) == (alone.sentence.a, alone.sentence.passage.chunk)
    assert not seen  # no weight: the cross-encoder is not asked
    both = reader.read(q, ps, stats, relevance, weight=3.0)
    assert both.sentence.passage.text[both.sentence.a:both.sentence.b] == "He lived at Delaford."
    unit = next(u for u in seen if u.endswith("He lived at Delaford."))
    assert unit.startswith("Colonel Brandon, the friend of Sir John")  # the sentence before it, then it
    c = both.sentence
    assert sentence_unit(c) == unit
    assert np.allclose(standardise(np.array([1.0, 3.0])), [-1.0, 1.0]) and not standardise(np.ones(3)).any()


def test_quote_bounds_grow_by_the_sentences_after_then_before():
    text = "One. Two is here. Three. Four. Five."
    a = text.index("Two")
    assert text[slice(*quote_bounds(text, a, a + len("Two is here."), limit=400))] == "One. Two is here. Three. Four."
    x, y = quote_bounds(text, a, a + len("Two is here."), limit=len("Two is here. Three."))
    assert text[x:y] == "Two is here. Three."


@pytest.mark.skipif(not (SHIPPED / "reader.safetensors").exists(), reason="no shipped reader")
def test_the_shipped_reader_loads_and_matches_this_code():
    r = Reader.load(SHIPPED)
    meta = json.loads((SHIPPED / "reader.json").read_text())
    assert tuple(meta["sentence_features"]) == SENTENCE_FEATURES and "command" in meta
    stats = DocStats(TEXTS)
    out = r.read("Who is Colonel Brandon?", _passages([1, 2, 3]), stats)
    assert out is not None and np.isfinite(out.score)
    assert Reader.load(ROOT / "tests") is None  # a checkpoint without a reader


def test_a_reader_of_other_features_is_refused(tmp_path):
    from safetensors.numpy import save_file

    save_file({"sentence.w": np.zeros(1, np.float32)}, str(tmp_path / "reader.safetensors"))
    (tmp_path / "reader.json").write_text(json.dumps({"sentence_features": ["x"], "span_features": ["y"]}))
    with pytest.raises(ValueError, match="retrain"):
        Reader.load(tmp_path)


def test_abstention_threshold_lets_at_most_the_share_of_answerable_abstain():
    from qa.abstain_model import FEATURES, abstains, fit_abstention

    rng = np.random.default_rng(0)
    pos = rng.normal(1.0, 1.0, (200, len(FEATURES)))
    neg = rng.normal(-1.0, 1.0, (200, len(FEATURES)))
    m = fit_abstention(list(pos) + list(neg), [True] * 200 + [False] * 200, max_false=0.10)
    false = np.mean([abstains(m, x) for x in pos])
    assert false <= 0.10 and false >= 0.05
    assert np.mean([abstains(m, x) for x in neg]) > 0.9  # separable: nearly all abstain
    assert not abstains(None, pos[0])


def test_sentences_do_not_end_at_a_title_or_an_initial():
    from qa.reader import sentence_spans

    t = ("Sixteen years had Miss Taylor been in Mr. Woodhouse's family. M. de Treville was there. "
         "It rained. Mrs. Weston came, e.g. at noon!\n\nNew part")
    assert [t[a:b] for a, b in sentence_spans(t)] == [
        "Sixteen years had Miss Taylor been in Mr. Woodhouse's family.", "M. de Treville was there.",
        "It rained.", "Mrs. Weston came, e.g. at noon!", "New part"]


def test_a_spaced_ellipsis_ends_no_sentence_inside_one():
    """". . ." is one mark: its dots end no sentence, and its last ends one only where a capital follows
    (walk 12, Galois cohomology notes: "a = pe11 pe22 . . . penn where ..." was cut at each dot, and the
    answer quoted ". penn where pi are prime ideals ..."). Hardy writes "The tranter's. . . . The voice"."""
    from qa.reader import sentence_spans

    t = ("It factors as a = p1 p2 . . . pn where pi are prime ideals. Let O be a domain. "
         "He went on . . . and on. I wish I could go. . . . The voice was the tranter's.")
    assert [t[a:b] for a, b in sentence_spans(t)] == [
        "It factors as a = p1 p2 . . . pn where pi are prime ideals.", "Let O be a domain.",
        "He went on . . . and on.", "I wish I could go. . . .", "The voice was the tranter's."]


def test_a_quote_opens_where_its_sentence_does_not_at_a_semicolon_clause():
    """Walk 12: the masked re-answer quoted "and in the space of a quarter of an hour Fancy found
    herself to be Mrs. Richard Dewy ...", the second half of a sentence split at its ";". The clauses
    before the chosen one join first, while the quote fits."""
    text = ("The lane dipped into the village of Geoffrey Day's parish; and in the space of a quarter of an hour "
            "Fancy found herself to be Mrs. Richard Dewy. The bells rang.")
    a = text.index("and in the space")
    b = text.index("Dewy.") + len("Dewy.")
    assert text[slice(*quote_bounds(text, a, b, limit=400))] == text
    assert quote_bounds(text, a, b, limit=b - a) == (a, b)  # no room: the clause alone
