"""Questions written by reading (`drt-reader eval qa`'s format: docs/eval/README.md) as training
data: each answerable question's answer located in the document's text as the app parses it, for the
cross-encoder's and the reader's training (qa.cross_encoder_train, qa.reader_train; docs/eval/train/)."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path


def locate(text: str, finder, q: dict) -> tuple[int, int] | None:
    """A written question's answer in the document's text: the answer's place inside the gold passage
    (the gold's own place where the answer is not found in it); None where the gold is not found."""
    from .eval_qa import TextFinder

    g = finder.find(q["gold"])
    if g is None:
        return None
    in_gold = TextFinder(text[g[0]:g[1]]).find(q["answer"])
    return (g[0] + in_gold[0], g[0] + in_gold[1]) if in_gold else g


def doc_path(doc: str, root: str, question_file: str) -> Path:
    """A written question's document: its `doc` under `root` (the training files' ../shared), else
    beside its question file (a sealed set's texts, `doc` relative to docs/eval)."""
    p = Path(root) / doc
    return p if p.is_file() else Path(question_file).parent / doc


def written_docs(files: list[str], root: str):
    """(doc, its text as the app parses it, its questions, each answerable one with `ans_char`, the
    answer's place, or left out where its gold is not found) for the written question files."""
    from ingest.parse import parse_file

    from .eval_qa import TextFinder, load_questions

    by_doc, path = defaultdict(list), {}
    for f in files:
        for q in load_questions(f):
            by_doc[q["doc"]].append(q)
            path.setdefault(q["doc"], doc_path(q["doc"], root, f))
    for d in sorted(by_doc):
        text = parse_file(path[d]).text
        finder, items = TextFinder(text), []
        for q in by_doc[d]:
            at = locate(text, finder, q) if q["answerable"] else None
            if q["answerable"] and at is None:
                print(f"{d}: gold not found for {q['id']}", file=sys.stderr)
                continue
            items.append(dict(q, ans_char=list(at)) if at else dict(q))
        yield d, text, items
