"""Fixtures for store tests: a Library in the test's DRT_HOME."""

from __future__ import annotations

import pytest


@pytest.fixture
def library(drt_home):
    from store.library import Library

    lib = Library(drt_home)
    yield lib
    lib.close()
