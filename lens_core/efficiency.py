"""Efficiency spans (idle waits as spans), poll-loop coalescing, and deferred child spans."""

from __future__ import annotations

import _thread
from time import monotonic as _monotonic

from . import _impl, _lifecycle, _log, scopes, semconv, state
from .carrier import usable_carrier
from .registry import Bucket, SpanRegistry
from .attributes import describe_exception, sanitize_attributes

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from types import TracebackType
    from typing import Any, Dict, Literal, Mapping, Optional, Type

    from .typing import Span, SpanContextManager

__all__ = [
    "EFFICIENCY_CATEGORY_BUCKET",
    "EfficiencySpan",
    "IdleWait",
    "MAX_UNREGISTERED_CATEGORIES",
    "OTHER_CATEGORY",
    "TIMER_ONLY",
    "category_bucket",
    "deferred_child_span",
    "efficiency_span",
    "record_efficiency_time",
    "register_efficiency_categories",
    "set_efficiency_sink",
    "start_efficiency_span",
]

#: Category -> bucket (None: the span is emitted but never bucketed, because its wall clock
#: overlaps other bucketed work). Consumers extend it with register_efficiency_categories.
EFFICIENCY_CATEGORY_BUCKET: Dict[str, Optional[str]] = {}


#: Categories measured only as efficiency/* metrics, never as spans (their window is already
#: counted, or they are thread-seconds that can exceed wall time). Extended by consumers.
TIMER_ONLY: set = set()

#: Category -> rl.efficiency.measurement of its metric (how its seconds were measured).
_MEASUREMENT: Dict[str, str] = {}
_DEFAULT_MEASUREMENT = "driver_wall_clock"

# Where efficiency/* seconds go: set by the exporting side (otel_bridge) to a function
# (metric_name, seconds, attributes) -> None; None records nothing (no metrics pipeline).
_sink: Any = None


#: How many categories outside the registered catalog (register_efficiency_categories) get
#: an efficiency/<category> series of their own; the seconds of any further one go to the
#: efficiency/other series (its count says how many waits), with one warning.
MAX_UNREGISTERED_CATEGORIES = 32
#: The category that stands for every unregistered one past MAX_UNREGISTERED_CATEGORIES.
OTHER_CATEGORY = "other"
_unregistered: set = set()  # the unregistered categories given a series of their own
_lock = _thread.allocate_lock()


def _after_fork_in_child() -> None:
    global _lock
    _lock = _thread.allocate_lock()  # a thread of the parent may have held it at the fork


_lifecycle.on_fork("lens_core.efficiency", after_in_child=_after_fork_in_child)


def _series_category(category: str) -> str:
    """``category``, or OTHER_CATEGORY once MAX_UNREGISTERED_CATEGORIES others have a series."""
    if category in EFFICIENCY_CATEGORY_BUCKET or category in TIMER_ONLY or category in _unregistered:
        return category
    with _lock:
        if category in _unregistered:
            return category
        if len(_unregistered) < MAX_UNREGISTERED_CATEGORIES:
            _unregistered.add(category)
            return category
    _log.warn_once("efficiency-other", f"efficiency category {category!r} and any further unregistered ones are "
                   f"recorded as {semconv.EFFICIENCY_METRIC_PREFIX}{OTHER_CATEGORY}: at most "
                   f"{MAX_UNREGISTERED_CATEGORIES} categories outside the registered catalog get a series of their "
                   "own (register_efficiency_categories declares more)")
    return OTHER_CATEGORY


def set_efficiency_sink(sink: Any) -> None:
    """Install ``sink(metric_name, seconds, attributes)`` for efficiency/* timer seconds (None: drop them)."""
    global _sink
    _sink = sink


def record_efficiency_time(category: str, seconds: float) -> None:
    """Record ``seconds`` of ``category`` as the ``efficiency/<category>`` metric, labelled with
    its ``rl.efficiency.measurement``. For waits measured elsewhere (a precomputed backoff), and
    what a timer-only category's efficiency_span records instead of a span. Past
    MAX_UNREGISTERED_CATEGORIES categories outside the catalog, ``efficiency/other``."""
    sink = _sink
    if sink is None:
        return
    category = _series_category(category)
    sink(semconv.EFFICIENCY_METRIC_PREFIX + category, float(seconds),
         {semconv.RL_EFFICIENCY_MEASUREMENT: _MEASUREMENT.get(category, _DEFAULT_MEASUREMENT),
          semconv.RL_EFFICIENCY_CATEGORY: category})


def register_efficiency_categories(mapping: Mapping[str, Optional[str]], timer_only: Any = (),
                                   measurements: Optional[Mapping[str, str]] = None) -> None:
    """Declare categories and their buckets (a bucket name, or None for unbucketed), the
    ``timer_only`` categories (metrics, never spans) and each category's measurement label."""
    TIMER_ONLY.update(timer_only)
    if measurements:
        _MEASUREMENT.update(measurements)
    for category, bucket in mapping.items():
        if bucket is not None and bucket not in Bucket.ALL:
            raise ValueError(f"efficiency category {category!r}: bucket {bucket!r} is not one of "
                             f"{', '.join(Bucket.ALL)} or None")
        EFFICIENCY_CATEGORY_BUCKET[category] = bucket


def category_bucket(category: str) -> Optional[str]:
    """The bucket of ``category``: from the table, else its prefix (``idle/x`` -> idle) when
    that names a bucket, else overhead (warned once) so it is never silently dropped."""
    if category in EFFICIENCY_CATEGORY_BUCKET:
        return EFFICIENCY_CATEGORY_BUCKET[category]
    prefix = category.split("/", 1)[0]
    if prefix in Bucket.ALL:
        return prefix
    _log.warn_once(("efficiency-category", category),
                   f"efficiency category {category!r} is not registered and its prefix names no bucket; "
                   f"counting it as {Bucket.DEFAULT}")
    return Bucket.DEFAULT


def span_name_for(category: str) -> str:
    """``idle/buffer_starvation`` -> ``rl.idle.buffer_starvation``."""
    return "rl." + category.replace("/", ".")


def _efficiency_attributes(category, group, attrs):
    info = SpanRegistry.group_info(group)
    key = info.bucket_key if info is not None else semconv.RL_BUCKET
    scope = scopes.current_scope_attributes()
    merged = dict(scope) if scope else {}
    merged.update(attrs)
    bucket = category_bucket(category)
    if key in attrs and attrs[key] != bucket:
        _log.warn_once_at_call_site("efficiency-bucket", f"efficiency span {category!r} keeps its category's "
                                    f"bucket ({bucket}); the {key}={attrs[key]!r} passed was ignored")
    merged.pop(key, None)
    if bucket is not None:  # bucket_scope never applies: the category names the phase
        merged[key] = bucket
    merged[semconv.RL_EFFICIENCY_CATEGORY] = category
    return sanitize_attributes(merged)


def efficiency_span(category: str, group: str = "efficiency", tracer: Any = None,
                    **attrs: object) -> SpanContextManager:
    """A span over an idle wait: name ``rl.<category with / -> .>``, attribute
    ``rl.efficiency.category``, bucket from the category table. Gated on ``group``."""
    backend = state.installed_backend()
    if backend is None or not _impl.gate.is_enabled(group):
        return _impl.gate.null_span
    if category in TIMER_ONLY:
        _timer_only_warning(category)
        return _TimerOnly(category)
    return backend.live(span_name_for(category), _efficiency_attributes(category, group, attrs), tracer)


def _timer_only_warning(category):
    _log.warn_once_at_call_site("timer-only", f"efficiency category {category!r} is timer-only: its "
                                f"duration is recorded as the {semconv.EFFICIENCY_METRIC_PREFIX}{category} "
                                f"metric, and no span is emitted (its window is already counted, or it is "
                                f"thread-seconds that can exceed wall time)")


class _TimerOnly:
    """What efficiency_span returns for a timer-only category: times the block into its metric."""

    __slots__ = ("_category", "_start")

    def __init__(self, category):
        self._category = category

    def __enter__(self) -> None:
        self._start = _monotonic()
        return None

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        record_efficiency_time(self._category, _monotonic() - self._start)
        return False


class _TimerOnlyHandle:
    """What start_efficiency_span returns for a timer-only category: end() records the metric."""

    __slots__ = ("_category", "_start", "span", "polls")

    def __init__(self, category):
        self._category = category
        self._start = _monotonic()
        self.span = None
        self.polls = 0

    def poll(self, n: int = 1) -> None:
        self.polls += n

    def end(self, exc: Optional[BaseException] = None) -> None:
        start, self._start = self._start, None
        if start is not None:
            record_efficiency_time(self._category, _monotonic() - start)


class EfficiencySpan:
    """A hand-managed efficiency span: NOT current (tasks created during an asyncio wait
    are not reparented under it); count polls with poll() and finish with end()."""

    __slots__ = ("_backend", "span", "polls", "_ended")

    def __init__(self, backend: Any, span: Optional[Span]) -> None:
        self._backend = backend
        self.span = span
        self.polls = 0
        self._ended = False

    def poll(self, n: int = 1) -> None:
        """Count ``n`` more polls of the wait (reported as ``rl.idle.polls``)."""
        if self.span is not None:  # the shared do-nothing one must not pile up every wait's polls
            self.polls += n

    def end(self, exc: Optional[BaseException] = None) -> None:
        """End the span once (later calls do nothing), recording the poll count."""
        if self._ended or self.span is None:
            return
        self._ended = True
        if self.polls:
            self._backend.set_attributes(self.span, {semconv.RL_IDLE_POLLS: self.polls})
        self._backend.end(self.span, exc)


_NULL_EFFICIENCY = EfficiencySpan(None, None)


def start_efficiency_span(category: str, group: str = "efficiency", tracer: Any = None,
                          **attrs: object) -> EfficiencySpan:
    """Start an efficiency span the caller ends; returns a shared do-nothing EfficiencySpan
    when ``group`` is off (so call sites need no None checks)."""
    backend = state.installed_backend()
    if backend is None or not _impl.gate.is_enabled(group):
        return _NULL_EFFICIENCY
    if category in TIMER_ONLY:
        _timer_only_warning(category)
        return _TimerOnlyHandle(category)  # type: ignore[return-value]
    span = backend.start(span_name_for(category), _efficiency_attributes(category, group, attrs), tracer)
    return EfficiencySpan(backend, span)


class IdleWait:
    """Coalesce a poll loop into one efficiency span per wait, not one per poll::

        wait = IdleWait("idle/buffer_starvation")
        while not buffer.ready():
            wait.starved()          # opens the span on the first starved poll
            time.sleep(0.005)
        wait.done()                 # ends it with rl.idle.polls = number of polls
    """

    __slots__ = ("_category", "_group", "_tracer", "_attrs", "_span", "_polls")

    def __init__(self, category: str, group: str = "efficiency", tracer: Any = None, **attrs: object) -> None:
        self._category = category
        self._group = group
        self._tracer = tracer
        self._attrs = attrs
        self._span: Optional[EfficiencySpan] = None
        self._polls = 0  # counted here: with the group off, the span is a shared do-nothing one

    def starved(self) -> None:
        """Record one starved poll, opening the span on the first."""
        if self._span is None:
            self._span = start_efficiency_span(self._category, self._group, self._tracer, **self._attrs)
        self._span.poll()
        self._polls += 1

    def done(self) -> int:
        """End the wait's span (if any poll starved); returns how many polls it covered,
        whether or not its group is on."""
        span, self._span = self._span, None
        polls, self._polls = self._polls, 0
        if span is None:
            return 0
        span.end()
        return polls


class _DeferredChild:
    __slots__ = ("_group", "_name", "_carrier", "_attrs", "_tracer", "_backend", "_span", "_token")

    def __init__(self, group, name, carrier, attrs, tracer):
        self._group = group
        self._name = name
        self._carrier = carrier
        self._attrs = attrs
        self._tracer = tracer
        self._backend = None

    def __enter__(self) -> Optional[Span]:
        backend = state.installed_backend()
        if backend is None or not _impl.gate.is_enabled(self._group):
            return None
        try:
            span = backend.start(self._name, self._attrs, self._tracer, self._carrier)
            token = backend.use(span)
        except Exception as exc:  # tracing must never decide whether the work happens
            _log.warn(f"could not open span {self._name!r}; the work proceeds untraced: {describe_exception(exc)}")
            return None
        self._backend, self._span, self._token = backend, span, token
        return span

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        backend, self._backend = self._backend, None
        if backend is not None:
            try:
                backend.release(self._token)
            finally:
                backend.end(self._span, exc)
        return False


def deferred_child_span(group: str, name: str, carrier: Optional[Mapping[str, str]], *,
                        iteration: Optional[int] = None, tracer: Any = None, **attrs: object) -> SpanContextManager:
    """A span for work that outlives its parent on another thread (the checkpoint
    ``finalize`` pattern): parented on ``carrier`` (captured with current_trace_carrier()
    inside the parent), never bucketed (it overlaps later steps), ``rl.iteration`` set
    explicitly (no scope reaches the thread), ERROR status if the work fails. A failure
    to open the span is warned about and the work runs untraced. An empty or malformed
    carrier (the latter counted and warned about once) parents it on the current context."""
    clean = sanitize_attributes(attrs)
    info = SpanRegistry.group_info(group)
    clean.pop(info.bucket_key if info is not None else semconv.RL_BUCKET, None)
    if iteration is not None:
        clean[semconv.RL_ITERATION] = iteration
    parent = usable_carrier(carrier, "deferred_child_span") or None  # a canonical copy, taken now
    return _DeferredChild(group, name, parent, clean, tracer)
