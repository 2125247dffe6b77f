"""Live goodput's cost against the enabled span path: the per-record roll-up the export thread runs for
every ended span (lens_core's GoodputRollup) against an enabled leaf managed_span with 3 attributes.

Paired rounds: each round opens LOOP leaf spans under a step on the native recorder (timed by
pytest-benchmark) and, in its setup, feeds the LOOP records the previous round recorded to a
fresh roll-up (timed as the paired side), as the export thread rolls up what was just recorded.
(One batch captured before all rounds sat wherever the heap had put it: in the whole bench suite
its roll-up read 0.053-0.057 of the span loop, against 0.028 for the latest records.) bench/checks.txt divides the
roll-up's best round by the span loop's: <= 5 % on the compiled gate (the roll-up holds the GIL
the application's spans need, so this is what it can take from them).
"""

import pytest

from paired import paired_benchmark

pytest.importorskip("opentelemetry.sdk")

import lens_core  # noqa: E402
from lens_core import LensConfig, _impl  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402

LOOP = 1000


@pytest.mark.benchmark(group="live goodput")
def test_live_goodput_rollup(benchmark, gate):
    from otel_bridge import setup_telemetry
    from otel_bridge.sdk.goodput import STEP_PATTERN, _rollup_for

    import re

    SpanRegistry.register("bench", ["g", "s"], umbrellas=["s"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g,s", metrics_enabled=False,
                                        recorder="native"), _allow_reinit=True)
    span, umbrella, scope = lens_core.managed_span, lens_core.umbrella_span, lens_core.iteration_scope

    def spans():
        with scope(1), umbrella("s", "bench.step"):
            for _ in range(LOOP - 1):
                with span("g", "name", a=1, b="x", c=2.5):
                    pass

    try:
        handle.pipeline._stopping = True  # keep the records: the export thread takes none
        rec = handle.providers.recorder
        rec.take(1 << 30)
        spans()
        records = rec.take(1 << 30)
        assert len(records) == LOOP
        rollup_class = _rollup_for(records[0])
        search = re.compile(STEP_PATTERN).search

        latest = [records]  # what the span loop recorded last: the export thread rolls up what was just recorded

        def rollup():
            steps = rollup_class(search).feed(latest[0], {}, frozenset())
            assert len(steps) == 1

        def measured():
            spans()
            latest[0] = rec.take(1 << 30)  # the queue stays short, as the export thread keeps it
            assert len(latest[0]) == LOOP

        paired_benchmark(benchmark, measured, rollup, label="rollup", rounds=200, warmup=10)
    finally:
        handle.pipeline._stopping = False
        handle.shutdown()
    benchmark.extra_info["impl"] = lens_core.IMPLEMENTATION
    benchmark.extra_info["rollup"] = rollup_class.__module__
