"""The engine serves a DRT checkpoint without transformers (drt_core/runtime.py, config.RunConfig,
tokenizer.EngineTokenizer): the same weights, numbers, fingerprints and token ids as
DRTForCausalLM.from_pretrained and PreTrainedTokenizerFast, and a new process that loads the
engine imports no transformers (the seconds `drt-reader ask` spent before any work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from drt_core import runtime, state_io, state_migration
from drt_core.config import RunConfig
from drt_core.modeling import DRTForCausalLM

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "checkpoints"
DRT_CHECKPOINTS = sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").exists()
                         and json.loads((p / "config.json").read_text())["arch"] == "drt")


def test_every_drt_checkpoint_is_found():
    assert {"drt-tiny", "drt-tiny-2hop", "drt-tiny-pretrained"} <= set(DRT_CHECKPOINTS)


@pytest.mark.parametrize("name", DRT_CHECKPOINTS)
def test_runtime_equals_the_transformers_model(name):
    """Same state dict (names and values), the head tied, and the same logits and selections."""
    folder = CHECKPOINTS / name
    hf = DRTForCausalLM.from_pretrained(str(folder)).eval()
    rt = runtime.load(folder)
    assert isinstance(rt, runtime.DRTRuntime) and not rt.training
    a, b = hf.state_dict(), rt.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert rt.lm_head.weight.data_ptr() == rt.embed.weight.data_ptr()
    ids = torch.randint(3, rt.config.vocab_size, (2, 5 * 63 + 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        oh, orr = hf(ids, output_retrieval=True), rt(ids, output_retrieval=True)
    torch.testing.assert_close(orr.logits, oh.logits, rtol=0, atol=0)
    for gh, gr in zip(oh.retrieval, orr.retrieval):
        assert torch.equal(gh["idx"], gr["idx"]) and torch.equal(gh["weights"], gr["weights"])


@pytest.mark.parametrize("name", DRT_CHECKPOINTS)
def test_run_config_gives_the_fingerprints_of_drtconfig(name):
    """Stored states are keyed by a fingerprint over the config as the states depend on it: read
    without transformers, the config gives the same state_config, both engine versions' fingerprints,
    and every field and derived size."""
    from drt_core.config import FIELDS
    from drt_core.hf_config import DRTConfig

    folder = CHECKPOINTS / name
    hf, rc = DRTConfig.from_pretrained(str(folder)), RunConfig.from_json(folder / "config.json")
    assert state_io.state_config(rc) == state_io.state_config(hf)
    assert state_migration.state_config_v1(rc) == state_migration.state_config_v1(hf)
    for dtype in (np.float16, np.float32):
        assert state_io.checkpoint_fingerprint(folder, rc, dtype) == state_io.checkpoint_fingerprint(folder, hf, dtype)
    for k in (*FIELDS, "tie_word_embeddings", "head_dim", "chunk_tokens", "num_groups", "preamble_len",
              "uses_chunks", "inserts_landmarks"):
        assert getattr(rc, k) == getattr(hf, k), k
    assert rc.extensions_on() == hf.extensions_on()


def test_run_config_refuses_what_drtconfig_refuses():
    with pytest.raises(ValueError, match="divisible"):
        RunConfig(hidden_size=100, num_heads=3)
    with pytest.raises(ValueError, match="retired"):
        RunConfig(smear_keys=True)
    assert not hasattr(RunConfig(smear_keys=False), "smear_keys")  # retired at its "off" value: dropped


def test_a_baseline_checkpoint_is_left_to_transformers(tmp_path):
    assert runtime.load(CHECKPOINTS / "sliding-window-tiny") is None


def test_weights_that_do_not_fit_are_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "config.json").write_text((CHECKPOINTS / "drt-tiny" / "config.json").read_text())
    sd = load_file(str(CHECKPOINTS / "drt-tiny" / "model.safetensors"))
    sd.pop("norm.weight")
    save_file(sd, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="norm.weight"):
        runtime.load(folder)


def test_engine_tokenizer_gives_the_ids_and_texts_of_transformers():
    from drt_core.tokenizer import EngineTokenizer, load_tokenizer

    hf, et = load_tokenizer(), EngineTokenizer()
    texts = ["Who is Mr. Knightley?", "  two  spaces\nand a line\u2014with a dash, caf\u00e9, \u65e5\u672c",
             "a special string <|endoftext|> and <|lmk|> inside", ""]
    for t in texts:
        for special in (False, True):
            assert et.encode(t, add_special_tokens=special) == hf.encode(t, add_special_tokens=special), t
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, len(hf), 40).tolist() for _ in range(5)] + [[0, 1, 2, 300, 1]]
    for s in seqs:
        for skip in (False, True):
            assert et.decode(s, skip_special_tokens=skip) == hf.decode(s, skip_special_tokens=skip)
    assert et.batch_decode(seqs, skip_special_tokens=True) == hf.batch_decode(seqs, skip_special_tokens=True)
    assert (et.pad_token_id, et.eos_token_id, len(et)) == (hf.pad_token_id, hf.eos_token_id, len(hf))
    from ingest.tokenize import tokenizer_fingerprint

    assert tokenizer_fingerprint(et) == tokenizer_fingerprint(hf)


def test_loading_the_engine_imports_no_transformers(tmp_path):
    """A new process builds the engine of the shipped model and generates without transformers in
    sys.modules (docs/cli.md#start-up: its import was most of `ask`'s start-up)."""
    code = """
import sys
from drt_core.engine import Engine
eng = Engine.from_pretrained("checkpoints/drt-tiny")
st = eng.new_state()
eng.prefill(st, eng.tokenizer.encode("Call me Ishmael. " * 40, add_special_tokens=False))
print(type(eng.model).__name__, sorted(m for m in sys.modules if m.split(".")[0] == "transformers"))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "DRTRuntime []"


def test_a_transformers_model_builds_from_an_engine_models_config():
    """`DRTForCausalLM(engine.model.config)` (a RunConfig) builds the same architecture as before."""
    from drt_core.engine import Engine
    from drt_core.hf_config import DRTConfig

    eng = Engine.from_pretrained(CHECKPOINTS / "drt-tiny")
    m = DRTForCausalLM(eng.model.config)
    assert isinstance(m.config, DRTConfig) and state_io.state_config(m.config) == state_io.state_config(eng.cfg)
    assert list(m.state_dict()) == list(eng.model.state_dict())
