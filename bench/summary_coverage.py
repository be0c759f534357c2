"""Whole-book summaries of PDFs: every chapter represented, no front or back matter, whole sentences.

`python -m bench.summary_coverage PDF... [--home DIR] [--json]`

Each PDF is ingested and prefilled by the shipped model (`drt-reader ingest`), then summarised as a
whole (`drt-reader summarize DOC`). The chapters are read from the PDF file itself, independently of
the summarizer: its bookmarks at the level with the most entries, "Contents", licence and index
entries left out, each chapter running from its page to the next one's. Reported per book:

    chapters   the share of chapters with at least one summary sentence on their pages
    matter     sentences on a licence, contents or index page (ingest.boilerplate.matter_of)
    whole      the share of sentences that start with a capital (or a quote), end with . ! or ? and
               occur verbatim in the document text
    lead       the same chapter share for the plain baseline: the first sentences of the book, as
               many as the summary has

A PDF without bookmarks is reported without a chapter share.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_BOILER = re.compile(r"^\s*(contents|table of contents|index|.*project gutenberg|.*licen[cs]e)\b", re.I)
_WHOLE = re.compile(r"^[\"'‘“(\[_]*[A-Z0-9].*[.!?][\"'’”)\]]*$", re.S)


def pdf_chapters(path: Path, n_pages: int) -> list[tuple[str, int, int]]:
    """(title, first page, last page) of the PDF's bookmarks at their most populated level."""
    import pymupdf

    with pymupdf.open(path) as doc:
        toc = [t for t in doc.get_toc(simple=True) if not _BOILER.match(t[1])]
    if not toc:
        return []
    levels = {}
    for lv, _, _ in toc:
        levels[lv] = levels.get(lv, 0) + 1
    best = max(levels, key=lambda lv: (levels[lv], -lv))
    marks = sorted({(pg, title) for lv, title, pg in toc if lv == best and pg >= 1})
    out = []
    for i, (pg, title) in enumerate(marks):
        end = marks[i + 1][0] - 1 if i + 1 < len(marks) else n_pages
        out.append((title, pg, max(pg, end)))
    return out


def covered(chapters: list[tuple[str, int, int]], pages: list[set[int]]) -> float:
    if not chapters:
        return float("nan")
    hit = sum(any(p & set(range(a, b + 1)) for p in pages) for _, a, b in chapters)
    return hit / len(chapters)


def run(home: str, pdfs: list[Path], model: str) -> list[dict]:
    from ingest import pipeline
    from ingest.boilerplate import matter_of
    from ingest.parts import document_text
    from qa.summary import extractive, dependency_map, whole_sentences
    from store.library import Library

    engine = pipeline.load_engine(model)
    rows = []
    with Library(home) as lib:
        for path in pdfs:
            res = pipeline.ingest(path, library=lib, engine=engine)
            if res.status != "done":
                raise SystemExit(f"prefill of {path} did not finish ({res.status}); run again to resume")
            doc = lib.document(res.doc_id)
            out = extractive(lib, res.doc_id, dependency_map(lib, engine, res.doc_id))
            sents = out["trace"]["sentences"]
            kinds = {p["number"]: matter_of(p["text"]) for p in lib.pages(res.doc_id, with_text=True)}
            text = " ".join(document_text(lib, res.doc_id).split())
            chapters = pdf_chapters(path, doc["n_pages"])
            lead_spans = whole_sentences(document_text(lib, res.doc_id))[: len(sents)]
            starts = [(p["char_start"], p["number"]) for p in lib.pages(res.doc_id)]
            lead_pages = [{max(n for s, n in starts if s <= a)} for a, _ in lead_spans]
            rows.append({
                "pdf": path.name, "pages": doc["n_pages"], "parts": len(out["trace"]["parts"]),
                "parts_from": out["trace"]["parts"][0]["source"] if out["trace"]["parts"] else "-",
                "chapters": len(chapters), "sentences": len(sents),
                "chapter_share": covered(chapters, [set(s["pages"]) for s in sents]),
                "lead_share": covered(chapters, lead_pages),
                "matter": sum(any(kinds.get(p) for p in s["pages"]) for s in sents),
                "whole": sum(bool(_WHOLE.match(s["text"])) and s["text"] in text for s in sents) / max(1, len(sents)),
            })
    return rows


def text_table(rows: list[dict]) -> str:
    lines = [f"{'pdf':22} {'pages':>5} {'parts (from)':>20} {'chapters':>8} {'sentences':>9} {'chapter share':>13} "
             f"{'lead':>6} {'matter':>6} {'whole':>6}"]
    for r in rows:
        share = "-" if r["chapter_share"] != r["chapter_share"] else f"{100 * r['chapter_share']:.1f}%"
        lead = "-" if r["lead_share"] != r["lead_share"] else f"{100 * r['lead_share']:.1f}%"
        lines.append(f"{r['pdf']:22} {r['pages']:5} {r['parts']:>8} ({r['parts_from']:>9}) {r['chapters']:8} "
                     f"{r['sentences']:9} {share:>13} {lead:>6} {r['matter']:6} {100 * r['whole']:5.1f}%")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.summary_coverage", description=__doc__.split("\n")[0])
    ap.add_argument("pdfs", nargs="+", type=Path)
    ap.add_argument("--home", default=str(ROOT / "tmp" / "summary-coverage"), help="library to ingest the PDFs into")
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.home, args.pdfs, args.model)
    print(json.dumps(rows) if args.json else text_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
