"""Train the answer reader (qa.reader) on questions mined from the training split.

    python -m qa.reader_train --mined data/qa/train.jsonl --corpora ../shared/corpora \\
        --out checkpoints/drt-tiny [--docs 40] [--per-doc 60] [--seed 0]

For each sampled training document: its 63-token chunks (the app's chunking, ingest.tokenize), a
BM25 ranking of them for each mined question (drt_core.bm25, chunk +-1 units, the engine's
question-time term), the top 8 read with their neighbours (qa.reader.Passage), and the labels:
the sentence holding the answer's first character, and inside it the span of at most 8 words with
the best token F1 against the answer. A question whose answer the ranking missed is left out (put
in at some rank, it would teach the reader that rank). Paraphrase: each question is also asked with each
of its non-name content words dropped with probability 0.3 ("Who is the character Mr. Weston?" ->
"Who is Mr. Weston?"), and mined templates come in disjoint train / held-out phrasings.

Writes OUT/reader.safetensors and OUT/reader.json (features, counts, the command, held-out accuracy
on the last 15% of the documents).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from drt_core.bm25 import BM25, STOP
from drt_core.mine.items import answer_target

from .reader import (SENTENCE_FEATURES, SPAN_FEATURES, WORD, DocStats, Passage, QuestionInfo, _names, candidates,
                     sentence_features, span_candidates, span_features)
from .written import written_docs
from ingest.tokenize import build_chunks, encode_text, make_encoder

TOP = 8
ABSTAIN_SHARE = 0.25  # the share of questions also asked with the answer's passages taken away


def _f1(pred: list[str], gold: list[str]) -> float:
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if not same:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def paraphrase(question: str, rng: random.Random) -> str:
    """Drop each content word that is not a name with probability 0.3 (at least one content word stays)."""
    names = set(_names(question))
    toks = question.split()
    keep, dropped = [], 0
    content = [t for t in toks if WORD.sub("", t) != t and t.strip("?,.").lower() not in STOP]
    for t in toks:
        w = t.strip("?,.\"'").lower()
        if (w and w not in STOP and not t[:1].isupper() and len(content) - dropped > 1 and rng.random() < 0.3
                and w not in names):
            dropped += 1
            continue
        keep.append(t)
    out = " ".join(keep)
    return out if out.endswith("?") or not question.endswith("?") else out + "?"


def passages_for(text: str, chunks, ranking: list[tuple[int, float]], boiler=frozenset()) -> list[Passage]:
    top = max((s for _, s in ranking), default=0.0) or 1.0
    out = []
    for r, (c, s) in enumerate(ranking):
        a = chunks[max(c - 1, 0)].char_start
        b = chunks[min(c + 1, len(chunks) - 1)].char_end
        out.append(Passage(c, r, s / top, text[a:b], a, chunks[c].char_start - a, chunks[c].char_end - a, c in boiler))
    return out


def examples_for_doc(text: str, items: list[dict], rng: random.Random, encode) -> list[dict]:
    ids, offsets = encode_text(text, encode)
    chunks = build_chunks(text, offsets, [])
    texts = [c.text for c in chunks]
    stats, bm = DocStats(texts), BM25(texts, window=1)
    out = []
    for it in items:
        for question in (it["question"], paraphrase(it["question"], rng)):
            q = QuestionInfo(question, stats)
            s = bm.scores(question)
            order = [int(i) for i in np.lexsort((np.arange(len(s)), -s))[:TOP]]
            a0 = it["ans_char"][0]
            gold_chunk = (next(c.index for c in chunks if c.char_start <= a0 < c.char_end)
                          if a0 < chunks[-1].char_end else None)
            if gold_chunk is None:
                continue
            if not any(abs(c - gold_chunk) <= 1 for c in order):
                continue  # retrieval missed it: nothing to learn to pick (putting it in would teach its rank)
            ps = passages_for(text, chunks, [(c, float(s[c])) for c in order])
            cands = candidates(ps)
            if rng.random() < ABSTAIN_SHARE:  # the abstention test's examples: with the answer, and without it
                rest = [int(i) for i in np.lexsort((np.arange(len(s)), -s))[: TOP + 6]
                        if abs(int(i) - gold_chunk) > 1][:TOP]
                out.append({"abstain": (question, ps, passages_for(text, chunks, [(c, float(s[c])) for c in rest]),
                                        s), "doc_stats": stats})
            lab = next((i for i, c in enumerate(cands) if c.passage.base + c.a <= a0 < c.passage.base + c.b), None)
            if lab is None:
                continue
            ex = {"sx": sentence_features(q, cands), "sy": lab, "kind": q.kind, "qtype": it["qtype"]}
            c = cands[lab]
            sent = c.passage.text[c.a:c.b]
            sc = span_candidates(sent, q)
            gold_words = [w.lower() for w in WORD.findall(answer_target(it["answer"]))]
            if sc and gold_words:
                f1 = [_f1([m.group().lower() for m in x[2]], gold_words) for x in sc]
                j = int(np.argmax(f1))
                if f1[j] >= 0.5:
                    ex |= {"px": span_features(sent, q, sc, stats), "py": j}
            out.append(ex)
    return out


def fit(groups: list[tuple[np.ndarray, int]], hidden: int = 16, epochs: int = 40, lr: float = 3e-3,
        seed: int = 0) -> dict[str, np.ndarray]:
    """Listwise softmax over each group's candidates (padded into one batch); returns Scorer parameters."""
    import torch

    torch.manual_seed(seed)
    X = np.concatenate([x for x, _ in groups])
    mean, std = X.mean(0), X.std(0) + 1e-6
    F, M = X.shape[1], max(len(x) for x, _ in groups)
    Z = torch.zeros(len(groups), M, F)
    valid = torch.zeros(len(groups), M, dtype=torch.bool)
    for i, (x, _) in enumerate(groups):
        Z[i, : len(x)] = torch.from_numpy((x - mean) / std)
        valid[i, : len(x)] = True
    Y = torch.tensor([y for _, y in groups])
    W1 = torch.nn.Parameter(torch.randn(hidden, F) * 0.1)  # hidden 0: the linear term alone
    b1 = torch.nn.Parameter(torch.zeros(hidden))
    w2 = torch.nn.Parameter(torch.zeros(hidden))
    w = torch.nn.Parameter(torch.zeros(F))
    opt = torch.optim.Adam([W1, b1, w2, w], lr=lr, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(groups), generator=g).split(64):
            s = torch.tanh(Z[idx] @ W1.T + b1) @ w2 + Z[idx] @ w
            loss = torch.nn.functional.cross_entropy(s.masked_fill(~valid[idx], -1e9), Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {"mean": mean.astype(np.float32), "std": std.astype(np.float32), "W1": W1.detach().numpy(),
            "b1": b1.detach().numpy(), "w2": w2.detach().numpy(), "w": w.detach().numpy()}


def accuracy(params, groups) -> float:
    from .reader import Scorer

    sc = Scorer(params)
    return float(np.mean([int(np.argmax(sc(x))) == y for x, y in groups])) if groups else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qa.reader_train", description=__doc__.split("\n")[0])
    ap.add_argument("--mined", default="data/qa/train.jsonl")
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--out", required=True, help="the checkpoint directory to write reader.* into")
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--per-doc", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=16, help="hidden units of the scorers' MLP (0: linear)")
    ap.add_argument("--examples", default=None, help="a pickle of the examples: read when it exists, else written")
    ap.add_argument("--written", action="append", default=[], help="a question file written by reading (repeatable)")
    ap.add_argument("--written-root", default="../shared", help="what the written files' `doc` paths are relative to")
    ap.add_argument("--written-repeat", type=int, default=3, help="times each written question's example is trained on")
    a = ap.parse_args(argv)
    t0 = time.time()
    rng = random.Random(a.seed)
    by_doc = defaultdict(list)
    with open(a.mined, encoding="utf-8") as f:
        for line in f:
            it = json.loads(line)
            by_doc[it["doc"]].append(it)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    docs = docs[: a.docs]
    encode = make_encoder(None)
    exs = []
    if a.examples and Path(a.examples).is_file():
        import pickle

        exs = pickle.loads(Path(a.examples).read_bytes())
        docs = list(dict.fromkeys(e["doc"] for e in exs))
    for d in docs if not exs else []:
        items = by_doc[d]
        per = defaultdict(list)
        for it in items:
            per[it["qtype"]].append(it)
        pick = []
        for t in sorted(per):  # the same share of each question type
            pick += rng.sample(per[t], min(len(per[t]), max(1, a.per_doc // len(per))))
        text = (Path(a.corpora) / d).read_bytes().decode("utf-8", errors="replace")
        for e in examples_for_doc(text, pick, rng, encode):
            e["doc"] = d
            exs.append(e)
        print(f"{d}: {len(exs)} examples so far ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    if a.examples and not Path(a.examples).is_file():
        import pickle

        Path(a.examples).write_bytes(pickle.dumps(exs))
    written = 0
    for d, text, items in (written_docs(a.written, a.written_root) if a.written else ()):
        got = [dict(e, doc="written:" + d) for e in examples_for_doc(
            text, [dict(q, qtype="written") for q in items if q["answerable"]], rng, encode)]
        written += sum("abstain" not in e for e in got)
        exs += [e for e in got if "abstain" not in e] * a.written_repeat + [e for e in got if "abstain" in e]
        print(f"{d}: {len(items)} written questions ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    n_hold = max(1, int(0.15 * len(docs)))
    hold = set(docs[-n_hold:])
    ab_exs = [e for e in exs if "abstain" in e]
    exs = [e for e in exs if "abstain" not in e]
    tr = [e for e in exs if e["doc"] not in hold]
    ho = [e for e in exs if e["doc"] in hold]
    sent = fit([(e["sx"], e["sy"]) for e in tr], hidden=a.hidden, epochs=a.epochs, seed=a.seed)
    span = fit([(e["px"], e["py"]) for e in tr if "px" in e], hidden=a.hidden, epochs=a.epochs, seed=a.seed)
    res = {"sentence_acc_heldout": accuracy(sent, [(e["sx"], e["sy"]) for e in ho]),
           "span_acc_heldout": accuracy(span, [(e["px"], e["py"]) for e in ho if "px" in e]),
           "sentence_acc_train": accuracy(sent, [(e["sx"], e["sy"]) for e in tr])}
    # the abstention test: P(the passages hold the answer), from the reader's and BM25's confidence on
    # questions asked with their answer's passages and without them (qa.abstain_model)
    from .abstain_model import features as ab_features, fit_abstention, score as ab_score
    from .reader import Reader, Scorer

    reader = Reader(Scorer(sent), Scorer(span), {})
    ax, ay, adoc = [], [], []
    for e in ab_exs:
        question, with_ps, without_ps, bm = e["abstain"]
        for ps, label in ((with_ps, True), (without_ps, False)):
            ax.append(ab_features(question, reader.read(question, ps, e["doc_stats"]), e["doc_stats"], bm))
            ay.append(label)
            adoc.append(e["doc"])
    a_tr = [i for i, d in enumerate(adoc) if d not in hold]
    a_ho = [i for i, d in enumerate(adoc) if d in hold]
    abstain = fit_abstention([ax[i] for i in a_tr], [ay[i] for i in a_tr])
    if a_ho:
        pos = [ab_score(abstain, ax[i]) < abstain["threshold"] for i in a_ho if ay[i]]
        neg = [ab_score(abstain, ax[i]) < abstain["threshold"] for i in a_ho if not ay[i]]
        res["abstain_heldout"] = {"answer_present": float(np.mean(pos)) if pos else None,
                                  "answer_removed": float(np.mean(neg)) if neg else None}
    from safetensors.numpy import save_file

    out = Path(a.out)
    tensors = {f"sentence.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in sent.items()}
    tensors |= {f"span.{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in span.items()}
    save_file(tensors, str(out / "reader.safetensors"))
    meta = {"sentence_features": list(SENTENCE_FEATURES), "span_features": list(SPAN_FEATURES),
            "command": "python -m qa.reader_train " + " ".join(argv if argv is not None else sys.argv[1:]),
            "documents": len(docs), "heldout_documents": sorted(hold),
            "examples": {"train": len(tr), "heldout": len(ho), "span_train": sum("px" in e for e in tr),
                         "written": written, "written_repeat": a.written_repeat, "written_files": a.written},
            "qtypes": dict(Counter(e["qtype"] for e in exs)), **res, "seconds": round(time.time() - t0, 1),
            "abstain": abstain}
    (out / "reader.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
