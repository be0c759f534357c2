"""Rows 12-15 of the reliability plan: a tokenizer that silently truncates, malicious and corrupt
checkpoints, states of another model. tests/ingest/test_tokenize.py covers the ingest encoder and
tests/drt_core/test_engine.py::test_states_of_another_model_are_refused the engine-level refusal."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
import torch

from cli_io import UserError
from drt_core.errors import CorruptCheckpoint, ModelNotFound
from ingest.errors import EngineUnavailable


def test_truncation_block_in_tokenizer_json_is_ignored(tmp_path, tiny_model):
    """Row 12. Regression: drt_core.tokenizer.backend restored tokenizer.json's truncation (and
    padding): every document encoded through it was cut to max_length tokens without a word."""
    from drt_core import tokenizer as T

    d = tmp_path / "tok"
    d.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(tiny_model / name, d / name)
    spec = json.loads((d / "tokenizer.json").read_text())
    spec["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    spec["padding"] = {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": None,
                       "pad_id": 0, "pad_type_id": 0, "pad_token": "<pad>"}  # fmt: skip
    (d / "tokenizer.json").write_text(json.dumps(spec))
    text = "word " * 100
    expected = T.encode(text, tiny_model)
    assert len(expected) > 16
    assert T.encode(text, d) == expected
    ids, offsets = T.encode_with_offsets(text, d)
    assert ids == expected and offsets[-1][1] == len(text)
    assert T.load_tokenizer(d).encode(text, add_special_tokens=False) == expected  # prompts


@pytest.fixture
def model_dir(tmp_path, tiny_model):
    d = tmp_path / "model"
    shutil.copytree(tiny_model, d)
    return d


def _load(d):
    from ingest import pipeline

    pipeline.load_engine.cache_clear()
    try:
        return pipeline.load_engine(str(d))
    finally:
        pipeline.load_engine.cache_clear()


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt"])
def test_pickled_checkpoint_is_never_unpickled(model_dir, tmp_path, name):
    """Row 13: a pickle whose __reduce__ runs a command, in place of the weights or beside them."""
    marker = tmp_path / "PWNED"
    torch.save({"w": _Evil(marker)}, model_dir / name)
    assert _load(model_dir).fingerprint  # beside model.safetensors: ignored, the safetensors load
    (model_dir / "model.safetensors").unlink()
    with pytest.raises(ModelNotFound, match="expected config.json and model.safetensors") as e:
        _load(model_dir)  # instead of it: refused, not unpickled
    assert "\n" not in str(e.value)
    assert not marker.exists()


def _corrupt(path, how):
    b = path.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    if how == "huge-header-length":
        return struct.pack("<Q", 10**12) + b[8:]
    if how == "truncated":
        return b[: len(b) // 2]
    if how == "bad-offsets":
        h = json.loads(b[8 : 8 + n])
        k = next(k for k in h if k != "__metadata__")
        h[k]["data_offsets"] = [0, 10**9]
        hb = json.dumps(h).encode()
        hb += b" " * (-len(hb) % 8)
        return struct.pack("<Q", len(hb)) + hb + b[8 + n :]
    if how == "garbage":
        return os.urandom(4096)
    return b""


@pytest.mark.parametrize("how", ["huge-header-length", "truncated", "bad-offsets", "garbage", "empty"])
def test_corrupt_safetensors_is_a_one_line_error(model_dir, how):
    """Row 14. Regression: safetensors' SafetensorError reached the user as a traceback."""
    p = model_dir / "model.safetensors"
    p.write_bytes(_corrupt(p, how))
    with pytest.raises((CorruptCheckpoint, EngineUnavailable)) as e:
        _load(model_dir)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)
    assert "model.safetensors" in str(e.value) or "cannot load" in str(e.value)


def test_store_of_one_model_opened_with_another(tmp_path, tiny_model, library):
    """Row 15 at the pipeline: a document prefilled by model A, then served with model B (other
    weights). B's states go to their own directory; B is told to prefill; A's states stay intact."""
    from drt_core.engine import Engine
    from ingest.errors import NotPrefilled
    from ingest.pipeline import ingest, ready_state

    a = Engine.from_pretrained(tiny_model)
    other = tmp_path / "model-b"
    shutil.copytree(tiny_model, other)
    from drt_core.modeling import DRTForCausalLM

    torch.manual_seed(1)
    DRTForCausalLM(a.model.config).save_pretrained(other)
    b = Engine.from_pretrained(other)
    assert a.fingerprint != b.fingerprint
    src = tmp_path / "doc.txt"
    src.write_text("A short document about drift between two models. " * 40)
    res = ingest(src, library=library, engine=a)
    state_a = ready_state(library, a, res.doc_id)
    meta = (state_a.directory / "meta.json").read_bytes()
    with pytest.raises(NotPrefilled, match="not prefilled by this model"):
        ready_state(library, b, res.doc_id)
    res_b = ingest(src, library=library, engine=b)  # prefilled again, beside A's
    assert res_b.status == "done" and ready_state(library, b, res.doc_id).directory != state_a.directory
    assert (state_a.directory / "meta.json").read_bytes() == meta
    from drt_core.errors import CheckpointMismatch

    with pytest.raises(CheckpointMismatch):  # never mixed, even when pointed at A's directory
        b.open_state(state_a.directory)
