"""Fixtures of the reliability tests (docs/RESULTS.md §7): small inputs built in the tests."""

from __future__ import annotations

import pytest

from tests.ui.conftest import tiny_model  # noqa: F401  (a random `tiny` DRT saved like a checkpoint)


@pytest.fixture
def library(drt_home):
    from store.library import Library

    lib = Library(drt_home)
    yield lib
    lib.close()


def make_pdf(path, pages: list[str | None], **save_kw) -> None:
    """A PDF with one page per entry (None: a blank page), written with PyMuPDF."""
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        if text:
            page.insert_text((72, 72), text, fontsize=11)
    doc.save(str(path), **save_kw)
    doc.close()
