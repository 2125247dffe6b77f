"""The enabled path on the application thread: an enabled leaf managed_span with 3 attributes on
Lens's native recorder against the OpenTelemetry SDK's start_as_current_span with the same
attributes, each side as its own setup builds it (the SDK: a bare TracerProvider).

Lens's rounds alternate with the SDK's (the SDK round is timed in each Lens round's setup),
so both see the same machine load; bench/checks.txt divides by the paired SDK minimum
(compiled recorder <= 0.2x, pure-Python recorder <= 0.6x). Lens's export thread runs as in
a job (exporter ``none``: records are taken and dropped on the floor by the pipeline).
"""


import pytest

from paired import paired_benchmark

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from lens_core.semconv import RL_BUCKET  # noqa: E402

LOOP = 1000


def _sdk():
    tracer = TracerProvider().get_tracer("lens")
    attrs = {RL_BUCKET: "overhead", "a": 1, "b": "x", "c": 2.5}

    def run():
        for _ in range(LOOP):
            with tracer.start_as_current_span("name", attributes=attrs):
                pass

    return run


def _lens(recorder):
    from otel_bridge import setup_telemetry

    SpanRegistry.register("bench", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g", metrics_enabled=False,
                                        recorder=recorder), _allow_reinit=True)
    assert lens_core.is_span_group_enabled("g")
    span = lens_core.managed_span

    def run():
        for _ in range(LOOP):
            with span("g", "name", a=1, b="x", c=2.5):
                pass

    return handle, run


@pytest.mark.benchmark(group="enabled span")
@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_enabled_managed_span(benchmark, gate, recorder):
    """Paired rounds: Lens (compiled or pure-Python gate and recorder, per ``gate``) against
    the SDK's own context manager."""
    handle, lens_run = _lens(recorder)
    try:
        paired_benchmark(benchmark, lens_run, _sdk(), label="sdk", rounds=100, warmup=5)
    finally:
        handle.shutdown()
    benchmark.extra_info["impl"] = lens_core.IMPLEMENTATION
    benchmark.extra_info["recorder"] = recorder
