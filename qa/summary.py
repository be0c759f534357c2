"""Summaries: each part's story in whole sentences quoted from it, and the story so far.

extractive (default): the document is cut into parts (ingest.parts: chapters from the PDF's
    bookmarks, headings, TeX sections, or equal page spans). Each part's summary is its whole
    sentences (they end at . ! or ?, not at a page break) chosen by qa.narrate: one from each
    stretch of the part, from its start to its end, scored by what the part is about (the shipped
    MiniLM encoder), the people it names, speech (penalised), its opening, words that move the
    story on, and the model's retrieval centrality (the weighted in-degree of the sentence's
    chunks in the dependency map, licence, contents and index pages left out). The book's summary
    is its parts' summaries, in order, each sentence with its pages. Nothing is paraphrased. Its
    heatmap (trace["chunks"], `sentence_rows`): one row per sentence, one column per document chunk,
    what the model retrieved while it read that sentence at prefill, with the fusion weights.
the story so far (`before_page=N`): the same summary of the document as a reader who stopped
    before page N has it: only the chunks that end before page N, their pages, and the dependency
    map's rows of those chunks (prefill is causal, so they are the truncated document's own): exact
    by construction, as `ask --before-page` is.
abstractive: the model generates after `drt_core.prompts.summary_suffix()`, retrieving only from
    the parts asked for. Offered only when the model's summary check (`summary_check.json` in its
    checkpoint, written by `drt-reader eval summary --write-check` on the validation chapters)
    shows it beats the extractive summary in ROUGE-L; otherwise the extractive summary is shown,
    with a one-line notice saying why.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from store.library import Library

from .ask import generate
from .evidence import evidence_rows, flat, trace_json
from .views import BeforePage, prefix_state
from ingest.boilerplate import NOT_QUOTED, chunk_matter
from ingest.parts import Part, document_parts, document_text, pages_ref, select
from drt_core.protocol import DocumentEngine
from ingest.pipeline import ready_state
from .errors import QAError
from . import narrate
from .reader import sentence_spans

MODES = ("extractive", "abstractive")
CHECK_FILE = "summary_check.json"
MIN_SENTENCE_CHARS = 40
MAX_SENTENCE_CHARS = 420
MIN_WORDS = 6
_ENDS = re.compile(r"[.!?][\"'’”)\]]*$")
_STARTS = re.compile(r"^[\"'‘“(\[_]*[A-Z0-9]")


def in_degree(dependency_map: Sequence[dict], n_chunks: int,
              skip: frozenset[int] | set[int] = frozenset()) -> list[float]:
    """Per document chunk, the sum of the fusion weights with which other chunks retrieved it;
    chunks in `skip` (boilerplate) neither give nor receive."""
    score = [0.0] * n_chunks
    for row in dependency_map:
        src = int(row.get("chunk", -1))
        if src in skip:
            continue
        for j, w in zip(row.get("retrieved", []), row.get("weights", [])):
            j = int(j)
            if 0 <= j < n_chunks and j != src and j not in skip:
                score[j] += float(w)
    return score


EFFECTS_NOTE = ("not measured: a summary sentence was read at prefill, and barring a chunk from that reading "
                "means prefilling the document again up to the sentence (a whole book's prefill for its last "
                "sentence); the rows are the prefill's own selection, with its fusion weights")


def sentence_rows(dependency_map: Sequence[dict], sentence_chunks: Sequence[Sequence[int]],
                  n_doc_chunks: int) -> list[dict]:
    """The heatmap rows of quoted sentences, one per sentence: what the model retrieved while it read
    the sentence, from the dependency map recorded at prefill (the prefill's own selection). A
    sentence's chunks are read with the selections of their dependency-map rows (chunk c's row: the
    selection made by landmark c - 1; chunk 0 retrieves nothing); the row gives each retrieved
    document chunk its fusion weight averaged over those selections (every retrieval group of every
    chunk of the sentence; 0 where one did not pick it), so a row's weights sum to at most 1.
    Each row: {"sentence", "reading" (the sentence's chunks that retrieved), "topk" (heaviest first),
    "weights", "scores": None (prefill keeps no score of the chunks it did not pick), "effects": None
    (EFFECTS_NOTE)}: the structure of an answer's trace["chunks"], which ui.plots draws."""
    by_chunk = {int(r.get("chunk", -1)): r for r in dependency_map}
    rows = []
    for i, chunks in enumerate(sentence_chunks):
        reading = [int(c) for c in chunks if int(c) in by_chunk]
        sels = []
        for c in reading:
            r = by_chunk[c]
            one = {"retrieved": r.get("retrieved", []), "weights": r.get("weights", [])}
            sels += r.get("groups") or [one]
        got: dict[int, float] = {}
        for g in sels:
            for j, w in zip(g.get("retrieved") or [], g.get("weights") or []):
                j, w = int(j), float(w)
                if 0 <= j < n_doc_chunks and w > 0:
                    got[j] = got.get(j, 0.0) + w / len(sels)
        top = sorted(got.items(), key=lambda jw: (-jw[1], jw[0]))
        rows.append({"sentence": i, "reading": reading, "topk": [j for j, _ in top],
                     "weights": [round(w, 6) for _, w in top], "scores": None, "effects": None})
    return rows


def whole_sentences(text: str) -> list[tuple[int, int]]:
    """[start, end) of the whole sentences of `text`: reader.sentence_spans joined across ';', kept
    when they start with a capital (or a quote), end at . ! ? (closing quotes allowed), hold no
    blank line, close every quote they open, are not in capitals (headings), and are 40-420
    characters and 6 words or more."""
    spans: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for a, b in sentence_spans(text):
        cur = (cur[0], b) if cur is not None else (a, b)
        if text[b - 1: b] == ";":
            continue
        spans.append(cur)
        cur = None
    out = []
    for a, b in spans:
        s = text[a:b]
        lead = len(s) - len(s.lstrip())
        a, s = a + lead, s.strip()
        if (MIN_SENTENCE_CHARS <= len(s) <= MAX_SENTENCE_CHARS and len(s.split()) >= MIN_WORDS
                and _ENDS.search(s) and _STARTS.match(s) and not re.search(r"\n\s*\n", s)
                and s.count('"') % 2 == 0 and s.count("“") == s.count("”")
                and sum(ch.isupper() for ch in s) <= 0.3 * sum(ch.isalpha() for ch in s)):  # no headings
            out.append((a, a + len(s)))
    return out


@dataclass
class Sentence:
    part: int
    char_start: int
    char_end: int
    text: str
    score: float
    chunks: list[int]


def part_sentences(text: str, part: Part, chunks: list[dict], centrality: list[float],
                   boiler: set[int]) -> list[Sentence]:
    """The candidate sentences of one part, each scored by the mean centrality of its chunks."""
    a, b = part.char_start, part.char_end
    starts = [c["char_start"] for c in chunks]
    out = []
    for s, e in whole_sentences(text[a:b]):
        s, e = s + a, e + a
        mine, i = [], max(0, bisect_right(starts, s) - 1)
        while i < len(chunks) and chunks[i]["char_start"] < e:
            if chunks[i]["char_end"] > s:
                mine.append(i)
            i += 1
        if not mine or any(i in boiler for i in mine):
            continue
        score = sum(centrality[i] for i in mine) / len(mine)
        out.append(Sentence(part.number, s, e, flat(text[s:e]), score, mine))
    return out


def per_part_budget(n_parts: int) -> int:
    """Sentences per part: a chapter (or up to six parts) gets five, more parts three each: the
    book's summary is its chapters' summaries."""
    return 5 if n_parts <= 6 else 3


def minilm_embed(texts: list[str]):
    """L2-normalised MiniLM embeddings of `texts` (the encoder the repository ships)."""
    from drt_core.fixed_retriever import embed_texts

    return embed_texts(texts)


def extractive(
    library: Library,
    doc_id: str,
    dependency_map: Sequence[dict],
    *,
    chapter: int | None = None,
    pages: tuple[int, int] | None = None,
    per_part: int | None = None,
    span: tuple[int, int, str] | None = None,
    embed=minilm_embed,
) -> dict:
    """{"summary", "evidence", "trace"}: whole sentences from every part (or from one `span`: (char
    start, char end, title), as `eval summary` gives a chapter); the trace lists the sentences
    (text, part, pages, chunks, score) and the parts, and holds the heatmap: `chunks`, one row per
    sentence of what the model retrieved while it read it (sentence_rows), over `n_doc_chunks`
    columns; `effects` is None and `effects_note` says why."""
    doc = library.document(doc_id)
    n = doc["n_chunks"]
    chunks = library.chunks(doc_id)
    # licence, contents and index chunks; a reference list is left to the parts (`select`: summarised when asked for)
    boiler = {c for c, k in chunk_matter(library, doc_id, chunks).items() if k not in NOT_QUOTED}
    cent = in_degree(dependency_map, n, frozenset(boiler))
    if span is not None:
        chosen = [Part(1, span[2], span[0], span[1], 0, 0, "given")]
    else:
        chosen = select(document_parts(library, doc_id), chapter=chapter, pages=pages)
    if not chosen:
        raise QAError(f"pages {pages[0]}-{pages[1]} are outside this document (1-{doc['n_pages']})" if pages
                          else "nothing to summarize")
    text = document_text(library, doc_id)
    page_rows = library.pages(doc_id)
    if pages is not None:  # clip the parts to the page range
        lo = next(p["char_start"] for p in page_rows if p["number"] >= pages[0])
        hi = max(p["char_end"] for p in page_rows if p["number"] <= pages[1])
        chosen = [Part(p.number, p.title, max(p.char_start, lo), min(p.char_end, hi), max(p.page_first, pages[0]),
                       min(p.page_last, pages[1]), p.source) for p in chosen]
    k = per_part or per_part_budget(len(chosen))
    per_stretch = max(2, min(narrate.PER_STRETCH, narrate.EMBED_BUDGET // (k * len(chosen))))
    picked: list[Sentence] = []
    for part in chosen:
        cands = part_sentences(text, part, chunks, cent, boiler)
        idx = narrate.narrative([c.text for c in cands], [c.char_start for c in cands],
                                (part.char_start, part.char_end), k, embed=embed,
                                centrality=[c.score for c in cands], per_stretch=per_stretch)
        picked += [cands[i] for i in idx]
    labels = {p["number"]: p["label"] for p in page_rows}
    lines, rows = [], []
    titles = {p.number: p.title for p in chosen}
    for s in picked:  # a sentence's own pages, not its chunks' (walk 11: a sentence printed on p. 46 said pp. 45-46)
        pg = [p["number"] for p in page_rows if p["char_end"] > s.char_start and p["char_start"] < s.char_end] or \
            sorted({q for i in s.chunks for q in range(chunks[i]["page_first"], chunks[i]["page_last"] + 1)})
        rows.append({"part": s.part, "part_title": titles[s.part], "text": s.text, "pages": pg,
                     "chunks": s.chunks, "char_start": s.char_start, "char_end": s.char_end,
                     "score": round(s.score, 6)})
    last_part = None
    for r in rows:
        if len(chosen) > 1 and r["part"] != last_part:
            lines.append(f"## {r['part_title']}")
            last_part = r["part"]
        lines.append(f"{r['text']} ({pages_ref(r['pages'], labels)})")
    covered = len({r["part"] for r in rows})
    source = next((p.source for p in chosen if p.number), chosen[0].source)  # where the parts come from, not part 0's
    intro = (f"Extractive summary: {len(rows)} sentences quoted from {covered} of {len(chosen)} "
             f"part(s) ({source}), in order: in each part, from its start to its end, the ones "
             "that tell who does what.")
    top = max((r["score"] for r in rows), default=0.0) or 1.0
    ev_pairs: dict[int, float] = {}
    for r in rows:
        for i in r["chunks"]:
            ev_pairs[i] = max(ev_pairs.get(i, 0.0), r["score"] / top)
    evidence = evidence_rows(library, doc_id, sorted(ev_pairs.items()), limit=len(ev_pairs))
    evidence.sort(key=lambda e: e["chunk"])
    trace = {"mode": "extractive",
             "method": f"narrative pick (qa.narrate): per part, the best whole sentence of each of {k} equal "
                       "stretches by what the part is about (MiniLM), its recurring names, speech, its opening, "
                       "time words and retrieval centrality",
             "sentences": rows, "parts": [p.to_json() for p in chosen],
             "in_degree": [round(x, 6) for x in cent], "selected": sorted(ev_pairs),
             # the heatmap: one row per sentence, one column per document chunk (sentence_rows)
             "n_doc_chunks": n, "chunks": sentence_rows(dependency_map, [r["chunks"] for r in rows], n),
             "effects": None, "effects_note": EFFECTS_NOTE}
    return {"summary": "\n\n".join([intro, *lines]), "evidence": evidence, "trace": trace}


def summary_check(model_dir: str | Path | None) -> dict | None:
    """The model's summary check (written by `eval summary --write-check`), or None."""
    if model_dir is None:
        return None
    path = Path(model_dir) / CHECK_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def abstractive_allowed(check: dict | None) -> tuple[bool, str]:
    """(offered, one-line reason) for the abstractive mode."""
    if not check:
        return False, ("abstractive summaries are off: this model has no summary check "
                       "(drt-reader eval summary --write-check); showing the extractive summary")
    a, e = check.get("abstractive_rouge_l"), check.get("extractive_rouge_l")
    if a is None or e is None or a <= e:
        return False, (f"abstractive summaries are off: on the validation chapters this model's ROUGE-L was "
                       f"{a if a is not None else 'n/a'} against {e if e is not None else 'n/a'} for the "
                       "extractive summary; showing the extractive summary")
    return True, ""


def part_chunks(library: Library, doc_id: str, parts: Sequence[Part]) -> set[int]:
    """The chunks that overlap the parts."""
    return {c["idx"] for c in library.chunks(doc_id)
            if any(c["char_end"] > p.char_start and c["char_start"] < p.char_end for p in parts)}


def abstractive(library: Library, engine: DocumentEngine, state, doc_id: str, *, keep: set[int] | None = None,
                max_new_tokens: int = 128) -> dict:
    """The model's own summary, retrieving only from the chunks in `keep` (all when None): the
    others are masked."""
    n = state.n_chunks or library.document(doc_id)["n_chunks"]  # the state's (a last partial chunk is none)
    mask = None if keep is None else [i for i in range(n) if i not in keep]
    text, trace, _ = generate(engine, state, None, max_new_tokens=max_new_tokens, mask=mask)
    evidence = evidence_rows(library, doc_id, engine.evidence(state, trace) if trace is not None else [])
    return {"summary": text, "evidence": evidence, "trace": {"mode": "abstractive", **trace_json(trace)}}


def summarize(
    library: Library,
    engine: DocumentEngine,
    doc_id: str,
    *,
    mode: str = "extractive",
    max_new_tokens: int = 128,
    chapter: int | None = None,
    pages: tuple[int, int] | None = None,
    per_part: int | None = None,
    force_abstractive: bool = False,
    before_page: int | None = None,
) -> dict:
    """Contract 2 `summarize`: {"summary", "evidence", "trace"}, the trace with "mode" (the one
    used) and "notice" (why the abstractive mode was not, else ""); recorded as a "summary" trace.
    `force_abstractive` is for `eval summary`, which measures the mode before it is offered.
    `before_page`: the story so far, nothing from page N on (see the module docstring)."""
    if mode not in MODES:
        raise QAError(f"unknown summary mode {mode!r}; use one of {', '.join(MODES)}")
    fp = str(engine.fingerprint)
    state = ready_state(library, engine, doc_id)
    notice = ""
    if mode == "abstractive" and not force_abstractive:
        ok, notice = abstractive_allowed(summary_check(engine.model_dir))
        if not ok:
            mode = "extractive"
    dep = None
    read = library
    if before_page is not None:
        read = BeforePage(library, doc_id, before_page)
        if mode == "extractive":
            dep = [r for r in dependency_map(library, engine, doc_id, state) if int(r.get("chunk", -1)) < read.limit]
        else:
            state = prefix_state(read, engine, doc_id, read.n_tokens, full=state)
    if mode == "extractive":
        out = extractive(read, doc_id, dep if dep is not None else dependency_map(library, engine, doc_id, state),
                         chapter=chapter, pages=pages, per_part=per_part)
    else:
        keep = None
        if chapter is not None or pages is not None:
            keep = part_chunks(read, doc_id, select(document_parts(read, doc_id), chapter=chapter, pages=pages))
        out = abstractive(read, engine, state, doc_id, keep=keep, max_new_tokens=max_new_tokens)
    out["trace"]["mode"], out["trace"]["notice"] = mode, notice
    if before_page is not None:
        out["trace"]["before_page"] = int(before_page)
        out["summary"] = f"The story so far, before page {int(before_page)}. " + out["summary"]
    library.add_trace(doc_id, fp, "summary", out)
    return out


def dependency_map(library: Library, engine: DocumentEngine, doc_id: str, state=None) -> list[dict]:
    """The document's dependency map for this model (stored at the end of prefill)."""
    fp = str(engine.fingerprint)
    dep = library.latest_trace(doc_id, fp, "dependency_map")
    if dep is not None:
        return dep["data"]
    dep_map = (state or ready_state(library, engine, doc_id)).dependency_map()
    library.add_trace(doc_id, fp, "dependency_map", dep_map)
    return dep_map


def parse_pages(text: str) -> tuple[int, int]:
    """"12-30" or "12" -> (12, 30) / (12, 12); a clear error otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[-–]\s*(\d+))?\s*", text or "")
    if not m:
        raise QAError(f"pages must look like 12-30 or 12, not {text!r}")
    a, b = int(m.group(1)), int(m.group(2) or m.group(1))
    if a < 1 or b < a:
        raise QAError(f"page range {text!r} is empty: give FIRST-LAST with 1 <= FIRST <= LAST")
    return a, b
