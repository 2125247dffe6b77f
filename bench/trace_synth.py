"""Fast synthetic multi-rank traces in the file exporter's format, for the report benchmark.

``write_run(out, ranks, steps)`` writes ``<out>/<run>/traces-rank<R>-pid<P>.jsonl`` per rank: what
lens's file exporter writes (one OTLP-JSON ``ExportTraceServiceRequest`` per line, hex ids,
64-bit integers as strings, the resource lens builds, 512 spans per line as the SDK's batch
processor exports them), with the attributes lens stamps (``lens.group``, ``lens.umbrella``,
``rl.bucket``, ``rl.iteration``, ``thread.*``). Each step has 20 spans: the step umbrella,
data processing, logprobs, a generation umbrella over 10 ``rl.vllm.generate``, reward,
advantage, policy training, a buffer-starvation wait and two data-plane calls. Step ``k`` is
slow on one rank (``k * 7919 % ranks``), so every step has a straggler. Strings are formatted
directly (no json.dumps per span): 10 million spans take a few seconds per core.

    python bench/trace_synth.py OUT --ranks 1000 --steps 500 [--jobs 2]

``write_sync_run`` (``--sync``) writes a synchronous run instead, with known stragglers:

    python bench/trace_synth.py OUT --sync --ranks 64 --steps 40 --slow 53:1.15 --slow 41:1.3:20
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from lens_core import semconv

S = 1_000_000_000
T0 = 1_760_000_000 * S
STEP_NS = 4 * S
BATCH = 512  # spans per line: the SDK batch processor's max_export_batch_size
SPANS_PER_STEP = 20

# (name, group, bucket or None for an umbrella, parent index in this list or -1 for the step, start, end) in
# fractions of a step; the generation umbrella holds the ten generate calls
_STEP_LAYOUT = (
    ("rl.grpo.data_processing", "data_processing", "overhead", -1, 0.00, 0.05),
    ("rl.grpo.generation", "rollout", None, -1, 0.05, 0.55),
    *(("rl.vllm.generate", "generation", "productive", 1, 0.05 + 0.05 * i, 0.10 + 0.05 * i) for i in range(10)),
    ("rl.grpo.reward_calculation", "reward", "productive", -1, 0.55, 0.60),
    ("rl.grpo.policy_and_reference_logprobs", "logprob", "overhead", -1, 0.60, 0.65),
    ("rl.grpo.advantage_calculation", "advantage", "overhead", -1, 0.65, 0.67),
    ("rl.data_plane.put", "data_plane", "overhead", -1, 0.67, 0.68),
    ("rl.data_plane.get", "data_plane", "overhead", -1, 0.68, 0.69),
    ("rl.grpo.policy_training", "policy_update", "productive", -1, 0.69, 0.90),
    ("rl.idle.buffer_starvation", "efficiency", "idle", -1, 0.90, 0.95),
)
assert len(_STEP_LAYOUT) + 1 == SPANS_PER_STEP


def step_layout(spans_per_step: int = SPANS_PER_STEP) -> tuple[tuple[Any, ...], ...]:
    """The layout of a step of ``spans_per_step`` spans (at least 11): the default one, its generation umbrella
    holding ``spans_per_step - 10`` generate calls in place of 10, each an equal share of the same window (more
    spans, the same buckets and steps: a larger run whose report is the same size)."""
    if spans_per_step == SPANS_PER_STEP:
        return _STEP_LAYOUT
    calls = spans_per_step - 10
    if calls < 1:
        raise ValueError(f"a step has at least 11 spans (one generate call), got {spans_per_step}")
    width = 0.5 / calls
    generate = tuple(("rl.vllm.generate", "generation", "productive", 1, 0.05 + width * i, 0.05 + width * (i + 1))
                     for i in range(calls))
    return (*_STEP_LAYOUT[:2], *generate, *_STEP_LAYOUT[12:])


def _attr(key: str, value: object) -> str:
    if isinstance(value, bool):
        return '{"key":"%s","value":{"boolValue":%s}}' % (key, "true" if value else "false")
    if isinstance(value, int):
        return '{"key":"%s","value":{"intValue":"%d"}}' % (key, value)
    return '{"key":"%s","value":{"stringValue":"%s"}}' % (key, value)


def _resource(run: str, rank: int, world: int) -> str:
    attributes = {"telemetry.sdk.language": "python", "telemetry.sdk.name": "opentelemetry",
                  "telemetry.sdk.version": "1.45.0", "service.instance.id": f"{run}-rank{rank}",
                  "service.name": "lens", "host.name": f"node{rank // 8}", "process.pid": 10_000 + rank,
                  "service.version": "0.1.0", "nemo.run.id": run, "nv.dl.rank": rank, "nv.dl.world_size": world,
                  "nv.dl.local_rank": rank % 8}
    return "[" + ",".join(_attr(k, v) for k, v in attributes.items()) + "]"


def write_rank(directory: str, run: str, rank: int, ranks: int, steps: int, extra: int = 0) -> int:
    """Write one rank's file; returns how many spans it holds.

    ``extra`` adds that many short unbucketed spans under the job span after the steps (to size
    a file exactly: 1 step and 9 extra make the 30-span files of the many-files benchmark).
    """
    thread = ',{"key":"thread.id","value":{"intValue":"140000000000001"}},' \
             '{"key":"thread.name","value":{"stringValue":"MainThread"}}'
    head = ('{"resourceSpans":[{"resource":{"attributes":' + _resource(run, rank, ranks)
            + '},"scopeSpans":[{"scope":{"name":"lens","version":"0.1.0"},"spans":[')
    tail = "]}]}]}\n"
    trace = "%016x%016x" % (0x1E45 + rank, 0xC0FFEE)
    template = ('{"traceId":"' + trace + '","spanId":"%016x"%s,"name":"%s","kind":1,'
                '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s' + thread + '],"status":{},'
                '"flags":256}')
    spans: list[str] = []
    base = (rank + 1) << 40
    job_id = base
    spans.append(template % (job_id, "", "rl.grpo.job", T0, T0 + steps * STEP_NS,
                             _attr("lens.group", "job") + "," + _attr("lens.umbrella", True)))
    umbrella = "," + _attr("lens.umbrella", True)
    layout = [(name, ',' + _attr("lens.group", group) + ("," + _attr("rl.bucket", bucket) if bucket else umbrella),
               parent, lo, hi) for name, group, bucket, parent, lo, hi in _STEP_LAYOUT]
    n = 1
    for step in range(1, steps + 1):
        slow = 1.5 if step * 7919 % ranks == rank else 1.0
        start = T0 + (step - 1) * STEP_NS
        length = int(STEP_NS * 0.95 * slow / 1.5)
        step_id = base + n
        iteration = _attr("rl.iteration", step)
        spans.append(template % (step_id, ',"parentSpanId":"%016x"' % job_id, "rl.grpo.step", start, start + length,
                                 iteration + "," + _attr("lens.group", "step") + umbrella))
        ids = []
        for i, (name, attrs, parent, lo, hi) in enumerate(layout):
            span_id = base + n + 1 + i
            ids.append(span_id)
            parent_id = step_id if parent < 0 else ids[parent]
            spans.append(template % (span_id, ',"parentSpanId":"%016x"' % parent_id, name,
                                     start + int(lo * length), start + int(hi * length), iteration + attrs))
        n += SPANS_PER_STEP
    end = T0 + steps * STEP_NS
    for i in range(extra):
        spans.append(template % (base + n + i, ',"parentSpanId":"%016x"' % job_id, "rl.data_plane.get",
                                 end - (i + 1) * 1000, end - i * 1000, _attr("lens.group", "data_plane")))
    path = Path(directory) / run / f"traces-rank{rank}-pid{10_000 + rank}.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(0, len(spans), BATCH):
            out.write(head + ",".join(spans[i:i + BATCH]) + tail)
    return len(spans)


def write_run(out: str | os.PathLike[str], ranks: int, steps: int, run: str = "synth", jobs: int = 1,
              extra: int = 0) -> int:
    """Write every rank's file of one run under ``out``; returns the number of spans."""
    (Path(out) / run).mkdir(parents=True, exist_ok=True)
    if jobs <= 1:
        return sum(write_rank(str(out), run, rank, ranks, steps, extra) for rank in range(ranks))
    with ProcessPoolExecutor(jobs) as pool:
        return sum(pool.map(write_rank, [str(out)] * ranks, [run] * ranks, range(ranks), [ranks] * ranks,
                            [steps] * ranks, [extra] * ranks, chunksize=max(1, ranks // (4 * jobs))))


SYNC_STEP_NS = 1 * S
"""A synchronous step's compute on a rank with no jitter and no slowdown (:func:`write_sync_run`)."""


def write_sync_run(out: str | os.PathLike[str], ranks: int, steps: int, *, jitter: float = 0.03, seed: int = 0,
                   slow: dict[int, tuple[float, int]] | None = None, run: str = "sync",
                   ranks_per_file: int = 100) -> int:
    """A synchronous data-parallel run with known stragglers; returns the number of spans.

    Every step, each rank computes for ``SYNC_STEP_NS`` × (1 ± ``jitter``, uniform, from
    ``random.Random(seed)``) × its slowdown (``slow``: rank -> (factor, first step), e.g.
    ``{41: (1.3, 20)}``), then waits at the all-reduce (an ``idle`` span) until the slowest
    rank is done; so every rank's step takes the same wall time. Per rank and step: the step
    umbrella, ``rl.grpo.policy_training`` (productive) and ``rl.idle.barrier`` (idle), under a
    job span; ``ranks_per_file`` ranks share a file (one request line per rank).
    """
    import random

    rng = random.Random(seed)
    slow = slow or {}
    compute = [[SYNC_STEP_NS * (1 + rng.uniform(-jitter, jitter))
                * (slow[r][0] if r in slow and step >= slow[r][1] else 1.0) for r in range(ranks)]
               for step in range(1, steps + 1)]
    walls = [int(max(row)) + 1000 for row in compute]
    starts = [T0 + sum(walls[:i]) + i * 1000 for i in range(steps)]
    directory = Path(out) / run
    directory.mkdir(parents=True, exist_ok=True)
    template = ('{"traceId":"%s","spanId":"%016x"%s,"name":"%s","kind":1,"startTimeUnixNano":"%d",'
                '"endTimeUnixNano":"%d","attributes":[%s]}')
    step_attrs = _attr("lens.group", "step") + "," + _attr("lens.umbrella", True)
    work_attrs = _attr("lens.group", "policy_update") + "," + _attr("rl.bucket", "productive")
    wait_attrs = (_attr("lens.group", "efficiency") + "," + _attr("rl.bucket", "idle") + ","
                  + _attr("rl.efficiency.category", "idle/barrier"))
    total = 0
    for first in range(0, ranks, ranks_per_file):
        lines = []
        for rank in range(first, min(ranks, first + ranks_per_file)):
            trace = "%016x%016x" % (0x5A1C + rank, 0xC0FFEE)
            base = (rank + 1) << 32
            end = starts[-1] + walls[-1]
            spans = [template % (trace, base, "", "rl.grpo.job", T0, end,
                                 _attr("lens.group", "job") + "," + _attr("lens.umbrella", True))]
            for i in range(steps):
                it = _attr("rl.iteration", i + 1) + ","
                step_id, start, busy = base + 1 + 3 * i, starts[i], int(compute[i][rank])
                parent = ',"parentSpanId":"%016x"'
                spans += [template % (trace, step_id, parent % base, "rl.grpo.step", start, start + walls[i],
                                      it + step_attrs),
                          template % (trace, step_id + 1, parent % step_id, "rl.grpo.policy_training", start,
                                      start + busy, it + work_attrs),
                          template % (trace, step_id + 2, parent % step_id, "rl.idle.barrier", start + busy,
                                      start + walls[i], it + wait_attrs)]
            total += len(spans)
            head = ('{"resourceSpans":[{"resource":{"attributes":' + _resource(run, rank, ranks)
                    + '},"scopeSpans":[{"scope":{"name":"lens","version":"0.1.0"},"spans":[')
            lines.append(head + ",".join(spans) + "]}]}]}\n")
        with open(directory / f"traces-ranks{first}-{first + ranks_per_file - 1}.jsonl", "w",
                  encoding="utf-8") as f:
            f.writelines(lines)
    return total


def write_chain(path: str | os.PathLike[str], depth: int) -> None:
    """One line of ``depth`` spans, each the parent of the next (a pathological trace)."""
    spans = []
    for level in range(depth):
        parent = {"parentSpanId": "%016x" % level} if level else {}
        spans.append({"traceId": "c" * 32, "spanId": "%016x" % (level + 1), **parent, "name": f"level{level}",
                      "kind": 1, "startTimeUnixNano": str(T0 + level), "endTimeUnixNano": str(T0 + 2 * depth - level)})
    spans[-1]["attributes"] = [{"key": "rl.bucket", "value": {"stringValue": "productive"}}]
    _write_one(path, spans)


def write_overlap(path: str | os.PathLike[str], count: int) -> None:
    """``count`` spans in one lane (one process, one thread), every one overlapping every other."""
    spans = [{"traceId": "d" * 32, "spanId": "%016x" % (i + 1), "name": "overlapping", "kind": 1,
              "startTimeUnixNano": str(T0 + i * 1000), "endTimeUnixNano": str(T0 + count * 1000 + i * 1000),
              "attributes": [{"key": "thread.id", "value": {"intValue": "1"}}]} for i in range(count)]
    _write_one(path, spans)


def _write_one(path: str | os.PathLike[str], spans: list[dict[str, object]]) -> None:
    resource = {"attributes": [{"key": "service.instance.id", "value": {"stringValue": "edge-rank0"}},
                               {"key": "nv.dl.rank", "value": {"intValue": "0"}}]}
    with open(path, "w", encoding="utf-8") as out:
        for i in range(0, len(spans), BATCH):
            request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans[i:i + BATCH]}]}]}
            out.write(json.dumps(request, separators=(",", ":")) + "\n")


def otel_traces_insert(table: str, ranks: int, steps: int, run: str = "synth",
                       spans_per_step: int = SPANS_PER_STEP, device: bool = False) -> str:
    """ClickHouse SQL: INSERT into the exporter's ``table`` the rows the Collector would write for
    :func:`write_run` (the same ids, times, names and attribute texts), computed from ``numbers()``
    in ClickHouse: 10M spans in seconds, where loading the files takes minutes. Equal to
    loading the files (``tests/report/test_report_clickhouse.py`` compares the two). With
    ``spans_per_step`` (:func:`step_layout`) each step holds more generate calls: more spans, the
    same steps and buckets. With ``device`` each productive leaf also carries device times: its host
    interval a fifth of its length later (work queued on a GPU, running past the host's call)."""
    layout = step_layout(spans_per_step)
    per_rank = 1 + steps * spans_per_step
    resource = ", ".join(
        f"'{key}', {value}" for key, value in (
            ("telemetry.sdk.language", "'python'"), ("telemetry.sdk.name", "'opentelemetry'"),
            ("telemetry.sdk.version", "'1.45.0'"), ("service.instance.id", f"concat('{run}-rank', toString(r))"),
            ("service.name", "'lens'"), ("host.name", "concat('node', toString(intDiv(r, 8)))"),
            ("process.pid", "toString(10000 + r)"), ("service.version", "'0.1.0'"), ("nemo.run.id", f"'{run}'"),
            ("nv.dl.rank", "toString(r)"), ("nv.dl.world_size", f"'{ranks}'"), ("nv.dl.local_rank", "toString(r % 8)")))
    # per layout entry (j = 1..19): name, group, bucket ('' for an umbrella), parent offset from the step span
    names = [name for name, *_ in layout]
    groups = [group for _, group, *_ in layout]
    buckets = [bucket or "" for _, _, bucket, *_ in layout]
    parents = [0 if parent < 0 else parent + 1 for *_, parent, _lo, _hi in layout]
    los = [repr(lo) for *_, lo, _hi in layout]
    his = [repr(hi) for *_, hi in layout]

    def array(values: list[str], quote: bool = True) -> str:
        return "[" + ", ".join(f"'{v}'" if quote else v for v in values) + "]"

    thread = "'thread.id', '140000000000001', 'thread.name', 'MainThread'"
    leaf = (f"map('rl.iteration', toString(step), 'lens.group', arrayElement({array(groups)}, j), 'rl.bucket', bucket, "
            f"{thread})")
    if device:
        later = "intDiv(en - st, 5)"
        times = (f"map('{semconv.LENS_DEVICE_START_TIME}', toString(st + {later}), "
                 f"'{semconv.LENS_DEVICE_END_TIME}', toString(en + {later}))")
        leaf = (f"mapUpdate(CAST({leaf} AS Map(String, String)), "
                f"CAST(if(bucket = 'productive', {times}, map()) AS Map(String, String)))")
    return f"""
INSERT INTO {table} (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
                     ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage)
WITH intDiv(number, {per_rank}) AS r, number % {per_rank} AS i, intDiv(i - 1, {spans_per_step}) + 1 AS step,
     (i - 1) % {spans_per_step} AS j, bitShiftLeft(toUInt64(r + 1), 40) AS base,
     base + 1 + (step - 1) * {spans_per_step} AS step_id,
     if(step * 7919 % {ranks} = r, 1.5, 1.0) AS slow, toInt64({STEP_NS} * 0.95 * slow / 1.5) AS length,
     toInt64({T0}) + (step - 1) * {STEP_NS} AS start,
     multiIf(i = 0, {T0}, j = 0, start, start + toInt64(arrayElement({array(los, False)}, j) * length)) AS st,
     multiIf(i = 0, {T0} + {steps} * {STEP_NS}, j = 0, start + length,
             start + toInt64(arrayElement({array(his, False)}, j) * length)) AS en,
     multiIf(i = 0, base, j = 0, step_id, step_id + j) AS span_id,
     multiIf(i = 0, toUInt64(0), j = 0, base, step_id + arrayElement({array([str(p) for p in parents], False)}, j))
         AS parent_id,
     arrayElement({array(buckets)}, j) AS bucket
SELECT fromUnixTimestamp64Nano(st), concat(lower(leftPad(hex(0x1E45 + r), 16, '0')), '0000000000c0ffee'),
       lower(leftPad(hex(span_id), 16, '0')), if(parent_id = 0, '', lower(leftPad(hex(parent_id), 16, '0'))), '',
       multiIf(i = 0, 'rl.grpo.job', j = 0, 'rl.grpo.step', arrayElement({array(names)}, j)), 'SPAN_KIND_INTERNAL',
       'lens', map({resource}), 'lens', '0.1.0',
       multiIf(i = 0, map('lens.group', 'job', 'lens.umbrella', 'true', {thread}),
               j = 0, map('rl.iteration', toString(step), 'lens.group', 'step', 'lens.umbrella', 'true', {thread}),
               bucket = '', map('rl.iteration', toString(step), 'lens.group', arrayElement({array(groups)}, j),
                                'lens.umbrella', 'true', {thread}),
               {leaf}),
       toUInt64(en - st), 'STATUS_CODE_UNSET', ''
FROM numbers({ranks * per_rank})"""


def main(argv: list[str] | None = None) -> int:
    """Command line: write a synthetic run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--run", default="synth")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sync", action="store_true",
                        help="a synchronous run (every rank waits at the all-reduce), +-3 %% jitter; see --slow")
    parser.add_argument("--slow", action="append", default=[], metavar="RANK:FACTOR[:STEP]",
                        help="with --sync: RANK computes FACTOR times longer from STEP on (default 1), e.g. 41:1.3:20")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.sync:
        slow = {}
        for text in args.slow:
            rank, factor, *since = text.split(":")
            slow[int(rank)] = (float(factor), int(since[0]) if since else 1)
        count = write_sync_run(args.out, args.ranks, args.steps, seed=args.seed, slow=slow, run=args.run)
    else:
        count = write_run(args.out, args.ranks, args.steps, args.run, args.jobs)
    print(f"wrote {count} spans under {Path(args.out) / args.run}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
