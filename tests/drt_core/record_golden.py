"""Record the golden loss curve of the `tiny` preset on CPU: tests/assets/losses/tiny_cpu.json.

    nice -n 15 .venv/bin/python -m tests.drt_core.record_golden [--check]

Trains `golden_config()` (tiny preset, seq_len 504, batch 2, 5 steps, seed 1234, fp32) on token files
built from tests/assets text by `build_token_dir`, and writes the per-step losses. Re-record only
for a change that is MEANT to change the numerics, and say so in the commit (torchtitan's rule: a
refactor must leave the curve unchanged). tests/drt_core/test_golden.py checks the file;
tests/drt_core/train/test_ddp.py reuses the token files.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

ASSETS = Path(__file__).resolve().parents[1] / "assets"
GOLDEN = ASSETS / "losses" / "tiny_cpu.json"


def build_token_dir(root: str | Path) -> Path:
    """A `drt-reader data`-like directory with books/{train,val}.bin from the test assets:
    Frankenstein (train, ~10K tokens) and the Stacks Brauer chapter (val), shipped tokenizer."""
    from drt_core.train.data import TOKEN_DTYPE
    from drt_core.tokenizer import EOT_ID, encode

    root = Path(root)
    (root / "books").mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "frankenstein_excerpt.txt"), ("val", "stacks-brauer.tex")):
        ids = encode((ASSETS / name).read_text(encoding="utf-8")) + [EOT_ID]
        np.asarray(ids, dtype=TOKEN_DTYPE).tofile(root / "books" / f"{split}.bin")
    return root


def golden_config(data: str | Path, out: str | Path, **overrides):
    """The recorded run: tiny preset, fp32, no validation, checkpoint only at the end."""
    from drt_core.train.options import TrainConfig

    kw = dict(
        preset="tiny", data=str(data), out=str(out), seq_len=504, batch_size=2, steps=5, warmup=2,
        eval_every=0, ckpt_every=1000, seed=1234, bf16="off", book_weight=1.0,
    )
    kw.update(overrides)
    return TrainConfig().replace(**kw)


def run_golden() -> list[float]:
    from drt_core.train.loop import train

    with tempfile.TemporaryDirectory() as tmp:
        data = build_token_dir(Path(tmp) / "data")
        res = train(golden_config(data, Path(tmp) / "run"))
    return [h["loss"] for h in res["history"]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare with the recorded file, do not write it")
    args = p.parse_args(argv)
    import torch

    losses = run_golden()
    if args.check:
        ref = json.loads(GOLDEN.read_text())["losses"]
        print(json.dumps({"recorded": ref, "now": losses}))
        return 0 if np.allclose(losses, ref, rtol=1e-4, atol=0) else 1
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    rec = {
        "what": "per-step training loss of golden_config() in tests/drt_core/record_golden.py",
        "losses": losses,
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor()}".strip(),
    }
    GOLDEN.write_text(json.dumps(rec, indent=2) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
