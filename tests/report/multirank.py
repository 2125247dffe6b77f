"""Known-answer multi-rank traces written by the project itself: the OTel SDK and lens's file exporter, rank set.

Each rank gets its own TracerProvider (resource: run id, ``<run>-rank<R>`` instance, rank) and
``otel_bridge.exporters.FileSpanExporter`` writing ``<dir>/<run>/traces-rank<R>-pid<P>.jsonl``.
Spans take explicit start and end times, so every duration, and therefore every figure of the
report, is known by construction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

S = 1_000_000_000
T0 = 1_750_000_000 * S


class RankWriter:
    """Spans of one rank, written through the SDK and lens's file exporter."""

    def __init__(self, directory: Path, run_id: str, rank: int, world_size: int, **resource: Any) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        from otel_bridge.exporters import FileSpanExporter

        attributes = {"service.name": "trainer", "service.instance.id": f"{run_id}-rank{rank}",
                      "nemo.run.id": run_id, "nv.dl.rank": rank, "nv.dl.world_size": world_size,
                      "process.pid": 10_000 + rank, "host.name": f"node{rank // 8}", **resource}
        self.exporter = FileSpanExporter(directory, run_id, rank=rank)
        self.provider = TracerProvider(resource=Resource(attributes))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("lens")

    def span(self, name: str, start_s: float, end_s: float, parent: Any = None, **attributes: Any) -> Any:
        """A span from ``start_s`` to ``end_s`` seconds after T0; attribute names use ``_`` for ``.``."""
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        attrs = {key.replace("__", "\0").replace("_", ".").replace("\0", "_"): value
                 for key, value in attributes.items()}
        span = self.tracer.start_span(name, context=context, start_time=T0 + round(start_s * S), attributes=attrs)
        span.end(end_time=T0 + round(end_s * S))
        return span

    def close(self) -> None:
        """Flush and close the rank's file."""
        self.provider.shutdown()


# productive seconds of each rank (columns) in each step (rows); every step takes 10 s on
# every rank: 1 s of data processing, the productive time, then idle at the barrier
PRODUCTIVE = [
    [5.0, 5.0, 7.0, 5.0],  # step 1: rank 2 is the straggler; the others wait 2 s each
    [6.0, 6.0, 6.0, 8.0],  # step 2: rank 3; the others wait 2 s each
    [5.0, 7.5, 5.0, 5.0],  # step 3: rank 1; the others wait 2.5 s each
]
OVERHEAD = 1.0
STEP = 10.0
STEP_START = [100.0, 200.0, 300.0]
JOB = (99.0, 311.0)  # every rank's job span: 212 s


def write_ddp_run(directory: Path, run_id: str = "ddp", ranks: int = 4) -> dict[str, Any]:
    """A synchronous data-parallel GRPO run of ``ranks`` ranks × 3 steps; returns the known answers."""
    for rank in range(ranks):
        writer = RankWriter(directory, run_id, rank, ranks)
        job = writer.span("rl.grpo.job", *JOB, lens_group="job", lens_umbrella=True)
        for step, start in enumerate(STEP_START, start=1):
            productive = PRODUCTIVE[step - 1][rank % 4]
            umbrella = writer.span("rl.grpo.step", start, start + STEP, job, rl_iteration=step,
                                   lens_group="step", lens_umbrella=True)
            writer.span("rl.grpo.data_processing", start, start + OVERHEAD, umbrella, rl_iteration=step,
                        rl_bucket="overhead", lens_group="data_processing")
            busy = start + OVERHEAD + productive
            writer.span("rl.grpo.policy_training", start + OVERHEAD, busy, umbrella, rl_iteration=step,
                        rl_bucket="productive", lens_group="policy_update")
            writer.span("rl.idle.barrier", busy, start + STEP, umbrella, rl_iteration=step, rl_bucket="idle",
                        lens_group="efficiency", rl_efficiency_category="idle/barrier")
        writer.close()
    columns = [[row[rank % 4] for rank in range(ranks)] for row in PRODUCTIVE]
    slowest = [max(range(ranks), key=lambda r: (row[r], -r)) for row in columns]
    waits = [sum(row[s] - value for value in row) for row, s in zip(columns, slowest)]
    productive = sum(map(sum, columns))
    wall = ranks * (JOB[1] - JOB[0])
    return {"productive_s": productive, "wall_rank_s": wall, "slowest": slowest, "waits_s": waits,
            "steps": len(STEP_START), "ranks": ranks}
