"""What scanning text for credentials costs an enabled span: a text attribute never seen
before (scanned every time) against the same span with a text seen before (cached).

Both sides run managed_span through the OTel backend on one TracerProvider
(SimpleSpanProcessor, null exporter); rounds alternate so both see the same machine
load, and bench/gate.py divides by the paired minimum.
"""

import itertools
import time

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

import lens_core  # noqa: E402
from lens_core import redaction  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge.backend import OTelBackend  # noqa: E402
from test_bench_enabled import NullSpanExporter  # noqa: E402

LOOP = 1000
ROUNDS, WARMUP = 100, 5


@pytest.fixture
def enabled():
    """Group ``g`` on, spans through the OTel backend into a null exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(NullSpanExporter()))
    SpanRegistry.register("bench", ["g"])
    lens_core.install_backend(OTelBackend(provider))
    lens_core.set_enabled_span_groups(["g"])
    yield
    provider.shutdown()


def _spans(texts):
    span = lens_core.managed_span

    def run():
        for text in itertools.islice(texts, LOOP):
            with span("g", "name", a=1, shard=text):
                pass

    return run


@pytest.mark.benchmark(group="redaction")
def test_enabled_span_with_a_new_text_attribute(benchmark, enabled):
    """Every round's 1,000 texts are new to the clean-text cache (a shard path with a
    counter: 34 characters, no credential marker), so each one is scanned."""
    # built before timing, so both sides only iterate
    fresh = iter([f"/data/shards/part-{i:08d}.parquet" for i in range(LOOP * (ROUNDS + WARMUP + 2))])
    seen = itertools.repeat("/data/shards/part-00000000.parquet")
    new_run, seen_run = _spans(fresh), _spans(seen)
    seen_rounds = []

    def paired_seen_round():
        started = time.perf_counter()
        seen_run()
        seen_rounds.append(time.perf_counter() - started)

    benchmark.pedantic(new_run, setup=paired_seen_round, rounds=ROUNDS, warmup_rounds=WARMUP)
    assert len(redaction._clean_texts) <= redaction._CLEAN_TEXT_LIMIT
    benchmark.extra_info["paired_seen_min_s"] = min(seen_rounds[WARMUP:])
