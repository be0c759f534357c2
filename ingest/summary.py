"""Summaries from the model's own signals.

extractive (default): while prefilling, every chunk of the document retrieved a few earlier chunks
    with fusion weights (the dependency map). A chunk that the rest of the document keeps going
    back to is one the document depends on. Score = weighted in-degree: the sum of the fusion
    weights with which later chunks retrieved it. When the engine's state also offers per-chunk
    language-model loss (`state.chunk_losses()`), the score blends in the loss rank (a chunk the
    model found hard to predict carries new information): 0.7 * in-degree rank + 0.3 * loss rank.
    The top chunks are shown verbatim, in document order, with their pages, and labelled
    "extractive": nothing is paraphrased.
abstractive: the model generates after `drt_core.prompts.summary_suffix()`, retrieving as it goes;
    the evidence is what that generation retrieved. The tiny shipped model writes poor summaries;
    the evidence shows what it looked at.
"""

from __future__ import annotations

import math
from typing import Sequence

from store.library import Library

from .ask import evidence_rows, generate, trace_json
from .errors import IngestError
from .pipeline import EngineLike, ready_state

MODES = ("extractive", "abstractive")


def in_degree(dependency_map: Sequence[dict], n_chunks: int) -> list[float]:
    """Per document chunk, the sum of the fusion weights with which other chunks retrieved it."""
    score = [0.0] * n_chunks
    for row in dependency_map:
        for j, w in zip(row.get("retrieved", []), row.get("weights", [])):
            j = int(j)
            if 0 <= j < n_chunks and j != int(row.get("chunk", -1)):
                score[j] += float(w)
    return score


def _ranks(values: Sequence[float]) -> list[float]:
    """Rank of each value in [0, 1] (1 = largest); ties share the average rank."""
    n = len(values)
    if n <= 1:
        return [1.0] * n
    order = sorted(range(n), key=lambda i: values[i])
    out = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        r = (i + j) / 2 / (n - 1)
        for k in range(i, j + 1):
            out[order[k]] = r
        i = j + 1
    return out


def default_k(n_chunks: int) -> int:
    return max(3, min(12, round(math.sqrt(n_chunks))))


def extractive(
    library: Library,
    doc_id: str,
    dependency_map: Sequence[dict],
    *,
    losses: Sequence[float] | None = None,
    k: int | None = None,
) -> dict:
    """{"summary", "evidence", "trace"} from the dependency map (and losses, when given)."""
    doc = library.document(doc_id)
    n = doc["n_chunks"]
    k = min(n, k or default_k(n))
    deg = in_degree(dependency_map, n)
    use_loss = losses is not None and len(losses) == n and any(math.isfinite(x) for x in losses)
    if any(d > 0 for d in deg):
        if use_loss:
            clean = [x if math.isfinite(x) else 0.0 for x in losses]  # type: ignore[union-attr]
            rd, rl = _ranks(deg), _ranks(clean)
            score = [0.7 * a + 0.3 * b for a, b in zip(rd, rl)]
            method = "weighted in-degree in the dependency map, blended with per-chunk loss (0.7/0.3 ranks)"
        else:
            score = deg
            method = "weighted in-degree in the dependency map"
        picked = sorted(sorted(range(n), key=lambda i: (-score[i], i))[:k])
        top = max(score[i] for i in picked) or 1.0
        weights = {i: score[i] / top for i in picked}
        intro = (
            f"Extractive summary: the {len(picked)} passages the rest of the document retrieved most, "
            "in document order."
        )
    else:
        # no chunk was retrieved (a document of one or two chunks): say so, show its opening
        picked = list(range(k))
        weights = {i: 0.0 for i in picked}
        method = "no retrieval signal (document too short): opening passages"
        intro = (
            "Extractive summary: the document is too short for retrieval signals; "
            "these are its opening passages."
        )
    labels = {p["number"]: p["label"] for p in library.pages(doc_id)}
    rows = {r["idx"]: r for r in library.chunks(doc_id, picked)}
    parts = [intro]
    for i in picked:
        r = rows[i]
        a = labels.get(r["page_first"], str(r["page_first"]))
        b = labels.get(r["page_last"], str(r["page_last"]))
        where = f"p. {a}" if a == b else f"pp. {a}-{b}"
        parts.append(f"({where}) {' '.join(r['text'].split())}")
    evidence = evidence_rows(library, doc_id, [(i, weights[i]) for i in picked], limit=len(picked))
    evidence.sort(key=lambda e: e["chunk"])
    trace = {
        "mode": "extractive",
        "method": method,
        "in_degree": [round(x, 6) for x in deg],
        "selected": picked,
        "chunks": [],  # no generated chunks: nothing was generated
    }
    return {"summary": "\n\n".join(parts), "evidence": evidence, "trace": trace}


def summarize(
    library: Library,
    engine: EngineLike,
    doc_id: str,
    *,
    mode: str = "extractive",
    max_new_tokens: int = 128,
    k: int | None = None,
) -> dict:
    """Contract 2 `summarize`: {"summary", "evidence", "trace"}; recorded as a "summary" trace."""
    if mode not in MODES:
        raise IngestError(f"unknown summary mode {mode!r}; use one of {', '.join(MODES)}")
    fp = str(engine.fingerprint)
    state = ready_state(library, engine, doc_id)
    if mode == "extractive":
        dep = library.latest_trace(doc_id, fp, "dependency_map")
        if dep is None:
            dep_map = state.dependency_map()
            library.add_trace(doc_id, fp, "dependency_map", dep_map)
        else:
            dep_map = dep["data"]
        losses = state.chunk_losses() if hasattr(state, "chunk_losses") else None
        out = extractive(library, doc_id, dep_map, losses=losses, k=k)
    else:
        text, trace = generate(engine, state, None, max_new_tokens=max_new_tokens)
        evidence = evidence_rows(library, doc_id, engine.evidence(state, trace) if trace is not None else [])
        tj = trace_json(trace)
        tj = {"mode": "abstractive", **tj}
        out = {"summary": text, "evidence": evidence, "trace": tj}
    library.add_trace(doc_id, fp, "summary", out)
    return out


def dependency_map(library: Library, engine: EngineLike, doc_id: str) -> list[dict]:
    """The document's dependency map for this model (stored at the end of prefill)."""
    fp = str(engine.fingerprint)
    dep = library.latest_trace(doc_id, fp, "dependency_map")
    if dep is not None:
        return dep["data"]
    dep_map = ready_state(library, engine, doc_id).dependency_map()
    library.add_trace(doc_id, fp, "dependency_map", dep_map)
    return dep_map
