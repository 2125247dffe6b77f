"""Do-nothing tracer and meter for a quiet rank: the OpenTelemetry API's surface, without importing it."""

from __future__ import annotations

__all__ = ["NOOP_METER", "NOOP_TRACER", "NoOpMeter", "NoOpTracer"]


class _NoOpSpan:
    """A span that records nothing (``is_recording()`` is False); a context manager."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return False

    def is_recording(self) -> bool:
        return False

    def _ignore(self, *args, **kwargs) -> None:
        return None

    set_attribute = set_attributes = add_event = add_link = set_status = update_name = end = _ignore
    record_exception = _ignore

    def get_span_context(self):
        return None


_SPAN = _NoOpSpan()


class NoOpTracer:
    """``start_span`` / ``start_as_current_span`` hand out one shared non-recording span."""

    __slots__ = ()

    def start_span(self, name, *args, **kwargs) -> _NoOpSpan:
        return _SPAN

    def start_as_current_span(self, name, *args, **kwargs) -> _NoOpSpan:
        return _SPAN  # a context manager, and usable as one from a decorator's body too


class _NoOpInstrument:
    """Every synchronous instrument: ``add``, ``record`` and ``set`` do nothing."""

    __slots__ = ()

    def add(self, amount, attributes=None, context=None) -> None:
        return None

    record = set = add


_INSTRUMENT = _NoOpInstrument()


class NoOpMeter:
    """``create_*`` return one shared do-nothing instrument (observable callbacks are never called)."""

    __slots__ = ()

    def _create(self, name, *args, **kwargs) -> _NoOpInstrument:
        return _INSTRUMENT

    create_counter = create_up_down_counter = create_histogram = create_gauge = _create
    create_observable_counter = create_observable_up_down_counter = create_observable_gauge = _create


NOOP_TRACER = NoOpTracer()
"""The tracer a quiet rank's handle returns."""

NOOP_METER = NoOpMeter()
"""The meter a quiet rank's handle returns."""
