"""Fixtures of the report tests (the helpers live in report_helpers, a name no other test directory uses)."""

from __future__ import annotations

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
