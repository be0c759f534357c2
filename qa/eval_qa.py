"""`drt-reader eval qa`: evidence and answer quality on a question set, DRT beside plain baselines.

    res = run_qa("docs/eval/qa_handwritten.jsonl", home=..., engine_or_models="checkpoints/drt-tiny",
                 docs_root="../shared/corpora")

The question file is JSONL, one question a line:
    {"id", "doc", "type", "question", "answer", "gold", "answerable"}
`doc` is a path under `docs_root`; `gold` is a passage copied from the document (the evidence the
answer rests on); `answer` the short gold answer (a string, or a list of accepted strings);
`answerable` false marks a question the document does not answer (gold and answer then unused).

What is measured, and on what:
- Each document goes through `ingest.pipeline.ingest` into the library at `home` (idempotent by
  content hash: a second run reuses it), so the chunks are exactly the app's 63-token chunks.
- The gold passage is found in the document's STORED text (its pages at their char spans), with
  whitespace collapsed (then also case, quotes and dashes folded); the gold chunk set is every
  chunk whose char span overlaps it. A passage not found is recorded and its question is left
  out of hit@k.
- DRT answers through `qa.ask.ask`, the function the CLI and the UI call; its evidence (the
  chunks the generated answer retrieved, heaviest first) is its ranking. An abstention counts as
  the answer "".
- Baselines (`qa.baselines`: BM25, MiniLM) rank the same chunk texts; their answer is the quote
  `qa.ask.quote_from_evidence` takes from their top chunk, the rule DRT's answer follows, so
  that answers differ only by the chunk each system ranks first.
Metrics: hit@1 / hit@4 (a gold chunk among the first 1 / 4 ranked), on answerable questions whose
gold was located; exact match, token F1 and "contains" (SQuAD-normalised, below), on answerable
questions; DRT's abstention rate on unanswerable questions (right) and on answerable ones (false
abstentions). Reported overall, per question type and per document.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ingest.parts import document_text

from .errors import QAError

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DOCS_ROOT = ROOT.parent / "shared" / "corpora"  # ../shared/corpora from the repository
BASELINES = ("bm25", "bm25s", "minilm")  # bm25s: drt_core.bm25 (question stop-words, stemming; chunk units)
K = (1, 4)  # hit@k reported
SHORT_RIGHT_F1 = 0.5  # a short answer is right when its token F1 against the gold answer reaches this
DRT = "drt"


# ---------------------------------------------------------------------------------------------
# answer metrics (SQuAD-style)
# ---------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lower case, punctuation removed (every Unicode P* character, so curly quotes too), the
    articles a / an / the removed, whitespace collapsed: SQuAD's normalize_answer."""
    s = "".join(" " if unicodedata.category(c).startswith("P") else c for c in str(s).lower())
    return " ".join(_ARTICLES.sub(" ", s).split())


def _golds(gold: str | Sequence[str] | None) -> list[str]:
    if gold is None:
        return [""]
    return [str(gold)] if isinstance(gold, str) else [str(g) for g in gold] or [""]


def exact_match(pred: str, gold: str | Sequence[str]) -> float:
    """1.0 when the normalised answer equals a normalised gold answer."""
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(gold)))


def token_f1(pred: str, gold: str | Sequence[str]) -> float:
    """SQuAD token F1 (best over the gold answers); two empty answers score 1, one empty 0."""
    p = normalize_answer(pred).split()
    best = 0.0
    for g in _golds(gold):
        g = normalize_answer(g).split()
        if not p or not g:
            best = max(best, float(p == g))
            continue
        common = sum((Counter(p) & Counter(g)).values())
        if common:
            prec, rec = common / len(p), common / len(g)
            best = max(best, 2 * prec * rec / (prec + rec))
    return best


def contains(pred: str, gold: str | Sequence[str]) -> float:
    """1.0 when a non-empty normalised gold answer occurs in the normalised answer, on word
    boundaries ("cat" is not found in "category")."""
    p = f" {normalize_answer(pred)} "
    return float(any((g := normalize_answer(x)) and f" {g} " in p for x in _golds(gold)))


def answer_scores(pred: str, gold: str | Sequence[str]) -> dict:
    return {"em": exact_match(pred, gold), "f1": token_f1(pred, gold), "contains": contains(pred, gold)}


# ---------------------------------------------------------------------------------------------
# the gold passage in the stored text
# ---------------------------------------------------------------------------------------------

_FOLD = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
)


_GLYPH = re.compile("[\ue000-\uf8ff]")  # the private-use area: a PDF's unnamed ligature glyphs


def _fold(s: str) -> str:
    """Quotes and dashes to ASCII, lower case: character for character (positions are kept)."""
    s = s.translate(_FOLD)
    low = s.lower()
    return low if len(low) == len(s) else "".join(c.lower() if len(c.lower()) == 1 else c for c in s)


class TextFinder:
    """Whitespace-insensitive search in a text: `find(passage) -> (start, end)` in the original."""

    def __init__(self, text: str):
        words = list(re.finditer(r"\S+", text))
        self.starts_c, self.starts_o, pos = [], [], 0  # each word's start, collapsed and original
        for m in words:
            self.starts_c.append(pos)
            self.starts_o.append(m.start())
            pos += len(m.group()) + 1
        self.collapsed = " ".join(m.group() for m in words)
        self.folded = _fold(self.collapsed)

    def _orig(self, c: int) -> int:
        i = bisect.bisect_right(self.starts_c, c) - 1
        return self.starts_o[i] + (c - self.starts_c[i])

    def find(self, passage: str, before: int | None = None) -> tuple[int, int] | None:
        """The first place of `passage`; with `before` (an offset in the text), the last one that
        starts before it."""
        p = " ".join(str(passage).split())
        if not p:
            return None
        if before is None:
            a = self.collapsed.find(p)
            if a < 0:
                a = self.folded.find(_fold(p))
        else:
            limit = self._limit(before)
            a = self.collapsed.rfind(p, 0, limit)
            if a < 0:
                a = self.folded.rfind(_fold(p), 0, limit)
        if a < 0:
            return self._glyphs(p, before)
        return self._orig(a), self._orig(a + len(p) - 1) + 1

    def _limit(self, before: int) -> int:
        """The collapsed text's offset of the first word starting at or after `before` (an original offset)."""
        i = bisect.bisect_left(self.starts_o, before)
        return self.starts_c[i] if i < len(self.starts_c) else len(self.collapsed)

    def _glyphs(self, p: str, before: int | None) -> tuple[int, int] | None:
        """A passage copied from a PDF's text as it was stored before ingest.glyphs read its private-use
        ligature glyphs ("le\ue039him" for "left him"; "reﬁnement"): each such glyph stands for one to
        three letters and the space it may have swallowed, an ordinary ligature ("ﬁ") for its letters."""
        if not _GLYPH.search(p) and unicodedata.normalize("NFKC", p) == p:
            return None
        rx = re.compile("".join(r"[^\W\d_]{1,3} ?" if _GLYPH.fullmatch(c) else re.escape(c)
                                for c in _fold(unicodedata.normalize("NFKC", p))))  # NFKC keeps private-use
        if before is None:
            m = rx.search(self.folded)
        else:  # the last one that starts before `before`
            m = None
            for m in rx.finditer(self.folded, 0, self._limit(before)):
                pass
        return None if m is None else (self._orig(m.start()), self._orig(m.end() - 1) + 1)


def overlapping_chunks(chunks: list[dict], span: tuple[int, int]) -> list[int]:
    """Indices of the chunks whose char span overlaps [start, end)."""
    a, b = span
    return [c["idx"] for c in chunks if c["char_start"] < b and c["char_end"] > a]


def gold_chunks(
    finder: TextFinder, chunks: list[dict], gold: str | Sequence[str] | None
) -> tuple[list[int], bool]:
    """(sorted gold chunk indices, whether every gold passage was found)."""
    passages = [g for g in _golds(gold) if g.strip()]
    found, ok = set(), bool(passages)
    for g in passages:
        span = finder.find(g)
        if span is None:
            ok = False
        else:
            found.update(overlapping_chunks(chunks, span))
    return sorted(found), ok


# ---------------------------------------------------------------------------------------------
# questions
# ---------------------------------------------------------------------------------------------


def load_questions(path: str | Path, limit: int | None = None) -> list[dict]:
    """The question file's rows (the first `limit`), with defaults: type "unknown", answerable
    true, answer "", gold ""; QAError for a missing file or a bad line."""
    p = Path(path)
    if not p.is_file():
        raise QAError(f"question file not found: {p}")
    if limit is not None and limit < 1:
        raise QAError("--limit must be at least 1")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            raise QAError(f"{p}:{n}: not JSON ({e.msg})") from None
        if not isinstance(q, dict):
            raise QAError(f"{p}:{n}: not a JSON object")
        missing = [f for f in ("id", "doc", "question") if not str(q.get(f) or "").strip()]
        if missing:
            raise QAError(f"{p}:{n}: missing {', '.join(missing)}")
        q = {"type": "unknown", "answer": "", "gold": "", "answerable": True} | q
        q["id"], q["type"], q["answerable"] = str(q["id"]), str(q["type"]), bool(q["answerable"])
        out.append(q)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise QAError(f"{p} has no questions")
    return out


def _engines(engine_or_models) -> dict[str, Any]:
    """{"drt": engine} for an engine, a factory or a model path; {"drt:NAME": ...} for several."""
    from ingest import pipeline

    items = list(engine_or_models) if isinstance(engine_or_models, (list, tuple)) else [engine_or_models]

    def load(x):
        if isinstance(x, (str, Path)):
            return pipeline.load_engine(str(x))
        return x if hasattr(x, "prefill") else x()

    if len(items) == 1:
        return {DRT: load(items[0])}
    out = {}
    for x in items:
        eng = load(x)
        out[f"{DRT}:{Path(x).name if isinstance(x, (str, Path)) else str(eng.fingerprint)[:12]}"] = eng
    return out


def _baseline_index(name: str, texts: list[str], device: str, cache: str | Path | None = None):
    from .baselines import BM25Index, MiniLMIndex

    from drt_core.bm25 import BM25

    return {"bm25": BM25Index, "bm25s": BM25,
            "minilm": lambda t: MiniLMIndex(t, device=device, cache=cache)}[name](texts)


def reader_quote(library, doc_id: str, chunks: list[dict], ranking: list[int], question: str, reader, stats,
                 boiler: set[int]) -> dict | None:
    """A baseline's answer when the model ships a reader: the reader (qa.reader) on the baseline's
    top 8 chunks, each read with its neighbours, as `ask` reads DRT's; the quote grown as ask grows it."""
    from .reader import passage_around, quote_bounds

    at = lambda i: chunks[i] if 0 <= i < len(chunks) else None  # noqa: E731
    ps = [passage_around(at, c, r, 1.0 / (1 + r), c in boiler) for r, c in enumerate(ranking[:8])]
    rd = reader.read(question, ps, stats)
    if rd is None:
        return None
    p = rd.sentence.passage
    a, b = quote_bounds(p.text, rd.sentence.a, rd.sentence.b)
    return {"text": " ".join(p.text[a:b].split()), "chunk": p.chunk,
            "short": " ".join(p.text[rd.span[0]:rd.span[1]].split()) if rd.span else None}


def _hits(ranking: list[int], gold: list[int]) -> dict:
    g = set(gold)
    return {f"hit@{k}": (float(bool(g & set(ranking[:k]))) if g else None) for k in K}


def _shown(shown: list[int], gold: list[int]) -> dict:
    """The right passage among the (up to) three shown with the answer."""
    return {"shown@3": float(bool(set(gold) & set(shown[:3]))) if gold else None}


CE_POOL = 12  # the cross-encoder baseline reads BM25's and MiniLM's best CE_POOL chunks each


def cross_read_ranking(scorer, lib, doc_id: str, question: str, ranking: list[int], reader=None,
                       by_cross_encoder: bool = False) -> dict:
    """A baseline read as `ask` reads DRT's pool (qa.rerank, qa.ask._read_pool): the cross-encoder
    reads each ranked chunk's window (its P decides abstention, as DRT's does); the trained reader,
    when the checkpoint ships one, picks the quote from the first 8 in the baseline's order (or, with
    `by_cross_encoder`, in the cross-encoder's), with the cross-encoder's sentence term as DRT's;
    else the cross-encoder's span in the best window:
    {"answer", "quote", "short", "abstained", "ranking", "p"}. The short answer follows the
    checkpoint's calibration, as DRT's does."""
    from . import rerank
    from .ask import _read_pool

    wins = rerank.windows(lib, doc_id, ranking, frozenset())
    rerank.read_pool(scorer, question, wins)
    cal = rerank.Calibration.of(scorer.meta)
    order = sorted(wins, key=lambda c: -wins[c].p) if by_cross_encoder else [c for c in ranking if c in wins]
    unsure, best = rerank.decide(wins, cal)
    if reader is not None and order:
        quote, order = _read_pool(lib, doc_id, question, order, reader, scorer, cal.sentence_weight)
    else:
        quote = rerank.quote_of(wins[order[0]]) if order else None
    if unsure:
        quote = None
    short = rerank.short_shown(quote, cal)
    return {"answer": quote["text"] if quote else "", "quote": quote, "short": short or "",
            "short_raw": (quote or {}).get("span_text") or "", "abstained": unsure, "p": best,
            "span_score": ((quote or {}).get("cross_encoder") or {}).get("span_score"),
            "ranking": order}


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


def run_qa(
    question_file: str | Path,
    *,
    home: str | Path,
    engine_or_models,
    docs_root: str | Path,
    baselines: Sequence[str] = BASELINES,
    limit: int | None = None,
    max_new_tokens: int = 64,
    device: str = "cpu",
    progress: Callable | None = None,
) -> dict:
    """Evaluate DRT (through `qa.ask.ask`) and `baselines` on the question file; see the
    module docstring. `engine_or_models`: an engine, a zero-argument factory, a model path, or a
    list of those (one "drt:NAME" system each). `progress` goes to `ingest.pipeline.ingest`;
    `device` is MiniLM's. Returns the `--json` object (summaries and per-question rows)."""
    from store.library import Library

    from . import ask as ask_mod
    from ingest import pipeline

    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        raise QAError(f"unknown baseline {', '.join(unknown)}; choose from {', '.join(BASELINES)}")
    questions = load_questions(question_file, limit)
    root = Path(docs_root)
    paths = {}
    for q in questions:
        path = root / q["doc"]
        if not path.is_file():
            raise QAError(f"document not found: {path} (question {q['id']}; --docs-root {root})")
        paths[q["doc"]] = path
    engines = _engines(engine_or_models)
    first = next(iter(engines.values()))
    scorer = ask_mod.cross_encoder(first)  # the checkpoint's cross-encoder, if it ships one
    systems = [*engines, *baselines, *(["cross_encoder"] if scorer is not None else [])]
    rows, docs = [], []
    with Library(home) as lib:
        for doc, path in paths.items():
            logger.info("eval qa: ingesting %s", path)
            for eng in engines.values():  # tokenized once (first engine), prefilled by each
                res = pipeline.ingest(path, library=lib, engine=eng, progress=progress)
                if res.status != "done":
                    raise QAError(f"prefill of {path} did not finish ({res.status}); run again to resume")
            d = _EvalDoc.open(lib, res.doc_id, first, scorer, baselines, device, Path(home) / "minilm-cache")
            docs.append({"doc": doc, "doc_id": res.doc_id, "title": res.title, "tokens": res.tokens,
                         "chunks": res.chunks})
            for q in [q for q in questions if q["doc"] == doc]:
                gold, found = gold_chunks(d.finder, d.chunks, q["gold"]) if q["answerable"] else ([], None)
                row = {k: q[k] for k in ("id", "doc", "type", "question", "answer", "answerable")}
                row |= {"gold_chunks": gold, "gold_found": found}
                for name, eng in engines.items():
                    row[name] = _drt_row(d, eng, q["question"], gold, max_new_tokens)
                pools = {}
                for b in baselines:
                    row[b], pools[b] = _baseline_row(d, b, q["question"], gold)
                if scorer is not None:  # the cross-encoder alone: BM25's and MiniLM's pools, no DRT
                    union = list(dict.fromkeys(c for b in ("bm25s", "minilm") for c in pools.get(b, [])[:CE_POOL]))
                    row["cross_encoder"] = _cross_row(d, q["question"], union, gold, by_cross_encoder=True)
                for s in systems:
                    _score(row[s], q)
                rows.append(row)
                logger.info("eval qa: %d of %d questions", len(rows), len(questions))
    by_type = {t: summarize(rows, systems, type=t) for t in sorted({r["type"] for r in rows})}
    for d in docs:
        d |= summarize(rows, systems, doc=d["doc"])
    return {
        "questions_file": str(question_file),
        "docs_root": str(root),
        "home": str(home),
        "models": {name: str(eng.fingerprint) for name, eng in engines.items()},
        "systems": systems,
        "overall": summarize(rows, systems),
        "by_type": by_type,
        "by_doc": docs,
        "gold_not_found": [r["id"] for r in rows if r["answerable"] and not r["gold_found"]],
        "rows": rows,
    }


@dataclass
class _EvalDoc:
    """One document as every system of `run_qa` reads it."""

    lib: Any
    doc_id: str
    chunks: list[dict]
    boiler: set[int]
    finder: TextFinder
    indexes: dict
    vocab: Any  # the baselines quote their top chunk as ask quotes DRT's
    reader: Any  # or, with a reader, read their top 8 as DRT's
    stats: Any
    scorer: Any

    @classmethod
    def open(cls, lib, doc_id: str, engine, scorer, baselines, device: str, cache: Path) -> "_EvalDoc":
        from . import ask as ask_mod
        from .abstain import DocVocabulary

        chunks = lib.chunks(doc_id)
        texts = [c["text"] for c in chunks]
        reader = ask_mod._reader(engine)
        return cls(lib, doc_id, chunks, boilerplate_chunks(lib, doc_id, chunks),
                   TextFinder(document_text(lib, doc_id)),
                   {b: _baseline_index(b, texts, device, cache) for b in baselines}, DocVocabulary(texts), reader,
                   ask_mod._doc_stats(lib, doc_id) if reader is not None else None, scorer)


def _drt_row(d: _EvalDoc, eng, question: str, gold: list[int], max_new_tokens: int) -> dict:
    """What `ask` answered and showed, timed."""
    from . import ask as ask_mod

    t_ask = time.monotonic()
    out = ask_mod.ask(d.lib, eng, d.doc_id, question, max_new_tokens=max_new_tokens, causal=False)
    t_ask = time.monotonic() - t_ask
    abstained = bool(out.get("abstained", False))
    answer = "" if abstained else str(out.get("answer") or "")
    ranking = [int(e["chunk"]) for e in out.get("evidence") or []]
    quote = out.get("quote")
    drawn = [int(quote["chunk"])] if quote else ranking[:1]
    short = ("" if abstained or not quote else quote.get("short") or "") if d.reader is not None else None
    shown = [int(p["chunk"]) for p in out.get("passages") or []] or ranking[:3]
    if d.scorer is not None:  # the short answer shown, and the scores calibration reads
        short = "" if abstained else (out.get("short_answer") or "")
    conf = out.get("confidence") or {}
    return {"answer": answer, "abstained": abstained, "quote": quote, "short": short,
            "short_raw": (quote or {}).get("span_text") or "",
            "span_score": ((quote or {}).get("cross_encoder") or {}).get("span_score"),
            "p": conf.get("p"), "confidence": out.get("confidence"), "seconds": round(t_ask, 3),
            "z": out.get("retrieval_z"), "ranking": ranking, **_hits(ranking, gold),
            "shown": shown, **_shown(shown, gold),
            "boilerplate": None if abstained else float(any(c in d.boiler for c in drawn))}


def _cross_row(d: _EvalDoc, question: str, pool: list[int], gold: list[int], by_cross_encoder: bool = False,
               rest: Sequence[int] = ()) -> dict:
    """A pool read by the cross-encoder (and the reader), as DRT's is; the ranking goes on with
    `rest` (the baseline's own ranking) unless the cross-encoder ranks alone."""
    t_ce = time.monotonic()
    cr = cross_read_ranking(d.scorer, d.lib, d.doc_id, question, pool, d.reader, by_cross_encoder=by_cross_encoder)
    ranking = cr["ranking"] if by_cross_encoder else cr["ranking"] + [c for c in rest if c not in cr["ranking"]]
    return {"answer": cr["answer"], "ranking": ranking[: max(K)], **_hits(ranking, gold), "shown": ranking[:3],
            **_shown(ranking, gold), "short": cr["short"], "short_raw": cr["short_raw"],
            "span_score": cr["span_score"], "p": cr["p"], "abstained": cr["abstained"],
            **({"seconds": round(time.monotonic() - t_ce, 3)} if by_cross_encoder else {}),
            "boilerplate": float(bool(cr["quote"]) and cr["quote"]["chunk"] in d.boiler)}


def _baseline_row(d: _EvalDoc, b: str, question: str, gold: list[int]) -> tuple[dict, list[int]]:
    """Baseline `b`'s row and its ranking: its pool read as DRT's is (by the cross-encoder, else
    the reader, else its top chunk quoted)."""
    from . import ask as ask_mod

    k = max(8, CE_POOL) if d.scorer is not None else 8 if d.reader is not None else max(K)
    ranking = [i for i, _ in d.indexes[b].search(question, k)]
    if d.scorer is not None:
        return _cross_row(d, question, ranking[:8], gold, rest=ranking), ranking
    if d.reader is not None:
        quote = reader_quote(d.lib, d.doc_id, d.chunks, ranking, question, d.reader, d.stats, d.boiler)
    else:
        quote = (ask_mod.quote_from_evidence(d.lib, d.doc_id, d.chunks[ranking[0]]["idx"], question, d.vocab)
                 if ranking else None)
    return {"answer": quote["text"] if quote else "", "ranking": ranking[: max(K)], **_hits(ranking, gold),
            "short": ((quote or {}).get("short") or "") if d.reader is not None else None,
            "boilerplate": float(bool(quote) and quote["chunk"] in d.boiler) if d.reader is not None
            else float(bool(ranking) and ranking[0] in d.boiler)}, ranking


def _score(r: dict, q: dict) -> None:
    """The answer's scores against the written answer, in place."""
    r |= answer_scores(r["answer"], q["answer"]) if q["answerable"] else {}
    if q["answerable"] and r.get("short") is not None:  # the reader's short answer
        r["short_f1"] = token_f1(r["short"], q["answer"]) if r["short"] else 0.0
    if r.get("short_raw") is not None:  # right (F1 >= 0.5): the one shown, else the span that would be
        said = r.get("short") or r["short_raw"]
        r["short_right"] = float(token_f1(said, q["answer"]) >= SHORT_RIGHT_F1) if q["answerable"] and said else 0.0


def boilerplate_chunks(library, doc_id: str, chunks: list[dict]) -> set[int]:
    """Chunks lying on a licence, contents or index page (ingest.boilerplate.chunk_matter)."""
    from ingest.boilerplate import chunk_matter

    return set(chunk_matter(library, doc_id, chunks))


def calibrate_confidence(rows: list[dict], system: str, max_false: float = 0.10) -> dict:
    """The threshold of the reader's abstention test (qa.abstain_model; ask's `confidence`) from
    evaluated rows: the largest score such that at most `max_false` of the answerable questions it
    scored fall below it; with the share of unanswerable questions it then abstains on."""
    def s(r):
        c = r[system].get("confidence")
        return None if c is None else float(c["score"])

    ans = sorted(s(r) for r in rows if r["answerable"] and s(r) is not None)
    una = [s(r) for r in rows if not r["answerable"] and s(r) is not None]
    if not ans:
        raise QAError("no answerable question has a confidence score: nothing to calibrate on")
    t = ans[int(max_false * len(ans))] - 1e-6
    return {"threshold": round(float(t), 6), "calibrated_on": len(ans), "abstain_answerable": _mean(x < t for x in ans),
            "abstain_unanswerable": _mean(x < t for x in una), "unanswerable": len(una)}


def calibrate_cross_encoder(rows: list[dict], system: str, max_false: float = 0.10,
                            precision: float = 0.75) -> dict:
    """The cross-encoder's two thresholds from evaluated rows (run with none set: nothing abstains,
    every span is offered): `abstain_below`, the largest best-passage probability below which at most
    `max_false` of the answerable questions fall; `short_above`, the lowest span score above which the
    offered short answers are right (token F1 >= SHORT_RIGHT_F1) for at least `precision` of those
    shown, and at least 10 are shown (None: no such score, the short answer is never shown)."""
    ans = sorted(float(r[system]["p"]) for r in rows if r["answerable"] and r[system].get("p") is not None)
    una = [float(r[system]["p"]) for r in rows if not r["answerable"] and r[system].get("p") is not None]
    if not ans:
        raise QAError("no answerable question has a cross-encoder probability: nothing to calibrate on")
    t = ans[int(max_false * len(ans))] - 1e-6
    cand = sorted(((float(r[system]["span_score"]), float(r[system].get("short_right") or 0.0)) for r in rows
                   if r[system].get("span_score") is not None and r[system].get("short_raw")
                   and (r[system].get("p") or 0) >= t), reverse=True)
    short_above, shown = None, 0
    right = 0.0
    for i, (score, ok) in enumerate(cand):  # scan from the surest down; keep the lowest score still precise enough
        right += ok
        if i + 1 >= 10 and right / (i + 1) >= precision:
            short_above, shown = score, i + 1
    return {"abstain_below": round(float(t), 6), "short_above": None if short_above is None else round(short_above, 4),
            "calibrated_on": len(ans), "abstain_answerable": _mean(x < t for x in ans),
            "abstain_unanswerable": _mean(x < t for x in una), "unanswerable": len(una),
            "short_shown": shown, "short_precision": (sum(ok for _, ok in cand[:shown]) / shown) if shown else None,
            "max_false": max_false, "precision": precision}


def mined_question_file(qa_dir: str | Path, split: str, out: str | Path, *, n: int = 200, n_unanswerable: int = 40,
                        seed: int = 0, docs_root: str | Path | None = None) -> Path:
    """A question file (load_questions' format) from the mined questions of `split` (drt_core.mine's
    data/qa/{split}.jsonl): n answerable ones, spread over the question types, their gold the mined
    passage's text; and n_unanswerable questions asked of a document they are not about: a mined
    question of another document whose capitalised and long words do not occur in this one
    (checked on its text). Used to calibrate abstention (val) and as the mined evaluation set."""
    import json
    import random

    import numpy as np

    from drt_core.tokenizer import decode

    d = Path(qa_dir)
    items = [json.loads(line) for line in open(d / f"{split}.jsonl", encoding="utf-8") if line.strip()]
    toks = np.memmap(d / f"{split}.bin", dtype=np.uint16, mode="r")
    rng = random.Random(f"mined:{split}:{seed}")
    by_type: dict[str, list[dict]] = {}
    for it in items:
        by_type.setdefault(it["qtype"], []).append(it)
    picked = []
    types = sorted(by_type)
    turn = 0
    while len(picked) < n and any(by_type.values()):  # round robin over the types that have items left
        t = types[turn % len(types)]
        turn += 1
        if by_type[t]:
            picked.append(by_type[t].pop(rng.randrange(len(by_type[t]))))
    root = Path(docs_root) if docs_root else DEFAULT_DOCS_ROOT
    texts = {doc: (root / doc).read_text(encoding="utf-8", errors="replace") for doc in {it["doc"] for it in items}}
    rows = []
    for i, it in enumerate(picked):
        s = int(it["doc_start"])
        a, b = it["passage_tok"]
        gold = decode(np.asarray(toks[s + a: s + b], dtype=np.int64).tolist())
        rows.append({"id": f"{split}-{i:04d}", "doc": it["doc"], "type": it["qtype"], "question": it["question"],
                     "answer": it["answer"], "gold": gold.strip(), "answerable": True,
                     "phrasing": it.get("phrasing", "train")})
    docs = sorted(texts)
    pool = [it for it in items]
    rng.shuffle(pool)
    k = 0
    for it in pool:
        if k >= n_unanswerable or len(docs) < 2:
            break
        other = docs[rng.randrange(len(docs))]
        if other == it["doc"]:
            continue
        keys = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", it["question"]) if w[0].isupper() or len(w) >= 8]
        keys = [w for w in keys if w not in ("Who", "What", "Where", "When", "Which", "How", "Find", "State", "Define",
                                             "Lemma", "Proposition", "Theorem", "Definition", "Give", "In")]
        if not keys or any(re.search(r"\b" + re.escape(w) + r"\b", texts[other]) for w in keys):
            continue
        rows.append({"id": f"{split}-neg-{k:03d}", "doc": other, "type": it["qtype"], "question": it["question"],
                     "answer": "", "gold": "", "answerable": False})
        k += 1
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


def _mean(xs) -> float | None:
    xs = [float(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summarize(rows: list[dict], systems: Sequence[str], **where) -> dict:
    """Counts and each system's mean metrics over the rows matching `where` (field=value)."""
    rows = [r for r in rows if all(r[k] == v for k, v in where.items())]
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    out = {"questions": len(rows), "answerable": len(ans), "unanswerable": len(una),
           "gold_located": sum(bool(r["gold_chunks"]) for r in ans), "metrics": {}}
    for s in systems:
        m = {f"hit@{k}": _mean(r[s][f"hit@{k}"] for r in ans) for k in K}
        m |= {x: _mean(r[s][x] for r in ans) for x in ("em", "f1", "contains")}
        m["short_f1"] = _mean(r[s].get("short_f1") for r in ans)
        m["shown@3"] = _mean(r[s].get("shown@3") for r in ans)
        shorts = [r for r in rows if r[s].get("short")]
        m["short_shown"] = (sum(bool(r[s].get("short")) for r in ans) / len(ans)
                            if ans and any("short" in r[s] for r in rows) else None)
        m["short_precision"] = _mean(r[s].get("short_right") for r in shorts)
        m["boilerplate"] = _mean(r[s].get("boilerplate") for r in rows)
        if s.startswith(DRT) or any("abstained" in r[s] for r in rows):
            m["abstain_unanswerable"] = _mean(r[s].get("abstained") for r in una)
            m["abstain_answerable"] = _mean(r[s].get("abstained") for r in ans)
        secs = sorted(r[s]["seconds"] for r in rows if r[s].get("seconds") is not None)
        if secs:
            m["seconds_p50"] = secs[len(secs) // 2]
            m["seconds_p95"] = secs[min(len(secs) - 1, int(0.95 * len(secs)))]
        out["metrics"][s] = m
    return out


# ---------------------------------------------------------------------------------------------
# text output and command line
# ---------------------------------------------------------------------------------------------

COLUMNS = [("hit@1", "hit@1"), ("hit@4", "hit@4"), ("shown@3", "right passage shown"), ("em", "EM"), ("f1", "F1"),
           ("contains", "contains"), ("short_f1", "short answer F1"), ("short_shown", "short shown"),
           ("short_precision", "short right where shown"),
           ("boilerplate", "from licence/contents"),
           ("abstain_unanswerable", "abstain (unanswerable)"), ("abstain_answerable", "abstain (answerable)")]


def _cells(summary: dict, system: str) -> list[str]:
    m = summary["metrics"][system]
    cells = [f"{100 * m[k]:.1f}%" if m.get(k) is not None else "-" for k, _ in COLUMNS]
    return cells + [f"{m['seconds_p50']:.2f} / {m['seconds_p95']:.2f}" if m.get("seconds_p50") is not None else "-"]


def qa_text(res: dict) -> str:
    """Markdown tables: overall, per question type, per document (one row per system)."""
    from cli_io import table_head

    o = res["overall"]
    lines = [
        f"QA on {res['questions_file']}: {o['questions']} questions ({o['answerable']} answerable, "
        f"{o['unanswerable']} unanswerable) over {len(res['by_doc'])} documents; gold passage located "
        f"for {o['gold_located']} of {o['answerable']} answerable",
        "hit@k: a gold chunk among the first k ranked (DRT: its evidence); EM / F1 / contains: the "
        "SQuAD-normalised answer against the gold answer; abstain: share DRT abstained on",
        "", "## overall", "",
    ]
    names = [c for _, c in COLUMNS] + ["seconds p50 / p95"]

    def rows(lead: list[str], summary: dict) -> list[str]:
        return ["| " + " | ".join([*lead, s, *_cells(summary, s)]) + " |" for s in res["systems"]]

    lines += table_head(["n", "system", *names]) + rows([str(o["questions"])], o)
    lines += ["", "## per question type", ""] + table_head(["type", "n", "system", *names])
    for t, sm in res["by_type"].items():
        lines += rows([t, str(sm["questions"])], sm)
    lines += ["", "## per document", ""] + table_head(["document", "tokens", "n", "system", *names])
    for d in res["by_doc"]:
        lines += rows([d["doc"], f"{d['tokens']:,}", str(d["questions"])], d)
    if res["gold_not_found"]:
        lines += ["", "gold passage not found in the stored text: " + ", ".join(res["gold_not_found"])]
    return "\n".join(lines)


def register_eval(esub) -> None:
    """`eval qa` under app's `eval` group."""
    q = esub.add_parser("qa", help="evidence and answer quality on questions: DRT beside BM25 and MiniLM")
    q.add_argument("--questions", required=True, metavar="FILE", help="JSONL question file")
    q.add_argument("--docs-root", metavar="DIR", default=str(DEFAULT_DOCS_ROOT),
                   help="where the questions' `doc` paths are (default: the repository's ../shared/corpora)")
    q.add_argument("--home", dest="qa_home", metavar="DIR", default=None,
                   help="library the documents are ingested into (default: <--home>/eval-qa)")
    q.add_argument("--baselines", default=",".join(BASELINES),
                   help=f"comma-separated, from {', '.join(BASELINES)}; '' for none (default: all)")
    q.add_argument("--limit", type=int, metavar="N", default=None, help="only the first N questions")
    q.add_argument("--max-new-tokens", type=int, metavar="N", default=64,
                   help="longest DRT answer in tokens (default 64)")
    q.add_argument("--calibrate", action="store_true",
                   help="also compute the abstention thresholds on these questions (validation questions only): "
                        "the cross-encoder's (cross_encoder.json), else the reader's (reader.json), such that at "
                        "most --max-false of the answerable ones abstain")
    q.add_argument("--max-false", type=float, default=0.10, metavar="SHARE",
                   help="with --calibrate: the share of answerable questions allowed to fall below the "
                        "threshold (default 0.10)")
    q.add_argument("--write-threshold", action="store_true",
                   help="with --calibrate: write the thresholds into the checkpoint's cross_encoder.json "
                        "(or reader.json)")
    q.add_argument("--mine", metavar="SPLIT", default=None,
                   help="instead of --questions FILE, first write FILE from the mined questions of SPLIT "
                        "(data/qa/SPLIT.jsonl; e.g. val) with unanswerable ones asked of other documents")
    q.add_argument("--mine-n", type=int, default=120, help="answerable mined questions (default 120)")
    q.add_argument("--json", action="store_true", help="print one JSON object (with per-question rows)")
    q.set_defaults(func=cmd_qa)


def cmd_qa(args) -> int:
    import sys

    from cli_io import emit

    from ingest.session import ProgressPrinter
    from ingest.pipeline import default_device

    if args.mine:
        mined_question_file(Path("data") / "qa", args.mine, args.questions, n=args.mine_n,
                            n_unanswerable=max(10, args.mine_n // 4), docs_root=args.docs_root)
    printer = ProgressPrinter(sys.stderr.isatty() or bool(getattr(args, "verbose", False)))
    try:
        res = run_qa(
            args.questions,
            home=args.qa_home or Path(args.home) / "eval-qa",
            engine_or_models=args.model,
            docs_root=args.docs_root,
            baselines=[b.strip() for b in args.baselines.split(",") if b.strip()],
            limit=args.limit,
            max_new_tokens=args.max_new_tokens,
            device=default_device(),
            progress=printer,
        )
    finally:
        printer.close()
    text = qa_text(res)
    drt0 = next((s for s in res["systems"] if s.startswith(DRT)), None)
    if args.calibrate and drt0 and any(r[drt0].get("p") is not None for r in res["rows"]):
        # the cross-encoder's abstention and short-answer thresholds, into the checkpoint's cross_encoder.json
        res["calibration"] = cal = calibrate_cross_encoder(res["rows"], drt0, max_false=args.max_false)
        text += (f"\n\ncross-encoder: abstain below P = {cal['abstain_below']} (abstains on "
                 f"{100 * (cal['abstain_answerable'] or 0):.1f}% of {cal['calibrated_on']} answerable and "
                 f"{100 * (cal['abstain_unanswerable'] or 0):.1f}% of {cal['unanswerable']} unanswerable); "
                 "short answer "
                 + (f"above span score {cal['short_above']} ({cal['short_shown']} shown, "
                    f"{100 * cal['short_precision']:.1f}% right)" if cal["short_above"] is not None else "never shown"))
        if args.write_threshold:
            from .cross_encoder import META

            meta_path = Path(args.model) / META
            meta = json.loads(meta_path.read_text())
            meta["calibration"] = {**(meta.get("calibration") or {}), "abstain_below": cal["abstain_below"],
                                   "short_above": cal["short_above"], "calibrated_on": str(args.questions),
                                   "figures": cal}
            tmp = meta_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(meta, indent=2) + "\n")
            tmp.replace(meta_path)
            text += f"\nwritten to {meta_path}"
    elif args.calibrate and drt0 and any(r[drt0].get("confidence") for r in res["rows"]):
        # the reader's abstention test: its threshold, written into the checkpoint's reader.json
        res["calibration"] = cal = calibrate_confidence(res["rows"], drt0, max_false=args.max_false)
        text += (f"\n\ncalibrated reader abstention threshold = {cal['threshold']} "
                 f"on {cal['calibrated_on']} answerable "
                 f"questions: abstains on {100 * (cal['abstain_answerable'] or 0):.1f}% of answerable and "
                 f"{100 * (cal['abstain_unanswerable'] or 0):.1f}% of {cal['unanswerable']} unanswerable (those not "
                 "already abstained on by the rare-word test)")
        if args.write_threshold:
            meta_path = Path(args.model) / "reader.json"
            meta = json.loads(meta_path.read_text())
            meta["abstain"]["threshold"] = cal["threshold"]
            meta["abstain"]["calibrated_on"] = str(args.questions)
            tmp = meta_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(meta, indent=2) + "\n")
            tmp.replace(meta_path)
            text += f"\nwritten to {meta_path}"
    elif args.calibrate:
        text += ("\n\nnothing calibrated: this checkpoint has neither a cross-encoder (cross_encoder.json) nor a "
                 "reader's abstention test (reader.json), the two thresholds a checkpoint reads")
    emit(args, res, text)
    return 0
