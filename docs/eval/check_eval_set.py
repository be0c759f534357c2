#!/usr/bin/env python3
"""Validate the hand-written QA evaluation set (docs/eval/qa_handwritten.jsonl).

Schema checks (always): one JSON object per line; required fields with the right types; unique ids;
`type` in the allowed set; answerable rows have a non-empty `answer` that is a substring of a
non-empty `gold` (60-400 characters, answer at most 12 words); unanswerable rows have empty
`answer` and `gold`; minimum counts of answerable / unanswerable rows; at least 2 book documents
and 2 Stacks documents with answerable questions.

Corpora checks (with --corpora DIR): every `doc` exists under DIR, every `gold` is an exact
substring of its document; reports how often it occurs (warning if more than once) and where it
first sits (fraction of the file's characters; warning if in the first 2%).

Standard library only. Exit status 0 when there are no errors (warnings do not fail), 1 otherwise.

    python docs/eval/check_eval_set.py --corpora ../shared/corpora
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

DEFAULT_FILE = Path(__file__).resolve().parent / "qa_handwritten.jsonl"
ALLOWED_TYPES = ("definition", "character", "fact", "find")
FIELDS = {  # name -> required type
    "id": str,
    "doc": str,
    "type": str,
    "question": str,
    "answer": str,
    "gold": str,
    "answerable": bool,
}
GOLD_MIN, GOLD_MAX = 60, 400
ANSWER_MAX_WORDS = 12
EARLY_FRACTION = 0.02


def load(path: str | Path) -> tuple[list[dict], list[str]]:
    """(rows, errors): one row per non-empty line; each row gets a `_line` key."""
    rows, errors = [], []
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return [], [f"{p}: cannot read ({e})"]
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"line {n}: not JSON ({e.msg})")
            continue
        if not isinstance(obj, dict):
            errors.append(f"line {n}: not a JSON object")
            continue
        obj["_line"] = n
        rows.append(obj)
    if not rows and not errors:
        errors.append(f"{p}: no rows")
    return rows, errors


def _where(row: dict) -> str:
    return f"line {row.get('_line', '?')} ({row.get('id', '?')})"


def check_schema(
    rows: list[dict], min_answerable: int = 60, min_unanswerable: int = 10
) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the field / value / count rules."""
    errors: list[str] = []
    warnings: list[str] = []
    ids = Counter()
    n_ans = n_unans = 0
    book_docs, stacks_docs = set(), set()
    for row in rows:
        w = _where(row)
        bad = False
        for name, typ in FIELDS.items():
            if name not in row:
                errors.append(f"{w}: missing field {name!r}")
                bad = True
            elif not isinstance(row[name], typ):
                errors.append(f"{w}: field {name!r} should be {typ.__name__}, got {type(row[name]).__name__}")
                bad = True
        extra = sorted(set(row) - set(FIELDS) - {"_line"})
        if extra:
            warnings.append(f"{w}: extra fields {extra}")
        if bad:
            continue
        ids[row["id"]] += 1
        if not row["id"].strip():
            errors.append(f"{w}: empty id")
        if not row["question"].strip():
            errors.append(f"{w}: empty question")
        if row["type"] not in ALLOWED_TYPES:
            errors.append(f"{w}: type {row['type']!r} not in {ALLOWED_TYPES}")
        doc = row["doc"]
        if not doc or doc.startswith("/") or ".." in Path(doc).parts:
            errors.append(f"{w}: doc {doc!r} should be a relative path inside the corpora directory")
        elif not (doc.startswith("books/") or doc.startswith("stacks/")):
            warnings.append(f"{w}: doc {doc!r} is neither under books/ nor stacks/")
        ans, gold = row["answer"], row["gold"]
        if row["answerable"]:
            n_ans += 1
            if doc.startswith("books/"):
                book_docs.add(doc)
            elif doc.startswith("stacks/"):
                stacks_docs.add(doc)
            if not ans.strip():
                errors.append(f"{w}: answerable but answer is empty")
            if not gold.strip():
                errors.append(f"{w}: answerable but gold is empty")
            if ans and gold and ans not in gold:
                errors.append(f"{w}: answer is not a substring of gold")
            if gold and not (GOLD_MIN <= len(gold) <= GOLD_MAX):
                errors.append(f"{w}: gold has {len(gold)} characters (want {GOLD_MIN}-{GOLD_MAX})")
            if len(ans.split()) > ANSWER_MAX_WORDS:
                errors.append(f"{w}: answer has {len(ans.split())} words (want at most {ANSWER_MAX_WORDS})")
        else:
            n_unans += 1
            if ans != "" or gold != "":
                errors.append(f"{w}: unanswerable but answer/gold are not empty")
    for i, k in ids.items():
        if k > 1:
            errors.append(f"id {i!r} occurs {k} times")
    if n_ans < min_answerable:
        errors.append(f"{n_ans} answerable questions (want at least {min_answerable})")
    if n_unans < min_unanswerable:
        errors.append(f"{n_unans} unanswerable questions (want at least {min_unanswerable})")
    if len(book_docs) < 2:
        errors.append(f"answerable questions on {len(book_docs)} book documents (want at least 2)")
    if len(stacks_docs) < 2:
        errors.append(f"answerable questions on {len(stacks_docs)} Stacks documents (want at least 2)")
    return errors, warnings


def check_corpora(rows: list[dict], corpora: str | Path) -> tuple[list[str], list[str], list[dict]]:
    """(errors, warnings, report): report rows {id, doc, count, position} for answerable questions."""
    root = Path(corpora)
    errors: list[str] = []
    warnings: list[str] = []
    report: list[dict] = []
    if not root.is_dir():
        return [f"corpora directory not found: {root}"], [], []
    cache: dict[str, str | None] = {}
    for row in rows:
        doc = row.get("doc")
        if not isinstance(doc, str) or not doc:
            continue
        w = _where(row)
        if doc not in cache:
            p = root / doc
            try:
                cache[doc] = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                cache[doc] = None
                errors.append(f"{doc}: cannot read document ({e})")
        text = cache[doc]
        if text is None or not row.get("answerable"):
            continue
        if not isinstance(row.get("gold"), str) or not row["gold"]:
            continue
        gold = row["gold"]
        count = text.count(gold)
        if count == 0:
            errors.append(f"{w}: gold is not an exact substring of {doc}")
            report.append({"id": row.get("id"), "doc": doc, "count": 0, "position": None})
            continue
        pos = text.index(gold) / max(1, len(text))
        if count > 1:
            warnings.append(f"{w}: gold occurs {count} times in {doc}")
        if pos < EARLY_FRACTION:
            warnings.append(f"{w}: gold sits in the first {EARLY_FRACTION:.0%} of {doc} (position {pos:.4f})")
        report.append({"id": row.get("id"), "doc": doc, "count": count, "position": pos})
    return errors, warnings, report


def summary(rows: list[dict]) -> str:
    """Counts per document and type (answerable) plus unanswerable per document."""
    per = Counter((r.get("doc"), r.get("type")) for r in rows if r.get("answerable") is True)
    unans = Counter(r.get("doc") for r in rows if r.get("answerable") is False)
    docs = sorted({r.get("doc") for r in rows if isinstance(r.get("doc"), str)})
    head = f"{'doc':44} " + " ".join(f"{t:>10}" for t in ALLOWED_TYPES)
    head += f" {'answerable':>10} {'unanswer.':>10}"
    lines = [head]
    for d in docs:
        counts = [per[(d, t)] for t in ALLOWED_TYPES]
        cells = " ".join(f"{c:>10}" for c in counts)
        lines.append(f"{d:44} {cells} {sum(counts):>10} {unans[d]:>10}")
    tot = [sum(per[(d, t)] for d in docs) for t in ALLOWED_TYPES]
    cells = " ".join(f"{c:>10}" for c in tot)
    lines.append(f"{'total':44} {cells} {sum(tot):>10} {sum(unans.values()):>10}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE), help="JSONL file (default: committed set)")
    ap.add_argument("--corpora", help="corpora directory: check each gold passage against its document")
    ap.add_argument("--min-answerable", type=int, default=60)
    ap.add_argument("--min-unanswerable", type=int, default=10)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each gold's count and position")
    args = ap.parse_args(argv)

    rows, errors = load(args.file)
    warnings: list[str] = []
    e, w = check_schema(rows, args.min_answerable, args.min_unanswerable)
    errors += e
    warnings += w
    report: list[dict] = []
    if args.corpora:
        e, w, report = check_corpora(rows, args.corpora)
        errors += e
        warnings += w

    print(f"{args.file}: {len(rows)} rows")
    print(summary(rows))
    if report:
        found = [r for r in report if r["count"]]
        unique = sum(1 for r in found if r["count"] == 1)
        print(f"\ngold passages found in the corpora: {len(found)}/{len(report)} (unique: {unique})")
        by_doc: dict[str, list[float]] = {}
        for r in found:
            by_doc.setdefault(r["doc"], []).append(r["position"])
        for d, ps in sorted(by_doc.items()):
            ps.sort()
            print(f"  {d:44} positions {ps[0]:.3f} .. {ps[-1]:.3f}  (median {ps[len(ps) // 2]:.3f})")
        if args.verbose:
            for r in report:
                pos = "-" if r["position"] is None else f"{r['position']:.4f}"
                print(f"  {r['id']:12} {r['doc']:44} count={r['count']} position={pos}")
    for m in warnings:
        print(f"WARNING: {m}")
    for m in errors:
        print(f"ERROR: {m}")
    print(f"\n{len(errors)} error(s), {len(warnings)} warning(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
