"""DeviceTimer against the CPU stand-in: the device-to-host mapping under known, varying lags,
re-anchoring against drift, the bounded event pool and its untimed count, order, fork."""

import os
import threading
import time

import pytest

from lens_core import Bucket, SpanRegistry, semconv
from lens_core import _device
from lens_core._device import DeviceTimer, StandInDevice, UNTIMED

START, END, INDEX = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME, semconv.LENS_DEVICE_INDEX


class Record:
    """The fields DeviceTimer reads and writes on an ended span record."""

    __slots__ = ("attrs", "dev_mark", "span_id")

    def __init__(self, group, span_id=0):
        self.attrs = {semconv.LENS_GROUP: group}
        self.dev_mark = None
        self.span_id = span_id


@pytest.fixture(autouse=True)
def groups():
    SpanRegistry.register("dev", ["fwd", "log"], buckets={"fwd": Bucket.PRODUCTIVE, "log": Bucket.OVERHEAD},
                          device_timed=["fwd"])


class FakeClock:
    """A host clock the test advances (for drift over hours in no time)."""

    def __init__(self):
        self.now = 1_700_000_000_000_000_000

    def __call__(self):
        return self.now


def _span(timer, device, group="fwd", busy_ns=0, clock=None):
    r = Record(group)
    r.dev_mark = timer.enter(r.attrs)
    if busy_ns:
        device.launch(busy_ns)
    if clock is not None:
        clock.now += 1000
    timer.exit(r.dev_mark)
    events = list(device.log)[-2:] if r.dev_mark else None
    return r, events


def _wait_settled(timer, records, timeout=5.0):
    out = timer.settle(records)
    deadline = time.monotonic() + timeout
    while timer.held and time.monotonic() < deadline:
        time.sleep(0.002)
        out += timer.settle([])
    return out


def test_mapping_follows_a_lag_that_varies():
    """Each span's device start and end are when the stand-in's device reached its events (its
    lag changes from span to span), on the host clock, not the host's own start and end."""
    device = StandInDevice(lag=0, drift_ppm=0)
    timer = DeviceTimer(device)
    cases = []
    for lag_ms in (0.5, 4.0, 1.5, 7.0):
        device.lag = int(lag_ms * 1e6)
        r, events = _span(timer, device, busy_ns=int(lag_ms * 2e5))
        cases.append((r, [done for _, done in events], lag_ms))
    out = _wait_settled(timer, [r for r, _, _ in cases])
    assert [r for r, _, _ in cases] == out
    for r, (start_truth, end_truth), lag_ms in cases:
        assert abs(r.attrs[START] - start_truth) <= 1_000, lag_ms  # within a microsecond
        assert abs(r.attrs[END] - end_truth) <= 1_000, lag_ms
        assert r.attrs[INDEX] == 0
        assert r.dev_mark is None
    assert timer.timed == 4 and timer.untimed == 0


def test_a_host_only_group_is_not_timed():
    device = StandInDevice()
    timer = DeviceTimer(device)
    r, _ = _span(timer, device, group="log")
    assert r.dev_mark is None and device.records == 0
    assert timer.settle([r]) == [r] and START not in r.attrs


def test_reanchoring_keeps_drift_under_a_tenth_of_a_millisecond_an_hour():
    """A device clock running 200 ppm fast (720 ms an hour apart from the host's): spans over a
    simulated hour are mapped within 0.1 ms of when the device reached them. The same spans
    mapped through the first anchor alone (no re-anchoring) are off by far more, so the drift is
    real and the re-anchoring is what removes it."""
    clock = FakeClock()
    device = StandInDevice(lag=2_000_000, drift_ppm=200, clock=clock)
    timer = DeviceTimer(device, reanchor_s=0.0)
    worst = naive_worst = 0
    first_anchor = None
    for second in range(0, 3600, 30):
        clock.now += 30_000_000_000
        r, events = _span(timer, device, clock=clock)
        clock.now += 5_000_000  # the device catches up
        assert timer.settle([r]) == [r]
        truth = events[0][1]
        worst = max(worst, abs(r.attrs[START] - truth))
        if first_anchor is None:
            host_ns, event = timer._anchors[0][0]
            first_anchor = (host_ns, device.device_clock(device._done[event]))
        else:
            host_ns, device_ns = first_anchor
            naive = host_ns + device.device_clock(truth) - device_ns
            naive_worst = max(naive_worst, abs(naive - truth))
    assert worst < 100_000, worst
    assert naive_worst > 100 * worst and naive_worst > 500_000_000


def test_the_pool_is_bounded_and_what_it_cannot_time_is_counted():
    """Spans made faster than the device completes them: at most ``capacity`` events exist,
    the spans past them are host-only and counted, and once the device catches up the pool
    serves again."""
    device = StandInDevice(lag=300_000_000)  # the device is 0.3 s behind
    timer = DeviceTimer(device, capacity=8, hold_s=0.0)
    records = [_span(timer, device)[0] for _ in range(100)]
    assert timer._made == 8
    assert sum(1 for r in records if r.dev_mark) == 4
    assert timer.untimed == 96
    out = timer.settle(records)  # hold_s=0: not reached now, so host-only (counted)
    assert out == records and timer.untimed == 100 and not any(START in r.attrs for r in records)
    time.sleep(0.35)  # the device catches up
    device.lag = 0
    r, _ = _span(timer, device)
    time.sleep(0.001)
    assert timer.settle([r]) == [r] and START in r.attrs and timer._made == 8


def test_records_leave_in_arrival_order_behind_one_waiting_for_the_device():
    """Live goodput needs children before parents: a host-only record behind a device-timed one
    that the device has not reached waits with it."""
    device = StandInDevice(lag=50_000_000)
    timer = DeviceTimer(device)
    timed, _ = _span(timer, device)
    plain = Record("log")
    assert timer.settle([timed, plain]) == [] and timer.held == 2
    out = _wait_settled(timer, [])
    assert out == [timed, plain] and START in timed.attrs


def test_final_settle_waits_until_the_deadline_then_counts():
    device = StandInDevice(lag=30_000_000)
    timer = DeviceTimer(device)
    soon, _ = _span(timer, device)
    device.lag = 60_000_000_000
    never, _ = _span(timer, device)
    started = time.monotonic()
    out = timer.settle([soon, never], deadline=time.monotonic() + 0.3, final=True)
    assert out == [soon, never]
    assert 0.25 <= time.monotonic() - started < 5
    assert START in soon.attrs and START not in never.attrs and timer.untimed == 1


def test_an_exit_without_an_event_gives_the_start_back():
    device = StandInDevice(lag=10_000_000_000)
    timer = DeviceTimer(device, capacity=4)
    r = Record("fwd")
    r.dev_mark = timer.enter(r.attrs)
    others = [timer.enter({semconv.LENS_GROUP: "fwd"}) for _ in range(3)]
    assert all(others) and timer._made == 4
    timer.exit(r.dev_mark)  # no event left for the end
    assert timer.untimed == 1 and r.dev_mark[1] is None
    assert timer.settle([r]) == [r] and START not in r.attrs
    assert timer.enter({semconv.LENS_GROUP: "fwd"}) is not UNTIMED  # the start event came back


def test_work_queued_from_another_thread_lands_inside_the_span():
    """A span around loss.backward() on the caller's thread: autograd's engine thread queues the
    backward kernels on the same stream, so the end event recorded after them on the caller's
    thread is reached only once they are done; the span's device interval covers that work."""
    device = StandInDevice(lag=1_000_000)
    timer = DeviceTimer(device)
    r = Record("fwd")
    r.dev_mark = timer.enter(r.attrs)
    finished = []
    worker = threading.Thread(target=lambda: finished.append(device.launch(20_000_000)))
    worker.start()
    worker.join()
    timer.exit(r.dev_mark)
    out = _wait_settled(timer, [r])
    assert out == [r]
    assert r.attrs[END] >= finished[0] - 1_000
    assert r.attrs[END] - r.attrs[START] >= 20_000_000 - 1_000


def test_the_child_of_a_fork_never_uses_the_parent_events():
    """After a fork the child's device-timed spans are host-only: the parent's events, pool and
    waiting records are never touched there (a child cannot use its parent's CUDA context)."""
    device = StandInDevice(lag=10_000_000_000)
    timer = DeviceTimer(device)
    waiting, _ = _span(timer, device)
    timer.settle([waiting])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            before = device.records
            mark = timer.enter({semconv.LENS_GROUP: "fwd"})
            ok = mark is None and device.records == before and timer.held == 0 and not timer._free
            os.write(write, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 8)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert timer.held == 1  # the parent's own are untouched


def test_timer_for_off_is_none_and_auto_does_not_load_cuda_without_torch():
    """off: no timer. auto, where torch has not initialised CUDA: a timer whose probe finds no
    device, so device-timed spans are host-only and nothing is loaded."""
    _device.use(None)
    assert _device.timer_for("off") is None
    timer = _device.timer_for("auto")
    assert timer.enter({semconv.LENS_GROUP: "fwd"}) is None and timer.backend is None
    if "torch" not in __import__("sys").modules:
        assert not _device.cuda_initialised()


def test_registry_refuses_device_timed_umbrellas_and_strangers():
    with pytest.raises(ValueError, match="umbrella groups cannot be device-timed"):
        SpanRegistry.register("x", ["a"], umbrellas=["a"], device_timed=["a"])
    with pytest.raises(ValueError, match="device_timed names groups it does not register: b"):
        SpanRegistry.register("y", ["a2"], device_timed=["b"])
    assert SpanRegistry.device_timed_groups() == frozenset({"fwd"})
    assert SpanRegistry.group_info("fwd").device_timed and not SpanRegistry.group_info("log").device_timed


def test_config_reads_device_timing_events_and_nvtx():
    from lens_core.config import LensConfig

    config = LensConfig.from_env(environ={"LENS_DEVICE_TIMING": " On ", "LENS_DEVICE_EVENTS": "64", "LENS_NVTX": "1"})
    assert (config.device_timing, config.device_events, config.nvtx) == ("on", 64, True)
    assert (LensConfig().device_timing, LensConfig().device_events, LensConfig().nvtx) == ("auto", 4096, False)
    with pytest.raises(ValueError, match=r"^LENS_DEVICE_TIMING='sometimes': allowed: auto, on, off$"):
        LensConfig.from_env(environ={"LENS_DEVICE_TIMING": "sometimes"})
    with pytest.raises(ValueError, match="LENS_DEVICE_EVENTS"):
        LensConfig.from_env(environ={"LENS_DEVICE_EVENTS": "2"})
    with pytest.raises(ValueError, match=r"device_timing='yes': allowed: auto, on, off"):
        LensConfig(device_timing="yes")


def test_marks_handed_over_for_sdk_records_are_bounded():
    """SDK spans hand their marks over by span id until their records arrive; records that never
    arrive (dropped at a full queue) cannot keep the pool's events: past a quarter of the pool
    the oldest is given up (its events back in the pool), host-only and counted."""
    device = StandInDevice(lag=0)
    timer = DeviceTimer(device, capacity=40)
    for span_id in range(1, 101):
        mark = timer.enter({semconv.LENS_GROUP: "fwd"})
        timer.exit(mark)
        assert mark, "a mark given up gives its events back: the pool never runs dry"
        timer.hand_over(span_id, mark)
    assert len(timer.keyed) == 10 and timer._made <= 40
    assert timer.untimed == 90
    r = Record("fwd", span_id=max(timer.keyed))
    time.sleep(0.001)
    assert timer.settle([r]) == [r] and START in r.attrs
