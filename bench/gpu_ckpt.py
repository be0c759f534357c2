"""Moving a training run to and from a lent GPU within the device's transfer limits (issue 29,
item 7): at most 64 MiB travels each way, in files of at most 16 MiB.

    python -m bench.gpu_ckpt data --data data --out .gpu-data --mb 40   # here: token files that fit
    python -m bench.gpu_ckpt split RUN/model OUTDIR --max-mb 15           # there: bf16 shards
    python -m bench.gpu_ckpt join OUTDIR checkpoints/NAME                 # here: a loadable checkpoint

`data` keeps the first MB of each corpus's training tokens in proportion to its size (whole
documents up to the cut, plus val.bin and meta.json), so `drt-reader train --data .gpu-data` runs
there. `split` writes the model's tensors in bf16 to safetensors shards no larger than --max-mb
and its config.json; `join` reads them back to fp32 and adds the repository's tokenizer files (the
checkpoints share one tokenizer), so `Engine.from_pretrained` loads the result."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def cut_data(data: Path, out: Path, mb: float) -> dict:
    meta = json.loads((data / "meta.json").read_text())
    eot = int(meta.get("eot_id", 1))
    sizes = {c: (data / c / "train.bin").stat().st_size
             for c in ("books", "stacks") if (data / c / "train.bin").exists()}
    budget = int(mb * 2**20)
    kept = {}
    for c, size in sizes.items():
        n = min(size, budget * size // sum(sizes.values())) // 2  # uint16 tokens
        toks = np.memmap(data / c / "train.bin", dtype=np.uint16, mode="r")
        ends = np.flatnonzero(np.asarray(toks[:n]) == eot)  # end on a document boundary
        n = int(ends[-1]) + 1 if len(ends) else n
        (out / c).mkdir(parents=True, exist_ok=True)
        np.asarray(toks[:n]).tofile(out / c / "train.bin")
        shutil.copy(data / c / "val.bin", out / c / "val.bin")
        kept[c] = n
    meta["tokens"] = {c: dict(meta["tokens"][c], train=kept[c]) for c in kept}
    meta["cut_from"] = str(data)
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return kept


def split(model_dir: Path, out: Path, max_mb: float) -> list[str]:
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(model_dir / "model.safetensors"))
    limit, shards, cur, size = int(max_mb * 2**20) - 2**16, [], {}, 0  # 64 KiB for each header
    for name in sorted(tensors):
        t = tensors[name].to(torch.bfloat16) if tensors[name].is_floating_point() else tensors[name]
        nbytes = t.numel() * t.element_size()
        if nbytes > limit:
            raise SystemExit(f"gpu_ckpt split: tensor {name} has {nbytes} bytes, more than a shard")
        if cur and size + nbytes > limit:
            shards.append(cur)
            cur, size = {}, 0
        cur[name], size = t.contiguous(), size + nbytes
    if cur:
        shards.append(cur)
    names = []
    for i, sh in enumerate(shards):
        names.append(f"model-{i + 1:02d}-of-{len(shards):02d}.safetensors")
        save_file(sh, str(out / names[-1]))
    shutil.copy(model_dir / "config.json", out / "config.json")
    return names


def join(shard_dir: Path, out: Path) -> Path:
    from safetensors.torch import load_file, save_file

    files = sorted(shard_dir.glob("model-*-of-*.safetensors"))
    if not files:
        raise SystemExit(f"gpu_ckpt join: no model-*-of-*.safetensors under {shard_dir}")
    total = int(files[0].name.split("-of-")[1].split(".")[0])
    if len(files) != total:
        raise SystemExit(f"gpu_ckpt join: {len(files)} of {total} shards under {shard_dir}")
    tensors = {}
    for f in files:
        tensors |= {k: v.float() if v.is_floating_point() else v for k, v in load_file(str(f)).items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(shard_dir / "config.json", out / "config.json")
    for name in TOKENIZER_FILES:
        shutil.copy(ROOT / "checkpoints" / "drt-tiny" / name, out / name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.gpu_ckpt", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--data", default="data")
    d.add_argument("--out", default=".gpu-data")
    d.add_argument("--mb", type=float, default=40.0)
    s = sub.add_parser("split")
    s.add_argument("model_dir")
    s.add_argument("out")
    s.add_argument("--max-mb", type=float, default=15.0)
    j = sub.add_parser("join")
    j.add_argument("shard_dir")
    j.add_argument("out")
    a = p.parse_args(argv)
    if a.cmd == "data":
        print(json.dumps(cut_data(Path(a.data), Path(a.out), a.mb)))
    elif a.cmd == "split":
        print("\n".join(split(Path(a.model_dir), Path(a.out), a.max_mb)))
    else:
        print(join(Path(a.shard_dir), Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
