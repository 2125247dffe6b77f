"""A typed program that uses Lens the way docs/guide/instrumenting.md shows: registration, spans, scopes,
efficiency spans, trace_fn on every kind of callable, config and setup.

tests/typing/test_typing.py checks it with ``mypy --strict`` and ``pyright --strict`` (the
``assert_type`` lines are what the checkers must infer) and also runs it, so every line is
real, working code.
"""

from __future__ import annotations

import asyncio
import sys
from typing import AsyncIterator, Iterator, assert_type

from lens_core import (
    Bucket,
    IdleWait,
    LensConfig,
    SpanRegistry,
    bucket_scope,
    current_trace_carrier,
    deferred_child_span,
    efficiency_span,
    in_per_prompt_scope,
    is_span_group_enabled,
    iteration_scope,
    managed_span,
    per_prompt_scope,
    remote_trace_context,
    safe_set_span_attributes,
    span_attributes,
    span_cm,
    start_efficiency_span,
    trace_fn,
    umbrella_span,
    umbrella_trace_fn,
)
from lens_core.config import ExportRanks
from lens_core.efficiency import EfficiencySpan
from lens_core.typing import Span
from otel_bridge import TelemetryHandle, setup_telemetry

# ---- a library: groups declared at import time ---------------------------------------------

SpanRegistry.register(
    "typedlib",
    ["job", "step", "forward", "io", "checkpoint", "efficiency"],
    presets={"default": ["job", "checkpoint"], "per_step": ["job", "step", "forward", "io", "checkpoint"]},
    buckets={"forward": Bucket.PRODUCTIVE, "io": Bucket.OVERHEAD, "checkpoint": Bucket.OVERHEAD},
    umbrellas=["job", "step"],
)


@trace_fn("forward")
def forward(batch: list[float], scale: float = 1.0) -> float:
    """A plain function: the decorated one keeps its parameters and return type."""
    return sum(batch) * scale


@trace_fn("io", name="typedlib.fetch")
async def fetch(n: int) -> bytes:
    """A coroutine function: awaiting the decorated one gives bytes."""
    await asyncio.sleep(0)
    return b"x" * n


@trace_fn("io")
def batches(n: int) -> Iterator[list[int]]:
    """A generator function."""
    for i in range(n):
        yield [i, i + 1]


@trace_fn("io")
async def stream(n: int) -> AsyncIterator[int]:
    """An async generator function."""
    for i in range(n):
        await asyncio.sleep(0)
        yield i


class Trainer:
    """Methods, static and class methods, decorated either side of @staticmethod/@classmethod."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    @trace_fn("forward")
    def step(self, batch: list[float]) -> float:
        return forward(batch, scale=self.lr)

    @umbrella_trace_fn("job")
    def run(self, steps: int) -> list[float]:
        losses: list[float] = []
        for step in range(1, steps + 1):
            with iteration_scope(step), umbrella_span("step", "typedlib.step") as span:
                assert_type(span, Span | None)
                losses.append(self.step([1.0, 2.0]))
        return losses

    @staticmethod
    @trace_fn("io")
    def load(path: str) -> bytes:
        return path.encode()

    @trace_fn("io")
    @staticmethod
    def load_raw(path: str, size: int = 4) -> bytes:
        return path.encode()[:size]

    @classmethod
    @trace_fn("io")
    def create(cls, lr: float) -> Trainer:
        return cls(lr)

    @trace_fn("io")
    @classmethod
    def create_default(cls) -> Trainer:
        return cls(0.5)


def checked_loss(trainer: Trainer) -> float:
    """A return inside a span's block returns: the span never swallows the exception path."""
    with managed_span("forward", "typedlib.loss", rows=2) as span:
        if span is not None:
            span.set_attribute("typedlib.rows", 2)
            span.add_event("computed")
        return trainer.step([0.5])


def checkpoint(step: int) -> None:
    """Checkpoint staging, with the finalize on a thread parented on the staging span."""
    with managed_span("checkpoint", "typedlib.checkpointing", step=step):
        carrier = current_trace_carrier()
        assert_type(carrier, dict[str, str])
    with deferred_child_span("checkpoint", "typedlib.finalize", carrier, iteration=step) as span:
        assert_type(span, Span | None)


def poll_until_ready(ready: list[bool]) -> int:
    """An idle poll loop coalesced into one span."""
    wait = IdleWait("idle/buffer_starvation", group="efficiency")
    while not ready[0]:
        wait.starved()
        ready[0] = True
    polls = wait.done()
    assert_type(polls, int)
    idle: EfficiencySpan = start_efficiency_span("idle/refit_bubble")
    idle.poll(2)
    idle.end()
    with efficiency_span("idle/refit_event_wait") as span:
        assert_type(span, Span | None)
    return polls


async def serve() -> int:
    payload = await fetch(3)
    assert_type(payload, bytes)
    total = 0
    async for item in stream(3):
        assert_type(item, int)
        total += item
    return total + len(payload)


def library_work() -> None:
    trainer = Trainer.create(0.1)
    assert_type(trainer, Trainer)
    assert_type(Trainer.create_default(), Trainer)
    assert_type(trainer.run(2), list[float])
    assert_type(forward([1.0], scale=2.0), float)
    assert_type(Trainer.load("a"), bytes)
    assert_type(Trainer.load_raw("abc", size=2), bytes)
    assert_type(checked_loss(trainer), float)
    for batch in batches(2):
        assert_type(batch, list[int])
    with bucket_scope(Bucket.OVERHEAD), span_attributes(run="typed", attempt=1), per_prompt_scope():
        assert_type(in_per_prompt_scope(), bool)
        forward([2.0])
    with span_cm("typedlib.server", context={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) as span:
        safe_set_span_attributes(span, {"typedlib.route": "/x"})
    with remote_trace_context(current_trace_carrier()):
        checkpoint(2)
    poll_until_ready([False])
    assert_type(asyncio.run(serve()), int)
    assert_type(is_span_group_enabled("forward"), bool)


# ---- the job: configuration and setup ------------------------------------------------------


def main(trace_dir: str) -> int:
    config = LensConfig.from_env().replace(enabled=True, span_groups="per_step", exporter="file",
                                           file_dir=trace_dir, metrics_enabled=False)
    assert_type(config, LensConfig)
    assert_type(config.enabled, bool)
    assert_type(config.run_id, str | None)
    assert_type(config.export_ranks, ExportRanks)
    assert_type(config.export_ranks.exports(0, 8), bool)
    explicit = LensConfig(enabled=False, export_ranks="first", shutdown_timeout_ms=2000)
    assert_type(explicit.shutdown_timeout_ms, int)
    handle = setup_telemetry(config, rank=0, world_size=1, local_rank=0)
    assert_type(handle, TelemetryHandle)
    assert_type(handle.is_exporting, bool)
    assert_type(handle.run_id, str)
    with handle.tracer.start_as_current_span("typedlib.raw_otel"):
        library_work()
    counter = handle.meter.create_counter("typedlib.steps")
    counter.add(1)
    assert_type(handle.force_flush(1000), bool)
    return 0 if handle.shutdown() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
