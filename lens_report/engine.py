"""Which engine and reader the report runs on: DuckDB (required), and the compiled reader when it is built."""

from __future__ import annotations

from typing import Any

__all__ = ["ENGINE_HINT", "MissingEngine", "compiled_reader", "compiled_rows_writer", "require_duckdb"]

ENGINE_HINT = "pip install 'lens-telemetry[report]'"
"""How to install what ``lens report`` needs (DuckDB, and zstandard for damaged ``.zst`` files)."""


class MissingEngine(ImportError):
    """DuckDB (the report's engine) is not installed; the message says how to install it."""


def require_duckdb() -> Any:
    """The ``duckdb`` module, or :class:`MissingEngine` naming the extra to install."""
    try:
        import duckdb
    except ImportError as exc:
        raise MissingEngine(f"DuckDB, the engine lens report runs on, is not installed: {ENGINE_HINT}") from exc
    return duckdb


def compiled_reader(detail: bool = False) -> Any | None:
    """The reader of plain trace files: the compiled one (``lens_report._scan``), or None for DuckDB's
    own (the SQL reader, which reads every file the compiled one leaves: compressed, damaged, hostile).

    This is the one place the choice is made. None when it is not built, under
    ``LENS_PURE_PYTHON=1``, or for a store with ``detail`` (``--perfetto``: the attributes, events
    and links only the SQL reader keeps). The SQL reader alone gives the same rows for ~2.2-2.4x the
    report's CPU at 1M and 3M spans (docs/performance-reader.md)."""
    from lens_core.config import pure_python_requested

    if detail or pure_python_requested():
        return None
    try:
        from . import _scan
    except ImportError:
        return None
    return _scan


def compiled_rows_writer() -> Any | None:
    """The compiled writer of the JSON report's (rank, step) rows (``lens_report._scan.seconds_rows``), or None
    (not built, or ``LENS_PURE_PYTHON=1``) for ``json.dumps``, which writes the same text: 1.2 s of a 10M-span
    report's 3.4 s went to ``json`` writing those 500,000 rows' 3M floats; the compiled writer takes 0.2 s."""
    from lens_core.config import pure_python_requested

    if pure_python_requested():
        return None
    try:
        from ._scan import seconds_rows
    except ImportError:
        return None
    return seconds_rows


def _input_errors() -> tuple[type[BaseException], ...]:
    """DuckDB's errors about the data it reads (not about the SQL, which are bugs and propagate)."""
    duckdb = require_duckdb()
    # out of memory too: a line long enough to need more than --memory-limit is the input's doing
    return (duckdb.IOException, duckdb.InvalidInputException, duckdb.ConversionException,
            duckdb.OutOfRangeException, duckdb.OutOfMemoryException)
