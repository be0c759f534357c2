"""sqlite-utils, imported without pandas: what library.py and migrations.py import it through.

sqlite-utils imports pandas whenever it is installed (gradio brings it in), only to map
`pandas.Timestamp` to TEXT, a type the library never stores; that import was most of the start-up
of `drt-reader list` (0.1-0.3 s: docs/cli.md#start-up). So pandas is hidden while sqlite-utils
loads, unless it is loaded already (the web UI: then nothing changes), and it stays importable
afterwards. numpy is not hidden: sqlite-utils maps numpy's scalar types to columns.
"""

from __future__ import annotations

import sys


def _import_without_pandas() -> None:
    if "sqlite_utils.db" in sys.modules or "pandas" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # `import pandas` -> ImportError, which sqlite-utils catches
    try:
        import sqlite_utils.db  # noqa: F401
    finally:
        if "pandas" in sys.modules and sys.modules["pandas"] is None:
            del sys.modules["pandas"]


_import_without_pandas()

from sqlite_utils import Database  # noqa: E402
from sqlite_utils.migrations import Migrations  # noqa: E402

__all__ = ["Database", "Migrations"]
