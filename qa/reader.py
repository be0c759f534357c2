"""The answer reader: from the passages the model retrieved, the answer sentence and its short answer.

A question's evidence (the model's top chunks, each read with the chunk before and after it) is cut
into sentences; a trained scorer ranks the sentences, and a second one ranks the short spans inside
the best sentence. Both are small feature models (a 2-layer MLP over the features below, softmax over
a question's candidates), trained on (question, passage, answer) triples mined from the training
split (`python -m qa.reader train`, docs/qa.md), shipped in the checkpoint as `reader.safetensors`
with `reader.json`, and run on the CPU in milliseconds.

What the features see (`sentence_features`, `span_features`): how much of the question's BM25 weight
(in-document idf of its stemmed non-stop words) the sentence, its neighbours and its passage hold;
the passage's retrieval rank and BM25 score; whether the sentence restates the question (a question
mark, or nothing but the question's words); for "Who is X?" whether the passage is where X is first
named (a name's first chunks introduce it); the question's kind (who / where / when / how many /
what / find) crossed with what the sentence holds (new capitalised words, numbers, places). A span
is scored by its length, capitals, numbers, the words before it ("is", "was", "called", "of") and
its distance to the question's words; a span holding a question word is never a candidate.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from drt_core.bm25 import BM25, STOP, stem, words as bm25_words

SENTENCE_END = re.compile(r"""[.!?;][\"'’”)\]]*\s+|\n\s*\n""")
WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
NUMBER_WORDS = frozenset("""one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
half quarter score dozen first second third""".split())
COPULA = frozenset("is was are were be been being became becomes".split())
NAMING = frozenset("called named name titled entitled".split())
PREP = frozenset("in at to from of by near into on".split())
QKINDS = ("who", "where", "when", "number", "what", "find", "other")
MAX_SPAN_WORDS = 8


def question_kind(question: str) -> str:
    q = question.lower().strip()
    if re.match(r"(find|locate|show|quote)\b", q) or re.search(r"\b(passage|where does the (book|text|chapter))\b", q):
        return "find"
    if re.match(r"(who|whom|whose)\b", q):
        return "who"
    if re.match(r"where\b", q):
        return "where"
    if re.match(r"(when|in what year|what year|which year|on what date|what date)\b", q):
        return "when"
    if re.match(r"(how (many|much|long|old|far|often)|what (age|sum|number|price))\b", q):
        return "number"
    if re.match(r"(what|which|define|how|why)\b", q):
        return "what"
    return "other"


# a period after these (or after a single capital: "M. de Treville", "J. S. Mill") ends no sentence
ABBREVIATIONS = frozenset("""mr mrs ms mme mlle messrs dr st rev col capt gen lt sgt prof sir esq hon
no vol ch chap fig eq cf e g i ie eg etc vs viz p pp ed""".split())
_BEFORE = re.compile(r"([^\W\d_]+)$")
_GOES_ON = re.compile(r"[a-z]")  # what follows a blank line inside a sentence
_ENDED = re.compile(r"""[.!?:;\"'’”)\]]\s*$""")  # what closes a line a blank line may follow


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence of `text` (ends at . ! ? ; and blank lines, not at the period of
    "Mr." or an initial, nor at a blank line between a line that ends no sentence and one that goes
    on in lower case: a PDF's page break, nor inside a spaced ellipsis ". . ."), blank ones dropped."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        if text[m.start()] == "\n" and _GOES_ON.match(text, m.end()) and not _ENDED.search(text, start, m.start()):
            continue  # a page break (or a blank line) inside a sentence: it goes on in lower case
        if text[m.start()] == "." and (text.startswith(".", m.end()) or (
                text[max(0, m.start() - 2): m.start()] == ". " and _GOES_ON.match(text, m.end()))):
            continue  # a dot of a spaced ellipsis (". . ."), or its last with the sentence going on in lower case
        if text[m.start()] == "." and not text[m.start() + 1: m.end()].strip("\"'’”)] \n\t"):
            w = _BEFORE.search(text, max(0, m.start() - 12), m.start())
            if w and (w.group(1).lower() in ABBREVIATIONS or (len(w.group(1)) == 1 and w.group(1).isupper())):
                continue
        end = m.start() + 1 if text[m.start()] in ".!?;" else m.start()
        spans.append((start, end))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


@dataclass
class Passage:
    """One retrieved chunk read with its neighbours: `text` starts at document character `base`;
    the chunk itself is text[lo:hi]."""
    chunk: int
    rank: int
    bm25: float  # the question's BM25 score of the chunk over the document's max (0..1)
    text: str
    base: int
    lo: int
    hi: int
    boiler: bool = False


def passage_around(chunk_at, c: int, rank: int, bm25: float, boiler: bool = False) -> Passage | None:
    """Chunk c read with the chunk before and after it, as the reader reads every passage:
    `chunk_at(i)` gives chunk i's {"char_start", "char_end", "text"} (a library row), or None."""
    me = chunk_at(c)
    if me is None:
        return None
    near = [x for x in (chunk_at(c - 1) if c > 0 else None, me, chunk_at(c + 1)) if x is not None]
    base = near[0]["char_start"]
    return Passage(c, rank, bm25, "".join(x["text"] for x in near), base, me["char_start"] - base,
                   me["char_end"] - base, boiler)


@dataclass
class Candidate:
    passage: Passage
    a: int  # sentence [a, b) in passage.text
    b: int


def unit_bounds(spans: list[tuple[int, int]], j: int) -> tuple[int, int]:
    """Sentence j of `spans` read after the sentence before it: [start, end) in their text."""
    return (spans[j - 1][0] if j > 0 else spans[j][0]), spans[j][1]


def sentence_unit(c: Candidate) -> str:
    """What the cross-encoder reads of a candidate sentence: the sentence after the one before it in
    its passage (`unit_bounds`, as it was trained: qa.cross_encoder_train.sentence_group)."""
    text = c.passage.text
    spans = sentence_spans(text)
    i = next((j for j, (a, _) in enumerate(spans) if a == c.a), None)
    return text[c.a:c.b] if i is None else text[unit_bounds(spans, i)[0]:c.b]


def standardise(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the candidates (zeros where they are all equal)."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


class DocStats:
    """A document's chunk-level term statistics: idf and, per term, the chunks that hold it (for the
    'first named here' feature). Built once per document from its chunk texts."""

    def __init__(self, texts: Sequence[str] | None = None, index: BM25 | None = None):
        self.index = index if index is not None else BM25(texts, window=0)  # index: the stored one
        self.n = self.index.n

    def idf(self, t: str) -> float:
        return self.index.idf(t)

    def chunks_of(self, t: str) -> list[int]:
        return self.index.chunks_of(t)


def _q_terms(question: str) -> list[str]:
    return list(dict.fromkeys(stem(w) for w in bm25_words(question) if w not in STOP))


def _names(question: str) -> list[str]:
    """Stemmed terms of the question's capitalised words (not its first word)."""
    toks = WORD.findall(question)
    return list(dict.fromkeys(stem(t.lower()) for t in toks[1:] if t[:1].isupper() and t.lower() not in STOP))


def _terms_of(text: str) -> set[str]:
    return {stem(w) for w in bm25_words(text) if w not in STOP}


FUNCTION = frozenset("""a an the of to in on at by for with from and or but is are was were be been being am do does
did what who whom whose which when where why how that this these those it its he she they his her their him them
i you we my your our me us as if than then so not no s""".split())


SENTENCE_FEATURES = (
    "cov", "cov_win", "cov_passage", "cov_names", "n_match", "rank_inv", "rank0", "bm25", "qmark", "restate",
    "restate_cov", "log_len", "short", "new_caps", "has_number", "place_prep", "first_named", "name_prior",
    "appositive", "dialogue", "boiler", "in_chunk", "best_in_passage", "best_overall", "best_win_overall",
    "cov_words", "naming", "next_to_best",
    *[f"k_{k}" for k in QKINDS],
    *[f"k_{k}_x_{f}" for k in ("who", "where", "when", "number", "what")
      for f in ("new_caps", "has_number", "place_prep", "appositive", "first_named")],
)


class QuestionInfo:
    def __init__(self, question: str, stats: DocStats):
        self.question = question
        self.kind = question_kind(question)
        self.terms = _q_terms(question)
        self.idf = {t: stats.idf(t) for t in self.terms}
        self.total = sum(self.idf.values()) or 1.0
        self.names = [t for t in _names(question) if t in self.idf]
        self.name_chunks = {t: stats.chunks_of(t) for t in self.names}
        self.qwords = {w.lower() for w in WORD.findall(question)}
        # the question's words but function words ("name", "called", "year" count here, as in the text)
        self.words = {stem(w) for w in self.qwords if w not in FUNCTION}

    def cov(self, terms: set[str]) -> float:
        return sum(v for t, v in self.idf.items() if t in terms) / self.total


def candidates(passages: Sequence[Passage]) -> list[Candidate]:
    """The sentences of the passages that overlap their own chunk, each once (the best-ranked passage's)."""
    out, seen = [], set()
    for p in sorted(passages, key=lambda p: p.rank):
        for a, b in sentence_spans(p.text):
            if b <= p.lo or a >= p.hi:
                continue
            key = (p.base + a, p.base + b)
            if key in seen:
                continue
            seen.add(key)
            out.append(Candidate(p, a, b))
    return out


def answer_candidates(q: QuestionInfo, passages: Sequence[Passage]) -> list[Candidate]:
    """The sentences the reader chooses among: the passages' candidates that do not restate the question."""
    return [c for c in candidates(passages) if not restates(q, c.passage.text[c.a:c.b])]


def restates(q: QuestionInfo, sent: str) -> bool:
    """Whether `sent` restates the question rather than answering it: a question itself ("Who is
    Colonel Brandon? Is he a man of fortune?") whose words are the question's, or a sentence with
    no word the question lacks. Such a sentence is never the answer."""
    content = [stem(w.lower()) for w in WORD.findall(sent) if w.lower() not in STOP]
    if not content or not q.terms:
        return False
    new = [t for t in content if t not in q.idf]
    if not new:
        return True
    return "?" in sent and len(new) <= 2 and q.cov(set(content)) >= 0.75


def sentence_features(q: QuestionInfo, cands: Sequence[Candidate]) -> np.ndarray:
    rows = []
    per_passage: dict[int, tuple] = {}  # a passage's sentences and terms, cut once for all its candidates
    for c in cands:
        p, text = c.passage, c.passage.text
        if id(p) not in per_passage:
            per_passage[id(p)] = (sentence_spans(text), _terms_of(text))
        spans, pt = per_passage[id(p)]
        sent = text[c.a:c.b]
        i = next((j for j, (a, b) in enumerate(spans) if a == c.a), None)
        win = text[spans[max(0, i - 1)][0]: spans[min(len(spans) - 1, i + 1)][1]] if i is not None else sent
        st, wt = _terms_of(sent), _terms_of(win)
        sw = WORD.findall(sent)
        cov = q.cov(st)
        content = [stem(w.lower()) for w in sw if w.lower() not in STOP]
        restate = (sum(t in q.idf for t in content) / len(content)) if content else 0.0
        new_caps = float(any(w[:1].isupper() and w.lower() not in q.qwords and j > 0 and w.lower() not in STOP
                             for j, w in enumerate(sw)))
        has_number = float(any(w.isdigit() or w.lower() in NUMBER_WORDS for w in sw))
        place = float(bool(re.search(r"\b(in|at|to|from|near)\s+(the\s+)?[A-Z]", sent)))
        # where the question's names are first met: the share of their chunks that come before this one
        prior = []
        for t in q.names:
            ch = q.name_chunks.get(t) or []
            if ch:
                prior.append(sum(x < p.chunk for x in ch) / len(ch))
        name_prior = float(np.mean(prior)) if prior else 0.5
        first_named = float(bool(prior) and all(v == 0 for v in prior) and any(t in st for t in q.names))
        appositive = 0.0
        for t in q.names:
            m = re.search(r"([^\W_]+)(?:[’']s)?\s*(,\s*(a|an|the|who|whose|my|his|her|our)\b|"
                          r"\s+(was|is|had been)\s+(a|an|the|my|his|her|our|one)\b)", sent)
            if m and stem(m.group(1).lower()) == t:
                appositive = 1.0
        k = q.kind
        f = {
            "cov": cov, "cov_win": q.cov(wt), "cov_passage": q.cov(pt),
            "cov_names": float(all(t in st for t in q.names)) if q.names else 0.5,
            "n_match": sum(t in st for t in q.terms) / max(len(q.terms), 1),
            "rank_inv": 1.0 / (1 + p.rank), "rank0": float(p.rank == 0), "bm25": p.bm25,
            "qmark": float("?" in sent), "restate": restate, "restate_cov": restate * cov,
            "log_len": math.log1p(len(sw)), "short": float(len(sw) < 5),
            "new_caps": new_caps, "has_number": has_number, "place_prep": place,
            "first_named": first_named, "name_prior": name_prior, "appositive": appositive,
            "dialogue": float(sent.lstrip()[:1] in "\"“'‘"), "boiler": float(p.boiler),
            "in_chunk": float(c.a >= p.lo and c.b <= p.hi),
            "cov_words": (len(q.words & {stem(w.lower()) for w in sw}) / len(q.words)) if q.words else 0.0,
            "naming": float(bool(re.search(r"\b(name|named|called|call|calls|styled|known as)\b", sent, re.I))
                            and bool(re.search(r"\b(name|named|called)\b", q.question, re.I))),
        }
        for kk in QKINDS:
            f[f"k_{kk}"] = float(k == kk)
        for kk in ("who", "where", "when", "number", "what"):
            for name in ("new_caps", "has_number", "place_prep", "appositive", "first_named"):
                f[f"k_{kk}_x_{name}"] = f[name] * (k == kk)
        rows.append(f)
    # the sentence right after the passage's best-covering one (what a question's words lead up to)
    for i, f in enumerate(rows):
        prev = [j for j, c in enumerate(cands) if c.passage is cands[i].passage and c.b <= cands[i].a]
        f["next_to_best"] = 0.0
        if prev:
            j = max(prev, key=lambda j: cands[j].b)
            peers = [rows[k]["cov"] for k, c in enumerate(cands) if c.passage is cands[i].passage]
            f["next_to_best"] = float(rows[j]["cov"] > 0 and rows[j]["cov"] >= max(peers))
    # relative features: the sentence covering most of the question, in its passage and overall
    for key, name, within in (("cov", "best_in_passage", True), ("cov", "best_overall", False),
                              ("cov_win", "best_win_overall", False)):
        for i, f in enumerate(rows):
            peers = [g[key] for j, g in enumerate(rows) if not within or cands[j].passage is cands[i].passage]
            f[name] = float(f[key] > 0 and f[key] >= max(peers))
    return np.asarray([[f[n] for n in SENTENCE_FEATURES] for f in rows],
                      dtype=np.float32).reshape(len(rows), len(SENTENCE_FEATURES))


SPAN_FEATURES = (
    "len", "len2", "cap_frac", "starts_cap", "has_digit", "has_numword", "after_copula", "after_naming", "after_prep",
    "after_comma", "before_punct", "at_end", "near_q_left", "near_q_right", "inner_stop", "idf_mean", "pos",
    *[f"k_{k}_x_{f}" for k in ("who", "where", "when", "number", "what", "find")
      for f in ("cap_frac", "has_digit", "has_numword", "after_copula", "after_prep", "len")],
)


def span_candidates(sent: str, q: QuestionInfo) -> list[tuple]:
    """[(start, end, words, i, j, all words, is-question-word flags)] in `sent`: runs of 1-8 words
    (words i..j) holding no question word, not starting or ending on a stop-word (numbers and
    capitalised words excepted)."""
    ws = list(WORD.finditer(sent))
    isq = [stem(m.group().lower()) in q.idf or m.group().lower() in q.qwords for m in ws]
    out = []
    for i in range(len(ws)):
        for j in range(i, min(len(ws), i + MAX_SPAN_WORDS)):
            if isq[j]:
                break
            a, b = ws[i].group(), ws[j].group()
            if (a.lower() in STOP and not a[:1].isupper()) or (b.lower() in STOP and not b[:1].isupper()):
                continue
            out.append((ws[i].start(), ws[j].end(), ws[i: j + 1], i, j, ws, isq))
    return out


def span_features(sent: str, q: QuestionInfo, cands, stats: DocStats) -> np.ndarray:
    rows = []
    for a, b, sw, i, j, ws, isq in cands:
        n = len(sw)
        toks = [m.group() for m in sw]
        prev = ws[i - 1].group().lower() if i > 0 else ""
        left = sent[ws[i - 1].end(): a] if i > 0 else sent[:a]
        right = sent[b: ws[j + 1].start()] if j + 1 < len(ws) else sent[b:]
        qpos = [x for x, v in enumerate(isq) if v]
        dl = min([i - x for x in qpos if x < i], default=99)
        dr = min([x - j for x in qpos if x > j], default=99)
        f = {
            "len": n / MAX_SPAN_WORDS, "len2": (n / MAX_SPAN_WORDS) ** 2,
            "cap_frac": sum(t[:1].isupper() for t in toks) / n, "starts_cap": float(toks[0][:1].isupper()),
            "has_digit": float(any(any(ch.isdigit() for ch in t) for t in toks)),
            "has_numword": float(any(t.lower() in NUMBER_WORDS for t in toks)),
            "after_copula": float(prev in COPULA), "after_naming": float(prev in NAMING),
            "after_prep": float(prev in PREP), "after_comma": float("," in left),
            "before_punct": float(bool(re.match(r"\s*[,.;:!?)\"”’]", right)) or j + 1 == len(ws)),
            "at_end": float(j + 1 == len(ws)), "near_q_left": 1.0 / (1 + dl), "near_q_right": 1.0 / (1 + dr),
            "inner_stop": sum(t.lower() in STOP for t in toks) / n,
            "idf_mean": float(np.mean([stats.idf(stem(t.lower())) for t in toks])) / 10.0,
            "pos": i / max(len(ws), 1),
        }
        for k in ("who", "where", "when", "number", "what", "find"):
            for name in ("cap_frac", "has_digit", "has_numword", "after_copula", "after_prep", "len"):
                f[f"k_{k}_x_{name}"] = f[name] * (q.kind == k)
        rows.append([f[x] for x in SPAN_FEATURES])
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(SPAN_FEATURES))


# ---------------------------------------------------------------------------------------------
# the scorers
# ---------------------------------------------------------------------------------------------


class Scorer:
    """score(x) = w2 . tanh(W1 ((x - mean) / std) + b1) + w . x_std: a small MLP beside a linear term."""

    def __init__(self, params: dict[str, np.ndarray]):
        self.p = params

    def __call__(self, x: np.ndarray) -> np.ndarray:
        p = self.p
        z = (x - p["mean"]) / p["std"]
        return np.tanh(z @ p["W1"].T + p["b1"]) @ p["w2"] + z @ p["w"]


@dataclass
class Reading:
    sentence: Candidate
    score: float
    margin: float  # best sentence's score minus the second's (softmax-free)
    prob: float  # the best sentence's softmax share among the candidates
    span: tuple[int, int] | None  # the short answer, [start, end) in the sentence's passage text
    features: np.ndarray | None = None  # the best sentence's SENTENCE_FEATURES
    span_score: float = 0.0  # the span scorer's score of the short answer (softmax-free)
    span_prob: float = 0.0  # its softmax share among the sentence's spans


class Reader:
    """The trained answer reader (`Reader.load(model_dir)`; None when the checkpoint ships none)."""

    def __init__(self, sentence: Scorer, span: Scorer, meta: dict):
        self.sentence, self.span, self.meta = sentence, span, meta

    @classmethod
    def load(cls, model_dir: str | Path) -> "Reader | None":
        d = Path(model_dir)
        if not (d / "reader.safetensors").is_file():
            return None
        from safetensors.numpy import load_file

        meta = json.loads((d / "reader.json").read_text())
        if tuple(meta["sentence_features"]) != SENTENCE_FEATURES or tuple(meta["span_features"]) != SPAN_FEATURES:
            raise ValueError(f"{d / 'reader.json'}: its features are not this code's; retrain the reader")
        t = load_file(str(d / "reader.safetensors"))
        sent = {k.split(".", 1)[1]: v for k, v in t.items() if k.startswith("sentence.")}
        span = {k.split(".", 1)[1]: v for k, v in t.items() if k.startswith("span.")}
        return cls(Scorer(sent), Scorer(span), meta)

    def read(self, question: str, passages: Sequence[Passage], stats: DocStats,
             relevance: Callable[[list[str]], np.ndarray] | None = None, weight: float = 0.0) -> Reading | None:
        """The best sentence of `passages` and its short answer. With `relevance` (the cross-encoder's
        relevance of each candidate's `sentence_unit`) and a weight, the sentence's score is the
        reader's and the cross-encoder's, each standardised over the candidates: z(reader) + weight
        z(cross-encoder) (the weight chosen on validation: cross_encoder.json's calibration)."""
        q = QuestionInfo(question, stats)
        cands = answer_candidates(q, passages)
        if not cands:
            return None
        X = sentence_features(q, cands)
        s = self.sentence(X)
        if relevance is not None and weight and len(cands) > 1:
            r = np.asarray(relevance([sentence_unit(c) for c in cands]), dtype=np.float64)
            s = standardise(s) + weight * standardise(r)
        order = np.argsort(-s, kind="stable")
        best = cands[int(order[0])]
        margin = float(s[order[0]] - s[order[1]]) if len(s) > 1 else 10.0
        e = np.exp(s - s.max())
        prob = float(e[order[0]] / e.sum())
        sent = best.passage.text[best.a:best.b]
        sc = span_candidates(sent, q)
        span, span_score, span_prob = None, -10.0, 0.0
        if sc:
            ss = self.span(span_features(sent, q, sc, stats))
            j = int(np.argmax(ss))
            a, b = sc[j][:2]
            span, span_score = (best.a + a, best.a + b), float(ss[j])
            es = np.exp(ss - ss.max())
            span_prob = float(es[j] / es.sum())
        return Reading(best, float(s[order[0]]), margin, prob, span, X[int(order[0])], span_score, span_prob)


QUOTE_MAX_CHARS = 400
QUOTE_GROW = (1, 2, -1)  # the sentences that join the answer's, in turn, while the quote fits (qa.ask)


def quote_bounds(text: str, a: int, b: int, limit: int = QUOTE_MAX_CHARS,
                 grow: tuple[int, ...] = QUOTE_GROW) -> tuple[int, int]:
    """The quote around sentence [a, b) of `text`: the sentences `grow` names (offsets from it) join in
    turn while the quote stays within `limit` characters, and after the first of them the clauses before
    it that end in ";" (a quote opens where its sentence does, not at "and in the space of a quarter of
    an hour ...", walk 12; the next sentence first, which often holds the answer); a sentence longer
    than the limit is cut."""
    spans = sentence_spans(text)
    i = next((j for j, (x, y) in enumerate(spans) if x <= a < y), None)
    if b - a > limit:
        b = a + limit
    if i is None:
        return a, b

    def join(j: int) -> bool:
        nonlocal a, b
        if 0 <= j < len(spans) and max(b, spans[j][1]) - min(a, spans[j][0]) <= limit:
            a, b = min(a, spans[j][0]), max(b, spans[j][1])
            return True
        return False

    for n, step in enumerate(grow):
        join(i + step)
        if n == 0:
            j = i
            while j > 0 and text[spans[j - 1][0]:spans[j - 1][1]].rstrip().endswith(";") and join(j - 1):
                j -= 1
    return a, b
