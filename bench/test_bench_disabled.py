"""The disabled hot path against the classic implementations, measured in one run.

Each benchmark body runs its statement LOOP times so the timer's own cost is negligible.
bench/gate.py turns these timings into the ratios CI gates on.
"""

import contextlib

import pytest

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


@pytest.mark.benchmark(group="managed_span disabled")
def test_managed_span_disabled(benchmark, gate, one_group_off):
    span = gate.managed_span

    def run():
        for _ in range(LOOP):
            with span("g", "name", k=1):
                pass

    benchmark.extra_info["impl"] = lens_core._impl.IMPLEMENTATION
    benchmark(run)


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


@pytest.mark.benchmark(group="trace_fn disabled")
def test_trace_fn_disabled(benchmark, gate, one_group_off):
    traced = lens_core.trace_fn("g", "name")(_plain)

    def run():
        for _ in range(LOOP):
            traced(1)

    benchmark.extra_info["impl"] = lens_core._impl.IMPLEMENTATION
    benchmark(run)


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
