"""The ``lens report`` engine: per-rank goodput, stragglers, invariant checks and views over OTLP-JSON trace files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from .cli import main
from .model import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_STEP_PATTERN,
    AttemptInfo,
    BucketTotals,
    LossRow,
    Problem,
    RankRow,
    RankSteps,
    Report,
    ReportPath,
    Rule,
    RunInfo,
    Span,
    StepRow,
    TopSpan,
    UnfinishedProcess,
    Violation,
)
from .perfetto import write_trace_events
from .render_html import render_html
from .render_text import render_text
from .rollup import DEFAULT_MAX_VIOLATIONS, DEFAULT_TOP_N, AttemptChoiceError, RunChoiceError, build_report
from .store import ReadResult, Store, TraceStore, read_spans

__all__ = [
    "AttemptChoiceError",
    "AttemptInfo",
    "BucketTotals",
    "LossRow",
    "Problem",
    "RankRow",
    "RankSteps",
    "ReadResult",
    "Report",
    "ReportPath",
    "Rule",
    "RunChoiceError",
    "RunInfo",
    "Span",
    "StepRow",
    "Store",
    "TopSpan",
    "TraceStore",
    "UnfinishedProcess",
    "Violation",
    "build_report",
    "main",
    "read_spans",
    "render_html",
    "render_text",
    "report",
    "write_trace_events",
]


def report(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *, run: str | None = None,
           attempt: int | None = None, step_pattern: str | re.Pattern[str] = DEFAULT_STEP_PATTERN,
           top_n: int = DEFAULT_TOP_N, max_violations: int = DEFAULT_MAX_VIOLATIONS,
           memory_limit: str = DEFAULT_MEMORY_LIMIT) -> Report:
    """The report of the one run in trace files: ``paths`` is a file or directory, or several.

    ``run`` and ``attempt`` pick one where the files hold several (else :class:`RunChoiceError`
    or :class:`AttemptChoiceError` lists them); the other options are :func:`build_report`'s
    and ``lens report``'s. For the HTML page or a Perfetto trace, which read the spans again,
    open a :class:`TraceStore`, ``load`` the files and call :func:`build_report` on it.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    with TraceStore(memory_limit=memory_limit) as store:
        store.load(paths)
        return build_report(store, run=run, attempt=attempt, step_pattern=step_pattern, top_n=top_n,
                            max_violations=max_violations)
