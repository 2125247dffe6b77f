"""The enabled path: managed_span through the OTel backend against the SDK's own
start_as_current_span, on the same TracerProvider (SimpleSpanProcessor, null exporter).

Both sides produce the same span: the group is a leaf, so lens stamps its bucket
(rl.bucket=overhead), and the SDK call is given that attribute too ("the same
attributes"). The span pipeline is identical, so the ratio bench/gate.py checks is the
cost lens adds (gate, bucket lookup and stamping, attribute sanitising) against what the
SDK's context manager costs.
"""

import time

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

import lens_core  # noqa: E402
from lens_core.semconv import RL_BUCKET  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge.backend import OTelBackend  # noqa: E402

LOOP = 1000


class NullSpanExporter(SpanExporter):
    """Accepts every span and keeps nothing."""

    def export(self, spans):
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


@pytest.fixture
def provider():
    """One TracerProvider per benchmark: SimpleSpanProcessor over a null exporter."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(NullSpanExporter()))
    yield tracer_provider
    tracer_provider.shutdown()


def _enable_lens(provider):
    SpanRegistry.register("bench", ["g"])
    lens_core.install_backend(OTelBackend(provider))
    lens_core.set_enabled_span_groups(["g"])
    assert lens_core.is_span_group_enabled("g")
    span = lens_core.managed_span

    def run():
        for _ in range(LOOP):
            with span("g", "name", a=1, b="x"):
                pass

    return run


def _sdk(provider):
    tracer = provider.get_tracer("lens")

    def run():
        for _ in range(LOOP):
            with tracer.start_as_current_span("name", attributes={RL_BUCKET: "overhead", "a": 1, "b": "x"}):
                pass

    return run


@pytest.mark.benchmark(group="enabled span")
def test_enabled_managed_span(benchmark, provider):
    """Lens's rounds alternate with the SDK's (timed in each round's setup), so both
    sides see the same machine load; bench/gate.py divides by the paired SDK minimum."""
    lens_run, sdk_run = _enable_lens(provider), _sdk(provider)
    sdk_rounds = []

    def paired_sdk_round():
        started = time.perf_counter()
        sdk_run()
        sdk_rounds.append(time.perf_counter() - started)

    benchmark.pedantic(lens_run, setup=paired_sdk_round, rounds=150, warmup_rounds=5)
    benchmark.extra_info["impl"] = lens_core.IMPLEMENTATION
    benchmark.extra_info["paired_sdk_min_s"] = min(sdk_rounds[5:])  # after the warm-up rounds


@pytest.mark.benchmark(group="enabled span", min_rounds=100, warmup=True)
def test_sdk_start_as_current_span(benchmark, provider):
    """The SDK side on its own, for the table (the gate uses the paired measurement)."""
    benchmark(_sdk(provider))
