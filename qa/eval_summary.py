"""`drt-reader eval summary`: chapter summaries against summaries written by reading.

The sets (docs/eval/summaries/: `sealed_v3.jsonl`, 15 chapters of three books outside every
split and every other set, texts in texts_v3/, read once per shipped round; `sealed_v2.jsonl`, 15
chapters of three books of ../shared/fresh, and `sealed.jsonl`, 12 test-split chapters, each read
once as the sealed set of its round and now for development; `val.jsonl`, 6 validation-split
chapters, for choices) give per chapter the book, its line span, a summary written in the reader's
own words and three key sentences copied verbatim. Each book is ingested and prefilled (resumable),
as the record's `read_as` file when it has one (a PDF of the same book; its line span still refers
to `doc`); each chapter is found in the stored text by its first and last lines, and summarised by
every system with the same budget (SENTENCES whole sentences; the model's generation: up to
--max-new-tokens):

  drt          the extractive summary (qa.summary.extractive): the narrative pick (qa.narrate)
  lead         the chapter's first sentences (the strongest plain baseline of news summarisation)
  centroid     the sentences closest to the chapter's TF-IDF centroid (Radev et al. 2004)
  abstractive  the model's own generation after the summary prompt, retrieving only from the chapter

Scores: ROUGE-L F1 (longest common subsequence of lower-cased words; Lin 2004) against the
written summary, and key-sentence recall: the share of the three key sentences that a system
quoted (word F1 >= 0.6 with one of its sentences). `--write-check` writes the model's
`summary_check.json`, which decides whether the abstractive mode is offered: run it on the
validation set only.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from pathlib import Path
from typing import Callable

from .errors import QAError
from .eval_qa import DEFAULT_DOCS_ROOT, TextFinder, token_f1

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
SETS = {"val": ROOT / "docs" / "eval" / "summaries" / "val.jsonl",
        "sealed": ROOT / "docs" / "eval" / "summaries" / "sealed.jsonl",
        "sealed_v2": ROOT / "docs" / "eval" / "summaries" / "sealed_v2.jsonl",
        "sealed_v3": ROOT / "docs" / "eval" / "summaries" / "sealed_v3.jsonl"}
# where each set's `doc` paths start: ../shared for sealed_v2, the repository for sealed_v3 (its texts ship)
SET_ROOTS = {"sealed_v2": ROOT.parent / "shared", "sealed_v3": ROOT}
SENTENCES = 5
SYSTEMS = ("drt", "lead", "centroid", "abstractive")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def lcs(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)), one row kept)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, reference: str) -> dict:
    """ROUGE-L precision, recall and F1 over lower-cased words."""
    c, r = words(candidate), words(reference)
    if not c or not r:
        return {"p": 0.0, "r": 0.0, "f": 0.0}
    n = lcs(c, r)
    p, rec = n / len(c), n / len(r)
    return {"p": p, "r": rec, "f": 0.0 if n == 0 else 2 * p * rec / (p + rec)}


def key_recall(sentences: list[str], keys: list[str], threshold: float = 0.6) -> float:
    """Share of the key sentences matched (word F1 >= threshold) by one of the system's sentences."""
    if not keys:
        return 0.0
    return sum(any(token_f1(s, k) >= threshold for s in sentences) for k in keys) / len(keys)


def lead(text: str, a: int, b: int, k: int) -> list[str]:
    from .summary import whole_sentences

    return [" ".join(text[a + s: a + e].split()) for s, e in whole_sentences(text[a:b])[:k]]


def centroid(text: str, a: int, b: int, k: int) -> list[str]:
    """The k sentences with the highest cosine to the chapter's TF-IDF centroid, in order."""
    from .summary import whole_sentences

    sents = [" ".join(text[a + s: a + e].split()) for s, e in whole_sentences(text[a:b])]
    bags = [Counter(words(s)) for s in sents]
    df = Counter(w for bag in bags for w in bag)
    n = len(bags)
    idf = {w: math.log((1 + n) / (1 + d)) + 1 for w, d in df.items()}
    cen: Counter = Counter()
    for bag in bags:
        for w, t in bag.items():
            cen[w] += t * idf[w]
    cnorm = math.sqrt(sum(v * v for v in cen.values())) or 1.0

    def cos(bag: Counter) -> float:
        vec = {w: t * idf[w] for w, t in bag.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return sum(v * cen[w] for w, v in vec.items()) / norm / cnorm

    best = sorted(range(n), key=lambda i: (-cos(bags[i]), i))[:k]
    return [sents[i] for i in sorted(best)]


def load_set(path: str | Path) -> list[dict]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for r in rows:
        missing = {"doc", "chapter", "line_start", "line_end", "summary", "key_sentences"} - set(r)
        if missing:
            raise QAError(f"{path}: a record lacks {', '.join(sorted(missing))}")
    return rows


def chapter_span(finder: TextFinder, file_lines: list[str], rec: dict) -> tuple[int, int]:
    """The chapter's [start, end) in the stored text: from the first to the last of its lines (of
    five words or more, whitespace aside) that occur once in the stored text, among those lying
    within the chapter's length of their median. Another edition, a PDF, may print a heading in
    its table of contents, repeat a line, or break lines otherwise: those lines do not count."""
    body = [ln for ln in file_lines[rec["line_start"] - 1: rec["line_end"]] if len(ln.split()) >= 5]
    size = len(" ".join(" ".join(body).split()))
    found = []
    for ln in body:
        first, last = finder.find(ln), finder.find(ln, before=1 << 62)
        if first is not None and last is not None and first[0] == last[0]:
            found.append(first)
    if not found:
        raise QAError(f"chapter {rec['chapter']!r} of {rec['doc']} not found in the stored text")
    mid = sorted(a for a, _ in found)[len(found) // 2]
    near = [(a, b) for a, b in found if abs(a - mid) <= size]
    return min(a for a, _ in near), max(b for _, b in near)


def book_chapters(lib, engine, recs: list[dict], docs_root: str | Path, progress: Callable | None = None):
    """Each record's book ingested and prefilled (as its `read_as` file when it has one; resumable),
    and the record's chapter found in the stored text: yields (doc_id, text, rec, (start, end)),
    book by book, in the set's order."""
    from ingest import pipeline
    from ingest.parts import document_text

    for doc in dict.fromkeys(r["doc"] for r in recs):
        path = Path(docs_root) / doc
        read = Path(docs_root) / next((r.get("read_as") or doc) for r in recs if r["doc"] == doc)
        for f in {path, read}:
            if not f.is_file():
                raise QAError(f"document not found: {f} (--docs-root {docs_root})")
        res = pipeline.ingest(read, library=lib, engine=engine, progress=progress)
        if res.status != "done":
            raise QAError(f"prefill of {path} did not finish ({res.status}); run again to resume")
        text = document_text(lib, res.doc_id)
        finder = TextFinder(text)
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for rec in (r for r in recs if r["doc"] == doc):
            yield res.doc_id, text, rec, chapter_span(finder, lines, rec)


def run_summary_eval(set_path: str | Path, *, home: str | Path, model: str, docs_root: str | Path = DEFAULT_DOCS_ROOT,
                     systems=SYSTEMS, k: int = SENTENCES, max_new_tokens: int = 160,
                     progress: Callable | None = None) -> dict:
    """Scores per chapter and means per system (see the module docstring)."""
    from store.library import Library

    from ingest import pipeline
    from .summary import abstractive, dependency_map, extractive

    recs = load_set(set_path)
    engine = pipeline.load_engine(model)
    rows = []
    with Library(home) as lib:
        book = None  # (doc_id, its dependency map, its state): once per book
        for doc_id, text, rec, (a, b) in book_chapters(lib, engine, recs, docs_root, progress):
            if book is None or book[0] != doc_id:
                book = (doc_id, dependency_map(lib, engine, doc_id),
                        pipeline.ready_state(lib, engine, doc_id) if "abstractive" in systems else None)
            _, dep, state = book
            out: dict[str, list[str]] = {}
            if "drt" in systems:
                ex = extractive(lib, doc_id, dep, span=(a, b, rec["chapter"]), per_part=k)
                out["drt"] = [s["text"] for s in ex["trace"]["sentences"]]
            if "lead" in systems:
                out["lead"] = lead(text, a, b, k)
            if "centroid" in systems:
                out["centroid"] = centroid(text, a, b, k)
            if "abstractive" in systems:
                chunks = lib.chunks(doc_id)
                keep = [c["idx"] for c in chunks if c["char_end"] > a and c["char_start"] < b]
                gen = abstractive(lib, engine, state, doc_id, keep=set(keep), max_new_tokens=max_new_tokens)
                out["abstractive"] = [gen["summary"]]
            row = {"doc": rec["doc"], "chapter": rec["chapter"], "systems": {}}
            for name, sents in out.items():
                rl = rouge_l(" ".join(sents), rec["summary"])
                row["systems"][name] = {"rouge_l": round(rl["f"], 4), "rouge_l_recall": round(rl["r"], 4),
                                        "key_recall": round(key_recall(sents, rec["key_sentences"]), 4),
                                        "words": len(words(" ".join(sents))), "sentences": sents}
            rows.append(row)
    means = {}
    for name in systems:
        got = [r["systems"][name] for r in rows if name in r["systems"]]
        if got:
            means[name] = {m: round(sum(g[m] for g in got) / len(got), 4) for m in ("rouge_l", "rouge_l_recall",
                                                                                  "key_recall", "words")}
    return {"set": str(set_path), "chapters": len(rows), "sentences": k, "means": means, "rows": rows}


def summary_text(res: dict) -> str:
    lines = [f"eval summary: {res['set']}, {res['chapters']} chapters, {res['sentences']} sentences per summary",
             f"{'system':12} {'ROUGE-L F1':>10} {'ROUGE-L R':>10} {'key sent.':>10} {'words':>6}"]
    for name, m in res["means"].items():
        lines.append(f"{name:12} {m['rouge_l']:10.3f} {m['rouge_l_recall']:10.3f} {m['key_recall']:10.3f} "
                     f"{m['words']:6.0f}")
    return "\n".join(lines)


def write_check(res: dict, model_dir: str | Path, command: str) -> Path:
    """The model's summary_check.json: ROUGE-L of its abstractive and extractive summaries."""
    from .summary import CHECK_FILE

    m = res["means"]
    check = {"set": Path(res["set"]).name, "chapters": res["chapters"],
             "abstractive_rouge_l": m.get("abstractive", {}).get("rouge_l"),
             "extractive_rouge_l": m.get("drt", {}).get("rouge_l"), "command": command}
    path = Path(model_dir) / CHECK_FILE
    path.write_text(json.dumps(check, indent=1) + "\n")
    return path


def register_eval(esub) -> None:
    s = esub.add_parser("summary", help="chapter summaries against summaries written by reading (ROUGE-L)")
    s.add_argument("--set", dest="summary_set", default="val",
                   help="val (validation chapters, for choices), sealed_v3 (unseen books' chapters: once per "
                        "shipped round), sealed and sealed_v2 (earlier rounds' sealed sets, now development), "
                        "or a JSONL path (default val)")
    s.add_argument("--docs-root", metavar="DIR", default=None,
                   help="where the records' `doc` paths are (default: the repository's ../shared/corpora; "
                        "../shared for sealed_v2, the repository for sealed_v3)")
    s.add_argument("--home", dest="summary_home", metavar="DIR", default=None,
                   help="library the books are ingested into (default: <--home>/eval-summary)")
    s.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {', '.join(SYSTEMS)}")
    s.add_argument("--sentences", type=int, default=SENTENCES, help=f"sentences per summary (default {SENTENCES})")
    s.add_argument("--max-new-tokens", type=int, default=160, help="longest abstractive summary (default 160)")
    s.add_argument("--write-check", action="store_true",
                   help="write the model's summary_check.json (decides whether the abstractive mode is offered; "
                        "validation set only)")
    s.add_argument("--json", action="store_true", help="print one JSON object (with per-chapter rows)")
    s.set_defaults(func=cmd_summary)


def cmd_summary(args) -> int:
    import sys

    from cli_io import emit

    from ingest.session import ProgressPrinter

    set_path = SETS.get(args.summary_set, args.summary_set)
    if args.docs_root is None:
        args.docs_root = str(SET_ROOTS.get(args.summary_set, DEFAULT_DOCS_ROOT))
    if args.write_check and Path(set_path).resolve() in {SETS[k].resolve() for k in SETS if k != "val"}:
        raise QAError("--write-check decides on validation chapters only: use --set val")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise QAError(f"unknown system {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    if args.write_check and not {"drt", "abstractive"} <= set(systems):
        raise QAError("--write-check needs the drt and abstractive systems")
    printer = ProgressPrinter(sys.stderr.isatty() or bool(getattr(args, "verbose", False)))
    try:
        res = run_summary_eval(set_path, home=args.summary_home or Path(args.home) / "eval-summary", model=args.model,
                               docs_root=args.docs_root, systems=systems, k=args.sentences,
                               max_new_tokens=args.max_new_tokens, progress=printer)
    finally:
        printer.close()
    if args.write_check:
        from ingest.pipeline import load_engine

        path = write_check(res, load_engine(args.model).model_dir, "drt-reader eval summary --set val --write-check")
        print(f"wrote {path}", file=sys.stderr)
    emit(args, res, summary_text(res))
    return 0
