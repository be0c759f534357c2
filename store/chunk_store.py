"""Chunk memory: the per-chunk states the DRT engine keeps for retrieval, in RAM or on disk.

For every chunk c of a document the engine stores
    key[c]      [D]      the landmark key (what retrieval scores against), float32
    mem_k[c]    [N, D]   the chunk's K memory (N = real slots, 63), float16 on disk
    mem_v[c]    [N, D]   the chunk's V memory
    sel_idx[c]  [G, k]   the chunks that chunk c's landmark selected (serving chunk c+1), int32
    sel_w[c]    [G, k]   their fusion weights, float32
    tokens[c]   [N]      the chunk's token ids, int32 (what a copy head points at)
    gates[c]    [N, 2]   the word gates of its tokens (config lexical_gates; 0 without), as mem_k
so the document's dependency map is stored beside its memory.

Two tiers share one interface (`ChunkMemory`): `RamChunkMemory` (numpy arrays that grow) and
`MemmapChunkMemory` (one memory-mapped file per array under a directory, grown in blocks). Disk
writes are committed by `commit(n, extra)`: the memmaps are flushed and fsynced, then meta.json
(n_committed and the caller's metadata) is written to a temporary name, fsynced and renamed. Rows
past the committed count are ignored on reopen, so a crash mid-append loses only uncommitted rows.
Landmark keys are also kept in RAM (D floats per chunk) so scoring never touches the disk; K/V rows
are read from the page cache only for the k chunks selected. `faiss_index()` builds an exact
inner-product index over the keys for very long documents (same top-k as the matrix product).
"""

from __future__ import annotations

import errno
import json
import mmap
import os
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

FORMAT_VERSION = 1


class ChunkMemory:
    """Interface: append rows, read keys, gather K/V rows. `n` is the number of rows."""

    D: int
    N: int
    G: int
    k: int
    n: int

    def append(self, key, mem_k, mem_v, sel_idx, sel_w, tokens=None, gates=None) -> None:  # each [m, ...]
        raise NotImplementedError

    def tokens(self, idx: np.ndarray) -> np.ndarray:  # [..., N] int32 token ids of chunks idx
        raise NotImplementedError

    def word_gates(self, idx: np.ndarray) -> np.ndarray:  # [..., N, 2] the tokens' word gates (lexical_gates)
        raise NotImplementedError

    def keys(self) -> np.ndarray:  # [n, D] float32
        raise NotImplementedError

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [..., N, D] each
        raise NotImplementedError

    def gather_keys(self, idx: np.ndarray) -> np.ndarray:  # [..., N, D]: gather's K without reading V
        return self.gather(idx)[0]

    def selections(self) -> tuple[np.ndarray, np.ndarray]:  # [n, G, k] idx, weights
        raise NotImplementedError

    def truncate(self, n: int) -> None:
        raise NotImplementedError

    def faiss_index(self):
        """An exact inner-product faiss index over the landmark keys (IndexFlatIP)."""
        import faiss

        index = faiss.IndexFlatIP(self.D)
        if self.n:
            index.add(np.ascontiguousarray(self.keys(), dtype=np.float32))
        return index


class RamChunkMemory(ChunkMemory):
    def __init__(self, D: int, N: int, G: int, k: int, dtype=np.float32):
        self.D, self.N, self.G, self.k = D, N, G, k
        self.dtype = np.dtype(dtype)
        self.n = 0
        self._cap = 0
        self._alloc(64)

    def _alloc(self, cap: int) -> None:
        def grow(old, shape, dt):
            new = np.zeros((cap, *shape), dtype=dt)
            if old is not None:
                new[: self.n] = old[: self.n]
            return new

        self._key = grow(getattr(self, "_key", None), (self.D,), np.float32)
        self._k = grow(getattr(self, "_k", None), (self.N, self.D), self.dtype)
        self._v = grow(getattr(self, "_v", None), (self.N, self.D), self.dtype)
        self._si = grow(getattr(self, "_si", None), (self.G, self.k), np.int32)
        self._sw = grow(getattr(self, "_sw", None), (self.G, self.k), np.float32)
        self._tok = grow(getattr(self, "_tok", None), (self.N,), np.int32)
        self._gate = grow(getattr(self, "_gate", None), (self.N, 2), self.dtype)
        self._cap = cap

    def append(self, key, mem_k, mem_v, sel_idx, sel_w, tokens=None, gates=None) -> None:
        m = len(key)
        if self.n + m > self._cap:
            self._alloc(max(2 * self._cap, self.n + m))
        s = slice(self.n, self.n + m)
        self._key[s], self._k[s], self._v[s] = key, mem_k, mem_v
        self._si[s], self._sw[s] = sel_idx, sel_w
        self._tok[s] = 0 if tokens is None else tokens
        self._gate[s] = 0 if gates is None else gates
        self.n += m

    def tokens(self, idx):
        return self._tok[idx]

    def word_gates(self, idx):
        return self._gate[idx]

    def set_selection(self, rows: np.ndarray, sel_idx, sel_w) -> None:
        self._si[rows], self._sw[rows] = sel_idx, sel_w

    def keys(self) -> np.ndarray:
        return self._key[: self.n]

    def gather(self, idx):
        return self._k[idx], self._v[idx]

    def gather_keys(self, idx):
        return self._k[idx]

    def selections(self):
        return self._si[: self.n], self._sw[: self.n]

    def truncate(self, n: int) -> None:
        self.n = min(self.n, n)


class MemmapChunkMemory(ChunkMemory):
    """Disk tier: directory with key.f32, k.bin, v.bin, sel_idx.i32, sel_w.f32, tok.i32, gates.bin and meta.json.

    gates.bin came later still (config lexical_gates): a directory without it gets it, zero (what a
    model without the option stores); a state of a model with the option always has it, since
    that model's fingerprint is new.

    tok.i32 came later: a state committed before it (no tok.i32, or a first chunk whose ids start
    with 0, the pad id that no document token has: the ids it lacked were padded) is refused with
    StateTooOld rather than read with pad ids in place of its tokens; the ingest pipeline then
    prefills the document again from its stored token ids."""

    BLOCK = 1024  # chunks added per file growth

    def __init__(self, directory: str | os.PathLike, D: int, N: int, G: int, k: int, dtype=np.float16):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.D, self.N, self.G, self.k = D, N, G, k
        self.dtype = np.dtype(dtype)
        (self.dir / "meta.json.tmp").unlink(missing_ok=True)  # a commit killed before its rename
        meta = self.read_meta(self.dir)
        if meta is not None:
            shape = (meta["D"], meta["N"], meta["G"], meta["k"], meta["dtype"])
            if shape != (D, N, G, k, self.dtype.name):
                raise ValueError(f"chunk memory at {self.dir} has shape {shape}, "
                                 f"expected {(D, N, G, k, self.dtype.name)}")
            if not self._has_token_ids(int(meta["n"])):
                from .errors import StateTooOld

                raise StateTooOld(f"the prefilled state in {self.dir} was saved before the chunks' token ids "
                                  "were stored: prefill the document again (drt-reader ingest on its file)")
        self.n = int(meta["n"]) if meta else 0
        self.meta = meta or {}
        self._cap = 0
        self._open(max(self.BLOCK, -(-self.n // self.BLOCK) * self.BLOCK))
        self._key_ram = np.array(self._key[: self.n], dtype=np.float32)

    def _has_token_ids(self, n: int) -> bool:
        """Whether a committed directory holds its chunks' token ids (see the class docstring)."""
        p = self.dir / "tok.i32"
        if not p.exists():
            return False
        if n == 0:
            return True
        first = np.fromfile(p, dtype=np.int32, count=1)
        return len(first) == 1 and int(first[0]) != 0

    # files -------------------------------------------------------------------------------------
    def _spec(self):
        return [("key.f32", (self.D,), np.float32), ("k.bin", (self.N, self.D), self.dtype),
                ("v.bin", (self.N, self.D), self.dtype), ("sel_idx.i32", (self.G, self.k), np.int32),
                ("sel_w.f32", (self.G, self.k), np.float32), ("tok.i32", (self.N,), np.int32),
                ("gates.bin", (self.N, 2), self.dtype)]

    def _open(self, cap: int) -> None:
        maps = []
        for name, shape, dt in self._spec():
            path = self.dir / name
            nbytes = cap * int(np.prod(shape)) * np.dtype(dt).itemsize
            with open(path, "ab") as f:
                if f.tell() < nbytes:
                    f.truncate(nbytes)  # sparse: append() reserves its rows (_allocate)
            maps.append(np.memmap(path, dtype=dt, mode="r+", shape=(cap, *shape)))
        self._key, self._k, self._v, self._si, self._sw, self._tok, self._gate = maps
        self._cap = cap

    @staticmethod
    def read_meta(directory: Path) -> dict | None:
        p = Path(directory) / "meta.json"
        if not p.exists():
            return None
        return json.loads(p.read_text())

    # interface ---------------------------------------------------------------------------------
    def append(self, key, mem_k, mem_v, sel_idx, sel_w, tokens=None, gates=None) -> None:
        m = len(key)
        if self.n + m > self._cap:
            self.flush()
            self._open(-(-(self.n + m) // self.BLOCK) * self.BLOCK + self.BLOCK)
        for name, shape, dt in self._spec():  # real blocks before the mapping is written (SIGBUS)
            row = int(np.prod(shape)) * np.dtype(dt).itemsize
            _allocate(self.dir / name, self.n * row, m * row)
        s = slice(self.n, self.n + m)
        self._key[s], self._k[s] = key, mem_k.astype(self.dtype, copy=False)
        self._v[s] = mem_v.astype(self.dtype, copy=False)
        self._si[s], self._sw[s] = sel_idx, sel_w
        self._tok[s] = 0 if tokens is None else tokens
        self._gate[s] = 0 if gates is None else gates.astype(self.dtype, copy=False)
        if self.n + m > len(self._key_ram):  # grow by doubling: appends stay O(1) amortised
            grown = np.empty((max(2 * len(self._key_ram), self.n + m), self.D), np.float32)
            grown[: self.n] = self._key_ram[: self.n]
            self._key_ram = grown
        self._key_ram[self.n: self.n + m] = key
        self.n += m

    def set_selection(self, rows: np.ndarray, sel_idx, sel_w) -> None:
        self._si[rows], self._sw[rows] = sel_idx, sel_w

    def keys(self) -> np.ndarray:
        return self._key_ram[: self.n]

    def gather(self, idx):
        """Read the selected rows with pread: nothing gets mapped into the process, so resident
        memory does not grow with the document (Linux's page cache is unified, so rows written
        through the mapping and not yet flushed are read back as written)."""
        k_fd, v_fd = self._fds()
        return self._pread(k_fd, idx), self._pread(v_fd, idx)

    def gather_keys(self, idx):
        return self._pread(self._fds()[0], idx)

    def _pread(self, fd: int, idx) -> np.ndarray:
        idx = np.asarray(idx)
        flat = idx.reshape(-1).tolist()
        row = self.N * self.D * self.dtype.itemsize
        a = np.empty((len(flat), self.N, self.D), self.dtype)
        for j, c in enumerate(flat):
            if os.preadv(fd, [a[j]], int(c) * row) != row:
                raise IOError(f"short read of chunk {c} in {self.dir}")
        return a.reshape(*idx.shape, self.N, self.D)

    def tokens(self, idx):
        return np.asarray(self._tok[np.asarray(idx)])

    def word_gates(self, idx):
        return np.asarray(self._gate[np.asarray(idx)])

    def _fds(self) -> tuple[int, int]:
        if getattr(self, "_kv_fds", None) is None:
            self._kv_fds = (os.open(self.dir / "k.bin", os.O_RDONLY), os.open(self.dir / "v.bin", os.O_RDONLY))
        return self._kv_fds

    def close(self) -> None:
        for fd in getattr(self, "_kv_fds", None) or ():
            os.close(fd)
        self._kv_fds = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def selections(self):
        return np.asarray(self._si[: self.n]), np.asarray(self._sw[: self.n])

    def truncate(self, n: int) -> None:
        self.n = min(self.n, n)

    def flush(self) -> None:
        for m in (self._key, self._k, self._v, self._si, self._sw, self._tok, self._gate):
            m.flush()

    def commit(self, extra: dict | None = None) -> None:
        """Make the first `n` rows durable: flush + fsync the data files, then atomically
        replace meta.json (the commit record)."""
        self.flush()
        for name, _, _ in self._spec():
            fd = os.open(self.dir / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        meta = dict(self.meta)
        meta.update(extra or {})
        meta.update(format=FORMAT_VERSION, n=self.n, D=self.D, N=self.N, G=self.G, k=self.k, dtype=self.dtype.name)
        atomic_write_bytes(self.dir / "meta.json", json.dumps(meta, indent=1).encode())
        self.meta = meta
        # drop the written pages from this process's mapping (they stay in the file and the page
        # cache): without it, resident memory grows with every chunk appended
        for m in (self._key, self._k, self._v, self._si, self._sw, self._tok, self._gate):
            m._mmap.madvise(mmap.MADV_DONTNEED)

    def disk_bytes(self) -> int:
        return sum((self.dir / n).stat().st_size for n, _, _ in self._spec())


def _allocate(path: Path, offset: int, nbytes: int) -> None:
    """Give bytes [offset, offset + nbytes) of `path` real disk blocks (posix_fallocate).

    The memmaps are sparse files; a write through the mapping into a hole on a full disk kills
    the process with SIGBUS. Reserving the rows' blocks first turns a full disk into an OSError
    (ENOSPC) here instead. Filesystems without fallocate keep the old (sparse) behaviour."""
    if not hasattr(os, "posix_fallocate"):  # pragma: no cover - macOS
        return
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, offset, nbytes)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Call `write(f)` on a temporary file, fsync it, rename it over `path`, fsync the directory:
    a crash leaves either the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))
