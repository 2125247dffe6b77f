"""The ``lens report`` engine: goodput rollup, invariant checks and waterfall from OTLP-JSON trace files."""

from .model import (
    BUCKET_ATTR,
    BUCKETS,
    DEFAULT_STEP_PATTERN,
    ITERATION_ATTR,
    BucketTotals,
    Problem,
    Report,
    Span,
    StepRow,
    TopSpan,
    Violation,
)
from .reader import ReadResult, find_trace_files, read_spans
from .render_html import render_html
from .render_text import render_text
from .rollup import (
    DEFAULT_TOP_N,
    RULE_BAD_TIMING,
    RULE_NESTED_BUCKET,
    RULE_RUN_OVERFLOW,
    RULE_STEP_OVERFLOW,
    RULE_UNKNOWN_BUCKET,
    build_report,
)
from .tree import SpanTree

__all__ = [
    "BUCKETS",
    "BUCKET_ATTR",
    "BucketTotals",
    "DEFAULT_STEP_PATTERN",
    "DEFAULT_TOP_N",
    "ITERATION_ATTR",
    "Problem",
    "RULE_BAD_TIMING",
    "RULE_NESTED_BUCKET",
    "RULE_RUN_OVERFLOW",
    "RULE_STEP_OVERFLOW",
    "RULE_UNKNOWN_BUCKET",
    "ReadResult",
    "Report",
    "Span",
    "SpanTree",
    "StepRow",
    "TopSpan",
    "Violation",
    "build_report",
    "find_trace_files",
    "read_spans",
    "render_html",
    "render_text",
]
