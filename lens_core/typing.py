"""Types for annotating code that uses lens_core; lens_core itself imports this only for type checkers.

Use it under ``TYPE_CHECKING`` (importing it loads :mod:`typing`, which ``import lens_core``
never does)::

    from typing import TYPE_CHECKING
    if TYPE_CHECKING:
        from lens_core.typing import Span

    def tag(span: "Span | None") -> None:
        if span is not None:
            span.set_attribute("rows", 10)
"""

from __future__ import annotations

from types import TracebackType
from typing import (Any, Callable, Literal, Mapping, Optional, ParamSpec, Protocol, Sequence, Type, TypeVar, Union,
                    overload)

__all__ = ["AttributeValue", "Carrier", "Span", "SpanContextManager", "SpanDecorator"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: What a span attribute may hold: a scalar or a homogeneous sequence of one scalar type.
AttributeValue = Union[str, bool, int, float, Sequence[str], Sequence[bool], Sequence[int], Sequence[float]]

#: A W3C trace-context carrier: ``{"traceparent": "00-...", "tracestate": "..."}``.
Carrier = Mapping[str, str]


class Span(Protocol):
    """A recording span, as ``managed_span`` and friends yield it (``None`` when the group is
    off). The methods are OpenTelemetry's ``Span`` API, which the SDK's spans implement."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one attribute."""

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Set several attributes."""

    def add_event(self, name: str, attributes: Optional[Mapping[str, AttributeValue]] = None,
                  timestamp: Optional[int] = None) -> None:
        """Add a timestamped event (epoch nanoseconds; now when None)."""

    def update_name(self, name: str) -> None:
        """Rename the span."""

    def is_recording(self) -> bool:
        """True while the span records (until it ends)."""

    def set_status(self, status: Any, description: Optional[str] = None) -> None:
        """Set the status (an OpenTelemetry ``Status`` or ``StatusCode``)."""

    def record_exception(self, exception: BaseException, attributes: Optional[Mapping[str, AttributeValue]] = None,
                         timestamp: Optional[int] = None, escaped: bool = False) -> None:
        """Record ``exception`` as an event."""

    def get_span_context(self) -> Any:
        """The span's context (an OpenTelemetry ``SpanContext``)."""

    def end(self, end_time: Optional[int] = None) -> None:
        """End the span (a ``with`` block ends it for you)."""


class SpanContextManager(Protocol):
    """What ``managed_span`` / ``umbrella_span`` / ``span_cm`` / ``efficiency_span`` /
    ``deferred_child_span`` return: ``with`` it to get the recording ``Span``, or ``None``
    when the group is off. It never swallows an exception, so checkers know a ``return``
    inside the block returns."""

    def __enter__(self) -> Optional[Span]: ...

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Optional[Literal[False]]: ...


class SpanDecorator(Protocol):
    """What ``trace_fn(...)`` returns: a decorator that keeps the decorated callable's exact
    signature. Coroutine, generator and async-generator functions keep theirs too (the
    wrapper returns the same kind of object), and ``staticmethod`` / ``classmethod``
    objects stay what they are."""

    @overload
    def __call__(self, fn: staticmethod[P, R]) -> staticmethod[P, R]: ...

    @overload
    def __call__(self, fn: classmethod[T, P, R]) -> classmethod[T, P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: Any) -> Any:
        """Wrap ``fn`` so each call runs in a span when its group is on."""
