"""The disabled hot path against the classic implementations, measured in one run.

Each benchmark body runs its statement LOOP times so the timer's own cost is negligible.
bench/gate.py turns these timings into the ratios CI gates on.
"""

import contextlib
import time

import pytest
from paired import paired_benchmark

import lens_core
from lens_core.registry import SpanRegistry
from recording import RecordingBackend

LOOP = 1000


@pytest.fixture
def one_group_off():
    """A registered group that is off while another group is on (so the gate is live)."""
    SpanRegistry.register("bench", ["g", "other"])
    lens_core.install_backend(RecordingBackend())
    lens_core.set_enabled_span_groups(["other"])
    assert not lens_core.is_span_group_enabled("g")


def _reference_contextmanager(enabled):
    @contextlib.contextmanager
    def managed_span(group, name, tracer=None, **attrs):
        if group in enabled:
            yield object()
            return
        yield None

    return managed_span


def _reference_decorator(enabled, group):
    def decorate(fn):
        def wrapper(*args, **kwargs):
            if group in enabled:
                return None
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def _plain(x):
    return x


def _with_loop(span):
    def run():
        for _ in range(LOOP):
            with span("g", "name", k=1):
                pass

    return run


def _null_loop():
    null = contextlib.nullcontext
    for _ in range(LOOP):
        with null():
            pass


@pytest.mark.benchmark(group="managed_span disabled")
def test_managed_span_disabled(benchmark, gate, one_group_off):
    """Each round of the disabled managed_span loop is paired with a @contextmanager reference
    loop and a nullcontext loop timed in its setup, so the ratios bench/checks.txt gates on
    compare numbers taken under the same machine load (separate benchmarks drifted apart on a
    loaded machine)."""
    paired = {"reference": (_with_loop(_reference_contextmanager(frozenset({"other"}))), []),
              "nullcontext": (_null_loop, [])}

    def paired_rounds():
        for run, times in paired.values():
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)

    benchmark.pedantic(_with_loop(gate.managed_span), setup=paired_rounds, rounds=2000, warmup_rounds=50)
    benchmark.extra_info["impl"] = lens_core._impl.IMPLEMENTATION
    for label, (_, times) in paired.items():
        benchmark.extra_info[f"paired_{label}_s"] = times[50:]
        benchmark.extra_info[f"paired_{label}_min_s"] = min(times[50:])


@pytest.mark.benchmark(group="managed_span disabled")
def test_reference_contextmanager_disabled(benchmark, one_group_off):
    span = _reference_contextmanager(frozenset({"other"}))

    def run():
        for _ in range(LOOP):
            with span("g", "name", k=1):
                pass

    benchmark(run)


@pytest.mark.benchmark(group="managed_span disabled")
def test_nullcontext(benchmark):
    null = contextlib.nullcontext

    def run():
        for _ in range(LOOP):
            with null():
                pass

    benchmark(run)


def _calls(fn):
    def run():
        for _ in range(LOOP):
            fn(1)

    return run


@pytest.mark.benchmark(group="trace_fn disabled")
def test_trace_fn_disabled(benchmark, gate, one_group_off):
    """Each round of the traced loop is paired with a bare-call loop and a reference
    wrapper loop timed in its setup, so the overhead ratio bench/gate.py checks compares
    numbers taken under the same machine load."""
    traced = _calls(lens_core.trace_fn("g", "name")(_plain))
    paired = {"bare": (_calls(_plain), []),
              "reference": (_calls(_reference_decorator(frozenset({"other"}), "g")(_plain)), [])}

    def paired_rounds():
        for run, times in paired.values():
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)

    benchmark.pedantic(traced, setup=paired_rounds, rounds=3000, warmup_rounds=50)
    benchmark.extra_info["impl"] = lens_core._impl.IMPLEMENTATION
    for label, (_, times) in paired.items():
        benchmark.extra_info[f"paired_{label}_s"] = times[50:]
        benchmark.extra_info[f"paired_{label}_min_s"] = min(times[50:])


@pytest.mark.benchmark(group="trace_fn disabled")
def test_reference_decorator_disabled(benchmark, one_group_off):
    wrapped = _reference_decorator(frozenset({"other"}), "g")(_plain)

    def run():
        for _ in range(LOOP):
            wrapped(1)

    benchmark(run)


@pytest.mark.benchmark(group="trace_fn disabled")
def test_bare_call(benchmark):
    def run():
        for _ in range(LOOP):
            _plain(1)

    benchmark(run)


def _floor_loop():
    from lens_core import _gate

    span = _gate._reference_null_span

    def run():
        for _ in range(LOOP):
            with span("g", "name", k=1):
                pass

    return run


@pytest.mark.benchmark(group="managed_span disabled, against C")
def test_managed_span_disabled_against_c(benchmark, one_group_off):
    """A disabled group while telemetry is on (another group on), compiled gate, paired round by
    round with the floor: a C function of the same calling convention returning the prebuilt null
    span (lens_core._gate._reference_null_span). bench/checks.txt gates the median ratio <= 1.1."""
    pytest.importorskip("lens_core._gate")
    lens_core._impl.use("cython")
    paired_benchmark(benchmark, _with_loop(lens_core._impl.gate.managed_span), _floor_loop(), label="floor",
                     rounds=2000, warmup=50)


@pytest.mark.benchmark(group="managed_span disabled, against C")
def test_managed_span_quiet_against_c(benchmark):
    """The same on a quiet rank (no backend: every group off), for comparison."""
    pytest.importorskip("lens_core._gate")
    lens_core._impl.use("cython")
    SpanRegistry.register("bench", ["g", "other"])
    paired_benchmark(benchmark, _with_loop(lens_core._impl.gate.managed_span), _floor_loop(), label="floor",
                     rounds=2000, warmup=50)
