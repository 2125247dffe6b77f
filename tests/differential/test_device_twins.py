"""The compiled and pure recorders time device-timed spans alike: one workload (device-timed and
host-only spans, nesting, an exception, trace_fn, a pool too small for every span) through each
gate-and-recorder twin, on a CPU stand-in driven by a clock the test advances, so every device
time is known in advance; the settled records' device attributes and the untimed counts agree."""

import contextvars

import pytest
from twins import count, recorder_pair, require_pair, skip_in_pure_pass

pytest.importorskip("opentelemetry.sdk")

import lens_core  # noqa: E402
from lens_core import _device, _impl, semconv, state  # noqa: E402
from lens_core.registry import Bucket, SpanRegistry  # noqa: E402

pytestmark = skip_in_pure_pass
DEVICE_KEYS = (semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME, semconv.LENS_DEVICE_INDEX)


class Clock:
    def __init__(self):
        self.now = 1_800_000_000_000_000_000

    def __call__(self):
        self.now += 1_000  # every reading 1 µs later: the stand-in's times follow the workload's steps
        return self.now


def _run(twin):
    from opentelemetry.sdk.trace import TracerProvider

    from otel_bridge.sdk import recording

    _impl.use(twin.impl)
    SpanRegistry.register("dt", ["step", "fwd", "bwd", "log"], umbrellas=["step"],
                          buckets={"fwd": Bucket.PRODUCTIVE, "bwd": Bucket.PRODUCTIVE, "log": Bucket.OVERHEAD},
                          device_timed=["fwd", "bwd"])
    clock = Clock()
    device = _device.StandInDevice(lag=lambda now: (now // 1_000) % 7 * 250_000, clock=clock, drift_ppm=30)
    timer = _device.DeviceTimer(device, capacity=6, reanchor_s=1e9)  # one anchor: the same in both runs
    rec = twin.Recorder()
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
    rec._device = timer
    traced = lens_core.trace_fn("bwd", "train.backward")(lambda: device.launch(400_000))
    lens_core.install_backend(rec)
    try:
        lens_core.set_span_group_spec("all")
        for step in range(4):
            with lens_core.umbrella_span("step", "train.step"):
                with lens_core.managed_span("fwd", "train.forward", k=step):
                    device.launch(1_000_000)
                traced()
                try:
                    with lens_core.managed_span("fwd", "train.fails"):
                        raise ValueError("x")
                except ValueError:
                    pass
                with lens_core.managed_span("log", "train.log"):
                    pass
    finally:
        lens_core.uninstall_backend()
    clock.now += 10_000_000_000  # the device is done with everything
    records = timer.settle(rec.take(1 << 20))
    out = [(r.name, tuple(r.attrs.get(k) for k in DEVICE_KEYS)) for r in records]
    return out, timer.untimed, timer.timed


def test_both_recorders_time_device_spans_alike():
    pair = require_pair(recorder_pair())
    before = _impl.IMPLEMENTATION
    results = []
    try:
        for twin in pair:
            SpanRegistry.clear()
            state._reset_for_tests()
            results.append(contextvars.Context().run(_run, twin))
    finally:
        _impl.use(before)
        SpanRegistry.clear()
        state._reset_for_tests()
    compiled, pure = results
    assert compiled == pure
    records, untimed, timed = pure
    assert untimed > 0 and timed > 0  # the small pool left some spans host-only
    assert any(device[0] is not None for name, device in records if name == "train.backward")
    assert all(device == (None, None, None) for name, device in records if name in ("train.step", "train.log"))
    count("recorder", 1)
