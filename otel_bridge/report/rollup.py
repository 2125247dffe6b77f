"""Goodput rollup: bucket seconds per step and for the run, top spans, and the invariant checks."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from .model import (
    BUCKETS,
    DEFAULT_STEP_PATTERN,
    NS_PER_S,
    BucketTotals,
    Report,
    Span,
    StepRow,
    TopSpan,
    Violation,
)
from .reader import ReadResult
from .tree import SpanTree

__all__ = [
    "DEFAULT_TOP_N",
    "RULE_BAD_TIMING",
    "RULE_NESTED_BUCKET",
    "RULE_RUN_OVERFLOW",
    "RULE_STEP_OVERFLOW",
    "RULE_UNKNOWN_BUCKET",
    "TOLERANCE_NS",
    "build_report",
]

DEFAULT_TOP_N = 10
"""How many span names the report lists by total time unless told otherwise."""

TOLERANCE_NS = 1_000
"""Slack (1 µs) allowed before bucket seconds exceeding a wall time count as a violation."""

RULE_NESTED_BUCKET = "nested-bucket"
"""Invariant (a): a bucketed span has a bucketed descendant, so one second would count twice."""

RULE_STEP_OVERFLOW = "step-overflow"
"""Invariant (b): the bucketed spans under a step sum to more than the step's wall time."""

RULE_BAD_TIMING = "bad-timing"
"""Invariant (c): a span has a missing timestamp or ends before it starts."""

RULE_UNKNOWN_BUCKET = "unknown-bucket"
"""Invariant (d): ``rl.bucket`` holds a value that is not one of the four buckets."""

RULE_RUN_OVERFLOW = "run-overflow"
"""The bucketed spans of the whole input sum past its wall time (overlapping bucketed work)."""


def build_report(
    read: ReadResult,
    *,
    step_pattern: str | re.Pattern[str] = DEFAULT_STEP_PATTERN,
    top_n: int = DEFAULT_TOP_N,
) -> Report:
    """Roll the spans of ``read`` up into steps, run totals and top spans, and check the invariants.

    A step is an unbucketed span carrying ``rl.iteration`` whose name matches ``step_pattern``
    (searched). In a trace with no such span, unbucketed spans sharing an ``rl.iteration``
    form the step instead (except those below a bucketed span, such as a deferred finalize). A step's buckets sum the bucketed spans below it, in any process.
    """
    pattern = re.compile(step_pattern)
    tree = SpanTree(read.spans)
    violations = _span_violations(read.spans) + _nested_bucket_violations(tree)
    steps = _steps(tree, pattern, violations)
    run = _run_totals(read.spans, violations)
    violations.sort(key=lambda v: (v.file, v.line, v.rule, v.span_id))
    return Report(
        files=read.files,
        span_count=len(read.spans),
        trace_count=len({span.trace_id for span in read.spans}),
        duplicate_count=read.duplicate_count,
        orphan_count=len(tree.orphans),
        error_count=sum(span.error for span in read.spans),
        step_pattern=pattern.pattern,
        steps=tuple(steps),
        run=run,
        top_spans=_top_spans(read.spans, top_n),
        violations=tuple(violations),
        problems=read.problems,
    )


def _violation(rule: str, span: Span, reason: str) -> Violation:
    return Violation(rule, span.trace_id, span.span_id, span.name, span.file, span.line, reason)


def _seconds(ns: int) -> str:
    return f"{ns / NS_PER_S:.6f} s"


def _span_violations(spans: Iterable[Span]) -> list[Violation]:
    violations = []
    for span in spans:
        if span.start_ns is None or span.end_ns is None:
            missing = " and ".join(
                what for what, value in (("start", span.start_ns), ("end", span.end_ns)) if value is None
            )
            violations.append(_violation(RULE_BAD_TIMING, span, f"missing {missing} timestamp"))
        elif span.end_ns < span.start_ns:
            reason = f"ends {_seconds(span.start_ns - span.end_ns)} before it starts"
            violations.append(_violation(RULE_BAD_TIMING, span, reason))
        if span.bucket is not None and span.bucket not in BUCKETS:
            reason = f"rl.bucket {span.bucket!r} is not one of {', '.join(BUCKETS)}"
            violations.append(_violation(RULE_UNKNOWN_BUCKET, span, reason))
    return violations


def _nested_bucket_violations(tree: SpanTree) -> list[Violation]:
    """Flag each bucketed span that has bucketed spans below it (it should be an umbrella)."""
    below: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for span in tree.spans.values():
        if span.bucket is None:
            continue
        nearest = next((a for a in tree.ancestors(span) if a.bucket is not None), None)
        if nearest is not None:
            below[nearest.key].append(span)
    violations = []
    for key, inner in below.items():
        outer, first = tree.spans[key], inner[0]
        reason = (
            f"bucketed ({outer.bucket}) span has {len(inner)} bucketed descendant(s), "
            f"e.g. {first.name!r} span={first.span_id} ({first.bucket})"
        )
        violations.append(_violation(RULE_NESTED_BUCKET, outer, reason))
    return violations


def _totals(wall_ns: int, spans: Iterable[Span]) -> BucketTotals:
    bucket_ns = dict.fromkeys(BUCKETS, 0)
    for span in spans:
        duration = span.duration_ns
        if span.bucket in bucket_ns and duration is not None:
            bucket_ns[span.bucket] += duration
    return BucketTotals(wall_ns, bucket_ns)


def _steps(tree: SpanTree, pattern: re.Pattern[str], violations: list[Violation]) -> list[StepRow]:
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in tree.spans.values():
        if span.bucket is None and span.iteration is not None:
            by_trace[span.trace_id].append(span)
    found: list[tuple[int, StepRow]] = []
    for candidates in by_trace.values():
        step_spans = [span for span in candidates if pattern.search(span.name)]
        if step_spans:
            for span in step_spans:
                if span.duration_ns is not None:
                    found.append((span.start_ns, _step(span, "pattern", span.duration_ns, [span], tree)))
            continue
        groups: dict[int, list[Span]] = defaultdict(list)
        for span in candidates:
            # A span below a bucketed span (a checkpoint's deferred finalize) is not step
            # work: it may outlive the step, and its time is already its ancestor's.
            if span.duration_ns is not None and not any(a.bucket is not None for a in tree.ancestors(span)):
                groups[span.iteration].append(span)
        for members in groups.values():
            anchor = min(members, key=lambda s: (s.start_ns, -s.end_ns))
            wall = max(s.end_ns for s in members) - anchor.start_ns
            found.append((anchor.start_ns, _step(anchor, "iteration", wall, members, tree)))
    found.sort(key=lambda item: (item[1].iteration, item[0], item[1].trace_id))
    steps = [step for _, step in found]
    for step in steps:
        if step.totals.attributed_ns > step.totals.wall_ns + TOLERANCE_NS:
            anchor = tree.spans[(step.trace_id, step.span_id)]
            reason = (
                f"buckets under step {step.iteration} sum to {_seconds(step.totals.attributed_ns)}, "
                f"more than its wall time {_seconds(step.totals.wall_ns)}"
            )
            violations.append(_violation(RULE_STEP_OVERFLOW, anchor, reason))
    return steps


def _step(anchor: Span, method: str, wall_ns: int, members: list[Span], tree: SpanTree) -> StepRow:
    below = {d.key: d for member in members for d in tree.descendants(member)}
    return StepRow(
        iteration=anchor.iteration,
        trace_id=anchor.trace_id,
        span_id=anchor.span_id,
        name=anchor.name,
        method=method,
        totals=_totals(wall_ns, below.values()),
    )


def _run_totals(spans: tuple[Span, ...], violations: list[Violation]) -> BucketTotals:
    timed = [span for span in spans if span.duration_ns is not None]
    wall = max(s.end_ns for s in timed) - min(s.start_ns for s in timed) if timed else 0
    totals = _totals(wall, timed)
    if totals.attributed_ns > wall + TOLERANCE_NS:
        reason = (
            f"buckets over all spans sum to {_seconds(totals.attributed_ns)}, more than the wall time "
            f"{_seconds(wall)}: bucketed spans overlap (concurrent processes or threads)"
        )
        violations.append(Violation(RULE_RUN_OVERFLOW, "-", "-", "(run)", "", 0, reason))
    return totals


def _top_spans(spans: tuple[Span, ...], top_n: int) -> tuple[TopSpan, ...]:
    count: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for span in spans:
        if span.duration_ns is not None:
            count[span.name] += 1
            total[span.name] += span.duration_ns
    ranked = sorted(total, key=lambda name: (-total[name], name))[:top_n]
    return tuple(TopSpan(name, count[name], total[name]) for name in ranked)
