"""Data types of the report: spans as read, input problems, invariant violations, rollups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lens_core import semconv
from lens_core.registry import Bucket

__all__ = [
    "BUCKETS",
    "BUCKET_ATTR",
    "BucketTotals",
    "DEFAULT_STEP_PATTERN",
    "ITERATION_ATTR",
    "NS_PER_S",
    "Problem",
    "RESOURCE_KEYS",
    "Report",
    "Span",
    "StepRow",
    "TopSpan",
    "Violation",
]

BUCKET_ATTR = semconv.RL_BUCKET
"""Span attribute naming the goodput bucket of a leaf span; umbrellas omit it."""

ITERATION_ATTR = semconv.RL_ITERATION
"""Span attribute holding the 1-based training step index."""

BUCKETS = Bucket.ALL
"""The goodput buckets, in display order; any other value of ``rl.bucket`` is a violation."""

DEFAULT_STEP_PATTERN = r"(^|\.)step$"
"""Regex (searched) that names a step umbrella span, e.g. ``rl.grpo.step``."""

RESOURCE_KEYS = (semconv.SERVICE_NAME, semconv.SERVICE_INSTANCE_ID, semconv.PROCESS_PID,
                 semconv.HOST_NAME, semconv.NV_DL_RANK)
"""Resource attributes the reader keeps on every span."""

NS_PER_S = 1_000_000_000
"""Nanoseconds per second."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span as read from an OTLP-JSON file; times in Unix nanoseconds, ids in lower-case hex."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    error: bool
    events: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    file: str
    line: int

    @property
    def key(self) -> tuple[str, str]:
        """The identity of the span: ``(trace_id, span_id)``."""
        return (self.trace_id, self.span_id)

    @property
    def parent_key(self) -> tuple[str, str] | None:
        """The identity of the parent span, or ``None`` for a root."""
        return None if self.parent_span_id is None else (self.trace_id, self.parent_span_id)

    @property
    def bucket(self) -> Any:
        """The raw ``rl.bucket`` value, or ``None`` when the span is an umbrella (unbucketed)."""
        return self.attributes.get(BUCKET_ATTR)

    @property
    def iteration(self) -> int | None:
        """The ``rl.iteration`` value when it is an integer, else ``None``."""
        value = self.attributes.get(ITERATION_ATTR)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def duration_ns(self) -> int | None:
        """End minus start, or ``None`` when a timestamp is missing or the span ends before it starts."""
        if self.start_ns is None or self.end_ns is None or self.end_ns < self.start_ns:
            return None
        return self.end_ns - self.start_ns

    @property
    def process(self) -> str:
        """The process the span ran in: ``service.instance.id``, else pid and host, else the service."""
        instance = self.resource.get(semconv.SERVICE_INSTANCE_ID)
        if instance is not None:
            return str(instance)
        pid, host = self.resource.get(semconv.PROCESS_PID), self.resource.get(semconv.HOST_NAME)
        if pid is not None or host is not None:
            return f"pid {pid if pid is not None else '?'}@{host if host is not None else '?'}"
        return str(self.resource.get(semconv.SERVICE_NAME, "unknown process"))

    @property
    def thread(self) -> str:
        """The thread the span ran on: ``thread.id`` (with ``thread.name``), or ``""`` when not recorded."""
        thread_id = self.attributes.get(semconv.THREAD_ID)
        thread_name = self.attributes.get(semconv.THREAD_NAME)
        if thread_id is None:
            return "" if thread_name is None else str(thread_name)
        return str(thread_id) if thread_name is None else f"{thread_id} {thread_name}"


@dataclass(frozen=True)
class Problem:
    """Input that could not be read: which file, which line (0 when the whole file), and why."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


@dataclass(frozen=True)
class Violation:
    """A broken goodput invariant, pinned to the span that breaks it (and the file line it came from)."""

    rule: str
    trace_id: str
    span_id: str
    span_name: str
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"[{self.rule}] {self.span_name} trace={self.trace_id} span={self.span_id} ({where}): {self.reason}"


@dataclass(frozen=True)
class BucketTotals:
    """Wall clock of a step or the run, split into buckets; all in nanoseconds."""

    wall_ns: int
    bucket_ns: dict[str, int]

    @property
    def attributed_ns(self) -> int:
        """Sum over the buckets."""
        return sum(self.bucket_ns.values())

    @property
    def unattributed_ns(self) -> int:
        """Wall clock no bucket accounts for; never negative."""
        return max(0, self.wall_ns - self.attributed_ns)

    @property
    def goodput(self) -> float | None:
        """Productive time over wall time, or ``None`` when the wall time is zero."""
        return self.bucket_ns["productive"] / self.wall_ns if self.wall_ns > 0 else None

    def to_json(self) -> dict[str, Any]:
        """Seconds per bucket, unattributed seconds and goodput as a JSON-ready dict."""
        return {
            "wall_s": self.wall_ns / NS_PER_S,
            "buckets_s": {name: self.bucket_ns[name] / NS_PER_S for name in BUCKETS},
            "unattributed_s": self.unattributed_ns / NS_PER_S,
            "goodput": self.goodput,
        }


@dataclass(frozen=True)
class StepRow:
    """One training step: the span (or iteration group) that defines it and its bucket totals.

    ``method`` is ``"pattern"`` when a step umbrella span matched the step pattern, or
    ``"iteration"`` when the step was rebuilt from unbucketed spans sharing ``rl.iteration``.
    """

    iteration: int
    trace_id: str
    span_id: str
    name: str
    method: str
    totals: BucketTotals

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON-ready dict."""
        return {
            "iteration": self.iteration,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "name": self.name,
            "method": self.method,
            **self.totals.to_json(),
        }


@dataclass(frozen=True)
class TopSpan:
    """Spans sharing one name: how many, and how long in total and on average."""

    name: str
    count: int
    total_ns: int

    @property
    def mean_ns(self) -> float:
        """Mean duration in nanoseconds."""
        return self.total_ns / self.count

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict."""
        return {
            "name": self.name,
            "count": self.count,
            "total_s": self.total_ns / NS_PER_S,
            "mean_s": self.mean_ns / NS_PER_S,
        }


@dataclass(frozen=True)
class Report:
    """Everything ``lens report`` says about a set of trace files."""

    files: tuple[str, ...]
    span_count: int
    trace_count: int
    duplicate_count: int
    orphan_count: int
    error_count: int
    step_pattern: str
    steps: tuple[StepRow, ...]
    run: BucketTotals
    top_spans: tuple[TopSpan, ...]
    violations: tuple[Violation, ...]
    problems: tuple[Problem, ...]

    def to_json(self) -> dict[str, Any]:
        """The whole report as a JSON-ready dict (what ``lens report --json`` prints)."""
        return {
            "files": list(self.files),
            "spans": self.span_count,
            "traces": self.trace_count,
            "duplicate_spans": self.duplicate_count,
            "orphan_spans": self.orphan_count,
            "error_spans": self.error_count,
            "step_pattern": self.step_pattern,
            "steps": [step.to_json() for step in self.steps],
            "run": self.run.to_json(),
            "top_spans": [top.to_json() for top in self.top_spans],
            "violations": [
                {
                    "rule": v.rule,
                    "trace_id": v.trace_id,
                    "span_id": v.span_id,
                    "span_name": v.span_name,
                    "file": v.file,
                    "line": v.line,
                    "reason": v.reason,
                }
                for v in self.violations
            ],
            "problems": [{"file": p.file, "line": p.line, "message": p.message} for p in self.problems],
        }
