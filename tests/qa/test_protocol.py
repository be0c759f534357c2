"""The engine that ingest/ and qa/ ask through `DocumentEngine` (drt_core/protocol.py): the real
Engine and the tests' FakeEngine both provide it, states included, so the QA tests that run on the
fake exercise the surface the real engine serves."""

import numpy as np

from drt_core.protocol import DocumentEngine, DocumentState
from tests.drt_core.test_engine import make_model
from tests.ingest.fake_engine import FakeEngine


def test_the_engine_and_its_states_follow_the_protocol(tmp_path):
    from drt_core.engine import Engine

    eng = Engine(make_model(), memory_dtype=np.float32)
    assert isinstance(eng, DocumentEngine) and eng.model_dir is None
    assert isinstance(eng.open_state(tmp_path / "s"), DocumentState)


def test_the_fake_engine_follows_it_too(tmp_path, test_tokenizer):
    eng = FakeEngine(tokenizer=test_tokenizer)
    assert isinstance(eng, DocumentEngine) and eng.bm25_index(None) is None
    assert isinstance(eng.open_state(tmp_path / "s"), DocumentState)


def test_a_partial_engine_does_not(tmp_path):
    class NoEvidence:
        fingerprint, tokenizer, model_dir = "x", None, None

        def open_state(self, directory): ...

        def prefill(self, state, ids, **kw): ...

        def generate(self, state, question=None, **kw): ...

    assert not isinstance(NoEvidence(), DocumentEngine)
