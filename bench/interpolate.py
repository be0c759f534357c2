"""`drt-reader bench interpolate A B OUT [--alpha 0.5]`: a checkpoint whose weights are
(1 - alpha) * A + alpha * B, tensor by tensor, with A's config and tokenizer. A and B must be the
same architecture (same tensor names and shapes), e.g. two stages of the scorer trained from one
another (docs/history/2026-11-29-to-12-01-model-rounds.md, round 16: p3 and m4 trade lemma
retrieval against the 256K needle ranking; their average sits between them). Tensors equal in A
and B stay bit-identical.

`--partial`: B may hold only some of A's tensors (the others are A's), e.g. a scorer kept apart
(written by `--diff-only`): `bench interpolate A SCORER OUT --alpha 1 --partial` rebuilds the model.
`--only copy_head.` (with `--alpha 1`): B's copy head on A's other weights (issue 29: a scorer and a
copy head trained apart). `--diff-only`: write only the tensors that differ from A."""
import argparse
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file


def interpolate(a: dict, b: dict, alpha: float, partial: bool = False) -> dict:
    if partial and not b.keys() <= a.keys():
        raise SystemExit(f"B has tensors A lacks: {sorted(b.keys() - a.keys())[:5]}")
    if partial:
        b = {**a, **b}
    if a.keys() != b.keys():
        raise SystemExit(f"the checkpoints differ in tensor names: {sorted(a.keys() ^ b.keys())[:5]}")
    out = {}
    for k, ta in a.items():
        tb = b[k]
        if ta.shape != tb.shape:
            raise SystemExit(f"{k}: shapes differ, {tuple(ta.shape)} against {tuple(tb.shape)}")
        out[k] = ta if ta.equal(tb) else ((1 - alpha) * ta.float() + alpha * tb.float()).to(ta.dtype)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("out")
    p.add_argument("--alpha", type=float, default=0.5, help="weight of B (0: A, 1: B)")
    p.add_argument("--partial", action="store_true", help="B holds a subset of A's tensors")
    p.add_argument("--diff-only", action="store_true", help="write only the tensors that differ from A")
    p.add_argument("--only", default="", metavar="PREFIXES",
                   help="comma-separated name prefixes: take only these tensors of B (implies --partial), "
                        "e.g. --alpha 1 --only copy_head. puts B's copy head on A")
    args = p.parse_args(argv)
    a, b = Path(args.a), Path(args.b)
    ta = load_file(a / "model.safetensors")
    tb = load_file(b / "model.safetensors")
    if args.only:
        pre = tuple(x for x in args.only.split(",") if x)
        tb = {k: v for k, v in tb.items() if k.startswith(pre)}
        if not tb:
            raise SystemExit(f"B has no tensor named {args.only}*")
    mixed = interpolate(ta, tb, args.alpha, args.partial or bool(args.only))
    out = Path(args.out)
    changed = [k for k in mixed if not mixed[k].equal(ta[k])]
    if args.diff_only:  # the tensors alone: --partial over A rebuilds the checkpoint
        out.mkdir(parents=True, exist_ok=True)
        mixed = {k: mixed[k] for k in changed}
    else:
        shutil.copytree(a, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors"))
    save_file(mixed, out / "model.safetensors", metadata={"format": "pt"})
    print(f"wrote {out}: {len(changed)} tensors differ from A, {len(mixed)} written (alpha {args.alpha})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
