"""What NIAH and perplexity share: the models compared side by side on the SAME inputs (`ModelEntry`,
`load_models`: the DRT and its baselines, config.arch), a fresh stream state per input (RAM, or the
memmap tier in a temporary directory above --memmap-above tokens, fp16 K/V as ingest stores
documents, so RSS stays flat), the input fed in blocks as ingest feeds a document, the token
sources (a uint16 .bin file, or text tokenized with each model's tokenizer) and the peak RSS of
this process while a length runs."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import DRTError

ROOT = Path(__file__).resolve().parents[2]  # the repository (data/books/val.bin)


# ----------------------------------------------------------------------------------------------
# memory


def rss_mb() -> float:
    """Current resident set size of this process (anonymous + file-backed pages), MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RssMonitor:
    """Peak RSS of this process while the block runs (VmRSS sampled every `dt` s in a thread)."""

    def __init__(self, dt: float = 0.05):
        self.dt = dt
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.wait(self.dt):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> "RssMonitor":
        self.peak = rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


# ----------------------------------------------------------------------------------------------
# models


@dataclass
class ModelEntry:
    name: str
    path: str | None
    engine: object  # drt_core.engine.Engine
    tokenizer_path: str | None  # directory with tokenizer.json (for the NIAH builders / text files)

    @property
    def arch(self) -> str:
        return self.engine.cfg.arch

    def describe(self) -> dict:
        m = self.engine.model
        return {"name": self.name, "path": self.path, "arch": self.arch,
                "fingerprint": self.engine.fingerprint,
                "params": int(sum(p.numel() for p in m.parameters()))}


def default_device() -> str:
    return os.environ.get("DRT_DEVICE", "cpu")


def load_models(paths: Sequence[str], device: str | None = None, use_faiss: bool = False) -> list[ModelEntry]:
    """Engine.from_pretrained for each checkpoint; names are the directory names (made unique)."""
    from ..engine import Engine

    out: list[ModelEntry] = []
    seen: dict[str, int] = {}
    for p in paths:
        eng = Engine.from_pretrained(p, device=device or default_device(), use_faiss=use_faiss)
        name = Path(p).resolve().name
        if name in seen:
            seen[name] += 1
            name = f"{name}#{seen[name]}"
        else:
            seen[name] = 1
        tok = str(Path(p)) if (Path(p) / "tokenizer.json").exists() else None
        out.append(ModelEntry(name, str(p), eng, tok))
    return out


def unsupported(entry: ModelEntry, length: int, kind: str = "niah") -> str | None:
    """Why a model cannot run `length` tokens for `kind` ("niah" or "ppl"), or None.

    Every architecture streams; full attention only up to Stream.full_attention_capacity."""
    eng = entry.engine
    if entry.arch == "full_attention" and length > eng.stream.full_attention_capacity:
        return f"n/a: exceeds capacity ({length} > {eng.stream.full_attention_capacity} positions)"
    return None


class StateFactory:
    """A fresh stream state: RAM for short inputs, the memmap tier in a temporary directory above
    `memmap_above` tokens (for models with chunk memory). Use as a context manager."""

    def __init__(self, engine, n_tokens: int, memmap_above: int, tmp_dir: str | None):
        self.engine, self.n, self.memmap_above, self.tmp_dir = engine, n_tokens, memmap_above, tmp_dir
        self.dir: str | None = None

    @property
    def tier(self) -> str:
        if self.engine.cfg.uses_chunks and self.n > self.memmap_above:
            return f"memmap-{self.engine.memory_dtype.name}"
        return "ram"

    def __enter__(self):
        if self.tier.startswith("memmap"):
            self.dir = tempfile.mkdtemp(prefix="drt-eval-", dir=self.tmp_dir)
            return self.engine.new_state(self.dir)
        return self.engine.new_state(None)

    def __exit__(self, *exc):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def feed_blocks(engine, state, ids: np.ndarray, block_tokens: int) -> None:
    """Feed ids the way ingest does: Engine.prefill (blocks aligned to chunks; a state with a
    directory is committed every few blocks, which is where the store releases written pages)."""
    block_chunks = max(1, block_tokens // engine.cfg.chunk_tokens) if engine.cfg.uses_chunks else \
        max(1, block_tokens // 64)
    for _ in engine.prefill(state, ids, block_chunks=block_chunks):
        pass


# ----------------------------------------------------------------------------------------------
# haystacks and token files


def is_token_file(path: Path) -> bool:
    return path.suffix.lower() == ".bin"


def load_token_source(path: str | os.PathLike, tokenizer_path: str | None) -> tuple[np.ndarray, str]:
    """(token ids, description): a uint16 .bin token file (memory-mapped) or a text file tokenized
    with the tokenizer in `tokenizer_path`."""
    p = Path(path)
    if not p.is_file():
        raise DRTError(f"file not found: {p}")
    if is_token_file(p):
        if p.stat().st_size < 2:
            raise DRTError(f"empty token file: {p}")
        arr = np.memmap(p, dtype=np.uint16, mode="r")
        return arr, f"{p} ({arr.size:,} tokens, uint16)"
    from ..tokenizer import encode
    from ..train.data import read_text

    text = read_text(p)
    if not text.strip():
        raise DRTError(f"no text in {p}")
    ids = np.asarray(encode(text, tokenizer_path), dtype=np.int64)
    return ids, f"{p} ({ids.size:,} tokens, text tokenized)"


def default_haystack(home: str | None = None) -> Path | None:
    """The validation split of the book corpus: data/books/val.bin (repository, then DRT_HOME)."""
    cands = [ROOT / "data" / "books" / "val.bin"]
    if home:
        cands.append(Path(home) / "data" / "books" / "val.bin")
    for c in cands:
        if c.is_file():
            return c
    return None


def tok_key(tokenizer_path: str | None) -> str:
    if tokenizer_path is None:
        return "default"
    p = Path(tokenizer_path) / "tokenizer.json"
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else str(tokenizer_path)


def models_from_args(args) -> list[ModelEntry]:
    """The models of `eval niah` / `eval ppl`: --models, else the global --model."""
    paths = [x.strip() for x in args.models.split(",") if x.strip()] if args.models else [args.model]
    return load_models(paths, device=args.device, use_faiss=args.faiss)

