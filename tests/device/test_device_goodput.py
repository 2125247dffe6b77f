"""Live goodput on the clock the work ran on (lens_core.device_clock): both GoodputRollup twins count a
leaf with device times on its device interval, take the host's wait for device-timed productive work
out of overhead, and read a host-only rank exactly as before."""

import re

import pytest

from lens_core import device_clock, semconv
from lens_core._native import _goodput_py, _recorder_py

try:
    from lens_core._native import _goodput
    from lens_core._native._recorder import make_record as compiled_make_record
except ImportError:  # pure-Python install
    _goodput = compiled_make_record = None

STEP = re.compile(r"(^|\.)step$").search
MS = 1_000_000
START, END = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME


def _twins():
    twins = [(_goodput_py.GoodputRollup, _recorder_py.make_record)]
    if _goodput is not None:
        twins.append((_goodput.GoodputRollup, compiled_make_record))
    return twins


def _step(t0, device, as_strings=False):
    """The issue's H200 step (ms): host spans end when their kernels are queued, the log call
    waits for the device. (name, span id, parent, start, end, attrs) in end order."""
    def leaf(bucket, dev=None):
        attrs = {semconv.LENS_GROUP: "g", semconv.RL_BUCKET: bucket}
        if dev is not None and device:
            start, end = t0 + int(dev[0] * MS), t0 + int(dev[1] * MS)
            attrs[START], attrs[END] = (str(start), str(end)) if as_strings else (start, end)
        return attrs

    ms = lambda x: t0 + int(x * MS)  # noqa: E731
    return [
        ("train.data", 2, 1, ms(0), ms(0.2), leaf("overhead", (0, 2.5))),  # a copy: device-timed overhead
        ("train.forward", 3, 1, ms(0.2), ms(1.2), leaf("productive", (2.5, 15.5))),
        ("train.backward", 4, 1, ms(1.2), ms(3.0), leaf("productive", (15.5, 39.5))),
        ("train.optimizer", 5, 1, ms(3.0), ms(3.8), leaf("productive", (39.5, 42.5))),
        ("train.log", 6, 1, ms(3.8), ms(42.7), leaf("overhead")),  # loss.item(): waits for the device
        ("train.step", 1, 0, ms(0), ms(43.0), {semconv.RL_ITERATION: 1, semconv.LENS_GROUP: "step"}),
    ]


def _feed(rollup_cls, make, specs):
    rollup = rollup_cls(STEP)
    records = [make(0, name, 1, 1, span, parent, False, None, start, end, dict(attrs), None, None, 0, None)
               for name, span, parent, start, end, attrs in specs]
    steps = rollup.feed(records, {}, frozenset())
    return rollup.totals, steps


@pytest.mark.parametrize("twin", range(len(_twins())), ids=["pure", "compiled"][:len(_twins())])
def test_a_device_timed_step_counts_the_device_intervals(twin):
    """Productive = forward + backward + optimizer on the device (13 + 24 + 3 ms); the data copy
    counts its 2.5 ms on the device; the log call's 38.9 ms wait less the 38.9 ms the device spent
    on productive work within it leaves 0.2 ms of overhead (its host time after the optimizer's
    kernels finished at 42.5)."""
    totals, steps = _feed(*_twins()[twin], _step(10**12, device=True))
    assert totals == [40 * MS, int(2.5 * MS) + int(0.2 * MS), 0, 0]
    (iteration, wall, own), = steps
    assert own == totals and wall == 43 * MS


@pytest.mark.parametrize("twin", range(len(_twins())), ids=["pure", "compiled"][:len(_twins())])
def test_a_host_only_rank_reads_exactly_as_before(twin):
    totals, _ = _feed(*_twins()[twin], _step(10**12, device=False))
    assert totals == [int(1.0 * MS) + int(1.8 * MS) + int(0.8 * MS), int(0.2 * MS) + int(38.9 * MS), 0, 0]


def test_twins_agree_and_device_times_as_strings_count_the_same():
    """ClickHouse stores attributes as strings: the rule reads digits the same as ints."""
    results = {(cls.__module__, strings): _feed(cls, make, _step(10**12, True, strings))
               for cls, make in _twins() for strings in (False, True)}
    assert len({repr(v) for v in results.values()}) == 1


def test_the_rule_in_one_place():
    assert device_clock.device_interval({START: 5, END: 9}) == (5, 9)
    assert device_clock.device_interval({START: 9, END: 5}) is None  # backwards: host-only
    assert device_clock.device_interval({START: "x", END: 9}) is None
    assert device_clock.covered_ns(0, 100, [(10, 20), (15, 30), (90, 200), (300, 400)]) == 30
