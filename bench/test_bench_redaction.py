"""What scanning text for credentials costs an enabled span: a text attribute never seen
before (scanned every time) against the same span with a text seen before (cached).

Both sides run managed_span on the compiled gate through setup_telemetry with exporter
``none``, with each recorder; rounds alternate so both see the same machine load, and
bench/checks.txt takes the median of the rounds' own ratios.
"""

import itertools

import pytest

from paired import paired_benchmark

pytest.importorskip("opentelemetry.sdk")

import lens_core  # noqa: E402
from lens_core import LensConfig, _impl, redaction  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402

LOOP = 1000
ROUNDS, WARMUP = 100, 5


def _spans(texts):
    span = lens_core.managed_span

    def run():
        for text in itertools.islice(texts, LOOP):
            with span("g", "name", a=1, shard=text):
                pass

    return run


@pytest.mark.benchmark(group="redaction")
@pytest.mark.parametrize("recorder", ["sdk", "native"])
def test_enabled_span_with_a_new_text(benchmark, recorder):
    """Every round's 1,000 texts are new to the clean-text cache (a shard path with a
    counter: 34 characters, no credential marker), so each one is scanned."""
    from otel_bridge import setup_telemetry

    pytest.importorskip("lens_core._gate")
    _impl.use("cython")
    SpanRegistry.register("bench", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g", metrics_enabled=False,
                                        recorder=recorder), _allow_reinit=True)
    # built before timing, so both sides only iterate
    fresh = iter([f"/data/shards/part-{i:08d}.parquet" for i in range(LOOP * (ROUNDS + WARMUP + 2))])
    seen = itertools.repeat("/data/shards/part-00000000.parquet")
    try:
        paired_benchmark(benchmark, _spans(fresh), _spans(seen), label="seen", rounds=ROUNDS, warmup=WARMUP)
    finally:
        handle.shutdown()
    assert len(redaction._clean_texts) <= redaction._CLEAN_TEXT_LIMIT
    benchmark.extra_info["recorder"] = recorder
