"""Split a DRT's upper layers into more retrieval groups, keeping every weight:
`python -m bench.regroup --model checkpoints/drt-tiny --groups 1,1 --out runs/drt-g2/init`.

Upper layer i keeps its weights and lands in group g of the new `upper_groups` (layers in order);
a new group's landmark query norm (and query projection, with query_encoder / query_key) is a
copy of the old group's that its first layer came from. With groups 1,1 the second layer's GCA
then reads chunks retrieved by a landmark that has already read the first group's retrievals (the
paper's G = 2, for multi-hop questions), starting from the trained G = 1 model instead of a second
pretraining."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path


def regroup(model_dir: str, groups: list[int], out: str) -> Path:
    from drt_core import DRTForCausalLM
    from drt_core.train.checkpoint import copy_tokenizer

    src = DRTForCausalLM.from_pretrained(model_dir)
    old = list(src.config.upper_groups)
    if sum(groups) != sum(old):
        raise SystemExit(f"--groups must keep the {sum(old)} upper layers, got {groups}")
    where_old = [(g, j) for g, n in enumerate(old) for j in range(n)]
    where_new = [(g, j) for g, n in enumerate(groups) for j in range(n)]
    cfg = copy.deepcopy(src.config)
    cfg.upper_groups = list(groups)
    dst = DRTForCausalLM(cfg)
    sd, new = src.state_dict(), {}
    for name, t in sd.items():
        if name.startswith("groups."):
            _, g, j, rest = name.split(".", 3)
            i = where_old.index((int(g), int(j)))
            ng, nj = where_new[i]
            new[f"groups.{ng}.{nj}.{rest}"] = t
        elif not name.startswith(("lmk_norms.", "query_projs.")):
            new[name] = t
    for ng in range(len(groups)):  # per-group query parts: copies of the old group's
        i = where_new.index((ng, 0))
        og = where_old[i][0]
        for part in ("lmk_norms", "query_projs"):
            if f"{part}.{og}.weight" in sd:
                new[f"{part}.{ng}.weight"] = sd[f"{part}.{og}.weight"]
    missing, unexpected = dst.load_state_dict(new, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise SystemExit(f"regroup: missing {missing}, unexpected {unexpected}")
    out_dir = Path(out)
    dst.save_pretrained(out_dir)
    copy_tokenizer(out_dir, Path(model_dir))
    return out_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.regroup", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--groups", required=True, help="new upper_groups, e.g. 1,1")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    out = regroup(a.model, [int(x) for x in a.groups.split(",")], a.out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
