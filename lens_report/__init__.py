"""The ``lens report`` engine: per-rank goodput, stragglers, invariant checks and views over OTLP-JSON trace files."""

from .discovery import TRACE_FILE_SUFFIXES, find_trace_files
from .engine import ENGINE_HINT, MissingEngine, require_duckdb
from .store import ReadResult, TraceStore, read_spans
from .model import (
    BUCKET_ATTR,
    AttemptInfo,
    BUCKETS,
    DEFAULT_STEP_PATTERN,
    ITERATION_ATTR,
    BucketTotals,
    LossRow,
    Problem,
    RankRow,
    RankSteps,
    Report,
    RunInfo,
    Span,
    StepRow,
    TopSpan,
    UnfinishedProcess,
    Violation,
)
from .rollup import (
    DEFAULT_MAX_VIOLATIONS,
    AttemptChoiceError,
    DEFAULT_TOP_N,
    RULE_BAD_TIMING,
    RULE_BUCKETED_OVERLAP,
    RULE_BUCKETED_UMBRELLA,
    RULE_NESTED_BUCKET,
    RULE_PARENT_CYCLE,
    RULE_RANK_OVERFLOW,
    RULE_STEP_OVERFLOW,
    RULE_TIMER_ONLY,
    RULE_UNKNOWN_BUCKET,
    RULES,
    RunChoiceError,
    build_report,
    list_attempts,
    list_runs,
)
from .rules import (
    RULE_EFFICIENCY_BUCKET,
    RULE_UMBRELLA_GROUP_BUCKET,
    RULE_UNCATALOGUED_BUCKET,
    RULE_VALIDATION_PRODUCTIVE,
)
from .render_html import render_html
from .render_text import render_text
from .perfetto import write_trace_events


def report_files(paths, **options) -> Report:
    """Read trace files and directories and build the report of their one run (``run=`` picks one of several).

    ``options`` go to :func:`build_report`. For HTML or Perfetto output, which read the spans
    again, use a :class:`TraceStore` and :func:`build_report` directly.
    """
    with TraceStore() as store:
        store.load(paths)
        return build_report(store, **options)

__all__ = [
    "AttemptChoiceError",
    "AttemptInfo",
    "BUCKETS",
    "BUCKET_ATTR",
    "BucketTotals",
    "DEFAULT_MAX_VIOLATIONS",
    "DEFAULT_STEP_PATTERN",
    "DEFAULT_TOP_N",
    "ENGINE_HINT",
    "ITERATION_ATTR",
    "LossRow",
    "MissingEngine",
    "Problem",
    "RULES",
    "RULE_BAD_TIMING",
    "RULE_BUCKETED_OVERLAP",
    "RULE_BUCKETED_UMBRELLA",
    "RULE_EFFICIENCY_BUCKET",
    "RULE_NESTED_BUCKET",
    "RULE_PARENT_CYCLE",
    "RULE_RANK_OVERFLOW",
    "RULE_STEP_OVERFLOW",
    "RULE_TIMER_ONLY",
    "RULE_UMBRELLA_GROUP_BUCKET",
    "RULE_UNCATALOGUED_BUCKET",
    "RULE_UNKNOWN_BUCKET",
    "RULE_VALIDATION_PRODUCTIVE",
    "RankRow",
    "RankSteps",
    "ReadResult",
    "Report",
    "RunChoiceError",
    "RunInfo",
    "Span",
    "StepRow",
    "TRACE_FILE_SUFFIXES",
    "TopSpan",
    "TraceStore",
    "UnfinishedProcess",
    "Violation",
    "build_report",
    "find_trace_files",
    "list_attempts",
    "list_runs",
    "read_spans",
    "render_html",
    "render_text",
    "report_files",
    "require_duckdb",
    "write_trace_events",
]
