"""Pure-Python gate: the disabled fast path of managed_span / trace_fn (same API as _gate.pyx)."""

from __future__ import annotations

import sys

from . import semconv

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from types import TracebackType
    from typing import Optional, Type

__all__ = [
    "GoodputRollup",
    "is_enabled",
    "managed_span",
    "null_span",
    "publish",
    "set_attribute_hooks",
    "set_factories",
    "set_native",
    "umbrella_span",
    "wrap_function",
]

#: Raw group spellings we cache per snapshot; beyond this, lookups normalise each call.
_ALIAS_LIMIT = 1024


class _NullSpan:
    """The one shared do-nothing context manager a disabled group hands out."""

    __slots__ = ()
    if TYPE_CHECKING:  # what checkers see (as in _gate.pyi); the C callables below behave so

        def __enter__(self) -> None: ...

        def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                     tb: Optional[TracebackType]) -> None: ...

    else:
        # C callables that are not descriptors, so `with` binds no method object: NoneType()
        # returns None for __enter__; "".format(*exc_info) returns "" (falsy: exceptions
        # propagate) for __exit__. Measured ~2x cheaper than def methods in pure Python.
        __enter__ = type(None)
        __exit__ = "".format

    def __repr__(self):
        return "<lens null span>"


null_span = _NullSpan()

class _Lookup(dict):
    """Spelling -> enabled?, answered by one subscript; an unseen spelling is normalised
    once by __missing__ and cached. A snapshot is replaced whole by publish()."""

    __slots__ = ("ids", "bits")

    def __init__(self, ids, bits):
        super().__init__((name, bool(bits >> gid & 1)) for name, gid in ids.items())
        self.ids = dict(ids)
        self.bits = bits

    def __missing__(self, group):
        gid = self.gid(group)
        on = gid >= 0 and bool(self.bits >> gid & 1)
        if len(self) < _ALIAS_LIMIT:
            self[group] = on
        return on

    def gid(self, group):
        gid = self.ids.get(group)
        if gid is None:
            if not isinstance(group, str):
                raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
            gid = self.ids.get(group.strip().lower(), -1)
        return gid


_on = _Lookup({}, 0)

# Set by lens_core.spans: factories for the enabled path (kept out of the gate so the
# gate stays small and has no imports of the rest of lens_core).
_span_factory = None
_call_factory = None


def set_factories(span_factory, call_factory):
    """Install the enabled-path builders: span_factory(group, name, tracer, attrs, umbrella)
    returns a context manager; call_factory(traced, args, kwargs) runs a traced call."""
    global _span_factory, _call_factory
    _span_factory = span_factory
    _call_factory = call_factory


def set_native(recorder):
    """Nothing to do here: the pure-Python gate always hands enabled spans to the span
    factory (the compiled gate records into a compiled Recorder directly)."""


def set_attribute_hooks(*hooks):
    """Nothing to do here (the compiled gate's attribute fast path needs these)."""


def publish(ids, bits, infos=None):
    """Swap in a new snapshot: ``ids`` (normalised name -> id), ``bits`` (int bitset);
    ``infos`` is for the compiled recorder and not needed here."""
    global _on
    _on = _Lookup(ids, int(bits))  # one reference assignment; readers never lock


def is_enabled(group):
    """True when ``group`` is on (registered, enabled and a backend installed)."""
    return _on[group]


def managed_span(group, name, tracer=None, **attrs):
    """Context manager for a span of ``group``; yields the span, or None when off."""
    if _on[group]:
        return _span_factory(group, name, tracer, attrs, False)
    return null_span


def umbrella_span(group, name, tracer=None, **attrs):
    """Like managed_span, for an umbrella (never bucketed) span."""
    if _on[group]:
        return _span_factory(group, name, tracer, attrs, True)
    return null_span


# Pickled by reference under their public names, like the compiled gate's (whichever gate
# the unpickling process runs then answers).
managed_span.__module__ = umbrella_span.__module__ = "lens_core"


def wrap_function(fn, group, name, tracer, umbrella):
    """Wrap a plain function (not a coroutine or generator) so each call checks the gate."""
    # The gate is read through this module object, not as a global: a wrapper pickled by
    # value (cloudpickle, which Ray uses for classes defined in __main__) would carry a
    # frozen copy of the globals it reads, and the module is pickled by reference.
    gate = sys.modules[__name__]

    def traced(*args, **kwargs):
        if gate._on[group]:
            return gate._call_factory(traced, args, kwargs)
        return fn(*args, **kwargs)

    # A function object binds as a method by itself; spans.trace_fn copies the metadata.
    traced.__wrapped__ = fn
    traced._lens_group = group
    traced._lens_name = name
    traced._lens_tracer = tracer
    traced._lens_umbrella = umbrella
    return traced


# ---- live goodput: the per-record roll-up (compiled twin in _gate.pyx) -------------------------

_BUCKET_SLOT = {"productive": 0, "overhead": 1, "idle": 2, "wasted": 3}
_K_BUCKET, _K_ITERATION = semconv.RL_BUCKET, semconv.RL_ITERATION
_K_GROUP, _K_UMBRELLA, _K_CATEGORY = semconv.LENS_GROUP, semconv.LENS_UMBRELLA, semconv.RL_EFFICIENCY_CATEGORY


class GoodputRollup:
    """Per-process roll-up of ended span records into buckets and steps (live goodput).

    ``feed(records, never, skip_category)`` takes records in end order: a counted bucketed span
    adds its duration to ``totals`` and to its parent's pending entry, every span hands its own
    entry up to its parent, and a step (unbucketed, ``rl.iteration``, a name ``step_search``
    finds) takes its entry. Returns ``[(iteration, wall_ns, [ns per bucket] or None)]`` for the
    steps that ended. ``never`` (names) and ``skip_category`` (efficiency categories) are never
    counted. Past ``max_pending`` open entries the oldest are dropped (``evicted``)."""

    def __init__(self, step_search, max_pending=65536):
        self._step_search = step_search
        self.max_pending = max_pending
        self.evicted = 0
        self._pending = {}  # span id -> [ns per bucket] of its ended descendants
        self._acc = [0, 0, 0, 0]
        self._first = self._last = None
        self._names = {}  # name -> 1 a step name, 2 never bucketed, 0 neither
        self._never = None

    @property
    def totals(self):
        """Counted nanoseconds per bucket (productive, overhead, idle, wasted)."""
        return list(self._acc)

    @property
    def bounds(self):
        """``(first start, last end)`` of the records fed so far, or ``(None, None)``."""
        return (self._first, self._last)

    @property
    def pending(self):
        """How many open spans hold an entry."""
        return len(self._pending)

    def feed(self, records, never, skip_category):
        """Roll ``records`` up; returns the steps that ended, as ``(iteration, wall_ns, buckets or None)``."""
        steps = []
        pending, acc, names = self._pending, self._acc, self._names
        if never is not self._never:  # the catalog was imported since: classify names again
            self._never = never
            names.clear()
        for r in records:
            start, end = r.start_ns, r.end_ns
            if start <= 0 or end <= 0 or end < start:
                continue  # the report skips bad timings too
            if self._first is None:
                self._first, self._last = start, end
            else:
                if start < self._first:
                    self._first = start
                if end > self._last:
                    self._last = end
            dur = end - start
            attrs = r.attrs
            own = pending.pop(r.span_id, None) if pending else None
            name = r.name
            code = names.get(name)
            if code is None:
                code = 2 if name in never else (1 if self._step_search(name) is not None else 0)
                if len(names) < 4096:
                    names[name] = code
            bucket = attrs.get(_K_BUCKET) if attrs else None
            counted = False
            if bucket is None:
                if code == 1 and attrs:
                    iteration = attrs.get(_K_ITERATION)
                    if iteration is not None:
                        steps.append((iteration, dur, own))
                        continue
            elif code != 2:
                slot = _BUCKET_SLOT.get(bucket) if type(bucket) is str else None
                # a leaf a lens group stamped was checked where it was emitted (an umbrella
                # carries no bucket, an efficiency span is no group's): only others need looking at
                if slot is not None:
                    counted = True
                    if _K_GROUP not in attrs:
                        category = attrs.get(_K_CATEGORY)
                        counted = _K_UMBRELLA not in attrs and (category is None or category not in skip_category)
            if counted:
                acc[slot] += dur
                if own is None:
                    own = [0, 0, 0, 0]
                own[slot] += dur
            parent = r.parent_id
            if own is not None and parent:
                into = pending.get(parent)
                if into is None:
                    if len(pending) >= self.max_pending:
                        del pending[next(iter(pending))]
                        self.evicted += 1
                    pending[parent] = own
                else:
                    for i in range(4):
                        into[i] += own[i]
        return steps
