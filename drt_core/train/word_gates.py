"""Train the lexical term's word gates (config lexical_gates) on the training split's citations.

    python -m drt_core.train.word_gates --init checkpoints/drt-tiny --corpora ../shared/corpora \\
        --out runs/gates [--chapters 10] [--steps 200] [--lr 3e-2] [--label-styles stacks,prefix,...]

In Stacks Project LaTeX a chunk that cites a statement (`\\ref{X}`) should retrieve the chunk that
states it (`\\label{X}`): free supervision for the prefill's selection (tasks.cite). The citing
chunk's words mostly say what the passage is about, and so do the stated chunk's; the words that
tie the two (the label's) are few and common ("flat", "base", "change"), so the idf terms cannot
pick them out. Which words those are depends on their context, which the lower layers' states hold:
the gates are a sigmoid of a linear map of the state at each word's last token, one for the query
chunk and one for the key chunk (LexicalScorer.word_gates), times a learned scale per group.

Everything else is frozen: the landmark keys and queries, the token and word terms, the layers.
The loss is the retrieval loss of the scores the engine computes (model.chunk_scores, the one
scoring function), for every chunk that cites a statement at least MIN_GAP chunks back, over the
chunks before it. The training chapters: `chapters` of the data split's training Stacks chapters of
80-300 KB, drawn with seed 0 (the test chapters, which bench.citations measures, are never read).
With `--label-styles`, each chapter is read with its labels renamed in one style drawn for it, as
papers write them (`lem:x`, `x:lem`, `\\cref`, ...: tasks.cite.restyle_labels): the same citations,
written otherwise, so that the gates do not learn one notation only.
Writes OUT: the init checkpoint's files with the model's weights and config replaced.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import torch

from .tasks.cite import LABEL_STYLES, citation_pairs, restyle_labels, statement_labels

MIN_GAP = 4  # as bench.citations: a statement at least 4 chunks back, beyond the lower layers' reach


def training_chapters(corpora: Path, n: int, seed: int = 0) -> list[Path]:
    """`n` of the split's training Stacks chapters of 80-300 KB, drawn with `seed`."""
    from .data import make_splits

    names = make_splits(corpora)["train"]["stacks"]
    cands = [p for _, p in sorted(((corpora / p).stat().st_size, p) for p in names
                                  if 80_000 < (corpora / p).stat().st_size < 300_000)]
    random.Random(seed).shuffle(cands)
    return [corpora / p for p in cands[:n]]


def chapter_rows(model, path: Path, style: str = "stacks", cref: bool = False) -> dict | None:
    """What the loss needs of one chapter, computed once (the frozen parts): token ids per chunk,
    landmark keys and group-0 queries, the lower-layer states of the real slots, and the citing
    chunks with the chunks they cite. `style`, `cref`: the chapter's labels restyled as papers write
    them (tasks.cite.restyle_labels)."""
    from ..tokenizer import encode_with_offsets

    cfg = model.config
    S, N = cfg.chunk_size, cfg.chunk_size - 1
    text, renamed = restyle_labels(path.read_text(encoding="utf-8", errors="replace"), style, cref)
    statements = statement_labels(renamed)
    ids, offsets = encode_with_offsets(text)
    pairs = [(c, t) for c, t, _ in citation_pairs(text, [s for s, _ in offsets], N, statements) if c - t >= MIN_GAP]
    if not pairs:
        return None
    x = torch.tensor(ids)
    keys, queries, lower = model.landmarks(x, lower=True)  # one pass of the frozen layers
    aug, C = model.augment(x.view(1, -1))
    rows = sorted({c for c, _ in pairs})
    at = {c: i for i, c in enumerate(rows)}
    target = torch.zeros(len(rows), C, dtype=torch.bool)
    for c, t in pairs:
        target[at[c], t] = True
    name = path.stem + ("" if style == "stacks" else f"@{style}" + ("+cref" if cref else ""))
    return {"name": name, "keys": keys, "queries": queries, "toks": aug.view(1, C, S)[:, :, :N],
            "lower": lower, "rows": torch.tensor(rows), "target": target, "pairs": pairs}


def citing_scores(model, ch: dict) -> torch.Tensor:
    """[R, C]: the citing rows' scores over the chapter's chunks (model.chunk_scores, group 0, with the
    gates of the chunks' lower-layer states)."""
    rows, C = ch["rows"], ch["keys"].shape[0]
    gq, gk = model.word_gates(ch["lower"][None])  # [1, C, N] each
    return model.chunk_scores(0, ch["queries"][rows][None], ch["keys"][None], rows, torch.arange(C),
                              ch["toks"][:, rows], ch["toks"], q_gates=gq[:, rows], k_gates=gk)[0]


def chapter_loss(model, ch: dict) -> torch.Tensor:
    """The retrieval loss of the chapter's citing rows: -log of the softmax mass of the cited chunks
    among the chunks before each row."""
    s = citing_scores(model, ch)
    return -(torch.logsumexp(s.masked_fill(~ch["target"], float("-inf")), -1) - torch.logsumexp(s, -1)).mean()


def hit_rate(model, ch: dict, k: int) -> float:
    """Share of the chapter's citations whose cited chunk is in the top k of the citing row (the
    training signal's own measure; bench.citations measures the engine on held-out chapters)."""
    with torch.no_grad():
        top = citing_scores(model, ch).topk(min(k, ch["keys"].shape[0]), -1).indices
    return float((ch["target"].gather(1, top).any(-1)).float().mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m drt_core.train.word_gates", description=__doc__.split("\n")[0])
    ap.add_argument("--init", default="checkpoints/drt-tiny", help="the checkpoint whose gates to train")
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--out", required=True, help="where to write the checkpoint")
    ap.add_argument("--chapters", type=int, default=10, help="training chapters (default 10)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--lr", type=float, default=3e-2)
    ap.add_argument("--scale", type=float, default=1.0, help="the gates' scale at the start (config lexical_gates)")
    ap.add_argument("--label-styles", default="stacks",
                    help="comma-separated label styles drawn one per chapter (seeded), each restyled chapter "
                         "citing with \\cref half the time: " + ", ".join(LABEL_STYLES)
                         + " (default stacks: as written)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    styles = args.label_styles.split(",")
    if not set(styles) <= set(LABEL_STYLES):
        ap.error(f"--label-styles: unknown {', '.join(sorted(set(styles) - set(LABEL_STYLES)))}; "
                 f"choose from {', '.join(LABEL_STYLES)}")
    from ..modeling import DRTForCausalLM
    from ..hf_config import DRTConfig

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = DRTForCausalLM.from_pretrained(args.init)
    cfg = DRTConfig(**{**base.config.to_dict(), "lexical_gates": args.scale})
    model = DRTForCausalLM(cfg).eval()
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("lexical.gate") for k in missing), (missing, unexpected)
    if missing:  # new gates: every word weighs 0.5 on each side
        with torch.no_grad():
            model.lexical.gates.fill_(args.scale)
            model.lexical.gate.weight.zero_()
            model.lexical.gate.bias.zero_()
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("lexical.gate"))
    t0 = time.time()
    draw = random.Random(args.seed + 1)
    looks = [(draw.choice(styles), draw.random() < 0.5) for _ in range(args.chapters)]
    paths = training_chapters(Path(args.corpora), args.chapters, args.seed)
    chapters = [c for c in (chapter_rows(model, p, st, cref and st != "stacks") for p, (st, cref) in zip(paths, looks))
                if c is not None]
    print(json.dumps({"chapters": [c["name"] for c in chapters], "citations": sum(len(c["pairs"]) for c in chapters),
                      "seconds": round(time.time() - t0, 1)}), flush=True)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    k = cfg.chunk_topk
    for step in range(1, args.steps + 1):
        opt.zero_grad()
        loss = sum(chapter_loss(model, ch) for ch in chapters) / len(chapters)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps:
            line = {"step": step, "loss": round(loss.item(), 4), "scale": [round(v, 3) for v in
                                                                           model.lexical.gates.tolist()],
                    "seconds": round(time.time() - t0, 1)}
            if step % 50 == 0 or step == args.steps:
                line["train_hit"] = round(sum(hit_rate(model, ch, k) for ch in chapters) / len(chapters), 4)
            print(json.dumps(line), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for f in Path(args.init).iterdir():
        if f.is_file() and f.name not in ("model.safetensors", "config.json"):
            shutil.copy2(f, out / f.name)
    for p in model.parameters():
        p.requires_grad_(True)
    model.save_pretrained(out)
    print(json.dumps({"out": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
