"""Abstention when every word of the question is in the document: a calibrated confidence test.

The rare-word test (qa.abstain) cannot fire on "What is the name of Elinor's horse?": Elinor and
horse are both in the book. What differs is how sure the reader and the retriever are. A logistic
regression over `FEATURES` gives P(answerable); `ask` abstains below the threshold. It is fitted on
validation questions written that way (`python -m qa.abstain_model fit`, docs/qa.md), its
threshold set so that at most a given share (10%) of the answerable validation questions abstain,
and it ships in the checkpoint's reader.json (key "abstain").
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

# what the question asks for by itself (its length, "name") is left out: it would learn how a question
# set's unanswerable questions were phrased, not whether the document answers
FEATURES = ("reader_prob", "reader_margin", "reader_score", "sent_cov", "sent_cov_win", "names_in_sentence",
            "bm25_cov", "span_score", "span_prob", "asks_name_x_new_caps", "asks_number_x_has_number", "new_caps",
            "has_number", "type_ok")
_ASKS_NUMBER = re.compile(r"\b(how (many|much|old|long|far)|what (year|age|sum|price|number|date)|which year|when)\b",
                          re.I)
_ASKS_NAME = re.compile(r"\b(name|named|called|title|who)\b", re.I)


def features(question: str, reading: Any, stats: Any, bm25: np.ndarray) -> np.ndarray:
    """The abstention features of one question: `reading` (qa.reader.Reading or None), the
    document's DocStats and the question's BM25 scores of the document's chunks."""
    from .reader import SENTENCE_FEATURES, QuestionInfo, _terms_of, sentence_spans

    q = QuestionInfo(question, stats)
    if reading is not None:
        c = reading.sentence
        text = c.passage.text
        sent = text[c.a:c.b]
        spans = sentence_spans(text)
        i = next((j for j, (a, b) in enumerate(spans) if a == c.a), 0)
        win = text[spans[max(0, i - 1)][0]: spans[min(len(spans) - 1, i + 1)][1]]
        st = _terms_of(sent)
        sent_cov, win_cov = q.cov(st), q.cov(_terms_of(win))
        names = float(all(t in st for t in q.names)) if q.names else 1.0
        prob, margin, rscore = reading.prob, min(reading.margin, 10.0), reading.score
    else:
        sent_cov = win_cov = names = prob = margin = 0.0
        rscore = -10.0
    top_bm = float(bm25.max()) if len(bm25) else 0.0
    f = dict(zip(SENTENCE_FEATURES, reading.features)) if reading is not None and reading.features is not None else {}
    new_caps, has_number = float(f.get("new_caps", 0.0)), float(f.get("has_number", 0.0))
    asks_name = float(bool(re.search(r"\b(name|named|called)\b", question, re.I)))
    asks_number = float(bool(_ASKS_NUMBER.search(question)))
    return np.array([prob, margin, rscore, sent_cov, win_cov, names, top_bm / (q.total + 1e-9) if q.terms else 0.0,
                     reading.span_score if reading is not None else -10.0,
                     reading.span_prob if reading is not None else 0.0,
                     asks_name * new_caps, asks_number * has_number, new_caps, has_number,
                     type_ok(question, reading)], dtype=np.float64)


def type_ok(question: str, reading: Any) -> float:
    """Whether the reader's answer sentence holds what the question asks for: a number for "how
    many / how old / what year ...", a capitalised word the question lacks (not the sentence's first)
    for "what is the name / what was X called"; 1.0 for other questions, 0.0 without a reading."""
    if reading is None:
        return 0.0
    from .reader import NUMBER_WORDS, WORD

    c = reading.sentence
    sent = c.passage.text[c.a:c.b]
    words = WORD.findall(sent)
    qwords = {w.lower() for w in WORD.findall(question)}
    if _ASKS_NUMBER.search(question):
        return float(any(any(ch.isdigit() for ch in w) or w.lower() in NUMBER_WORDS for w in words))
    if re.search(r"\b(name|named|called)\b", question, re.I):
        return float(any(w[:1].isupper() and w.lower() not in qwords for w in words[1:]))
    return 1.0


def fit_abstention(xs: Sequence[np.ndarray], answerable: Sequence[bool], max_false: float = 0.10,
                   l2: float = 1.0, threshold_on: Sequence[np.ndarray] | None = None) -> dict:
    """Logistic regression P(answerable | x) (standardised, L2), and the threshold under which it
    abstains: the largest that lets at most `max_false` of the answerable questions (those of
    `threshold_on` when given: written questions, whose confidence runs lower than mined ones') abstain."""
    X = np.asarray(xs, dtype=np.float64)
    y = np.asarray(answerable, dtype=np.float64)
    mean, std = X.mean(0), X.std(0) + 1e-9
    Z = (X - mean) / std
    w, b = np.zeros(X.shape[1]), 0.0
    for _ in range(2000):  # gradient descent: a few features, a few hundred questions
        p = 1 / (1 + np.exp(-(Z @ w + b)))
        g = Z.T @ (p - y) / len(y) + l2 * w / len(y)
        w -= 0.5 * g
        b -= 0.5 * float((p - y).mean())
    s = Z @ w + b
    if threshold_on is not None:
        pos = np.sort(((np.asarray(threshold_on, dtype=np.float64) - mean) / std) @ w + b)
    else:
        pos = np.sort(s[y == 1])
    k = int(math.floor(max_false * len(pos)))
    threshold = float(pos[k]) - 1e-9 if len(pos) else 0.0
    return {"features": list(FEATURES), "mean": mean.tolist(), "std": std.tolist(), "w": w.tolist(), "b": b,
            "threshold": threshold, "max_false": max_false, "n": len(y), "n_answerable": int(y.sum())}


def score(model: dict, x: np.ndarray) -> float:
    """The abstention test's score of features `x` (model: reader.json's "abstain", fit_abstention's)."""
    if tuple(model["features"]) != FEATURES:
        raise ValueError("reader.json: its abstention features are not this code's; retrain the reader")
    z = (np.asarray(x) - np.asarray(model["mean"])) / np.asarray(model["std"])
    return float(z @ np.asarray(model["w"]) + model["b"])


def abstains(model: dict | None, x: np.ndarray) -> bool:
    """Whether the calibrated test abstains on features `x` (never without a model or a threshold)."""
    if model is None or model.get("threshold") is None:
        return False
    return score(model, x) < model["threshold"]
