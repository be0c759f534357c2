"""Corpora -> flat uint16 token files, the document split, and the window sampler (spec §5.1).

Command: ``drt-reader data --corpora DIR --out DIR [--train-tokenizer] [--vocab-size N] [--json]``

Layout written under OUT::

    OUT/splits.json                   which documents are train / val / test (split BY DOCUMENT)
    OUT/books/{train,val,test}.bin    books + Shakespeare + Milton, uint16, docs separated by EOT
    OUT/stacks/{train,val,test}.bin   Stacks Project chapters (LaTeX), same format
    OUT/meta.json                     token counts per corpus/split, tokenizer fingerprint, timing
    OUT/READY                         written last, when everything above is complete

Each document's ids are followed by one ``<|endoftext|>`` (id 1), as in the reference's PG19 files
(spec §5.1). The split is seeded and deterministic; see docs/data.md for the held-out names.
Non-chapter Stacks files (preamble, chapters, bibliography, fdl) are never used as text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .options import SPLIT_SEED

log = logging.getLogger("drt.data")

CORPORA = ("books", "stacks")
SPLITS = ("train", "val", "test")
# sub-folders of the corpora dir that make up each corpus (Shakespeare and Milton count as books)
CORPUS_DIRS = {"books": ("books", "shakespeare", "milton"), "stacks": ("stacks",)}
CORPUS_EXT = {"books": ".txt", "stacks": ".tex"}
STACKS_NON_CHAPTER = frozenset({"preamble.tex", "chapters.tex", "bibliography.tex", "fdl.tex"})

N_HELDOUT_BOOKS = 3  # per held-out split (val, test), drawn from books/ only
N_HELDOUT_STACKS = 4  # per held-out split, drawn from Stacks chapters without a parallel chapter
MAX_HELDOUT_BOOK_BYTES = 1_500_000  # never hold out a giant (War and Peace) that training needs
MIN_HELDOUT_STACKS_BYTES = 60_000  # held-out chapters big enough to measure perplexity at 16K+

TOKEN_DTYPE = np.uint16


# --------------------------------------------------------------------------------------------
# documents and the split
# --------------------------------------------------------------------------------------------


def list_documents(corpora: str | os.PathLike) -> dict[str, list[str]]:
    """Document paths relative to `corpora`, per corpus, sorted. Raises if a corpus is empty."""
    root = Path(corpora)
    out: dict[str, list[str]] = {}
    for corpus, dirs in CORPUS_DIRS.items():
        docs = []
        for d in dirs:
            for f in sorted((root / d).glob("*" + CORPUS_EXT[corpus])):
                if corpus == "stacks" and f.name in STACKS_NON_CHAPTER:
                    continue
                if f.is_file():
                    docs.append(f"{d}/{f.name}")
        out[corpus] = docs
    return out


def _stacks_family(name: str) -> str:
    """'spaces-more-morphisms.tex' -> 'morphisms': chapters that share a family are near-parallel
    texts (the manifest warns they share passages), so a held-out chapter must have no relative."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".tex")
    for prefix in ("spaces-", "stacks-", "more-", "examples-", "formal-", "sites-"):
        if stem.startswith(prefix) and len(stem) > len(prefix):
            stem = stem[len(prefix):]
    for prefix in ("more-",):
        if stem.startswith(prefix):
            stem = stem[len(prefix):]
    return stem


def make_splits(
    corpora: str | os.PathLike,
    seed: int = SPLIT_SEED,
    n_books: int = N_HELDOUT_BOOKS,
    n_stacks: int = N_HELDOUT_STACKS,
) -> dict:
    """The document split: {"seed", "val": {corpus: [paths]}, "test": {...}, "train": {...}}.

    Deterministic given (the file names and sizes in `corpora`, seed). Val and test hold out
    `n_books` books (from books/, at most 1.5 MB each) and `n_stacks` Stacks chapters (at least
    60 KB, from a family with a single chapter, so no parallel chapter leaks into training).
    """
    root = Path(corpora)
    docs = list_documents(root)
    rng = random.Random(seed)

    book_cands = [d for d in docs["books"]
                  if d.startswith("books/") and (root / d).stat().st_size <= MAX_HELDOUT_BOOK_BYTES]
    fam: dict[str, list[str]] = {}
    for d in docs["stacks"]:
        fam.setdefault(_stacks_family(d), []).append(d)
    stacks_cands = [
        d for d in docs["stacks"]
        if len(fam[_stacks_family(d)]) == 1 and (root / d).stat().st_size >= MIN_HELDOUT_STACKS_BYTES
    ]
    if len(book_cands) < 2 * n_books or len(stacks_cands) < 2 * n_stacks:
        # small corpora (tests): fall back to any document, keeping at least one for training
        book_cands = list(docs["books"])
        stacks_cands = list(docs["stacks"])
        n_books = max(0, min(n_books, (len(book_cands) - 1) // 2))
        n_stacks = max(0, min(n_stacks, (len(stacks_cands) - 1) // 2))
    hb = rng.sample(book_cands, 2 * n_books)
    hs = rng.sample(stacks_cands, 2 * n_stacks)
    split = {
        "seed": seed,
        "val": {"books": sorted(hb[:n_books]), "stacks": sorted(hs[:n_stacks])},
        "test": {"books": sorted(hb[n_books:]), "stacks": sorted(hs[n_stacks:])},
    }
    held = set(hb) | set(hs)
    split["train"] = {c: [d for d in docs[c] if d not in held] for c in CORPORA}
    return split


def read_text(path: str | os.PathLike) -> str:
    """A corpus file as text (UTF-8; undecodable bytes replaced, which the corpora do not have)."""
    return Path(path).read_bytes().decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# tokenizer training sample
# --------------------------------------------------------------------------------------------


def tokenizer_sample(
    corpora: str | os.PathLike,
    split: dict,
    books_bytes: int = 16_000_000,
    stacks_bytes: int = 9_000_000,
    seed: int = 0,
    piece_chars: int = 1 << 16,
) -> Iterable[str]:
    """A representative sample of the TRAINING documents for BPE training (~25 MB by default):
    from each document a random contiguous run of lines, of a length proportional to its size,
    so the sample mixes every book, play, poem and chapter. Yields pieces of ~64K characters."""
    root = Path(corpora)
    rng = random.Random(seed)
    for corpus, budget in (("books", books_bytes), ("stacks", stacks_bytes)):
        names = split["train"][corpus]
        sizes = [(root / n).stat().st_size for n in names]
        total = max(1, sum(sizes))
        frac = min(1.0, budget / total)
        for name in names:
            text = read_text(root / name)
            take = int(len(text) * frac)
            if take <= 0:
                continue
            start = rng.randrange(0, max(1, len(text) - take + 1))
            if start > 0:
                nl = text.find("\n", start)
                start = nl + 1 if nl >= 0 else start
            yield from _sample_pieces(text[start : start + take], piece_chars)


_NL_BEFORE_NONSPACE = re.compile(r"\n(?=\S)")


def _sample_pieces(text: str, piece_chars: int) -> Iterable[str]:
    """Pieces for BPE training: cut after a newline that precedes a non-space character. (Not the
    exact-cut rule of tokenizer.iter_pieces; kept because the shipped tokenizer was trained on
    these pieces, so `--train-tokenizer` reproduces checkpoints/drt-tiny/tokenizer.json.)"""
    i, n = 0, len(text)
    while i < n:
        j = min(n, i + piece_chars)
        if j < n:
            k = text.rfind("\n", i, j)
            while k > i and (k + 1 >= n or text[k + 1].isspace()):
                k = text.rfind("\n", i, k)
            if k > i:
                j = k + 1
            else:
                m = _NL_BEFORE_NONSPACE.search(text, j)
                j = m.end() if m else n
        yield text[i:j]
        i = j


def heldout_texts(corpora: str | os.PathLike, split: dict, corpus: str, max_bytes: int = 3_000_000) -> list[str]:
    """Text of the val documents of a corpus (capped at `max_bytes`), for bytes/token measurement."""
    from ..tokenizer import iter_pieces

    root = Path(corpora)
    out: list[str] = []
    used = 0
    for name in split["val"][corpus]:
        t = read_text(root / name)
        t = t[: max(0, max_bytes - used)]
        used += len(t)
        out.extend(iter_pieces(t))
        if used >= max_bytes:
            break
    return out


def train_and_measure(
    corpora: str | os.PathLike,
    split: dict,
    out_dir: str | os.PathLike,
    vocab_size: int = 8192,
    sizes: Sequence[int] = (4096, 8192, 16384),
) -> dict:
    """Train the BPE once at max(sizes + vocab_size), measure bytes/token on held-out books and
    Stacks for each size (truncating the merges, which is exact for BPE), save `vocab_size`."""
    from ..tokenizer import bytes_per_token, save_tokenizer, train_tokenizer, truncate_vocab

    t0 = time.time()
    big = max([*sizes, vocab_size])
    tok_big = train_tokenizer(tokenizer_sample(corpora, split), vocab_size=big)
    t_train = time.time() - t0
    held = {c: heldout_texts(corpora, split, c) for c in CORPORA}
    table = []
    for n in sorted(set([*sizes, vocab_size])):
        tk = truncate_vocab(tok_big, n) if n != big else tok_big
        row = {"vocab_size": n}
        for c in CORPORA:
            bpt, nb, nt = bytes_per_token(tk, held[c])
            row[f"{c}_bytes_per_token"] = round(bpt, 3)
            row[f"{c}_tokens"] = nt
        table.append(row)
    chosen = truncate_vocab(tok_big, vocab_size) if vocab_size != big else tok_big
    save_tokenizer(chosen, out_dir)
    return {"train_seconds": round(t_train, 1), "table": table, "vocab_size": vocab_size, "out": str(out_dir)}


# --------------------------------------------------------------------------------------------
# token files
# --------------------------------------------------------------------------------------------


def encode_documents(paths: Sequence[str | os.PathLike], tokenizer_path=None,
                     batch_chars: int = 8_000_000) -> Iterable[np.ndarray]:
    """Yield, per document, its uint16 ids followed by EOT. Pieces of several documents are encoded
    together in one parallel batch (`encode_batch_fast`), ~8 M characters at a time."""
    from ..tokenizer import EOT_ID, backend, iter_pieces

    tok = backend(tokenizer_path)
    if tok.get_vocab_size() > np.iinfo(TOKEN_DTYPE).max + 1:
        raise ValueError("vocabulary too large for uint16 token files")
    pending: list[tuple[int, list[str]]] = []  # (doc index, pieces)
    n_chars = 0

    def flush():
        flat = [p for _, ps in pending for p in ps]
        encs = tok.encode_batch_fast(flat, add_special_tokens=False)
        k = 0
        for _, ps in pending:
            parts = [np.asarray(encs[k + j].ids, dtype=TOKEN_DTYPE) for j in range(len(ps))]
            k += len(ps)
            parts.append(np.asarray([EOT_ID], dtype=TOKEN_DTYPE))
            yield np.concatenate(parts)
        pending.clear()

    for i, p in enumerate(paths):
        text = read_text(p)
        pending.append((i, list(iter_pieces(text, 1 << 14))))
        n_chars += len(text)
        if n_chars >= batch_chars:
            yield from flush()
            n_chars = 0
    if pending:
        yield from flush()


def _write_atomic_bin(path: Path, arrays: Iterable[np.ndarray]) -> int:
    from store.chunk_store import atomic_write

    n = 0

    def write(f) -> None:
        nonlocal n
        for a in arrays:
            f.write(a.astype(TOKEN_DTYPE, copy=False).tobytes())
            n += int(a.size)

    atomic_write(path, write)
    return n


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def build_token_files(
    corpora: str | os.PathLike,
    out: str | os.PathLike,
    tokenizer_path=None,
    split: dict | None = None,
) -> dict:
    """Write OUT/{books,stacks}/{train,val,test}.bin and OUT/meta.json; return the counts."""
    from ..tokenizer import _resolve

    root = Path(corpora)
    outp = Path(out)
    split = split or make_splits(root)
    counts: dict[str, dict[str, int]] = {}
    docs_n: dict[str, dict[str, int]] = {}
    nbytes = 0
    t0 = time.time()
    for corpus in CORPORA:
        (outp / corpus).mkdir(parents=True, exist_ok=True)
        counts[corpus], docs_n[corpus] = {}, {}
        for s in SPLITS:
            names = split[s][corpus]
            nbytes += sum((root / n).stat().st_size for n in names)
            n = _write_atomic_bin(outp / corpus / f"{s}.bin",
                                  encode_documents([root / n for n in names], tokenizer_path))
            counts[corpus][s] = n
            docs_n[corpus][s] = len(names)
            log.info("%s/%s: %d docs, %d tokens", corpus, s, len(names), n)
    secs = time.time() - t0
    tp = _resolve(tokenizer_path)
    meta = {
        "tokens": counts,
        "documents": docs_n,
        "dtype": "uint16",
        "eot_id": 1,
        "tokenizer": str(tp),
        "tokenizer_sha256": _file_sha(tp / "tokenizer.json"),
        "seconds": round(secs, 1),
        "bytes": nbytes,
        "mb_per_second": round(nbytes / 1e6 / max(secs, 1e-9), 2),
        "threads": os.environ.get("RAYON_NUM_THREADS", "default"),
    }
    (outp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# --------------------------------------------------------------------------------------------
# window sampler
# --------------------------------------------------------------------------------------------


class WindowSampler:
    """Seeded random windows over flat token files, mixing corpora by weight (spec §5.1).

    `paths_with_weights`: [(path_to_bin, weight), ...] (or a {path: weight} dict). Every row of
    `batch(step, batch_size, rank, world_size)` is `seq_len + 1` consecutive ids (inputs and the
    shifted targets) from a uniformly random offset of a file picked with probability proportional
    to its weight; windows may cross document boundaries (EOT in between), as in the reference.

    The draw for row r of a batch is a pure function of (seed, step, rank, r), so results do not
    depend on call order, resumption or the number of steps already taken, and each rank (DDP)
    gets different windows. Files are read through np.memmap (opened lazily, so the sampler can be
    pickled into DataLoader workers).
    """

    def __init__(self, paths_with_weights, seq_len: int, seed: int = 0):
        items = list(paths_with_weights.items()) if isinstance(paths_with_weights, dict) else list(paths_with_weights)
        if not items:
            raise ValueError("WindowSampler needs at least one (path, weight)")
        self.paths = [str(p) for p, _ in items]
        w = np.asarray([float(x) for _, x in items], dtype=np.float64)
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights must be >= 0 with a positive sum, got {w.tolist()}")
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.lengths = []
        for p in self.paths:
            n = os.path.getsize(p) // np.dtype(TOKEN_DTYPE).itemsize
            if n < self.seq_len + 1 and w[len(self.lengths)] > 0:
                raise ValueError(f"{p} has {n} tokens, fewer than seq_len + 1 = {self.seq_len + 1}")
            self.lengths.append(n)
        self.weights = w / w.sum()
        self._mm: list[np.memmap] | None = None

    def _maps(self) -> list[np.memmap]:
        if self._mm is None:
            self._mm = [np.memmap(p, dtype=TOKEN_DTYPE, mode="r") for p in self.paths]
        return self._mm

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_mm"] = None
        return d

    def draw(self, step: int, batch_size: int, rank: int = 0, world_size: int = 1) -> list[tuple[int, int]]:
        """The (file index, start offset) of each row: the sampler's whole randomness."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        ss = np.random.SeedSequence([self.seed & 0xFFFFFFFF, int(step), int(rank), 0x5EED])
        g = np.random.default_rng(ss)
        files = g.choice(len(self.paths), size=batch_size, p=self.weights)
        out = []
        for f in files.tolist():
            hi = self.lengths[f] - (self.seq_len + 1)
            out.append((f, int(g.integers(0, hi + 1))))
        return out

    def batch(self, step: int, batch_size: int, rank: int = 0, world_size: int = 1):
        """LongTensor [batch_size, seq_len + 1] for this (step, rank)."""
        import torch

        maps = self._maps()
        rows = np.empty((batch_size, self.seq_len + 1), dtype=np.int64)
        for i, (f, s) in enumerate(self.draw(step, batch_size, rank, world_size)):
            rows[i] = maps[f][s : s + self.seq_len + 1]
        return torch.from_numpy(rows)


# --------------------------------------------------------------------------------------------
# command line (its parser is drt_core.train.cli's, which calls run)
# --------------------------------------------------------------------------------------------


def run(args) -> int:
    from cli_io import emit

    from ..errors import DRTError

    corpora = Path(args.corpora)
    if not corpora.is_dir():
        raise DRTError(f"corpora directory not found: {corpora}")
    docs = list_documents(corpora)
    if not docs["books"] and not docs["stacks"]:
        raise DRTError(f"no books/*.txt or stacks/*.tex under {corpora}")
    if args.vocab_size > np.iinfo(TOKEN_DTYPE).max + 1:
        raise DRTError(f"--vocab-size {args.vocab_size} does not fit uint16 token files")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ready = out / "READY"
    if ready.exists():
        ready.unlink()
    split = make_splits(corpora, seed=args.seed)
    (out / "splits.json").write_text(json.dumps(split, indent=2) + "\n")
    result: dict = {"out": str(out), "splits": {s: split[s] for s in ("val", "test")}}
    tok_path = Path(getattr(args, "tokenizer_out", None) or args.model)
    if args.train_tokenizer:
        sizes = [int(x) for x in str(args.measure_sizes).split(",") if x.strip()]
        result["tokenizer_training"] = train_and_measure(corpora, split, tok_path, args.vocab_size, sizes)
    meta = build_token_files(corpora, out, tok_path, split)
    result.update(meta)
    ready.write_text(json.dumps({"finished": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    lines = [f"{c}/{s}: {meta['tokens'][c][s]:,} tokens ({meta['documents'][c][s]} docs)"
             for c in CORPORA for s in SPLITS]
    lines.append(f"{meta['mb_per_second']} MB/s; wrote {out}")
    emit(args, result, "\n".join(lines))
    return 0
