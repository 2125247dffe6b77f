"""What scanning text for credentials costs an enabled span: a text attribute never seen
before (scanned every time) against the same span with a text already known to be clean.

Both sides run managed_span on the compiled gate through setup_telemetry with exporter
``none``, with each recorder, and both take a different text object for every span, built
before timing: the seen side's are put in the clean-text cache just before its round, so
the two differ by the scan alone (one repeated text instead read 7-8 % faster with the SDK
recorder even with no scan at all: a string object hot in every cache). Rounds alternate so
both see the same machine load, and bench/checks.txt takes the median of the rounds' own
ratios.
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
    count = LOOP * (ROUNDS + WARMUP + 2)
    fresh = iter([f"/data/shards/part-{i:08d}.parquet" for i in range(count)])
    known = [f"/data/shards/seen-{i:08d}.parquet" for i in range(count)]
    seen = iter(known)
    rounds = iter(range(0, count, LOOP))

    def mark_clean():
        # the next round's texts, as the clean-text cache holds texts it has scanned before
        start = next(rounds)
        if len(redaction._clean_texts) + LOOP > redaction._CLEAN_TEXT_LIMIT:
            redaction._clean_texts.clear()
        redaction._clean_texts.update(known[start:start + LOOP])

    try:
        paired_benchmark(benchmark, _spans(fresh), _spans(seen), label="seen", rounds=ROUNDS, warmup=WARMUP,
                         prepare=mark_clean)
    finally:
        handle.shutdown()
    assert len(redaction._clean_texts) <= redaction._CLEAN_TEXT_LIMIT
    benchmark.extra_info["recorder"] = recorder
