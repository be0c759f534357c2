"""What the document pipeline (ingest/) and the question answering (qa/) need of an engine, as types:
`DocumentEngine` and the `DocumentState` it keeps per document. drt_core.engine.Engine implements
them; the tests' FakeEngine (tests/ingest/fake_engine.py) is a second implementation, fast and
deterministic, that the pipeline and QA tests run on. Both are checked against these protocols
(tests/qa/test_protocol.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence, runtime_checkable


@runtime_checkable
class DocumentState(Protocol):
    """A document's prefilled state: its tokens so far, its chunks, what each chunk retrieved."""

    @property
    def n_tokens(self) -> int: ...

    @property
    def n_chunks(self) -> int: ...

    def dependency_map(self) -> list[dict]: ...


@runtime_checkable
class DocumentEngine(Protocol):
    """The model behind the library: reads documents into states, generates, retrieves, and says
    what each retrieved chunk did to an answer."""

    fingerprint: str  # the model and tokenizer (and what the states depend on): stored states are keyed by it
    tokenizer: Any  # a `transformers` / `tokenizers` tokenizer, or None
    model_dir: Path | None  # the checkpoint folder (its answer reader, common words), None for a model in memory

    def open_state(self, directory: str | Path) -> DocumentState: ...

    def prefill(self, state: Any, ids: Sequence[int], **kw: Any) -> Iterator[Any]:
        """Feed a document's token ids, yielding progress; checkpoints as it goes."""
        ...

    def generate(self, state: Any, question: str | None = None, **kw: Any) -> Iterator[Any]:
        """Stream an answer (or a summary) on a fork of the state: events with text deltas, the
        last one done, with the answer, its token ids and the retrieval trace."""
        ...

    def evidence(self, state: Any, trace: Any, n_doc_chunks: int | None = None) -> list[tuple[int, float]]:
        """The document chunks a generation retrieved, heaviest first: (chunk, weight)."""
        ...

    def bm25_index(self, state: Any) -> Any:
        """The document's BM25 index (drt_core.bm25.BM25), or None for an engine without one."""
        ...

    def causal_effects(self, state: Any, question: str | None, answer_ids: Sequence[int],
                       chunks: Iterable[int], **kw: Any) -> dict[int, float]:
        """Each chunk's effect on the answer's log-likelihood when it alone is barred, in nats."""
        ...
