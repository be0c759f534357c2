"""The ingest fixtures (a library, a fake engine, the CLI) serve the question-answering tests too."""

from tests.ingest.conftest import cli, fake_engine, library, test_tokenizer  # noqa: F401
