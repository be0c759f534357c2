"""Logits of the shipped checkpoints on test documents, saved before a change and compared after:
`python -m bench.logits save FILE` then `python -m bench.logits compare FILE`.

For each checkpoint in checkpoints/ and each document, the first `--tokens` tokens (default 4032,
the training length; 8064 also reaches past it) through the batch forward and through the streaming
engine (`Engine.feed(..., want_logits=True)`), both in fp32 on the CPU. `compare` prints the largest
absolute difference per checkpoint, document and path, and fails (exit 1) above `--atol` (float
noise: the tests' 1e-4). Documents are read from the corpus folder (`--corpora`, default
../shared/corpora), the test split's books by default: a refactoring must leave them unchanged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

DOCS = ("books/1257-the-three-musketeers.txt", "books/1727-the-odyssey-butler.txt")


def _checkpoints(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "config.json").exists())


@torch.no_grad()
def logits_of(ckpt: Path, texts: dict[str, str], n_tokens: int) -> dict[str, torch.Tensor]:
    from drt_core import DRTForCausalLM
    from drt_core.engine import Engine
    from drt_core.tokenizer import load_tokenizer

    torch.manual_seed(0)
    model = DRTForCausalLM.from_pretrained(ckpt).eval()
    tok = load_tokenizer(ckpt)
    engine = Engine(model, tok)
    out = {}
    for name, text in texts.items():
        ids = tok.encode(text[: n_tokens * 8])[:n_tokens]
        out[f"{name}/batch"] = model(torch.tensor([ids])).logits[0].float()
        state = engine.new_state()
        out[f"{name}/engine"] = engine.feed(state, ids, want_logits=True).float()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("save", "compare"))
    ap.add_argument("file")
    ap.add_argument("--checkpoints", default="checkpoints")
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--docs", nargs="*", default=list(DOCS))
    ap.add_argument("--tokens", type=int, default=4032)
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    texts = {Path(d).stem: (Path(a.corpora) / d).read_text(encoding="utf-8", errors="replace") for d in a.docs}
    results = {c.name: logits_of(c, texts, a.tokens) for c in _checkpoints(Path(a.checkpoints))}
    if a.mode == "save":
        torch.save(results, a.file)
        print(f"saved {sum(len(v) for v in results.values())} logit tensors of {len(results)} checkpoints to {a.file}")
        return 0
    before = torch.load(a.file)
    worst = 0.0
    for ck, per in results.items():
        for key, lg in per.items():
            ref = before.get(ck, {}).get(key)
            if ref is None or ref.shape != lg.shape:
                print(f"{ck:24s} {key:40s} missing or reshaped in {a.file}")
                worst = float("inf")
                continue
            d = (lg - ref).abs().max().item()
            worst = max(worst, d)
            print(f"{ck:24s} {key:40s} max |diff| {d:.2e}")
    ok = worst <= a.atol
    print(f"largest difference {worst:.2e} ({'within' if ok else 'ABOVE'} {a.atol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
