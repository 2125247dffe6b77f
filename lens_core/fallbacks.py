"""Canonical no-ops with lens_core's signatures, for libraries that must also run without lens.

Copy this file into your package and import from it when lens is not installed::

    try:
        from lens_core import SpanRegistry, managed_span, trace_fn
    except ImportError:  # lens is optional for mylib
        from mylib._lens_fallbacks import SpanRegistry, managed_span, trace_fn  # type: ignore[assignment]

It imports nothing at run time (the typing names below are for type checkers only), so the
copy works on its own. Everything a library following the README uses is here: the
registry and buckets (``SpanRegistry.resolve`` and ``clear`` too), the enabled and pending
groups, spans and umbrellas, trace_fn on every kind of callable, span_cm, carriers, scopes,
efficiency spans, IdleWait, deferred child spans and ``encode_resource_attributes``
(otel_bridge.resources). Spans are ``None``, scopes do nothing, carriers are empty, no group
is enabled, every spec entry is pending, IdleWait still counts its polls, and
``encode_resource_attributes`` hands the inherited value back unchanged. Lens's tests
check that every name here has the signature of the real one and that a library runs
with only this file.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: nothing is imported at run time
    from types import TracebackType
    from typing import (Any, Callable, Collection, Dict, FrozenSet, Iterable, Mapping, Optional, ParamSpec,
                        Protocol, Tuple, Type, TypeVar, Union, overload)

    _P = ParamSpec("_P")
    _R = TypeVar("_R")
    _S = TypeVar("_S")
    _T = TypeVar("_T")

    class _Decorator(Protocol):
        @overload
        def __call__(self, fn: staticmethod[_P, _R]) -> staticmethod[_P, _R]: ...
        @overload
        def __call__(self, fn: classmethod[_S, _P, _R]) -> classmethod[_S, _P, _R]: ...
        @overload
        def __call__(self, fn: Callable[_P, _R]) -> Callable[_P, _R]: ...

__all__ = [
    "Bucket",
    "EfficiencySpan",
    "IdleWait",
    "SpanRegistry",
    "bucket_scope",
    "current_trace_carrier",
    "deferred_child_span",
    "efficiency_span",
    "enabled_span_groups",
    "encode_resource_attributes",
    "get_pp_trace_carrier",
    "in_per_prompt_scope",
    "is_span_group_enabled",
    "iteration_scope",
    "managed_span",
    "pending_span_groups",
    "per_prompt_scope",
    "remote_trace_context",
    "safe_set_span_attributes",
    "set_pp_trace_carrier",
    "span_attributes",
    "span_cm",
    "start_efficiency_span",
    "trace_fn",
    "umbrella_span",
    "umbrella_trace_fn",
]


class _Null:
    """A do-nothing context manager whose ``__enter__`` yields None."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        return None


_NULL = _Null()


def _identity(fn: _T) -> _T:
    return fn


# ---- span groups ----------------------------------------------------------------------------


class Bucket:
    """Goodput buckets (the same names as lens_core.Bucket)."""

    PRODUCTIVE = "productive"
    OVERHEAD = "overhead"
    IDLE = "idle"
    WASTED = "wasted"
    ALL = (PRODUCTIVE, OVERHEAD, IDLE, WASTED)
    DEFAULT = OVERHEAD


class SpanRegistry:
    """No-op registry: registering does nothing, and nothing is registered."""

    @classmethod
    def register(cls, namespace: str, groups: Iterable[str], presets: Optional[Mapping[str, Iterable[str]]] = None,
                 *, buckets: Optional[Mapping[str, str]] = None, umbrellas: Optional[Iterable[str]] = None,
                 allow_override: bool = False, bucket_key: str = "rl.bucket",
                 device_timed: Optional[Iterable[str]] = None) -> None:
        """No-op."""

    @classmethod
    def unregister(cls, namespace: str) -> bool:
        """Always False: nothing was registered."""
        return False

    @classmethod
    def groups(cls) -> FrozenSet[str]:
        """Always empty."""
        return frozenset()

    @classmethod
    def presets(cls) -> Dict[str, FrozenSet[str]]:
        """Always empty."""
        return {}

    @classmethod
    def namespaces(cls) -> Dict[str, FrozenSet[str]]:
        """Always empty."""
        return {}

    @classmethod
    def group_info(cls, group: str) -> None:
        """Always None: no group is registered."""
        return None

    @classmethod
    def bucket_of(cls, group: str) -> Optional[str]:
        """Always None."""
        return None

    @classmethod
    def is_umbrella(cls, group: str) -> bool:
        """Always False."""
        return False

    @classmethod
    def clear(cls) -> None:
        """No-op: nothing is registered."""

    @classmethod
    def resolve(cls, spec: Union[str, Iterable[str], None],
                view: Optional[object] = None) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        """``(enabled, pending)``: nothing is registered, so nothing is enabled and every entry
        of ``spec`` (stripped, lower-cased) is pending, as lens answers before any registration."""
        parts = () if spec is None else spec.split(",") if isinstance(spec, str) else spec
        return frozenset(), frozenset(part.strip().lower() for part in parts if part.strip())

    @classmethod
    def device_timed_groups(cls) -> FrozenSet[str]:
        """Always empty."""
        return frozenset()


def is_span_group_enabled(group: str) -> bool:
    """Always False without lens."""
    return False


def enabled_span_groups() -> FrozenSet[str]:
    """Always empty without lens."""
    return frozenset()


def pending_span_groups() -> FrozenSet[str]:
    """Always empty without lens (no spec was applied)."""
    return frozenset()


# ---- spans ----------------------------------------------------------------------------------


def managed_span(group: str, name: str, tracer: Optional[Any] = None, **attrs: Any) -> _Null:
    """No-op managed_span: the body runs, ``None`` is yielded."""
    return _NULL


def umbrella_span(group: str, name: str, tracer: Optional[Any] = None, **attrs: Any) -> _Null:
    """No-op umbrella_span."""
    return _NULL


def span_cm(name: str, tracer: Any = None, record_exception: bool = True, context: Any = None,
            **attrs: object) -> _Null:
    """No-op span_cm."""
    return _NULL


def trace_fn(group: str, name: Optional[str] = None, tracer: Any = None) -> _Decorator:
    """No-op trace_fn: returns what it decorates unchanged (functions, methods, coroutines,
    generators, staticmethod and classmethod objects alike)."""
    return _identity


def umbrella_trace_fn(group: str, name: Optional[str] = None, tracer: Any = None) -> _Decorator:
    """No-op umbrella_trace_fn."""
    return _identity


def safe_set_span_attributes(span: Optional[Any], attrs: Optional[Mapping[str, object]],
                             redact_keys: Optional[Collection[str]] = None) -> None:
    """No-op."""


# ---- carriers -------------------------------------------------------------------------------


def current_trace_carrier() -> Dict[str, str]:
    """Always ``{}`` without lens."""
    return {}


def remote_trace_context(carrier: Optional[Mapping[str, str]]) -> _Null:
    """No-op context manager."""
    return _NULL


def set_pp_trace_carrier(carrier: Optional[Mapping[str, str]]) -> None:
    """No-op."""


def get_pp_trace_carrier() -> Dict[str, str]:
    """Always ``{}`` without lens."""
    return {}


def encode_resource_attributes(attrs: Mapping[str, object], inherited: Optional[str] = None) -> str:
    """No-op (otel_bridge.resources' formats ``attrs`` for ``OTEL_RESOURCE_ATTRIBUTES``): the
    inherited value unchanged, so a child started with it gets what this process had."""
    return inherited or ""


# ---- scopes ---------------------------------------------------------------------------------


def span_attributes(**attrs: object) -> _Null:
    """No-op scope."""
    return _NULL


def iteration_scope(iteration: int) -> _Null:
    """No-op scope."""
    return _NULL


def bucket_scope(bucket: str) -> _Null:
    """No-op scope."""
    return _NULL


def per_prompt_scope() -> _Null:
    """No-op scope."""
    return _NULL


def in_per_prompt_scope() -> bool:
    """Always False without lens."""
    return False


# ---- efficiency spans and deferred children ---------------------------------------------------


def efficiency_span(category: str, group: str = "efficiency", tracer: Any = None, **attrs: object) -> _Null:
    """No-op efficiency_span."""
    return _NULL


class EfficiencySpan:
    """What start_efficiency_span returns: no span; poll() and end() do nothing."""

    __slots__ = ("_backend", "span", "polls", "_ended")

    def __init__(self, backend: Any, span: None) -> None:
        self._backend = backend
        self.span = span
        self.polls = 0
        self._ended = False

    def poll(self, n: int = 1) -> None:
        """No-op (lens counts polls only on a recording span)."""

    def end(self, exc: Optional[BaseException] = None) -> None:
        """No-op."""


_NULL_EFFICIENCY = EfficiencySpan(None, None)


def start_efficiency_span(category: str, group: str = "efficiency", tracer: Any = None,
                          **attrs: object) -> EfficiencySpan:
    """A shared do-nothing EfficiencySpan."""
    return _NULL_EFFICIENCY


class IdleWait:
    """A poll-loop wait that records nothing but, like lens's, counts its starved polls."""

    __slots__ = ("_polls",)

    def __init__(self, category: str, group: str = "efficiency", tracer: Any = None, **attrs: object) -> None:
        self._polls = 0

    def starved(self) -> None:
        """Count one starved poll."""
        self._polls += 1

    def done(self) -> int:
        """How many polls starved since the last done()."""
        polls, self._polls = self._polls, 0
        return polls


def deferred_child_span(group: str, name: str, carrier: Optional[Mapping[str, str]], *,
                        iteration: Optional[int] = None, tracer: Any = None, **attrs: object) -> _Null:
    """No-op deferred_child_span."""
    return _NULL
