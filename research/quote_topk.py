"""Offline: quote from the best sentence among the first k evidence chunks, not only the first.

    python research/quote_topk.py tmp/val20.json tmp/hw20.json

For each answerable question that DRT answered (not abstained), every sentence of the first k
evidence chunks gets the in-document idf of the question words it shares (as
ingest.ask.quote_from_evidence) minus a rank penalty; the quote is built around the best one.
Prints "contains" (SQuAD-normalised gold span in the quote) per variant and file.
"""

from __future__ import annotations

import json
import sys

from ingest import abstain as A
from ingest import ask as ask_mod
from ingest.qa_eval import contains
from store.library import Library


def sentence_scores(lib, doc_id, chunk, q, vocab):
    by_idx = {r["idx"]: r for r in lib.chunks(doc_id, [chunk - 1, chunk, chunk + 1])}
    if chunk not in by_idx:
        return []
    near = [by_idx[c] for c in (chunk - 1, chunk, chunk + 1) if c in by_idx]
    base, me = near[0]["char_start"], by_idx[chunk]
    text = "".join(r["text"] for r in near)
    lo, hi = me["char_start"] - base, me["char_end"] - base
    spans = ask_mod.sentence_spans(text)
    out = []
    for i, (a, b) in enumerate(spans):
        if b > lo and a < hi:
            ws = set(A.words(text[a:b]))
            out.append((sum(vocab.idf(w) for w in q & ws), i, spans, text))
    return out


def build(spans, text, i, limit=ask_mod.QUOTE_MAX_CHARS):
    a, b = spans[i]
    if b - a > limit:
        b = a + limit
    for j in (i - 1, i + 1):
        if 0 <= j < len(spans) and max(b, spans[j][1]) - min(a, spans[j][0]) <= limit:
            a, b = min(a, spans[j][0]), max(b, spans[j][1])
    return " ".join(text[a:b].split())


def main(paths):
    variants = [(1, 0.0), (2, 0.0), (4, 0.0), (2, 1.0), (4, 1.0), (4, 2.0), (4, 3.0), (4, 0.5), (3, 1.0)]
    for path in paths:
        d = json.load(open(path))
        ids = {x["doc"]: x["doc_id"] for x in d["by_doc"]}
        res = {v: [] for v in variants}
        with Library(d["home"]) as lib:
            vocabs = {}
            for r in d["rows"]:
                if not r["answerable"]:
                    continue
                drt = r["drt"]
                if drt.get("abstained"):
                    for v in variants:
                        res[v].append(0.0)
                    continue
                doc_id = ids[r["doc"]]
                if doc_id not in vocabs:
                    vocabs[doc_id] = A.DocVocabulary(c["text"] for c in lib.chunks(doc_id))
                q = set(A.words(r["question"]))
                cands = [(rank, s) for rank, c in enumerate(drt["ranking"][:4])
                         for s in sentence_scores(lib, doc_id, c, q, vocabs[doc_id])]
                for k, lam in variants:
                    pool = [(s[0] - lam * rank, -rank, -s[1], s) for rank, s in cands if rank < k]
                    if not pool:
                        res[(k, lam)].append(0.0)
                        continue
                    best = max(pool)[3]
                    res[(k, lam)].append(contains(build(best[2], best[3], best[1]), r["answer"]))
        print(path, "answerable", len(res[variants[0]]))
        for v in variants:
            print(f"  k={v[0]} rank_penalty={v[1]}: contains {100 * sum(res[v]) / len(res[v]):.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
