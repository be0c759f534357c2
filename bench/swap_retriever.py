"""A DRT checkpoint with its learned retrieval swapped for the frozen MiniLM of the fixed_retriever
baseline: `python -m bench.swap_retriever --model checkpoints/drt-tiny --out runs/fixed-swap`.

Every weight that reads retrieved chunks (the lower and upper layers, the chunk encoder's memory
K/V, GCA, the copy head) is kept; the parts that only rank chunks (the key and query encoders, the
query projections, the lexical scorer) are dropped, and `arch` becomes "fixed_retriever": chunks
are then chosen by the cosine of MiniLM embeddings of their texts (drt_core/fixed_retriever.py),
softmax(cosine / retriever_temperature) over the top k as fusion weights. Not retrained: it measures
what the learned retrieval adds with everything else equal (issue 31's fixed-retriever NIAH row)."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

RETRIEVAL_ONLY = dict(key_encoder=0, key_context=0, query_encoder=0, query_key=False, lexical=False,
                      lexical_doc_df=0.0, lexical_words=0.0)


def swap(model_dir: str, out: str) -> Path:
    from drt_core import DRTForCausalLM
    from drt_core.train.checkpoint import copy_tokenizer

    src = DRTForCausalLM.from_pretrained(model_dir)
    if src.config.arch != "drt":
        raise SystemExit(f"--model must be a DRT checkpoint, got arch {src.config.arch!r}")
    cfg = copy.deepcopy(src.config)
    cfg.arch = "fixed_retriever"
    for k, v in RETRIEVAL_ONLY.items():
        setattr(cfg, k, v)
    dst = DRTForCausalLM(cfg)
    want = dst.state_dict()
    kept = {k: v for k, v in src.state_dict().items() if k in want}
    missing, _ = dst.load_state_dict(kept, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]  # tied to the embeddings
    if missing:
        raise SystemExit(f"swap_retriever: missing {missing}")
    out_dir = Path(out)
    dst.save_pretrained(out_dir)
    copy_tokenizer(out_dir, Path(model_dir))
    return out_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.swap_retriever", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    print(swap(a.model, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
