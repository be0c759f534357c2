"""Questions about a prefilled document: stream the answer, attach the evidence the model retrieved.

Evidence is not a search over the text: it is `engine.evidence(state, trace)`, the document chunks
the generated chunks actually retrieved, weighted by their fusion weights. Each item carries the
chunk's pages (physical, 1-based) and text, both from the library, never from the model, and its
causal effect on the model's answer (`engine.causal_effects`: how much less likely the generated
answer becomes when that chunk alone is barred from retrieval).

`ask(..., mask=[chunks])` regenerates with those chunks barred from retrieval (counterfactual
masking, `Engine.generate(mask=)`) and makes the answer from the new evidence as usual; the
unmasked answer rides beside it in trace["answer"]["unmasked"].
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import threading
import time
from typing import Any, Callable

import numpy as np

from store.library import Library

from . import abstain as abstain_mod
from ingest.boilerplate import NOT_QUOTED, chunk_matter, references_spans
from ingest.errors import Cancelled, NotPrefilled
from drt_core.protocol import DocumentEngine
from ingest.pipeline import ready_state
from .errors import QAError
from .evidence import evidence_rows, flat, trace_json
from .reader import sentence_spans  # quotes are cut as the reader cuts
from .short import count_answer
from .statement_qa import statement_absent, statement_answer, statement_asked
from .views import BeforePage, Redacted, blank, prefix_state, read_before

# answers and summaries never repeat a 4-gram of their own (engine.generate's no_repeat_ngram): the
# shipped model, asked what it was not trained to answer, otherwise loops on a copied phrase
NO_REPEAT_NGRAM = 4

NOT_FOUND = "Not found in this document."
# a quote: the best sentence of the quoted chunk (quote_chunk) and its neighbours, at most this long
QUOTE_MAX_CHARS = 400
# the sentences that join the best one, in turn, while the quote stays within QUOTE_MAX_CHARS: the two
# after it first (what a question's words lead up to, "she said:", "my name is", follows them),
# then the one before; validation's choice (docs/history/2026-12-04-quote-probes.md)
QUOTE_GROW = (1, 2, -1)


def retrieval_z(trace: Any, n_doc_chunks: int) -> float | None:
    """How far the question's best-scored document chunk stands above the rest: (max - mean) / std
    of the retrieval scores of the answer's first chunk over the document's chunks (None without
    scores). Reported in the answer's trace; no threshold reads it."""
    rows = (trace_json(trace) or {}).get("chunks") or []
    scores = rows[0].get("scores") if rows else None
    if not scores:
        return None
    x = [float(v) for v in scores[:n_doc_chunks] if v is not None and math.isfinite(float(v))]
    if len(x) < 2:
        return None
    mean = sum(x) / len(x)
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / len(x))
    return (max(x) - mean) / std if std > 0 else None


@functools.lru_cache(maxsize=8)
def _common_words(model_dir: str):
    return abstain_mod.load_common_words(model_dir)


_VOCABULARIES: dict[tuple[str, str], abstain_mod.DocVocabulary] = {}  # a document's words: its id is its content hash


def _doc_vocabulary(library: Library, doc_id: str) -> abstain_mod.DocVocabulary:
    key = (str(library.home), doc_id, getattr(library, "limit", None))
    if key not in _VOCABULARIES:
        while len(_VOCABULARIES) >= 4:
            _VOCABULARIES.pop(next(iter(_VOCABULARIES)))
        _VOCABULARIES[key] = abstain_mod.DocVocabulary(r["text"] for r in library.chunks(doc_id))
    return _VOCABULARIES[key]


def missing_words(library: Library, engine: DocumentEngine, doc_id: str, question: str) -> list[str]:
    """What the question names that the document never has (qa.abstain): its rare words, when they
    say it does not answer (`abstain.decisive`: a name, or two words; none when the model ships no
    common-word list), then its titled names ("Colonel Brandon" where a book has only "Lady Brandon");
    [] when everything is there."""
    model_dir = engine.model_dir
    common = _common_words(str(model_dir)) if model_dir is not None else None
    vocab = _doc_vocabulary(library, doc_id)
    missing = abstain_mod.missing_words(question, vocab, common) if common is not None else []
    missing = missing if abstain_mod.decisive(question, missing) else []
    return missing + abstain_mod.missing_names(question, vocab)


def abstain_reason(out: dict) -> str:
    """Why `ask` abstained, in one sentence for the reader (the CLI and the UI show it)."""
    absent = out.get("statement_absent")
    if absent:
        from .outline import kind_plural

        name = f"{absent['kind'].capitalize()} {absent['number']}"
        listed = absent["listed"]
        more = " ..." if len(listed) > 12 else ""
        have = (f"the {kind_plural(absent['kind'])} it lists are numbered {', '.join(listed[:12])}{more}" if listed
                else f"it lists no {absent['kind']} at all")
        return f"The outline of this document finds no {name}: {have}."
    missing = out.get("missing_words") or []
    if missing:
        named = ", ".join(f"\u201c{w}\u201d" for w in missing[:5])
        return f"The document never mentions {named}."
    conf = out.get("confidence") or {}
    if conf.get("lacks"):
        return (f"The passage that answers it best holds no {conf['lacks']}, and the question asks for one "
                f"(the reader gives it a {100 * conf['p']:.0f}% chance of holding the answer).")
    if conf.get("abstain") and conf.get("by") == "cross-encoder":
        return ("Its words are in the document, but no passage answers it: the reader gives the best one "
                f"a {100 * conf['p']:.0f}% chance of holding the answer, below the {100 * conf['threshold']:.0f}% "
                "chosen on validation questions.")
    if conf.get("abstain"):
        return ("Its words are in the document, but no passage answers it with confidence "
                f"(score {conf['score']:+.2f}, calibrated threshold {conf['threshold']:+.2f}).")
    return "No passage stood out for this question."


def not_found(out: dict) -> tuple[str, str]:
    """An abstention's heading and its reason (`abstain_reason`), said of the pages read: asked
    before p. N, "The document never mentions ..." is only true of those pages."""
    reason, page = abstain_reason(out), read_before(out)
    if not page:
        return NOT_FOUND, reason
    for whole, part in (("The document never mentions", f"The pages before p. {page} never mention"),
                        ("Its words are in the document", f"Its words are in the pages before p. {page}")):
        if reason.startswith(whole):
            reason = part + reason[len(whole):]
    return f"Not found before p. {page}.", reason


QUOTE_WINDOW = 0.5  # quote_chunk's weight of the words beside a chunk (docs/history/2026-12-04-window.md)


def quote_chunk(library: Library, doc_id: str, evidence: list[dict], question: str,
                vocab: abstain_mod.DocVocabulary, scores: list | None, window: float = QUOTE_WINDOW) -> dict:
    """Which retrieved chunk to quote: the evidence row maximising its retrieval score (the question
    landmark's, `scores` over the document's chunks) + `window` x the in-document idf of the
    question's words that the chunk lacks and the chunk before or after it holds: the model's
    four chunks are kept, and the one whose passage (three chunks, as the quote is) covers the
    question comes first. A chunk of a licence, contents or index page (its `matter`) gets no such
    bonus: boilerplate never wins over content by it. Without scores (or window 0): the heaviest.
    Chosen on validation questions (the 2026-12-04 log)."""
    def score(row):
        v = scores[row["chunk"]] if scores is not None and row["chunk"] < len(scores) else None
        return float(v) if v is not None and math.isfinite(float(v)) else -math.inf

    if not window or scores is None or len(evidence) < 2 or all(score(r) == -math.inf for r in evidence):
        return evidence[0]
    want = sorted({c for r in evidence for c in (r["chunk"] - 1, r["chunk"], r["chunk"] + 1)})
    bag = {r["idx"]: set(abstain_mod.words(r["text"])) for r in library.chunks(doc_id, want)}
    q = set(abstain_mod.words(question))

    def beside(c):
        own = bag.get(c, set())
        near = (bag.get(c - 1, set()) | bag.get(c + 1, set())) - own
        return sum(vocab.idf(w) for w in q & near)

    return max(evidence, key=lambda r: (score(r) + (0.0 if r.get("matter") else window * beside(r["chunk"])),
                                        r["weight"]))


@functools.lru_cache(maxsize=8)
def _load_reader(model_dir: str):
    from .reader import Reader

    return Reader.load(model_dir)


def _reader(engine: DocumentEngine):
    """The checkpoint's trained answer reader (qa.reader), or None when it ships none."""
    model_dir = engine.model_dir
    return _load_reader(str(model_dir)) if model_dir is not None else None


@functools.lru_cache(maxsize=2)
def _load_cross(model_dir: str):
    from .cross_encoder import Scorer

    return Scorer(model_dir)


def cross_encoder(engine: DocumentEngine):
    """The checkpoint's cross-encoder (qa.cross_encoder.Scorer), or None when it ships none (or the
    engine cannot score a question: it has no Engine.question_scores)."""
    from .cross_encoder import FILE

    model_dir = getattr(engine, "model_dir", None)
    if model_dir is None or not hasattr(engine, "question_scores") or not (model_dir / FILE).is_file():
        return None
    return _load_cross(str(model_dir))


def cross_read(library: Library, engine: DocumentEngine, state: Any, doc_id: str, question: str,
               barred: frozenset[int] | list[int], scorer) -> dict:
    """The cross-encoder's reading of the question's pool (qa.rerank): {"windows", "terms", "cal"}.
    The pool comes from the model's own question-time scores (and BM25's, and "Who is X?"'s
    introducing chunks); `terms` is the selection term the model then answers with."""
    from . import rerank

    barred = frozenset(int(c) for c in barred)
    n = state.n_chunks
    scores = engine.question_scores(state, question, mask=sorted(barred) or None)
    index = engine.bm25_index(state)
    bm = index.scores(question) if index is not None else None
    first = introduction(library, doc_id, question)
    wins = rerank.windows(library, doc_id, rerank.pool(scores, bm, barred, first, n), barred)
    rerank.read_pool(scorer, question, wins)
    cal = rerank.Calibration.of(scorer.meta)
    terms = rerank.terms(wins, n, cal.weight)
    # the pool in the order of the model's question-time scores with the cross-encoder's term added
    fused = {c: (float(scores[c]) if scores is not None and c < len(scores) and np.isfinite(scores[c]) else 0.0)
             + float(terms[c]) for c in wins}
    return {"windows": wins, "terms": terms, "cal": cal, "introduces": first, "reader": _reader(engine),
            "named": named(library, doc_id, question) if first else 0,
            "scorer": scorer, "order": sorted(wins, key=lambda c: (-fused[c], c))}


_STATS: dict[tuple[str, str], Any] = {}  # a document's term statistics for the reader (its id is its content hash)


def _doc_stats(library: Library, doc_id: str):
    from .reader import DocStats

    key = (str(library.home), doc_id, getattr(library, "limit", None))
    if key not in _STATS:
        while len(_STATS) >= 4:
            _STATS.pop(next(iter(_STATS)))
        if getattr(library, "limit", None) is None and hasattr(library, "document"):
            # the whole document of a library on disk: its stored index (ingest.pipeline.chunk_index)
            from ingest.pipeline import chunk_index

            _STATS[key] = DocStats(index=chunk_index(library, doc_id))
        else:  # a spoiler-safe view: its chunks only
            _STATS[key] = DocStats([r["text"] for r in library.chunks(doc_id)])
    return _STATS[key]


READ_PASSAGES = 8  # the reader reads the evidence, then the question's next best-scored chunks, up to this many


def reading_order(evidence: list[dict], scores: list | None, k: int = READ_PASSAGES) -> list[int]:
    """The chunks the reader reads: the evidence's (heaviest first), then the rest of the question
    selection's best-scored chunks (`scores`, the trace's first row: what the model scored highest)."""
    order = [int(e["chunk"]) for e in evidence][:k]
    if scores:
        rest = sorted((i for i, v in enumerate(scores) if v is not None and math.isfinite(float(v)) and i not in order),
                      key=lambda i: (-float(scores[i]), i))
        order += rest[: max(0, k - len(order))]
    return order


def quotable(library: Library, doc_id: str, chunks: list[int]) -> list[int]:
    """`chunks` (in their order) without those of a paper's reference list (ingest.boilerplate.NOT_QUOTED):
    a bibliography's entry ("In Proceedings of the 2019 ACM Symposium ..., pages 471-480.") is never
    the sentence quoted as the answer, though its passage may be shown, labelled."""
    tags = chunk_matter(library, doc_id, library.chunks(doc_id, sorted({c for c in chunks if c >= 0})))
    return [c for c in chunks if tags.get(c) not in NOT_QUOTED]


def unquoted_blank(library: Library, doc_id: str, rows: dict[int, dict]) -> dict[int, dict]:
    """`rows` (library chunk rows by index) with the characters of a paper's reference list blanked
    (qa.views.blank: offsets kept), for the passages the reader reads: a chunk that `quotable` keeps
    may still hold the list's first entries after the section's last lines (itcs20's chunk 873), or
    be read beside one, and no sentence of the list may be quoted."""
    spans = references_spans(library, doc_id)
    if not spans:
        return rows
    out = {}
    for i, r in rows.items():
        text, start = r["text"], r["char_start"]
        for a, b in spans:
            lo, hi = max(a, start) - start, min(b, start + len(text)) - start
            if lo < hi:
                text = text[:lo] + blank(text[lo:hi]) + text[hi:]
        out[i] = r if text is r["text"] else dict(r, text=text)
    return out


INTRO_CHUNKS = 3  # "Who is X?": the chunk of X's first mention and the two after it
_TEXTS: dict[tuple[str, str], tuple[str, list, list]] = {}  # a document's text, matter spans, chunk starts


def introduction(library: Library, doc_id: str, question: str) -> list[int]:
    """For "Who is X?", the chunks that introduce X (qa.outline.first_mention: X's first mention
    outside front and back matter, and the chunks after it); [] for other questions or an unknown name."""
    from .outline import first_mention, who_name

    name = who_name(question)
    if not name:
        return []
    text, skip, starts = _doc_texts(library, doc_id)
    pos = first_mention(text, name, skip)
    if pos is None:
        return []
    c = max(0, bisect.bisect_right(starts, pos) - 1)
    return [i for i in range(c, c + INTRO_CHUNKS) if i < len(starts)]


def _doc_texts(library: Library, doc_id: str) -> tuple[str, list, list]:
    """The document's text, the character spans of its front and back matter, its chunks' starts (cached)."""
    from ingest.parts import document_text

    key = (str(library.home), doc_id, getattr(library, "limit", None))
    if key not in _TEXTS:
        while len(_TEXTS) >= 4:
            _TEXTS.pop(next(iter(_TEXTS)))
        chunks = library.chunks(doc_id)
        boiler = chunk_matter(library, doc_id, chunks)
        _TEXTS[key] = (document_text(library, doc_id),
                       [(chunks[i]["char_start"], chunks[i]["char_end"]) for i in boiler],
                       [c["char_start"] for c in chunks])
    return _TEXTS[key]


WHO_MENTIONS = 3  # "Who is X?" of a person the document names this often is answered, never "Not found"


def named(library: Library, doc_id: str, question: str) -> int:
    """How often the document names the X of "Who is X?" (whole words, as written); 0 for other questions."""
    from .outline import who_name

    name = who_name(question)
    if not name:
        return 0
    return len(re.findall(rf"(?<!\w){re.escape(name)}(?!\w)", _doc_texts(library, doc_id)[0]))


def confidence(reader, library: Library, doc_id: str, question: str, reading: Any, bm) -> dict | None:
    """The calibrated abstention test (qa.abstain_model, the reader's "abstain"): {"score",
    "threshold", "abstain"}, or None when the checkpoint ships no test or the engine has no BM25 term.
    A test shipped without a threshold scores every answer and never abstains."""
    from . import abstain_model

    model = reader.meta.get("abstain")
    if model is None or bm is None:
        return None
    x = abstain_model.features(question, reading, _doc_stats(library, doc_id), np.asarray(bm, dtype=np.float64))
    s = abstain_model.score(model, x)
    t = model.get("threshold")  # None: measured, not calibrated to abstain (docs/qa.md): the score is shown only
    return {"score": round(s, 4), "threshold": None if t is None else round(float(t), 4),
            "abstain": t is not None and s < float(t)}


def read_answer(library: Library, engine: DocumentEngine, state: Any, doc_id: str, question: str,
                evidence: list[dict], reader, scores: list | None = None) -> tuple[dict | None, Any, np.ndarray | None]:
    """The trained reader's answer (qa.reader) from `reading_order`'s chunks, each read with the
    chunk before and after it: (quote, reading, the question's BM25 scores of the document's chunks).
    The quote is the answer sentence grown by its neighbours to at most QUOTE_MAX_CHARS, with its
    chunk, pages, character span and `short`, the short answer span inside it."""
    from .reader import passage_around

    from .outline import who_name

    order = reading_order(evidence, scores)
    intro = introduction(library, doc_id, question)
    if intro:  # "Who is X?": the passage that introduces X is read first (read alone, it did worse on validation)
        order = (intro + [c for c in order if c not in intro])[:READ_PASSAGES]
    want = sorted({c for c0 in order for c in (c0 - 1, c0, c0 + 1)})
    by_idx = unquoted_blank(library, doc_id, {r["idx"]: r for r in library.chunks(doc_id, [c for c in want if c >= 0])})
    matter = chunk_matter(library, doc_id, [by_idx[c] for c in order if c in by_idx])
    order = [c for c in order if matter.get(c) not in NOT_QUOTED]  # as `quotable`, from the tags read once
    index = engine.bm25_index(state)
    bm = index.scores(question) if index is not None else None
    top = max((float(bm[c]) for c in order if bm is not None and c < len(bm)), default=0.0) or 1.0
    weights = {int(e["chunk"]): float(e["weight"]) for e in evidence}
    passages = []
    for r, c in enumerate(order):
        s = float(bm[c]) / top if bm is not None and c < len(bm) else 0.0
        psg = passage_around(by_idx.get, c, r, max(s, 0.0), bool(matter.get(c)))
        if psg is not None:
            passages.append(psg)
    reading = reader.read(question, passages, _doc_stats(library, doc_id))
    if reading is None:
        return None, None, bm
    p = reading.sentence.passage
    quote = quote_of_reading(reading, by_idx)
    quote = {**quote, "short": quote.pop("span_text"),  # the short answer, when the quote holds it
             "weight": round(weights.get(p.chunk, 0.0), 6), "matter": matter.get(p.chunk),
             # whether the model retrieved the quoted chunk (it is in the evidence), and its place in the
             # reading order (1-based: the evidence first, then the question selection's next best-scored)
             "retrieved": p.chunk in weights, "rank": p.rank + 1,
             # "Who is X?": the quote comes from the passage that introduces X (read first)
             "introduces": who_name(question) if p.chunk in intro else None,
             "reader": {"score": round(reading.score, 4), "margin": round(reading.margin, 4),
                        "prob": round(reading.prob, 4)}}
    return quote, reading, bm


def quote_of_reading(reading, by_idx: dict[int, dict], cut_words: bool = False) -> dict:
    """The quote around the reader's sentence (`quote_bounds`; `cut_words`: never ending inside a
    word) with its text, sentence, chunk, pages and character span, and `span_text`, the reader's
    short answer where the quote holds it (a sentence longer than the quote is cut). `by_idx`: the
    library rows of the passage's chunks, for the pages."""
    from .reader import quote_bounds
    from .rerank import cut_at_word

    cand = reading.sentence
    p = cand.passage
    a, b = quote_bounds(p.text, cand.a, cand.b)
    if cut_words:
        b = cut_at_word(p.text, a, b)
    qa, qb = p.base + a, p.base + b
    pages = sorted({pg for x in by_idx.values()
                    if x["char_end"] > qa and x["char_start"] < qb and abs(x["idx"] - p.chunk) <= 1
                    for pg in range(x["page_first"], x["page_last"] + 1)})
    inside = reading.span is not None and a <= reading.span[0] and reading.span[1] <= b
    return {"text": flat(p.text[a:b]), "sentence": flat(p.text[cand.a:cand.b]),
            "span_text": flat(p.text[reading.span[0]:reading.span[1]]) if inside else None,
            "chunk": p.chunk, "pages": pages, "char_start": qa, "char_end": qb}


def quote_from_evidence(library: Library, doc_id: str, chunk: int, question: str,
                        vocab: abstain_mod.DocVocabulary, weight: float = 0.0,
                        limit: int = QUOTE_MAX_CHARS, grow: tuple[int, ...] = QUOTE_GROW) -> dict | None:
    """The extractive answer: in the chunk the model retrieved first, the sentence sharing the most
    in-document idf of the question's words (the model's word term, config lexical_words, at the
    scale of a sentence; ties: the first), quoted with the sentences `grow` names, in turn (offsets
    from it; QUOTE_GROW: the two after it, then the one before) while the quote stays within `limit`
    characters; with its chunk, pages and character span. Chosen on validation questions against the
    sentence the copy head points into (docs/history/2026-12-03-word-lexical.md) and against other cuts
    (2026-12-04-quote-probes.md)."""
    by_idx = {r["idx"]: r for r in library.chunks(doc_id, [chunk - 1, chunk, chunk + 1])}
    if chunk not in by_idx:
        return None
    near = [by_idx[c] for c in (chunk - 1, chunk, chunk + 1) if c in by_idx]
    base, me = near[0]["char_start"], by_idx[chunk]
    text = "".join(r["text"] for r in near)
    lo, hi = me["char_start"] - base, me["char_end"] - base
    spans = sentence_spans(text)
    q = set(abstain_mod.words(question))
    scored = [(sum(vocab.idf(w) for w in q & set(abstain_mod.words(text[a:b]))), -i)
              for i, (a, b) in enumerate(spans) if b > lo and a < hi]
    if not scored:
        return None
    i = -max(scored)[1]
    a, b = spans[i]
    if b - a > limit:
        b = a + limit
    for j in (i + step for step in grow):  # the sentences around it, while within the limit
        if 0 <= j < len(spans) and max(b, spans[j][1]) - min(a, spans[j][0]) <= limit:
            a, b = min(a, spans[j][0]), max(b, spans[j][1])
    qa, qb = base + a, base + b
    pages = sorted({p for r in near if r["char_end"] > qa and r["char_start"] < qb
                    for p in range(r["page_first"], r["page_last"] + 1)})
    return {"text": flat(text[a:b]), "sentence": flat(text[spans[i][0]:spans[i][1]]),
            "chunk": chunk, "pages": pages, "char_start": qa, "char_end": qb, "weight": round(float(weight), 6)}


def generate(
    engine: DocumentEngine,
    state: Any,
    question: str | None,
    *,
    max_new_tokens: int,
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    mask: list[int] | None = None,
    terms: np.ndarray | None = None,
) -> tuple[str, Any, list[int] | None]:
    """The one generation loop of the app, the CLI and the UI: engine.generate to the end, text
    deltas to `on_delta`; returns (answer, trace, the generated token ids or None). `question` is
    the user's question (None asks for a summary): the engine lays out the prompt with
    drt_core.prompts, the same function that built the fine-tuning examples."""
    answer, trace, parts, ids = None, None, [], None
    extra = {"mask": list(mask)} if mask else {}  # only when masking: engines without masks keep working
    if terms is not None:  # the cross-encoder's selection term (qa.rerank), for engines that take one
        extra["terms"] = terms
    for ev in engine.generate(state, question, max_new_tokens=max_new_tokens, temperature=0.0,
                              no_repeat_ngram=NO_REPEAT_NGRAM, **extra):
        delta = getattr(ev, "text_delta", "") or ""
        if delta:
            parts.append(delta)
            if on_delta is not None:
                on_delta(delta)
        if getattr(ev, "done", False):
            answer = getattr(ev, "answer", None)
            trace = getattr(ev, "trace", None)
            ids = getattr(ev, "ids", None)
            break
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation was stopped")
    if answer is None:
        answer = "".join(parts)
    return str(answer).strip(), trace, ids


def parse_mask(text: str | None) -> list[int]:
    """"3,17" (`ask --mask`, the UI's mask box) -> [3, 17]; QAError (one line) for anything but
    comma-separated chunk numbers. Whether each is a chunk of the document: check_mask."""
    if text is None:
        return []
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise QAError("--mask: give chunk numbers, e.g. --mask 3 or --mask 3,17")
    for p in parts:
        if not p.isdigit():
            raise QAError(f"--mask: {p!r} is not a chunk number (chunk numbers are integers from 0, e.g. 3,17)")
    return [int(p) for p in parts]


def check_mask(mask: Any, n_chunks: int) -> list[int]:
    """`mask` (chunk numbers) as a sorted list; QAError, one line, for anything that is not a
    chunk of the document."""
    out = set()
    for c in mask or []:
        if isinstance(c, bool) or not isinstance(c, int):
            if isinstance(c, float) and c.is_integer():
                c = int(c)
            else:
                raise QAError(f"--mask: {c!r} is not a chunk number")
        if not 0 <= c < n_chunks:
            raise QAError(f"--mask: chunk {c} is not in this document (its chunks are 0 to {n_chunks - 1})")
        out.add(c)
    return sorted(out)


def shown_answer(made: dict) -> tuple[str | None, str]:
    """The answer text the reader sees, which causal effects are measured on: (the short answer,
    "short answer"), else (the quoted sentence, "quoted sentence"); (None, "") for an abstention or
    no quote."""
    q = made.get("quote")
    if made.get("abstained") or not q:
        return None, ""
    if made.get("short_answer"):
        return str(made["short_answer"]), "short answer"
    return str(q.get("sentence") or q["text"]), "quoted sentence"


def answer_ids(engine: DocumentEngine, text: str) -> list[int] | None:
    """The token ids of `text` as an answer follows the prompt (drt_core.prompts.answer_text)."""
    from drt_core.prompts import answer_text

    tok = engine.tokenizer
    if tok is None:
        return None
    enc = tok.encode(answer_text(text), add_special_tokens=False)
    return list(getattr(enc, "ids", enc))  # an HF tokenizer gives ids, a bare `tokenizers` one an Encoding


def causal_effects(engine: DocumentEngine, state: Any, question: str, ids: list[int] | None,
                   chunks: list[int], terms: np.ndarray | None = None) -> dict[int, float | None]:
    """Each chunk's causal effect on the generated answer `ids` (Engine.causal_effects, in nats:
    logprob(answer) - logprob(answer | that chunk masked)); None for every chunk when the model
    generated nothing or the engine cannot tell."""
    if not ids or not chunks:
        return {c: None for c in chunks}
    extra = {"terms": terms} if terms is not None else {}
    return {int(c): round(float(v), 4) for c, v in engine.causal_effects(state, question, ids, chunks, **extra).items()}

READ_POOL = 2  # the trained reader reads the pool's best 2 by the fused score, each with its neighbours: since
# the cross-encoder orders the pool, fewer is better (development pool, 479 answerable written questions: the
# quote holds the answer 234 with 8, 242 with 4, 257 with 2, 255 with 1; docs/history/2026-12-07-twelfth-session.md)


def pool_passages(library: Library, doc_id: str, order: list[int]) -> tuple[list, dict[int, dict]]:
    """The passages the trained reader reads: the first READ_POOL chunks of `order`, each with its
    neighbours (qa.reader.passage_around, ranked as ordered), and the library rows they were cut from."""
    from .reader import passage_around

    top = order[:READ_POOL]
    want = sorted({c + d for c in top for d in (-1, 0, 1) if c + d >= 0})
    by_idx = unquoted_blank(library, doc_id, {r["idx"]: r for r in library.chunks(doc_id, want)})
    ps = [x for x in (passage_around(by_idx.get, c, r, 1.0 / (1 + r)) for r, c in enumerate(top)) if x is not None]
    return ps, by_idx


def _read_pool(library: Library, doc_id: str, question: str, order: list[int], reader, scorer=None,
               sentence_weight: float = 0.0) -> tuple[dict | None, list[int]]:
    """The trained reader (qa.reader) on the pool's best READ_POOL chunks in the fused order, each
    read with its neighbours, the cross-encoder's relevance of each sentence weighing in where the
    calibration gives it a weight: (the quote, the chunks in the order shown: the quote's first)."""
    ps, by_idx = pool_passages(library, doc_id, quotable(library, doc_id, order))
    relevance = None
    if scorer is not None and sentence_weight:
        def relevance(units: list[str]):
            return [r.relevance for r in scorer.read(question, units, spans=False)]
    reading = reader.read(question, ps, _doc_stats(library, doc_id), relevance, sentence_weight) if ps else None
    if reading is None:
        return None, list(order)
    p = reading.sentence.passage
    quote = {**quote_of_reading(reading, by_idx, cut_words=True), "short": None,
             "reader": {"score": round(reading.score, 4), "margin": round(reading.margin, 4),
                        "prob": round(reading.prob, 4), "span_prob": round(reading.span_prob, 4)},
             "cross_encoder": {"span_score": None}}
    if quote["span_text"] is not None:
        quote["cross_encoder"]["span_score"] = round(reading.prob * reading.span_prob, 4)
    return quote, [p.chunk] + [c for c in order if c != p.chunk]


def quote_origin(quote: dict) -> str | None:
    """Where an evidence-first quote came from, in words for the reader (the CLI and the UI), or None
    when it is simply the model's retrieved passage."""
    if quote.get("statement"):
        seen = "" if quote.get("retrieved") else "; the model did not retrieve it for this question"
        return f"{quote['statement']} as the outline finds it{seen}"
    if quote.get("introduces"):
        return f"the passage that introduces {quote['introduces']}"
    if quote.get("retrieved") is False:
        return "read from the question's pool: the model did not retrieve this chunk"
    return None


def matter_last(library: Library, doc_id: str, windows: list, k: int) -> list:
    """The first `k` of `windows` (passages, best first), those on a contents, index or licence page
    put after the others among the first 3k: their words match many questions and they answer none
    (a manual's function index came second and third, tried as a new user would)."""
    near = windows[: 3 * k]
    tags = chunk_matter(library, doc_id, library.chunks(doc_id, sorted({w.chunk for w in near})))
    return ([w for w in near if w.chunk not in tags] + [w for w in near if w.chunk in tags])[:k]


def _cross_answer(library: Library, doc_id: str, question: str, evidence: list[dict], ce: dict,
                  missing: list[str], common: frozenset[str] | None = None) -> dict:
    """The answer read by the cross-encoder (qa.rerank) from the passages the model retrieved: the
    best one's sentence as the quote, its span as the short answer where calibration allows, the
    passages shown (best first, then the next two); an abstention when the pool's best P is below
    the calibrated threshold (the passages are then the closest, not an answer)."""
    from . import rerank

    wins, cal = ce["windows"], ce["cal"]
    retrieved = [int(e["chunk"]) for e in evidence]
    unsure, best = rerank.decide(wins, cal)
    order = ce.get("order") or []
    # "Who is X?" of someone the document names again and again: the book does say who X is, so the
    # answer is the passage that introduces X (first), not "Not found" (Gilbert Blythe, 107 mentions,
    # got "Not found" when tried as a new user would); on development sets no such question abstained
    introduced = not missing and bool(ce.get("introduces")) and ce.get("named", 0) >= WHO_MENTIONS
    if introduced:
        unsure = False
        intro = [c for c in ce["introduces"] if c in wins][:1]  # its first mention; the passages after it are
        order = intro + [c for c in order if c not in intro]   # the model's others, not the next chunks
    abstained = bool(missing) or unsure
    reader = ce.get("reader")
    quote, shown = None, rerank.shown(wins, retrieved, k=len(wins))
    if reader is not None and order:  # the trained reader picks the sentence (validation's choice)
        quote, order = _read_pool(library, doc_id, question, order, reader, ce.get("scorer"), cal.sentence_weight)
        shown = [wins[c] for c in order if c in wins]
    elif shown:
        first = quotable(library, doc_id, [w.chunk for w in shown])[:1]
        quote = rerank.quote_of(next(w for w in shown if w.chunk == first[0])) if first else None
    kind = abstain_mod.asked_kind(question)  # "In what year ...?" answered by a passage that holds no year
    lacks = (kind if not abstained and quote is not None and kind
             and not abstain_mod.holds_kind(kind, quote["text"], question, _doc_vocabulary(library, doc_id), common)
             else None)
    abstained = abstained or lacks is not None
    if abstained:
        quote = None
    shown = matter_last(library, doc_id, shown, rerank.SHOWN)
    weights = {int(e["chunk"]): float(e["weight"]) for e in evidence}
    if quote is not None:
        from .outline import who_name

        c = quote["chunk"]
        quote["cross_encoder"] = {**quote.get("cross_encoder", {}), "p": round(wins[c].p, 4) if c in wins else None}
        matter = chunk_matter(library, doc_id, library.chunks(doc_id, [c]))
        quote |= {"weight": round(weights.get(c, 0.0), 6), "matter": matter.get(c), "retrieved": c in weights,
                  "rank": (retrieved.index(c) + 1) if c in retrieved else None,
                  "introduces": who_name(question) if c in ce.get("introduces", []) else None}
    passages = [rerank.passage_row(w) | {"retrieved": w.chunk in weights} for w in shown]
    short = rerank.short_shown(quote, cal)
    if short is None and quote is not None:  # "How many acres ...?": the one amount of that form the sentence states
        short = count_answer(question, quote["sentence"], quote["text"])
    if quote is not None:
        quote["short"] = short  # shown only where validation measured it right often enough
    return {"quote": quote, "abstained": abstained, "short_answer": short,
            "passages": passages,
            "confidence": {"p": round(best, 4), "threshold": cal.abstain_below, "abstain": unsure,
                           "by": "cross-encoder", **({"named": ce["named"]} if introduced else {}),
                           **({"lacks": lacks} if lacks else {})}}


def absent_answer(out: dict, absent: dict) -> dict:
    """`out` (`_make_answer`'s) as the abstention for a statement the outline does not list
    (qa.statement_qa.statement_absent): no quote and no short answer; its passages, if any, are the
    closest ones."""
    made = dict(out["made"], quote=None, short_answer=None, abstained=True, statement_absent=absent)
    return dict(out, answer=NOT_FOUND, made=made)


def _as_statement_question(library: Library, engine: DocumentEngine, doc_id: str, question: str, out: dict) -> dict:
    """`out` answered as a statement question where it is one: "What is Definition 1.4?" with the
    outline's statement (the model's evidence kept), a number the paper lacks with "Not found"; else
    `out` itself."""
    asked = statement_asked(library, doc_id, question)
    if asked is not None:
        return statement_answer(library, engine, doc_id, asked, out)
    absent = statement_absent(library, doc_id, question)
    return absent_answer(out, absent) if absent is not None else out


def _make_answer(library: Library, engine: DocumentEngine, doc_id: str, question: str, state: Any,
                 generated: str, trace: Any, missing: list[str], ce: dict | None = None) -> dict:
    """The answer made from one generation: {"answer", "evidence", "trace", "made"} (abstention,
    the quote from the first evidence chunk, or the generated text). `ce`: the cross-encoder's
    reading of the question (cross_read), which then reads the answer (_cross_answer)."""
    tj = trace_json(trace)
    evidence = evidence_rows(library, doc_id, engine.evidence(state, trace) if trace is not None else [])
    if ce is not None and evidence:
        common = _common_words(str(engine.model_dir)) if engine.model_dir is not None else None
        c = _cross_answer(library, doc_id, question, evidence, ce, missing, common)
        answer = NOT_FOUND if c["abstained"] else (c["quote"]["text"] if c["quote"] else generated)
        z = retrieval_z(tj, state.n_chunks)
        made = {**c, "generated": generated, "retrieval_z": None if z is None else round(z, 4),
                "missing_words": missing}
        return {"answer": answer, "evidence": evidence, "trace": tj, "made": made}
    n_chunks = state.n_chunks
    z = retrieval_z(tj, n_chunks)
    abstained = bool(missing)
    quote, reading, unsure = None, None, None
    reader = _reader(engine)
    rows = tj.get("chunks") or []
    scores = rows[0].get("scores") if rows else None
    if evidence and not abstained and reader is not None:
        quote, reading, bm = read_answer(library, engine, state, doc_id, question, evidence, reader, scores)
        unsure = confidence(reader, library, doc_id, question, reading, bm)
        if unsure is not None and unsure["abstain"]:  # calibrated: the reader and the retriever are not sure
            abstained, quote, reading = True, None, None
    cands = [e for e in evidence if e.get("matter") not in NOT_QUOTED]  # (a reference list is never quoted)
    if cands and not abstained and quote is None:
        # no reader, or it found no sentence to read: quote as a checkpoint without one does
        vocab = _doc_vocabulary(library, doc_id)
        first = quote_chunk(library, doc_id, cands, question, vocab, scores)
        quote = quote_from_evidence(library, doc_id, first["chunk"], question, vocab, weight=first["weight"])
        if quote is not None:  # a quote drawn from a licence / contents / index page says so (the UI and CLI show it)
            quote["matter"] = first.get("matter")
    if abstained:
        answer = NOT_FOUND
    elif quote is not None:
        answer = quote["text"]
    else:  # nothing retrieved (a model without retrieval): its generated text
        answer = generated
    if reading is not None and quote is not None:  # the trained reader's short answer, a span of the quote
        short = quote.get("short")
    else:  # the model's own short answer, shown only when it is copied verbatim from the quoted passage
        short = generated if quote is not None and generated and generated in quote["text"] else None
    made = {"quote": quote, "abstained": abstained, "short_answer": short, "generated": generated,
            "retrieval_z": None if z is None else round(z, 4),
            "missing_words": missing, "confidence": unsure}
    return {"answer": answer, "evidence": evidence, "trace": tj, "made": made}


def warm(library: Library, engine: DocumentEngine, doc_id: str) -> None:
    """Build now what a document's first question would: its model state, its BM25 index, the
    reader's term statistics, its words, and the cross-encoder and reader (the UI calls this when a
    document is picked; on a 500K-token book the first question took 2.5 s more than the next)."""
    state = ready_state(library, engine, doc_id)
    engine.bm25_index(state)
    _doc_stats(library, doc_id)
    _doc_vocabulary(library, doc_id)
    cross_encoder(engine)
    _reader(engine)


def ask(
    library: Library,
    engine: DocumentEngine,
    doc_id: str,
    question: str,
    *,
    max_new_tokens: int = 64,
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    mask: list[int] | None = None,
    causal: bool = True,
    before_page: int | None = None,
    on_answer: Callable[[dict], None] | None = None,
) -> dict:
    """Answer `question` about a prefilled document; record it; return the Contract 2 object
    {"answer", "evidence", "trace"} (and, beside them, how the answer was made).

    Every evidence row carries its `causal_effect` beside its fusion `weight`: the drop in the
    log-likelihood of the answer the reader sees (the short answer, else the quoted sentence;
    trace["answer"]["effects_on"] says which; the generated text when there is no quote) when that
    chunk alone is barred from retrieval: + means the chunk made that answer likelier.
    `mask`: document chunk numbers barred from retrieval; the answer is then regenerated without
    them, and the unmasked one is kept in trace["answer"]["unmasked"] (answer, generated, quote,
    abstained, the passages shown and why it abstained, as the answer itself shows them; evidence
    chunks with weight and causal effect). `causal=False` skips the effects
    (one batched forked pass, a row per evidence chunk; `eval qa` does not report them): they are then null.
    `before_page`: spoiler-safe reading: the model reads and retrieves only the chunks that end
    before that page (BeforePage, prefix_state): no evidence at or after it, and the answer the
    document truncated there would get. `on_answer(result)` is called with the answer as soon as it
    is made, before its causal effects are measured (the UI shows it, then streams the effects in).
    "question_id" is the question as the library recorded it (the UI exports a conversation by it)."""
    question = " ".join(str(question).split())
    if not question:
        raise QAError("the question is empty")
    if max_new_tokens < 1:
        raise QAError("--max-new-tokens must be at least 1")
    state = ready_state(library, engine, doc_id)
    record = library
    if before_page is not None:
        library = BeforePage(library, doc_id, before_page)
        state = prefix_state(library, engine, doc_id, library.n_tokens, full=state)
    barred = check_mask(mask, state.n_chunks)
    t0 = time.monotonic()
    missing = missing_words(library, engine, doc_id, question)
    scorer = cross_encoder(engine)
    ce = cross_read(library, engine, state, doc_id, question, [], scorer) if scorer is not None else None
    terms = ce["terms"] if ce is not None else None
    # the unmasked generation: the answer itself, or (masking) what the causal effects are measured on
    generated, trace, ids = generate(engine, state, question, max_new_tokens=max_new_tokens,
                                     on_delta=None if barred else on_delta, cancel=cancel, terms=terms)
    out = original = _make_answer(library, engine, doc_id, question, state, generated, trace, missing, ce)
    out = original = _as_statement_question(library, engine, doc_id, question, out)
    if barred:  # read again without the masked chunks: no quote, window or passage shows their text
        hidden = Redacted(library, doc_id, frozenset(barred))
        ce_m = cross_read(hidden, engine, state, doc_id, question, barred, scorer) if scorer is not None else None
        gen_m, trace_m, _ = generate(engine, state, question, max_new_tokens=max_new_tokens, on_delta=on_delta,
                                     cancel=cancel, mask=barred, terms=ce_m["terms"] if ce_m is not None else None)
        out = _make_answer(hidden, engine, doc_id, question, state, gen_m, trace_m, missing, ce_m)
        out = _as_statement_question(hidden, engine, doc_id, question, out)
    if cancel is not None and cancel.is_set():
        raise Cancelled("generation was stopped")
    if on_answer is not None:  # the answer now; its causal effects (a batched pass) follow
        on_answer({"answer": out["answer"], "evidence": out["evidence"],
                   "trace": dict(out["trace"], answer=out["made"]), **out["made"]})
    chunks = sorted({e["chunk"] for e in out["evidence"]} | {e["chunk"] for e in original["evidence"]})
    shown, effects_on = shown_answer(out["made"])
    shown_ids = answer_ids(engine, shown) if shown else ids  # what the reader sees, else the generation
    effects = causal_effects(engine, state, question, shown_ids if causal else None, chunks, terms)
    out["made"]["effects_on"] = effects_on if shown else "generated"
    for e in out["evidence"] + (original["evidence"] if barred else []):
        e["causal_effect"] = effects.get(e["chunk"])
    made = out["made"]
    if barred:
        o = original["made"]
        made = dict(made, masked=barred, unmasked={
            "answer": original["answer"], "generated": o["generated"], "quote": o["quote"],
            "abstained": o["abstained"], "short_answer": o["short_answer"], "missing_words": o["missing_words"],
            **{k: o[k] for k in ("passages", "confidence", "statement_absent") if k in o},  # as it is shown
            "evidence": [{k: e[k] for k in ("chunk", "pages", "weight", "causal_effect")}
                         for e in original["evidence"]]})
    # how the answer was made rides in the trace, so Contract 2's three keys stay as they are
    if before_page is not None:  # (the unmasked answer read the same pages)
        made = dict(made, before_page=int(before_page))
        if barred:
            made["unmasked"] = dict(made["unmasked"], before_page=int(before_page))
    tj = dict(out["trace"], answer=made)
    answer, evidence = out["answer"], out["evidence"]
    ids = record.record_answer(
        doc_id, question, str(engine.fingerprint), answer, evidence, tj, seconds=time.monotonic() - t0
    )
    return {"answer": answer, "evidence": evidence, "trace": tj, **made, "question_id": ids["question_id"]}


def ask_all(library: Library, engine: DocumentEngine, question: str, *, max_new_tokens: int = 64,
            before_page: int | None = None) -> dict:
    """The question asked of every document this model has prefilled: each document's model state
    does its own retrieval and the same reader reads it (`ask`, without causal effects); the
    answers are grouped by document, the one whose reader was surest first (abstentions last).
    {"question", "documents": [{"doc_id", "title", "answer", "evidence", "trace", ...}]}."""
    from ingest.pipeline import adopt_older_states

    adopt_older_states(library, engine)  # states of an older engine version count as this one's
    fp = str(engine.fingerprint)
    ready = [d for d in library.documents()
             if any(s["model_fp"] == fp and s["status"] == "done" for s in d.get("prefill") or [])]
    if not ready:
        raise NotPrefilled("no document is prefilled by this model yet: `drt-reader ingest FILE` first")
    out = []
    for d in ready:
        page = before_page if before_page is not None and before_page <= d["n_pages"] else None  # else all of it
        res = ask(library, engine, d["id"], question, max_new_tokens=max_new_tokens, causal=False, before_page=page)
        out.append({"doc_id": d["id"], "title": d["title"], **res})

    def surest_first(r: dict) -> tuple:
        score = ((r.get("quote") or {}).get("reader") or {}).get("score")
        return bool(r.get("abstained")), -(score if score is not None else -1e9)

    out.sort(key=surest_first)
    return {"question": " ".join(question.split()), "documents": out}


CONTRACT_KEYS = ("answer", "evidence", "trace")  # what `drt-reader ask --json` prints (docs/design.md, Contract 2)
