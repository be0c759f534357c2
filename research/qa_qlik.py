"""Offline: choose the quoted chunk among the four retrieved by the question's likelihood under the
model, given each chunk's passage (query likelihood, as in UPR, Sachan et al. 2022; research, not
product: docs/history/2026-12-05-query-likelihood.md).

    python research/qa_qlik.py tmp/valcarry.json:tmp/valcarry tmp/hwcarry.json:tmp/hwcarry

On `eval qa --json` runs and their libraries. For each answered question, each chunk c of DRT's
ranking (its four) gets s(c) = the mean log-probability of the question's tokens when the model
(the shipped DRT, its batch forward, copy head included) reads the passage c-1..c+1 and then the
prompt "\\n\\nQuestion: {q}" (prompts.qa_suffix's text). The retrieval is left as it is (hit@4 does
not move); only the quoted chunk changes, and the quote is cut from it by ask.quote_from_evidence.
Prints contains and "quoted chunk is gold" per variant and file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drt_core.prompts import QUESTION_PREFIX  # noqa: E402
from ingest import abstain as abstain_mod  # noqa: E402
from ingest import pipeline  # noqa: E402
from ingest.ask import quote_from_evidence  # noqa: E402
from ingest.qa_eval import contains  # noqa: E402
from store.library import Library  # noqa: E402


def _ids(tok, text: str) -> list[int]:
    enc = tok.encode(text)
    return list(getattr(enc, "ids", enc))


@torch.no_grad()
def qlik(model, tok, passage: str, question: str) -> float:
    """Mean log p(question tokens | passage + QUESTION_PREFIX) under the model."""
    ctx = _ids(tok, passage + QUESTION_PREFIX)
    q = _ids(tok, " ".join(question.split()))
    ids = torch.tensor([ctx + q])
    out = model(ids)
    logp = torch.log_softmax(out.logits[0].float(), -1)  # log_softmax of log-probs is the identity
    pos = torch.arange(len(ctx) - 1, len(ctx) + len(q) - 1)
    return float(logp[pos, torch.tensor(q)].mean())


def main(specs, model_path="checkpoints/drt-tiny"):
    engine = pipeline.load_engine(model_path)
    model, tok = engine.model, engine.tokenizer
    for spec in specs:
        js, home = spec.split(":")
        d = json.load(open(js))
        sysname = next(k for k in d["rows"][0] if isinstance(d["rows"][0][k], dict) and "quote" in d["rows"][0][k])
        res: dict[str, list[float]] = {}
        gold_q: dict[str, list[float]] = {}
        missing = 0
        with Library(home) as lib:
            ids = {x["source_name"]: x["id"] for x in lib.documents()}
            vocabs, texts = {}, {}
            for r in d["rows"]:
                if not r["answerable"]:
                    continue
                out = r[sysname]
                q = out.get("quote")
                if not q or out["abstained"]:
                    missing += 1  # abstained or no quote: counts as a miss for every variant
                    continue
                doc_id = ids[Path(r["doc"]).name]
                if doc_id not in vocabs:
                    chunks = lib.chunks(doc_id)
                    texts[doc_id] = [c["text"] for c in chunks]
                    vocabs[doc_id] = abstain_mod.DocVocabulary(texts[doc_id])
                tx = texts[doc_id]
                rank = out["ranking"][:4]
                shipped = int(q["chunk"])

                def passage(c, w=1):
                    return "".join(tx[i] for i in range(max(0, c - w), min(len(tx), c + w + 1)))

                s3 = {c: qlik(model, tok, passage(c), r["question"]) for c in rank}
                s1 = {c: qlik(model, tok, passage(c, 0), r["question"]) for c in rank}
                best = max(rank, key=lambda c: s3[c])
                choice = {
                    "shipped (quote_chunk)": shipped,
                    "ranking[0]": rank[0],
                    "qlik c-1..c+1": best,
                    "qlik c": max(rank, key=lambda c: s1[c]),
                }
                for m in (0.1, 0.25, 0.5):  # leave the shipped chunk unless another is clearly likelier
                    choice[f"shipped unless qlik3 +{m}"] = best if s3[best] > s3[shipped] + m else shipped
                for k, c in choice.items():
                    t = quote_from_evidence(lib, doc_id, c, r["question"], vocabs[doc_id])
                    res.setdefault(k, []).append(contains(t["text"], r["answer"]) if t else 0.0)
                    gold_q.setdefault(k, []).append(float(c in r["gold_chunks"]))
        n = len(next(iter(res.values()))) + missing
        print(js, f"({n} answerable, {missing} without a quote)")
        for k in res:
            print(f"  {k:30s} contains {100 * sum(res[k]) / n:5.1f}%   quoted chunk gold "
                  f"{100 * sum(gold_q[k]) / n:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
