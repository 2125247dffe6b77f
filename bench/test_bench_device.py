"""A device-timed span's cost on the application thread against a host-only enabled span, on the CPU
stand-in (lens_core._device.StandInDevice: one event record at enter and one at exit, resolved on the
export thread), in paired rounds.

Both sides are timed in the application thread's CPU time (time.thread_time): the export thread
resolving the device's events holds the GIL for its own work, which a wall clock would charge to
whichever loop it interrupted (1,000 device-timed spans in 3 ms is ~500x a training step's rate).
bench/checks.txt gates the median of the rounds' ratios: device-timed / host-only <= 2.
"""

import time

import pytest
from paired import paired_benchmark

pytest.importorskip("opentelemetry.sdk")

import lens_core  # noqa: E402
from lens_core import Bucket, LensConfig, _device  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402

LOOP = 1000


def _loop(group):
    span = lens_core.managed_span

    def run():
        for _ in range(LOOP):
            with span(group, "name", a=1, b="x", c=2.5):
                pass

    return run


@pytest.mark.benchmark(group="device-timed span", timer=time.thread_time)
@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_device_timed_span(benchmark, gate, recorder):
    """Paired rounds: a device-timed leaf (group ``d``) against a host-only leaf (group ``g``), both
    enabled, 3 attributes, the same recorder and gate; a pool large enough that every span is timed."""
    from otel_bridge import setup_telemetry

    SpanRegistry.register("bench", ["g", "d"], buckets={"g": Bucket.PRODUCTIVE, "d": Bucket.PRODUCTIVE},
                          device_timed=["d"])
    device = _device.StandInDevice(lag=0, log=False)
    _device.use(lambda: device)
    try:
        handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g,d", metrics_enabled=False,
                                            recorder=recorder, device_timing="on", device_events=1 << 20),
                                 _allow_reinit=True)
        try:
            paired_benchmark(benchmark, _loop("d"), _loop("g"), label="host", rounds=100, warmup=5,
                             clock=time.thread_time)
            timer = handle.pipeline.device
            assert device.records > 0 and timer.untimed == 0, (device.records, timer.untimed)
        finally:
            handle.shutdown()
    finally:
        _device.use(None)
    benchmark.extra_info["impl"] = lens_core.IMPLEMENTATION
    benchmark.extra_info["recorder"] = recorder
