"""Questions about a prefilled document: stream the answer, attach the evidence the model retrieved.

Evidence is not a search over the text: it is `engine.evidence(state, trace)`, the document chunks
the generated chunks actually retrieved, weighted by their fusion weights. Each item carries the
chunk's pages (physical, 1-based) and text, both from the library, never from the model.
"""

from __future__ import annotations

import math
import re
import threading
import time
from typing import Any, Callable

from store.library import Library

from .errors import Cancelled, IngestError
from .pipeline import EngineLike, ready_state

MAX_EVIDENCE = 8
# answers and summaries never repeat a 4-gram of their own (engine.generate's no_repeat_ngram): the
# shipped model, asked what it was not trained to answer, otherwise loops on a copied phrase
NO_REPEAT_NGRAM = 4


def trace_json(trace: Any) -> dict:
    """A RetrievalTrace as JSON ({"chunks": [{"gen_chunk", "topk", "weights", "scores"}, ...]})."""
    if trace is None:
        return {"chunks": []}
    if hasattr(trace, "to_json"):
        return trace.to_json()
    return dict(trace)


def evidence_rows(library: Library, doc_id: str, evidence: Any, limit: int = MAX_EVIDENCE) -> list[dict]:
    """[(chunk_id, weight), ...] -> [{"chunk", "pages", "weight", "text"}], heaviest first.

    Chunk ids past the document (the question's own chunks) are dropped.
    """
    pairs = [(int(c), float(w)) for c, w in evidence]
    pairs.sort(key=lambda cw: (-cw[1], cw[0]))
    rows = {r["idx"]: r for r in library.chunks(doc_id, [c for c, _ in pairs])}
    out: list[dict] = []
    for c, w in pairs:
        r = rows.get(c)
        if r is None:
            continue
        out.append(
            {
                "chunk": c,
                "pages": list(range(r["page_first"], r["page_last"] + 1)),
                "weight": round(w, 6),
                "text": r["text"],
            }
        )
        if len(out) >= limit:
            break
    return out


NOT_FOUND = "Not found in this document."
QUOTE_MAX_CHARS = 400  # a quote is the sentence the model points into, at most this long
_SENTENCE_END = re.compile(r"""[.!?;][\"'’”)\]]*\s+|\n\s*\n""")


def retrieval_z(trace: Any, n_doc_chunks: int) -> float | None:
    """How far the question's best-scored document chunk stands above the rest: (max - mean) / std
    of the retrieval scores of the answer's first chunk over the document's chunks (None without
    scores). The statistic abstention is calibrated on (`drt-reader eval qa --calibrate`)."""
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


def abstain_threshold(engine: EngineLike) -> float | None:
    """The model's calibrated abstention threshold on retrieval_z (config `abstain_z`), or None."""
    cfg = getattr(engine, "cfg", None) or getattr(getattr(engine, "model", None), "config", None)
    v = getattr(cfg, "abstain_z", None)
    return float(v) if v is not None else None


def sentence_around(text: str, at: int, limit: int = QUOTE_MAX_CHARS) -> tuple[int, int]:
    """[start, end) of the sentence of `text` holding character `at` (sentences end at . ! ? ;
    and blank lines), cut to `limit` characters around `at` when longer."""
    at = max(0, min(at, len(text) - 1))
    start, end = 0, len(text)
    for m in _SENTENCE_END.finditer(text):
        if m.end() <= at:
            start = m.end()
        elif m.start() >= at:
            end = m.start() + 1 if text[m.start()] in ".!?;" else m.start()
            break
    if end - start > limit:
        start = max(start, at - limit // 3)
        end = min(end, start + limit)
    return start, end


def quote_from_pointer(library: Library, doc_id: str, pointer: dict | None, n_doc_tokens: int) -> dict | None:
    """The extractive answer: the sentence of the document holding the slot the model's copy head
    points at most at the answer's first position (among document tokens), with its chunk, pages
    and character span. None when the model has no copy head or points at nothing in the document."""
    if not pointer or not pointer.get("slots"):
        return None
    acc: dict[int, float] = {}
    for pos, w in pointer["slots"]:
        if 0 <= pos < n_doc_tokens:
            acc[pos] = acc.get(pos, 0.0) + w
    if not acc:
        return None
    pos = max(acc, key=lambda t: (acc[t], -t))
    rows = library.chunks(doc_id)
    by_tok = {r["idx"]: r for r in rows}
    chunk = next((r["idx"] for r in rows if r["tok_start"] <= pos < r["tok_end"]), None)
    if chunk is None:
        return None
    near = [by_tok[c] for c in (chunk - 1, chunk, chunk + 1) if c in by_tok]
    text = "".join(r["text"] for r in near)
    base = near[0]["char_start"]
    me = by_tok[chunk]
    from drt_core.tokenizer import encode_with_offsets

    _, offs = encode_with_offsets(me["text"])
    r = min(pos - me["tok_start"], len(offs) - 1)
    at = me["char_start"] - base + (offs[r][0] if offs else 0)
    a, b = sentence_around(text, at)
    qa, qb = base + a, base + b
    pages = sorted({p for row in near if row["char_end"] > qa and row["char_start"] < qb
                    for p in range(row["page_first"], row["page_last"] + 1)})
    return {"text": " ".join(text[a:b].split()), "chunk": chunk, "pages": pages, "char_start": qa,
            "char_end": qb, "weight": round(acc[pos], 6), "gate": round(float(pointer.get("gate", 0.0)), 6)}


def generate(
    engine: EngineLike,
    state: Any,
    question: str | None,
    *,
    max_new_tokens: int,
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[str, Any]:
    """Run engine.generate to the end; return (answer, trace). Text deltas go to `on_delta`.

    `question` is the user's question (None asks for a summary): the engine lays out the prompt
    with drt_core.prompts, the same function that built the fine-tuning examples."""
    answer, trace, _ = generate_with_pointer(engine, state, question, max_new_tokens=max_new_tokens,
                                             on_delta=on_delta, cancel=cancel)
    return answer, trace


def generate_with_pointer(
    engine: EngineLike,
    state: Any,
    question: str | None,
    *,
    max_new_tokens: int,
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[str, Any, dict | None]:
    """generate, also returning where the copy head pointed at the answer's first position."""
    answer, trace, parts, pointer = None, None, [], None
    for ev in engine.generate(state, question, max_new_tokens=max_new_tokens, temperature=0.0,
                              no_repeat_ngram=NO_REPEAT_NGRAM):
        delta = getattr(ev, "text_delta", "") or ""
        if delta:
            parts.append(delta)
            if on_delta is not None:
                on_delta(delta)
        if getattr(ev, "done", False):
            answer = getattr(ev, "answer", None)
            trace = getattr(ev, "trace", None)
            pointer = getattr(ev, "pointer", None)
            break
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation was stopped")
    if answer is None:
        answer = "".join(parts)
    return str(answer).strip(), trace, pointer


def ask(
    library: Library,
    engine: EngineLike,
    doc_id: str,
    question: str,
    *,
    max_new_tokens: int = 64,
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict:
    """Answer `question` about a prefilled document; record it; return the Contract 2 object
    {"answer", "evidence", "trace"}."""
    question = " ".join(str(question).split())
    if not question:
        raise IngestError("the question is empty")
    if max_new_tokens < 1:
        raise IngestError("--max-new-tokens must be at least 1")
    state = ready_state(library, engine, doc_id)
    t0 = time.monotonic()
    generated, trace, pointer = generate_with_pointer(
        engine, state, question, max_new_tokens=max_new_tokens, on_delta=on_delta, cancel=cancel
    )
    tj = trace_json(trace)
    evidence = evidence_rows(library, doc_id, engine.evidence(state, trace) if trace is not None else [])
    n_chunks = int(getattr(state, "n_chunks", 0) or 0)
    z = retrieval_z(tj, n_chunks)
    threshold = abstain_threshold(engine)
    abstained = threshold is not None and z is not None and z < threshold
    quote = None if abstained else quote_from_pointer(library, doc_id, pointer, int(getattr(state, "n_tokens", 0)))
    if abstained:
        answer = NOT_FOUND
    elif quote is not None:
        answer = quote["text"]
    else:  # a model without a copy head: its generated text
        answer = generated
    # the model's own short answer, shown only when it is copied verbatim from the quoted passage
    short = generated if quote is not None and generated and generated in quote["text"] else None
    # how the answer was made rides in the trace, so Contract 2's three keys stay as they are
    made = {"quote": quote, "abstained": abstained, "short_answer": short, "generated": generated,
            "retrieval_z": None if z is None else round(z, 4), "abstain_threshold": threshold}
    tj = dict(tj, answer=made)
    library.record_answer(
        doc_id, question, str(engine.fingerprint), answer, evidence, tj, seconds=time.monotonic() - t0
    )
    return {"answer": answer, "evidence": evidence, "trace": tj, **made}


CONTRACT_KEYS = ("answer", "evidence", "trace")  # what `drt-reader ask --json` prints (DESIGN.md, Contract 2)
