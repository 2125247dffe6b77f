"""Mistakes a checker must catch in code that uses Lens: each line marked ``# expect-error``
must be reported by mypy --strict and by pyright --strict, and no other line. It proves the
user program's clean result comes from real types, not from Any. Never run."""

from __future__ import annotations

from typing import AsyncIterator

from lens_core import IdleWait, LensConfig, SpanRegistry, current_trace_carrier, managed_span, trace_fn
from otel_bridge import setup_telemetry


@trace_fn("g")
def scale(x: int, *, factor: float = 1.0) -> float:
    return x * factor


@trace_fn("g")
async def fetch(n: int) -> bytes:
    return b"x" * n


@trace_fn("g")
async def stream(n: int) -> AsyncIterator[int]:
    yield n


class Model:
    @trace_fn("g")
    def step(self, batch: list[float]) -> float:
        return sum(batch)

    @trace_fn("g")
    @staticmethod
    def load(path: str) -> bytes:
        return path.encode()


def mistakes() -> None:
    scale("one")  # expect-error: a decorated function keeps its parameter types
    scale(1, factr=2.0)  # expect-error: and its keyword names
    text: str = scale(1)  # expect-error: and its return type
    data: bytes = fetch(1)  # expect-error: a traced coroutine function still returns a coroutine
    first: int = stream(1)  # expect-error: a traced async generator is still an async iterator
    Model().step("batch")  # expect-error: a traced method keeps its signature once bound
    Model.load(b"path")  # expect-error: so does a traced staticmethod
    with managed_span("g", "n") as span:
        span.set_attribute("k", 1)  # expect-error: the span is None when the group is off
    config = LensConfig()
    config.enabeld  # expect-error: LensConfig's fields are known
    LensConfig(enabled="yes")  # expect-error: and typed
    SpanRegistry.register("ns", ["g"], buckets={"g": 1})  # expect-error: buckets are names
    setup_telemetry(config, rank="0")  # expect-error: ranks are ints
    polls: str = IdleWait("idle/x").done()  # expect-error: done() counts polls
    carrier: dict[str, int] = current_trace_carrier()  # expect-error: carriers map str to str
    print(text, data, first, polls, carrier)
