"""The QA files (`build_qa_data`; ``python -m drt_core.mine``)::

    OUT/qa/{split}.bin     the split's documents' token ids (uint16), each followed by <|endoftext|>
    OUT/qa/{split}.jsonl   one item per line, token spans relative to the document's start
    OUT/qa/meta.json       counts per split and type, seed, tokenizer fingerprint, timing

Each document is mined by the miner its path names (`mine_document`) with its own seeded generator,
so its items do not depend on which other documents are mined."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

from .book import mine_book
from .items import QTYPES, QAItem, answer_target, phrasing_of
from .stacks import mine_stacks

log = logging.getLogger("drt.mine")
DESCRIPTION = ("Question/answer training data mined from the corpora's own structure "
               "(no hand labels, no downloads).")


def mine_document(path: str, text: str, rng: random.Random, phrasings: str = "train") -> list[QAItem]:
    """Mine one corpus document; `path` (relative to the corpora dir) picks the miner: stacks/ ->
    LaTeX, shakespeare/ -> plays (and poems), anything else (books/, milton/) -> prose/verse."""
    p = str(path).replace("\\", "/")
    if p.startswith("stacks/") or p.endswith(".tex"):
        return mine_stacks(text, rng, phrasings)
    return mine_book(text, rng, phrasings, play=p.startswith("shakespeare/"))


def char_to_token_span(offsets: Sequence[tuple[int, int]] | np.ndarray, s: int, e: int) -> tuple[int, int]:
    """[ts, te): the tokens that overlap the character span [s, e) (`offsets` from
    tokenizer.encode_with_offsets: monotone (start, end) per token)."""
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    ts = int(np.searchsorted(off[:, 1], s, side="right"))
    te = int(np.searchsorted(off[:, 0], e, side="left"))
    return ts, max(te, ts + 1) if e > s else ts


def _doc_rng(seed: int, split: str, rel: str) -> random.Random:
    """A per-document generator: items do not depend on which other documents are mined."""
    return random.Random(f"drt-mine:{seed}:{split}:{rel}")


def _split_documents(splits: dict, split: str) -> list[str]:
    """The split's documents (books corpus first, then stacks), as in data.py's order."""
    from ..train.data import CORPORA

    return [d for c in CORPORA for d in splits[split].get(c, [])]


def build_qa_data(
    corpora_dir,
    splits_path,
    out_dir,
    tokenizer_path=None,
    seed: int = 0,
    splits: Sequence[str] = ("train", "val"),
) -> dict:
    """Mine every document of `splits` (never "test") and write OUT/qa/{split}.bin, .jsonl and
    meta.json; return {split: {qtype: count}}. Train items use the train phrasings, val items
    both (recorded per item). Texts are read as drt_core.train.data reads them (data.read_text)."""
    from store.chunk_store import atomic_write

    from ..tokenizer import _resolve

    if "test" in splits:
        raise ValueError("the test split is never mined")
    root, out = Path(corpora_dir), Path(out_dir) / "qa"
    split_doc = json.loads(Path(splits_path).read_text())
    out.mkdir(parents=True, exist_ok=True)
    meta: dict = {"seed": seed, "splits": {}}
    t0 = time.time()
    for split in splits:
        docs = _split_documents(split_doc, split)
        meta["splits"][split] = _write_split(root, docs, split, out, seed, tokenizer_path)
    tp = _resolve(tokenizer_path)
    meta["tokenizer_sha256"] = hashlib.sha256((tp / "tokenizer.json").read_bytes()).hexdigest()[:16]
    meta["seconds"] = round(time.time() - t0, 1)
    atomic_write(out / "meta.json", lambda f: f.write((json.dumps(meta, indent=2) + "\n").encode()))
    return {split: m["per_type"] for split, m in meta["splits"].items()}


def _write_split(root: Path, docs: Sequence[str], split: str, out: Path, seed: int, tokenizer_path) -> dict:
    """Tokenize and mine the split's documents; write out/{split}.bin and .jsonl; return its meta."""
    from store.chunk_store import atomic_write

    from ..tokenizer import EOT_ID, encode_with_offsets
    from ..train.data import TOKEN_DTYPE, read_text

    phrasings = "train" if split == "train" else "both"
    lines: list[str] = []
    per_type: Counter = Counter()
    per_phrasing: Counter = Counter()
    n_tok = 0
    t_tok = t_mine = 0.0

    def write_bin(f) -> None:
        nonlocal n_tok, t_tok, t_mine
        for rel in docs:
            text = read_text(root / rel)
            t1 = time.time()
            ids, offs = encode_with_offsets(text, tokenizer_path)
            t2 = time.time()
            items = mine_document(rel, text, _doc_rng(seed, split, rel), phrasings)
            t_tok, t_mine = t_tok + t2 - t1, t_mine + time.time() - t2
            off = np.asarray(offs, dtype=np.int64).reshape(-1, 2)
            for it in items:
                lines.append(json.dumps(_item_record(rel, n_tok, len(ids), it, off), ensure_ascii=False))
                per_type[it.qtype] += 1
                per_phrasing[phrasing_of(it.qtype, it.template)] += 1
            f.write(np.asarray(ids, dtype=TOKEN_DTYPE).tobytes())
            f.write(np.asarray([EOT_ID], dtype=TOKEN_DTYPE).tobytes())
            n_tok += len(ids) + 1
            log.info("%s %s: %d tokens, %d items", split, rel, len(ids), len(items))

    atomic_write(out / f"{split}.bin", write_bin)
    atomic_write(out / f"{split}.jsonl", lambda f: f.write("".join(x + "\n" for x in lines).encode("utf-8")))
    return {
        "documents": len(docs),
        "tokens": n_tok,
        "items": sum(per_type.values()),
        "per_type": {t: per_type[t] for t in QTYPES},
        "phrasing": {"train": per_phrasing["train"], "heldout": per_phrasing["heldout"]},
        "tokenize_seconds": round(t_tok, 1),
        "mine_seconds": round(t_mine, 1),
    }


def _item_record(rel: str, doc_start: int, doc_len: int, it: QAItem, off: np.ndarray) -> dict:
    """One jsonl line: token spans relative to the document's start in the .bin."""
    return {
        "doc": rel,
        "doc_start": doc_start,
        "doc_len": doc_len,
        "question": it.question,
        "answer": it.answer,
        "target": answer_target(it.answer),
        "qtype": it.qtype,
        "template": it.template,
        "phrasing": phrasing_of(it.qtype, it.template),
        "ans_tok": list(char_to_token_span(off, it.ans_start, it.ans_end)),
        "passage_tok": list(char_to_token_span(off, it.passage_start, it.passage_end)),
        "ans_char": [it.ans_start, it.ans_end],
        "passage_char": [it.passage_start, it.passage_end],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m drt_core.mine", description=DESCRIPTION)
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--data", default="data", help="data dir holding splits.json; writes DATA/qa/")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="train,val")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    t0 = time.time()
    counts = build_qa_data(
        args.corpora,
        Path(args.data) / "splits.json",
        args.data,
        args.tokenizer,
        args.seed,
        tuple(args.splits.split(",")),
    )
    if args.json:
        print(json.dumps({"counts": counts, "seconds": round(time.time() - t0, 1)}))
    else:
        for split, c in counts.items():
            print(f"{split}: " + ", ".join(f"{t} {n}" for t, n in c.items()) + f" (total {sum(c.values())})")
        print(f"{time.time() - t0:.0f} s; wrote {Path(args.data) / 'qa'}")
    return 0
