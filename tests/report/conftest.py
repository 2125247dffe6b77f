"""Fixtures of the report tests (the helpers live in report_helpers, a name no other test directory uses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from report_helpers import Otlp, two_step_spans


@pytest.fixture
def otlp() -> type[Otlp]:
    """The OTLP-JSON builder."""
    return Otlp


@pytest.fixture
def two_step_file(tmp_path: Path) -> Path:
    """A trace file holding the two-step trace of :func:`report_helpers.two_step_spans`."""
    return Otlp.write(tmp_path / "trace.jsonl", Otlp.request(two_step_spans(), service_name="trainer", process_pid=42))


@pytest.fixture(params=["sql", "compiled"])
def reader(request, monkeypatch) -> str:
    """Each of the store's readers in turn: ``sql`` (DuckDB's JSON reader, what ``LENS_PURE_PYTHON=1``
    and an install without a compiler get) and ``compiled`` (lens_report._scan; skipped when not
    built, a failure under LENS_REQUIRE_CYTHON=1)."""
    if request.param == "sql":
        monkeypatch.setenv("LENS_PURE_PYTHON", "1")
    else:
        _use_compiled(monkeypatch)
    return request.param


@pytest.fixture
def need_compiled(monkeypatch) -> None:
    """The compiled reader (where it is compared with the SQL reader): skipped when not built,
    a failure under LENS_REQUIRE_CYTHON=1."""
    _use_compiled(monkeypatch)


def _use_compiled(monkeypatch) -> None:
    from lens_report.engine import compiled_reader

    monkeypatch.delenv("LENS_PURE_PYTHON", raising=False)
    if compiled_reader() is None:
        if os.environ.get("LENS_REQUIRE_CYTHON") == "1":
            pytest.fail("LENS_REQUIRE_CYTHON=1 but lens_report._scan did not load")
        pytest.skip("lens_report._scan is not built")


@pytest.fixture
def sql_reader(monkeypatch) -> None:
    """The SQL reader only: for tests of what it does with memory, pieces and batches."""
    monkeypatch.setenv("LENS_PURE_PYTHON", "1")
