"""Offline: how the quote is cut from the quoted chunk (research, not product;
docs/history/2026-12-04-quote-probes.md).

    python research/qa_quote.py tmp/valcarry.json:tmp/valcarry tmp/hwcarry.json:tmp/hwcarry

On `eval qa --json` runs and their libraries: DRT's quoted chunk of each answered question is kept
and the quote is cut again by variants of ingest.ask.quote_from_evidence (the sentence chosen the
same way; which neighbours join it, `grow`, and the length limit). Prints contains per file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest import abstain as abstain_mod  # noqa: E402
from ingest.ask import quote_from_evidence  # noqa: E402
from ingest.qa_eval import contains  # noqa: E402
from store.library import Library  # noqa: E402


def cut(lib, doc_id, chunk, question, vocab, limit=400, order=(-1, 1)):
    return quote_from_evidence(lib, doc_id, chunk, question, vocab, limit=limit, grow=order)["text"]


VARIANTS = {
    "round 20 (400, before then after)": dict(limit=400, order=(-1, 1)),
    "400, after then before": dict(limit=400, order=(1, -1)),
    "400, after, after, before (round 21)": dict(limit=400, order=(1, 2, -1)),
    "300, before then after": dict(limit=300, order=(-1, 1)),
    "500, before then after": dict(limit=500, order=(-1, 1)),
    "500, after then before": dict(limit=500, order=(1, -1)),
    "sentence alone (400)": dict(limit=400, order=()),
}


def main(specs):
    for spec in specs:
        js, home = spec.split(":")
        d = json.load(open(js))
        with Library(home) as lib:
            ids = {x["source_name"]: x["id"] for x in lib.documents()}
            vocabs = {}
            res = {k: [] for k in VARIANTS}
            lens = {k: [] for k in VARIANTS}
            for r in d["rows"]:
                if not r["answerable"]:
                    continue
                q = r["drt"].get("quote")
                if not q or r["drt"]["abstained"]:
                    for k in VARIANTS:
                        res[k].append(0.0)
                    continue
                doc_id = ids[Path(r["doc"]).name]
                if doc_id not in vocabs:
                    vocabs[doc_id] = abstain_mod.DocVocabulary(c["text"] for c in lib.chunks(doc_id))
                for k, kw in VARIANTS.items():
                    t = cut(lib, doc_id, q["chunk"], r["question"], vocabs[doc_id], **kw)
                    res[k].append(contains(t, r["answer"]))
                    lens[k].append(len(t))
        print(js)
        for k in VARIANTS:
            print(f"  {k:36s} contains {100 * sum(res[k]) / len(res[k]):.1f}% (n={len(res[k])}, "
                  f"mean {sum(lens[k]) / len(lens[k]):.0f} chars)")


if __name__ == "__main__":
    main(sys.argv[1:])
