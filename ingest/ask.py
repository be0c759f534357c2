"""Questions about a prefilled document: stream the answer, attach the evidence the model retrieved.

Evidence is not a search over the text: it is `engine.evidence(state, trace)`, the document chunks
the generated chunks actually retrieved, weighted by their fusion weights. Each item carries the
chunk's pages (physical, 1-based) and text, both from the library, never from the model.
"""

from __future__ import annotations

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
    answer, trace, parts = None, None, []
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
            break
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation was stopped")
    if answer is None:
        answer = "".join(parts)
    return str(answer).strip(), trace


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
    answer, trace = generate(
        engine, state, question, max_new_tokens=max_new_tokens, on_delta=on_delta, cancel=cancel
    )
    tj = trace_json(trace)
    evidence = evidence_rows(library, doc_id, engine.evidence(state, trace) if trace is not None else [])
    library.record_answer(
        doc_id, question, str(engine.fingerprint), answer, evidence, tj, seconds=time.monotonic() - t0
    )
    return {"answer": answer, "evidence": evidence, "trace": tj}
