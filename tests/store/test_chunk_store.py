"""store.chunk_store on disk: a state saved before the chunks' token ids were stored (no tok.i32, or
a first chunk padded with the pad id 0) is refused with a clear one-line StateTooOld, never read on
with pad ids in place of its tokens (the ingest pipeline then prefills it again:
tests/ingest/test_pipeline.py::test_a_state_saved_before_token_ids_is_prefilled_again)."""

from __future__ import annotations

import numpy as np
import pytest

from cli_io import UserError
from store.chunk_store import MemmapChunkMemory
from store.errors import StateTooOld

D, N, G, K = 8, 5, 1, 2


def written(d, n: int, tokens=None) -> np.ndarray:
    """A committed memory of n chunks in d; its token ids (3.. as a document's, never the pad id 0)."""
    rng = np.random.default_rng(n)
    toks = rng.integers(3, 50, (n, N)).astype(np.int32) if tokens is None else tokens
    mem = MemmapChunkMemory(d, D, N, G, K, np.float32)
    mem.append(rng.normal(size=(n, D)).astype(np.float32), rng.normal(size=(n, N, D)).astype(np.float32),
               rng.normal(size=(n, N, D)).astype(np.float32), np.zeros((n, G, K), np.int32),
               np.zeros((n, G, K), np.float32), toks)
    mem.commit({"n_tokens": n * N})
    mem.close()
    return toks


def test_a_committed_memory_reopens_with_its_token_ids(tmp_path):
    toks = written(tmp_path / "s", 3)
    mem = MemmapChunkMemory(tmp_path / "s", D, N, G, K, np.float32)
    assert mem.n == 3 and np.array_equal(mem.tokens(np.arange(3)), toks)
    assert MemmapChunkMemory(tmp_path / "new", D, N, G, K, np.float32).n == 0  # nothing committed yet


@pytest.mark.parametrize("n", [3, 0])
def test_a_state_saved_before_token_ids_is_refused(tmp_path, n):
    d = tmp_path / "s"
    written(d, n)
    (d / "tok.i32").unlink()  # as every state committed before tok.i32 existed
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(StateTooOld, match="saved before the chunks' token ids were stored") as e:
        MemmapChunkMemory(d, D, N, G, K, np.float32)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value) and "ingest" in str(e.value)
    assert sorted(p.name for p in d.iterdir()) == before  # refusing it changes nothing on disk


def test_a_state_whose_first_chunk_was_padded_is_refused(tmp_path):
    # begun before token ids were stored and continued after: chunk 0's missing ids were padded (0)
    toks = np.random.default_rng(0).integers(3, 50, (3, N)).astype(np.int32)
    toks[0, :2] = 0
    written(tmp_path / "s", 3, toks)
    with pytest.raises(StateTooOld):
        MemmapChunkMemory(tmp_path / "s", D, N, G, K, np.float32)
