"""Data types of the report: spans read back, input problems, invariant violations, per-rank and per-step rollups."""

from __future__ import annotations

import functools
import itertools
import json
import operator
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TextIO

from lens_core import semconv
from lens_core.registry import Bucket

__all__ = [
    "AttemptInfo",
    "BUCKETS",
    "BUCKET_ATTR",
    "BucketTotals",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_STEP_PATTERN",
    "DeviceClock",
    "ITERATION_ATTR",
    "LossRow",
    "NS_PER_S",
    "Problem",
    "RESOURCE_KEYS",
    "RankRow",
    "RankSteps",
    "Report",
    "ReportPath",
    "Rule",
    "RunInfo",
    "Span",
    "StepRow",
    "TopSpan",
    "UnfinishedProcess",
    "Violation",
    "span_from_row",
]

BUCKET_ATTR = semconv.RL_BUCKET
"""Span attribute naming the goodput bucket of a leaf span; umbrellas omit it."""

ITERATION_ATTR = semconv.RL_ITERATION
"""Span attribute holding the 1-based training step index."""

BUCKETS = Bucket.ALL
"""The goodput buckets, in display order; any other value of ``rl.bucket`` is a violation."""

DEFAULT_MEMORY_LIMIT = "256MB"
"""Memory a report may use (``lens report --memory-limit``): its engine's limits are set so the whole
process peaks near it, spilling to disk past them (see :func:`lens_report.plan.memory_plan`)."""

DEFAULT_STEP_PATTERN = r"(^|\.)step$"
"""Regex (searched) that names a step umbrella span, e.g. ``rl.grpo.step``."""

RESOURCE_KEYS = (semconv.SERVICE_NAME, semconv.SERVICE_INSTANCE_ID, semconv.PROCESS_PID,
                 semconv.HOST_NAME, semconv.NV_DL_RANK, semconv.NEMO_RUN_ID)
"""Resource attributes the reader keeps for every span."""

from ._units import NS_PER_S  # noqa: E402 - re-exported: the report's modules import it from here
"""Nanoseconds per second."""

_JSON_CHUNK_ROWS = 10_000  # per-(rank, step) rows encoded at a time by Report.write_json


def _seconds(ns: float | None) -> float | None:
    return None if ns is None else ns / NS_PER_S


@dataclass(frozen=True, slots=True)
class Span:
    """One span read back from the store; times in Unix nanoseconds, ids in lower-case hex."""

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


def _any_value(value: Any) -> Any:
    """Decode an OTLP ``AnyValue`` as the store keeps it (every field present, all but one null)."""
    if not isinstance(value, dict):
        return None
    value = {key: v for key, v in value.items() if v is not None}
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return value["boolValue"] in (True, "true")
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        array = json.loads(value["arrayValue"]) if isinstance(value["arrayValue"], str) else value["arrayValue"]
        return [_any_value(v) for v in (array or {}).get("values", [])]
    if "kvlistValue" in value:
        kvlist = json.loads(value["kvlistValue"]) if isinstance(value["kvlistValue"], str) else value["kvlistValue"]
        return _attributes((kvlist or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {item["key"]: _any_value(item.get("value")) for item in items
            if isinstance(item, dict) and isinstance(item.get("key"), str)}


def span_from_row(row: dict[str, Any]) -> Span:
    """A :class:`Span` from a row of the store's ``spans`` table (joined with its file's path)."""
    if row.get("attrs") is not None:
        attributes = _attributes(json.loads(row["attrs"]))
    else:  # a store without detail keeps only what the report reads
        attributes = {key: value for key, value in (
            (BUCKET_ATTR, row["bucket"]), (ITERATION_ATTR, row["iteration"]), (semconv.LENS_GROUP, row["grp"]),
            (semconv.LENS_UMBRELLA, row["umbrella"]), (semconv.RL_EFFICIENCY_CATEGORY, row["category"]),
            (semconv.THREAD_NAME, row["thread_name"])) if value is not None}
        if row["thread"] is not None:
            attributes[semconv.THREAD_ID] = int(row["thread"]) if row["thread"].isdigit() else row["thread"]
    resource = {key: value for key, value in (
        (semconv.SERVICE_NAME, row["service"]), (semconv.SERVICE_INSTANCE_ID, row["instance"]),
        (semconv.PROCESS_PID, row["process_pid"]), (semconv.HOST_NAME, row["host"]),
        (semconv.NV_DL_RANK, row["rank"]), (semconv.NEMO_RUN_ID, row["run"] or None)) if value is not None}
    events = json.loads(row["events"]) if row.get("events") else []
    links = json.loads(row["links"]) if row.get("links") else []
    return Span(
        trace_id=row["trace"], span_id=row["span"], parent_span_id=row["parent"], name=row["name"],
        kind=row["kind"], start_ns=row["start_ns"], end_ns=row["end_ns"], attributes=attributes,
        resource=resource, error=row["error"],
        events=tuple(e.get("name", "") for e in events if isinstance(e, dict)),
        links=tuple((_hex(link.get("traceId"), 16), _hex(link.get("spanId"), 8)) for link in links
                    if isinstance(link, dict)),
        file=row["path"], line=row["line"])


def _hex(value: Any, size: int) -> str:
    """An id as hex: as given when it is hex, decoded when it is base64."""
    import base64
    import binascii

    if not isinstance(value, str):
        return ""
    if len(value) == 2 * size:
        return value.lower()
    try:
        return base64.b64decode(value.replace("-", "+").replace("_", "/")).hex()
    except (binascii.Error, ValueError):
        return value


@dataclass(frozen=True)
class Problem:
    """Input that could not be read: which file, which line (0 when the whole file), and why."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON-ready dict."""
        return {"file": self.file, "line": self.line, "message": self.message}


class Rule(str, Enum):
    """A goodput invariant or vocabulary rule a span (or a step, or a rank) can break. A member is
    its value, the rule's name in the report (``[nested-bucket]``, JSON ``rule`` and
    ``violations_by_rule``): ``Rule.NESTED_BUCKET == "nested-bucket"``."""

    BAD_TIMING = "bad-timing"
    """A span has a missing or out-of-range timestamp or ends before it starts; it is left out of every sum."""
    BUCKETED_OVERLAP = "bucketed-overlap"
    """A span that overlaps other bucketed work by rule (checkpoint finalize, a collector-loop wait,
    the initial buffer fill, a startup phase) carries a bucket."""
    BUCKETED_UMBRELLA = "bucketed-umbrella"
    """An umbrella span (it contains other work, or overlaps its siblings) carries a bucket."""
    EFFICIENCY_BUCKET = "efficiency-bucket"
    """An efficiency span carries a bucket other than its category's (``rl.idle.refit_bubble`` productive)."""
    NESTED_BUCKET = "nested-bucket"
    """A bucketed span has a bucketed descendant, so one second would count twice."""
    PARENT_CYCLE = "parent-cycle"
    """Parent ids form a cycle; the spans on it have no root."""
    RANK_OVERFLOW = "rank-overflow"
    """The bucketed spans of one rank sum past its wall time (bucketed spans overlap, e.g. on two threads)."""
    STEP_OVERFLOW = "step-overflow"
    """The bucketed spans under a step sum to more than the step's wall time."""
    TIMER_ONLY = "timer-only"
    """A timer-only efficiency category (``idle/validation``, ...) was emitted as a bucketed span."""
    UMBRELLA_GROUP_BUCKET = "umbrella-group-bucket"
    """A bucketed span whose stamped ``lens.group`` is an umbrella group (``per_prompt`` on a data-plane put)."""
    UNCATALOGUED_BUCKET = "uncatalogued-bucket"
    """A bucketed span with no ``lens.group`` stamp whose name no catalog knows: its bucket is unchecked."""
    UNKNOWN_BUCKET = "unknown-bucket"
    """``rl.bucket`` holds a value that is not one of the four buckets."""
    VALIDATION_PRODUCTIVE = "validation-productive"
    """A productive span under an evaluate span: validation tokens are scored and discarded, so overhead."""

    def __str__(self) -> str:
        """The rule's name (``nested-bucket``), on every Python (3.12 would print ``Rule.NESTED_BUCKET``)."""
        return str.__str__(self)


@dataclass(frozen=True)
class Violation:
    """A broken goodput invariant, pinned to the span that breaks it, its rank and the file line it came from."""

    rule: Rule
    trace_id: str
    span_id: str
    span_name: str
    file: str
    line: int
    reason: str
    rank: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        rank = f" {self.rank}" if self.rank else ""
        return f"[{self.rule}] {self.span_name}{rank} trace={self.trace_id} span={self.span_id} ({where}): {self.reason}"

    def to_json(self) -> dict[str, Any]:
        """The violation as a JSON-ready dict."""
        return {"rule": self.rule, "trace_id": self.trace_id, "span_id": self.span_id, "span_name": self.span_name,
                "rank": self.rank, "file": self.file, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class BucketTotals:
    """Wall clock of a step or the run, split into buckets; all in nanoseconds (rank-nanoseconds when summed over ranks)."""

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
    """One training step of the run, over every rank that ran it.

    ``totals`` sums the ranks: wall is rank-seconds (the sum of each rank's step time), so
    goodput is productive rank-seconds over step rank-seconds. The spread gives the step time
    of the fastest, median and slowest rank; ``slowest_rank`` is the rank with the most busy
    (non-idle) time, and ``wait_ns`` the rank-seconds every other rank spent waiting for it
    (the sum over ranks of its busy time minus theirs). ``trace_id``/``span_id``/``name``/
    ``method`` identify the slowest rank's step span: ``"pattern"`` when a step umbrella span
    matched the step pattern, ``"iteration"`` when the step was rebuilt from unbucketed spans
    sharing ``rl.iteration``.
    """

    iteration: int
    trace_id: str
    span_id: str
    name: str
    method: str
    totals: BucketTotals
    ranks: int = 1
    wall_min_ns: int = 0
    wall_median_ns: float = 0
    wall_max_ns: int = 0
    slowest_rank: str = ""
    wait_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON-ready dict."""
        return {
            "iteration": self.iteration,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "name": self.name,
            "method": self.method,
            "ranks": self.ranks,
            **self.totals.to_json(),
            "step_s": {"min": _seconds(self.wall_min_ns), "median": _seconds(self.wall_median_ns),
                       "max": _seconds(self.wall_max_ns)},
            "slowest_rank": self.slowest_rank,
            "wait_s": self.wait_ns / NS_PER_S,
        }


@dataclass(frozen=True)
class RankRow:
    """One rank of the run: its wall clock (first span start to last span end) and buckets, and what it cost others.

    ``slowest_steps`` counts the steps (run by more than one rank) where this rank was the
    slowest; ``straggler_cost_ns``
    sums the rank-seconds the other ranks waited for it in those steps, and
    ``idle_explained_ns`` the part of their idle bucket that waiting explains.
    """

    rank: str
    processes: int
    totals: BucketTotals
    steps: int
    slowest_steps: int
    straggler_cost_ns: int
    idle_explained_ns: int

    def to_json(self) -> dict[str, Any]:
        """The rank as a JSON-ready dict."""
        return {"rank": self.rank, "processes": self.processes, **self.totals.to_json(), "steps": self.steps,
                "slowest_steps": self.slowest_steps, "straggler_cost_s": self.straggler_cost_ns / NS_PER_S,
                "idle_explained_s": self.idle_explained_ns / NS_PER_S}


@dataclass(frozen=True)
class RankSteps:
    """Per (rank, step) figures, column-wise (a 1,000-rank × 500-step run is 500,000 of them).

    Entry ``i`` of every column belongs together; ``ranks`` holds indexes into ``rank_labels``.
    """

    rank_labels: tuple[str, ...]
    iterations: array = field(default_factory=lambda: array("q"))
    ranks: array = field(default_factory=lambda: array("q"))
    wall_ns: array = field(default_factory=lambda: array("q"))
    productive_ns: array = field(default_factory=lambda: array("q"))
    overhead_ns: array = field(default_factory=lambda: array("q"))
    idle_ns: array = field(default_factory=lambda: array("q"))
    wasted_ns: array = field(default_factory=lambda: array("q"))
    busy_ns: array = field(default_factory=lambda: array("q"))
    """The rank's busy time in the step: wall less waiting (see :data:`lens_report.rollup.BUSY_NS`)."""

    COLUMNS = ("iteration", "rank", "wall_s", "productive_s", "overhead_s", "idle_s", "wasted_s", "busy_s")

    def __len__(self) -> int:
        return len(self.iterations)

    def to_json(self, ranks: frozenset[str] | None = None) -> dict[str, Any]:
        """Column names and one row per (rank, step), seconds as numbers; only the ``ranks`` (labels) given."""
        return {"columns": list(self.COLUMNS), "rows": list(self.rows(ranks))}

    def rows(self, ranks: frozenset[str] | None = None) -> Iterator[list[Any]]:
        """The rows of :meth:`to_json`, one at a time."""
        return map(list, self.row_tuples(ranks))

    def json_chunks(self, ranks: frozenset[str] | None = None) -> Iterator[str]:
        """The rows of :meth:`to_json` as compact JSON text, ``_JSON_CHUNK_ROWS`` rows a piece (none empty), each
        the rows' texts joined by commas: as ``json.dumps`` writes them, by the compiled writer where it is
        built (:func:`~lens_report.engine.compiled_rows_writer`), else by ``json.dumps``."""
        from .engine import compiled_rows_writer

        write = compiled_rows_writer()
        if write is None:
            rows = self.row_tuples(ranks)
            while chunk := list(itertools.islice(rows, _JSON_CHUNK_ROWS)):
                yield json.dumps(chunk, separators=(",", ":"))[1:-1]
            return
        labels = [json.dumps(label).encode("ascii") for label in self.rank_labels]
        keep = None if ranks is None else bytes(label in ranks for label in self.rank_labels)
        columns = (self.iterations, self.ranks, labels, self.wall_ns, self.productive_ns, self.overhead_ns,
                   self.idle_ns, self.wasted_ns, self.busy_ns)
        for start in range(0, len(self), _JSON_CHUNK_ROWS):
            if text := write(*columns, start, min(start + _JSON_CHUNK_ROWS, len(self)), keep):
                yield text.decode("ascii")

    def row_tuples(self, ranks: frozenset[str] | None = None) -> Iterator[tuple[Any, ...]]:
        """The rows of :meth:`to_json` as tuples, made at C speed (``map`` and ``zip``, no Python loop a row:
        500,000 rows in ~0.1 s, not ~0.4 s), for the JSON writer."""
        seconds = [map(operator.truediv, column, itertools.repeat(NS_PER_S))
                   for column in (self.wall_ns, self.productive_ns, self.overhead_ns, self.idle_ns, self.wasted_ns,
                                  self.busy_ns)]
        rows = zip(self.iterations, map(self.rank_labels.__getitem__, self.ranks), *seconds)
        if ranks is None:
            return rows
        keep = {i for i, label in enumerate(self.rank_labels) if label in ranks}
        return itertools.compress(rows, map(keep.__contains__, self.ranks))


@dataclass(frozen=True)
class LossRow:
    """What one process could not deliver, from its newest ``lens.telemetry.loss`` record (cumulative counts)."""

    rank: str
    process: str
    created: int
    dropped: int
    failed: int
    unended: int
    truncated: int

    @property
    def lost(self) -> int:
        """Spans lost for good: dropped + failed + unended."""
        return self.dropped + self.failed + self.unended

    def __str__(self) -> str:
        return (f"{self.rank} lost {self.lost:,} spans: dropped {self.dropped:,}, failed {self.failed:,}, "
                f"unended {self.unended:,}; {self.truncated:,} truncated")

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return {"rank": self.rank, "process": self.process, "created": self.created, "lost": self.lost,
                "dropped": self.dropped, "failed": self.failed, "unended": self.unended,
                "truncated": self.truncated}


@dataclass(frozen=True)
class UnfinishedProcess:
    """A process Lens set up (``telemetry.distro.name`` lens) whose output has no final loss record.

    Its telemetry never shut down: it was killed (SIGKILL, OOM), left through ``os._exit``
    without ``shutdown()``, or is still running. Spans it held when it stopped are not in
    the output and were counted nowhere; ``spans`` is how many of its spans were read.
    """

    rank: str
    process: str
    spans: int

    def __str__(self) -> str:
        return f"{self.rank} ({self.process}): {self.spans:,} spans read, no final loss record"

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return {"rank": self.rank, "process": self.process, "spans": self.spans}


@dataclass(frozen=True)
class RunInfo:
    """One run found in the input: its id, how many ranks, processes and spans, and when it ran."""

    run_id: str
    ranks: int
    processes: int
    spans: int
    start_ns: int | None
    end_ns: int | None

    def to_json(self) -> dict[str, Any]:
        """The run as a JSON-ready dict."""
        return {"run_id": self.run_id, "ranks": self.ranks, "processes": self.processes, "spans": self.spans,
                "start_ns": self.start_ns, "end_ns": self.end_ns,
                "wall_s": None if self.start_ns is None or self.end_ns is None
                else (self.end_ns - self.start_ns) / NS_PER_S}


@dataclass(frozen=True)
class AttemptInfo:
    """One launch of a run: a run id reused by a restart or a re-run (``LENS_RUN_ID`` fixed) has several.

    Launches are told apart by their processes (``service.instance.id`` holds host and pid):
    a process that starts after every process of the attempt before it has ended, on a rank
    that attempt already had, begins a new attempt. ``gap_ns`` is the time from the end of
    the previous attempt to this one's start (lost to the restart), ``repeated_steps`` how
    many of this attempt's steps the previous one had run already (work done again).
    """

    attempt: int
    processes: int
    ranks: int
    spans: int
    start_ns: int | None
    end_ns: int | None
    goodput: float | None = None
    gap_ns: int | None = None
    repeated_steps: int = 0

    def to_json(self) -> dict[str, Any]:
        """The attempt as a JSON-ready dict."""
        return {"attempt": self.attempt, "processes": self.processes, "ranks": self.ranks, "spans": self.spans,
                "start_ns": self.start_ns, "end_ns": self.end_ns,
                "wall_s": None if self.start_ns is None or self.end_ns is None
                else (self.end_ns - self.start_ns) / NS_PER_S,
                "goodput": self.goodput, "lost_before_s": _seconds(self.gap_ns), "repeated_steps": self.repeated_steps}

    def describe(self) -> str:
        """One phrase: ``attempt 2: 4 ranks, 212 s, goodput 51.0 %, 300 s lost before it``."""
        wall = "" if self.start_ns is None or self.end_ns is None else f", {(self.end_ns - self.start_ns) / NS_PER_S:.0f} s"
        goodput = "" if self.goodput is None else f", goodput {self.goodput * 100:.1f} %"
        lost = "" if self.gap_ns is None else f", {self.gap_ns / NS_PER_S:.0f} s lost before it"
        again = f", {self.repeated_steps} step(s) run again" if self.repeated_steps else ""
        return f"attempt {self.attempt}: {self.ranks} rank(s){wall}{goodput}{lost}{again}"


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
        return {"name": self.name, "count": self.count, "total_s": self.total_ns / NS_PER_S,
                "mean_s": self.mean_ns / NS_PER_S}


@dataclass(frozen=True)
class DeviceClock:
    """Which clock the figures of a run with device-timed leaves came from (docs/report.md, "Device clock").

    A counted leaf with device times (``lens.device.*_time_unix_nano``) counts its device interval;
    a counted host-only overhead leaf gives back the time the device spent on device-timed
    productive work of its rank meanwhile (``given_back_ns``); everything else is on the host
    clock, as in a run without device times (where the report has no ``DeviceClock``)."""

    leaves: int
    """Counted (bucketed) leaves of the run."""
    timed: int
    """Of them, those with device times: counted on the device clock."""
    given_back_ns: int
    """Host-only overhead time not counted: the host was blocked while the device ran device-timed productive work."""
    ranks: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Rank label -> (device-timed leaves, counted leaves), for the ranks with any device-timed leaf."""
    steps: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Iteration -> (device-timed leaves, counted leaves) over its ranks, for the steps with any."""

    def describe(self, timed: int | None = None, leaves: int | None = None) -> str:
        """``device-timed leaves: 4 of 5`` (the run's, or the counts given)."""
        timed, leaves = (self.timed, self.leaves) if timed is None else (timed, leaves)
        return f"device-timed leaves: {timed} of {leaves}"

    def to_json(self) -> dict[str, Any]:
        """The clock as a JSON-ready dict."""
        return {"clock": "device" if self.timed == self.leaves else "device and host",
                "leaves": self.leaves, "device_timed_leaves": self.timed,
                "host_blocked_given_back_s": self.given_back_ns / NS_PER_S,
                "ranks": {label: {"device_timed_leaves": t, "leaves": n} for label, (t, n) in self.ranks.items()},
                "steps": [{"iteration": it, "device_timed_leaves": t, "leaves": n}
                          for it, (t, n) in self.steps.items()]}


@dataclass(frozen=True)
class ReportPath:
    """How a report over ClickHouse was computed: ``name`` is ``spans`` (every span walked, in ``parts`` parts of
    traces so the server's working set stays bounded) or ``rollup`` (the per-(rank, step) rollup table, kept at
    insert time: figures only). ``reason`` says why this path was taken; ``not_computed`` names the JSON keys
    the path leaves empty (they need every span)."""

    name: str
    reason: str
    parts: int = 1
    not_computed: tuple[str, ...] = ()

    def __str__(self) -> str:
        parts = f" in {self.parts:,} parts of traces" if self.parts > 1 else ""
        missing = f"; not computed: {', '.join(self.not_computed)}" if self.not_computed else ""
        return f"path: {self.name}{parts} ({self.reason}){missing}"

    def to_json(self) -> dict[str, Any]:
        """The path as a JSON-ready dict."""
        return {"name": self.name, "reason": self.reason, "parts": self.parts, "not_computed": list(self.not_computed)}


@dataclass(frozen=True)
class Report:
    """Everything ``lens report`` says about one run of a set of trace files.

    ``run`` sums the ranks: wall is rank-seconds (each rank's first-to-last span time), so
    run goodput is productive rank-seconds over wall rank-seconds. A 1-rank run reads as it
    always did.
    """

    run_id: str
    files: tuple[str, ...]
    span_count: int
    trace_count: int
    duplicate_count: int
    orphan_count: int
    error_count: int
    step_pattern: str
    steps: tuple[StepRow, ...]
    run: BucketTotals
    ranks: tuple[RankRow, ...]
    rank_steps: RankSteps
    top_spans: tuple[TopSpan, ...]
    violations: tuple[Violation, ...]
    problems: tuple[Problem, ...]
    loss: tuple[LossRow, ...] = ()
    rule_counts: dict[str, int] = field(default_factory=dict)
    unfinished: tuple[UnfinishedProcess, ...] = ()
    """Processes whose telemetry never shut down (see :class:`UnfinishedProcess`)."""
    attempt: int | None = None
    """Which launch of the run this report is of, when the run id was launched more than once."""
    attempts: tuple[AttemptInfo, ...] = ()
    """Every launch of the run (empty when it was launched once), each with its goodput and the time lost before it."""
    restart_lost_ns: int | None = None
    """Rank-seconds lost between attempts of the run (restarts), when known; the badput's ``restarts`` part."""
    device_clock: DeviceClock | None = None
    """Which clock the figures came from, when any leaf of the run has device times (else None: all host)."""
    path: ReportPath | None = None
    """How a report over ClickHouse was computed (None for files): see :class:`ReportPath`."""

    @functools.cached_property
    def aggregates(self) -> Any:
        """The :class:`~lens_report.aggregates.Aggregates` the report leads with (computed once)."""
        from .aggregates import aggregate

        return aggregate(self)

    @property
    def violation_count(self) -> int:
        """How many violations were found (``violations`` lists at most the report's limit)."""
        return sum(self.rule_counts.values()) if self.rule_counts else len(self.violations)

    @property
    def multi_rank(self) -> bool:
        """True when more than one rank (or process) ran the job."""
        return len(self.ranks) > 1

    @property
    def stragglers(self) -> tuple[RankRow, ...]:
        """Ranks that were the slowest of some step, costliest first."""
        costly = [r for r in self.ranks if r.slowest_steps]
        order = {label: i for i, label in enumerate(self.rank_steps.rank_labels)}  # numeric: rank 2 before rank 10
        return tuple(sorted(costly, key=lambda r: (-r.straggler_cost_ns, order.get(r.rank, len(order)), r.rank)))

    def to_json(self, *, rank_steps: bool = True, top: int | None = None,
                ranks: frozenset[str] | None = None) -> dict[str, Any]:
        """The whole report as a JSON-ready dict (what ``lens report --json`` prints).

        It leads with the aggregates (badput, step-time spread, the ``top`` straggler scores,
        all when None); ``rank_steps`` holds the per-(rank, step) rows of the ``ranks`` (labels)
        asked for, every rank's when None."""
        data = {
            "run_id": self.run_id,
            **self.aggregates.to_json(top=top),
            "files": list(self.files),
            "spans": self.span_count,
            "traces": self.trace_count,
            "duplicate_spans": self.duplicate_count,
            "orphan_spans": self.orphan_count,
            "error_spans": self.error_count,
            "step_pattern": self.step_pattern,
            "steps": [step.to_json() for step in self.steps],
            "run": self.run.to_json(),
            "ranks": [rank.to_json() for rank in self.ranks],
            "stragglers": [rank.rank for rank in self.stragglers],
            "top_spans": [top.to_json() for top in self.top_spans],
            "violation_count": self.violation_count,
            "violations_by_rule": dict(sorted(self.rule_counts.items())),
            "violations": [v.to_json() for v in self.violations],
            "problems": [p.to_json() for p in self.problems],
            "telemetry_loss": {"lost": sum(row.lost for row in self.loss), "processes": [r.to_json() for r in self.loss],
                               "unfinished": [u.to_json() for u in self.unfinished]},
        }
        if self.device_clock is not None:
            data["device_clock"] = self.device_clock.to_json()
        if self.path is not None:
            data["path"] = self.path.to_json()
        if self.attempts:
            data["attempt"] = self.attempt
            data["attempts"] = [a.to_json() for a in self.attempts]
        if rank_steps:
            data["rank_steps"] = self.rank_steps.to_json(ranks)
        return data

    def write_json(self, out: TextIO, *, top: int | None = None, ranks: frozenset[str] | None = None,
                   indent: int | None = None) -> None:
        """Write :meth:`to_json` to ``out``, the text ``json.dump`` writes (compact without ``indent``).

        Compact, the per-(rank, step) rows are encoded a chunk at a time, never all held as
        Python lists: at 1,000 ranks × 500 steps those lists took ~120 MB, and a 10M-span
        ``lens report --json`` peaked at 362 MiB against its 256 MB budget."""
        if indent is not None:
            json.dump(self.to_json(top=top, ranks=ranks), out, indent=indent)
            return
        compact = {"separators": (",", ":")}
        data = self.to_json(rank_steps=False, top=top, ranks=ranks)
        marker = "lens-report-rows"
        data["rank_steps"] = {"columns": list(RankSteps.COLUMNS), "rows": marker}
        # rank_steps is the document's last key, so its marker is the last occurrence of that text
        head, tail = json.dumps(data, **compact).rsplit(json.dumps(marker), 1)
        out.write(head + "[")
        separator = ""
        for text in self.rank_steps.json_chunks(ranks):
            out.write(separator + text)
            separator = ","
        out.write("]" + tail)
