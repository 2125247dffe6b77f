"""The compiled gate's address cache (a spelling seen at one address answers by pointer compare) never
answers for a stale snapshot or a different spelling."""

import gc

import pytest

import lens_core
from lens_core import _impl
from lens_core.registry import SpanRegistry

_gate = pytest.importorskip("lens_core._gate")


@pytest.fixture(autouse=True)
def compiled():
    previous = _impl.IMPLEMENTATION
    _impl.use("cython")
    yield
    _impl.use(previous)


def test_a_new_snapshot_does_not_read_the_old_answer(recorder):
    """Turning a group on after its disabled answer was cached: the next call records a span."""
    SpanRegistry.register("c", ["g", "other"])
    lens_core.set_enabled_span_groups(["other"])
    group = "g"
    for _ in range(3):
        assert lens_core.managed_span(group, "x") is _gate.null_span
    lens_core.set_enabled_span_groups(["g", "other"])
    with lens_core.managed_span(group, "x"):
        pass
    assert [s.name for s in recorder.spans] == ["x"]
    lens_core.set_enabled_span_groups(["other"])
    assert lens_core.managed_span(group, "x") is _gate.null_span


def test_spellings_made_at_run_time_are_answered_each_by_their_own_text(recorder):
    """Many distinct str objects, freed as they go (addresses are reused): each is answered for its
    own spelling, so the cache holds the objects it remembers rather than bare addresses."""
    SpanRegistry.register("c", ["on", "off"])
    lens_core.set_enabled_span_groups(["on"])
    for i in range(2000):
        name = "".join(["o", "n" if i % 2 else "ff"])  # a new object each time
        result = lens_core.managed_span(name, "x")
        assert (result is _gate.null_span) == (i % 2 == 0), (i, name)
        del name, result
        if i % 100 == 0:
            gc.collect()
