"""Export a run as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open and zoom.

One process per rank (sorted numerically), one track per thread, a complete event (``"X"``) per
span with its bucket as category and its attributes, ids and rank as ``args``. Events on one
track must nest; spans of a thread that overlap without nesting (coroutines, a finalize that
outlives its step) go to extra tracks named after the thread, ``(2)``, ``(3)``...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TextIO

from lens_core import semconv

from .model import Report, Span

__all__ = ["TrackAssigner", "trace_events", "write_trace_events"]


class TrackAssigner:
    """Gives each span of one thread the first of its tracks on which it nests (or starts after)
    the open spans; spans must arrive in (start, longest first) order."""

    def __init__(self) -> None:
        self.stacks: list[list[int]] = []  # per track: end times of the open spans, outermost first

    def place(self, start: int, end: int) -> int:
        """The track index for a span from ``start`` to ``end`` (nanoseconds)."""
        for track, stack in enumerate(self.stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return track
        self.stacks.append([end])
        return len(self.stacks) - 1


def _category(span: Span) -> str:
    bucket = span.bucket
    return str(bucket) if bucket is not None else "unbucketed"


def trace_events(store: Any, report: Report, *, steps: frozenset[int] | None = None,
                 ranks: frozenset[int] | None = None) -> Iterator[dict[str, Any]]:
    """The trace events of the run ``report`` covers, metadata first, then spans in time order per thread.

    ``steps`` (by ``rl.iteration``) and ``ranks`` (numbers) narrow it as they narrow the HTML
    waterfall; each defaults to all. Call right after :func:`build_report` on the same store.
    """
    labels = list(report.rank_steps.rank_labels) or [r.rank for r in report.ranks]
    where = (f"s.run = {store.dialect.literal(report.run_id)} AND s.start_ns IS NOT NULL AND s.end_ns IS NOT NULL "
             "AND s.end_ns >= s.start_ns")
    if steps is not None or ranks is not None:
        from .waterfall import choose_spans

        _, _, chosen = choose_spans(store, report, steps=steps, ranks=ranks, small_run=report.span_count,
                                    default_ranks=len(labels))
        kept = set(chosen)
        labels = [label for label in labels if label in kept]
        where = "s.rowid IN (SELECT id FROM wf_ids)"
    pid_of = {label: i + 1 for i, label in enumerate(labels)}
    for label, pid in pid_of.items():
        yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}}
        yield {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
    tracks: dict[tuple[int, str], TrackAssigner] = {}
    tids: dict[tuple[int, str, int], int] = {}
    for span in store.spans(where, order="s.start_ns, s.end_ns DESC, s.rowid"):
        rank = span.resource.get(semconv.NV_DL_RANK)
        label = f"rank {rank}" if rank is not None else span.process
        pid = pid_of.setdefault(label, len(pid_of) + 1)
        thread = span.thread
        assigner = tracks.setdefault((pid, thread), TrackAssigner())
        track = assigner.place(span.start_ns, span.end_ns)
        key = (pid, thread, track)
        if key not in tids:
            tids[key] = tid = len(tids) + 1
            name = (thread or "spans") + (f" ({track + 1})" if track else "")
            yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        args = {key: value for key, value in span.attributes.items()}
        args.update({"trace_id": span.trace_id, "span_id": span.span_id, "rank": label})
        if span.parent_span_id:
            args["parent_span_id"] = span.parent_span_id
        yield {"name": span.name, "cat": _category(span), "ph": "X", "ts": span.start_ns / 1000,
               "dur": (span.end_ns - span.start_ns) / 1000, "pid": pid, "tid": tids[key], "args": args}


def write_trace_events(store: Any, report: Report, out: TextIO, *, steps: frozenset[int] | None = None,
                       ranks: frozenset[int] | None = None) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` to ``out``, streaming; the number of span events.

    ``steps`` and ``ranks`` narrow it (see :func:`trace_events`)."""
    out.write('{"displayTimeUnit":"ms","otherData":')
    out.write(json.dumps({"source": "lens report", "run_id": report.run_id}))
    out.write(',"traceEvents":[\n')
    count = 0
    first = True
    for event in trace_events(store, report, steps=steps, ranks=ranks):
        if not first:
            out.write(",\n")
        out.write(json.dumps(event, separators=(",", ":"), default=str, allow_nan=False)
                  if _finite(event) else json.dumps(_without_nan(event), separators=(",", ":"), default=str))
        first = False
        count += event["ph"] == "X"
    out.write("\n]}\n")
    return count


def _finite(event: dict[str, Any]) -> bool:
    return all(not (isinstance(v, float) and v != v or v in (float("inf"), float("-inf")))
               for v in event.get("args", {}).values() if isinstance(v, float))


def _without_nan(event: dict[str, Any]) -> dict[str, Any]:
    # trace-event JSON is strict JSON: NaN and infinities become strings
    args = {k: (str(v) if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))) else v)
            for k, v in event["args"].items()}
    return {**event, "args": args}
