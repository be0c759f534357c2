"""`drt-reader bench lexical_idf --eval tmp/qa_hand.json --home H --model M`: which lexical
weighting finds the gold chunks of an `eval qa --json` run, offline (no model forward).

For every answerable question, ranks the document's chunks (their text, re-tokenized) by the summed
weights of the distinct tokens they share with the question's prompt (prompts.qa_suffix), and
reports hit@1 / hit@4 for: the model's learned global weights relu(w_t) (config lexical), the
in-document idf relu(log((n + 1) / (1 + df_t))) over the document's n chunks, and mixes. This is
how config lexical_doc_df was chosen (docs/history/2026-12-02-real-questions.md)."""
from __future__ import annotations

import argparse
import json

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eval", required=True, help="an `eval qa --json` output (its rows and documents)")
    p.add_argument("--home", required=True, help="the library that run ingested into (<home>/eval-qa)")
    p.add_argument("--model", required=True, help="a lexical checkpoint (its lexical.weight)")
    a = p.parse_args(argv)
    from safetensors.torch import load_file

    from drt_core import prompts
    from drt_core.tokenizer import encode
    from store.library import Library

    w = load_file(f"{a.model}/model.safetensors")["lexical.weight"].float().numpy().clip(min=0)
    w[:3] = 0.0  # pad, end of text, landmark
    run = json.load(open(a.eval))
    kinds = {"global w": lambda idf, t: w[t], "doc idf": lambda idf, t: idf[t],
             "doc idf + 0.1 w": lambda idf, t: idf[t] + 0.1 * w[t],
             "doc idf + 0.3 w": lambda idf, t: idf[t] + 0.3 * w[t],
             "doc idf * (w > 0)": lambda idf, t: idf[t] * (w[t] > 0)}
    res = {k: [] for k in kinds}
    with Library(a.home) as lib:
        for d in run["by_doc"]:
            sets = [set(encode(c["text"])) for c in lib.chunks(d["doc_id"])]
            df = np.zeros(len(w))
            for s in sets:
                df[list(s)] += 1
            n = len(sets)
            for q in [q for q in run["rows"] if q["doc"] == d["doc"] and q["answerable"] and q["gold_chunks"]]:
                qt = set(encode(prompts.qa_suffix(q["question"])))
                idf = {t: (t > 2) * max(0.0, float(np.log((n + 1) / (1 + df[t])))) for t in qt}
                for k, f in kinds.items():
                    wt = {t: f(idf, t) for t in qt}
                    sc = np.array([sum(wt[t] for t in qt & s) for s in sets])
                    top = np.argsort(-sc, kind="stable")[:4].tolist()
                    res[k].append((top[0] in q["gold_chunks"], bool(set(top) & set(q["gold_chunks"]))))
    for k, v in res.items():
        v = np.array(v, dtype=float)
        print(f"{k:20s} hit@1 {v[:, 0].mean():.1%}  hit@4 {v[:, 1].mean():.1%}  (n={len(v)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
