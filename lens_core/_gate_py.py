"""Pure-Python gate: the disabled fast path of managed_span / trace_fn (same API as _gate.pyx)."""

from __future__ import annotations

from types import MethodType

__all__ = [
    "TracedFunction",
    "any_enabled",
    "group_id",
    "is_enabled",
    "managed_span",
    "null_span",
    "publish",
    "set_factories",
    "umbrella_span",
]

#: Raw group spellings we cache per snapshot; beyond this, lookups normalise each call.
_ALIAS_LIMIT = 1024


class _NullSpan:
    """The one shared do-nothing context manager a disabled group hands out."""

    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return False

    def __repr__(self):
        return "<lens null span>"


null_span = _NullSpan()

# The snapshot is (ids, bits, any): ids maps group spellings to ids (-1 = unknown),
# bits is an int used as a bitset. It is replaced whole by publish(), never mutated
# except for adding alias spellings, so readers take no lock.
_snap = ({}, 0, False)

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


def publish(ids, bits):
    """Swap in a new snapshot: ``ids`` (normalised name -> id), ``bits`` (int bitset)."""
    global _snap
    _snap = (dict(ids), int(bits), bool(bits))


def _slow_id(ids, group):
    # A spelling not seen yet: normalise it once and remember the answer.
    if not isinstance(group, str):
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
    gid = ids.get(group.strip().lower(), -1)
    if len(ids) < _ALIAS_LIMIT:
        ids[group] = gid
    return gid


def group_id(group):
    """The id of ``group`` (any spelling) in the current snapshot, or -1 if unregistered."""
    ids = _snap[0]
    gid = ids.get(group)
    return _slow_id(ids, group) if gid is None else gid


def is_enabled(group):
    """True when ``group`` is on (registered, enabled and a backend installed)."""
    ids, bits, anyon = _snap
    if not anyon:
        return False
    gid = ids.get(group)
    if gid is None:
        gid = _slow_id(ids, group)
    return gid >= 0 and (bits >> gid) & 1 == 1


def any_enabled():
    """True when at least one group is on."""
    return _snap[2]


def managed_span(group, name, tracer=None, **attrs):
    """Context manager for a span of ``group``; yields the span, or None when off."""
    ids, bits, anyon = _snap
    if anyon:
        gid = ids.get(group)
        if gid is None:
            gid = _slow_id(ids, group)
        if gid >= 0 and (bits >> gid) & 1:
            return _span_factory(group, name, tracer, attrs, False)
    return null_span


def umbrella_span(group, name, tracer=None, **attrs):
    """Like managed_span, for an umbrella (never bucketed) span."""
    ids, bits, anyon = _snap
    if anyon:
        gid = ids.get(group)
        if gid is None:
            gid = _slow_id(ids, group)
        if gid >= 0 and (bits >> gid) & 1:
            return _span_factory(group, name, tracer, attrs, True)
    return null_span


class TracedFunction:
    """A plain function wrapped by trace_fn: checks the gate on each call."""

    def __init__(self, fn, group, name, tracer, umbrella):
        self.__wrapped__ = fn
        self._lens_group = group
        self._lens_name = name
        self._lens_tracer = tracer
        self._lens_umbrella = umbrella

    def __call__(self, *args, **kwargs):
        ids, bits, anyon = _snap
        if anyon:
            group = self._lens_group
            gid = ids.get(group)
            if gid is None:
                gid = _slow_id(ids, group)
            if gid >= 0 and (bits >> gid) & 1:
                return _call_factory(self, args, kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        # Behave like a function: bind as a method when looked up on an instance.
        if obj is None:
            return self
        return MethodType(self, obj)

    def __repr__(self):
        return f"<lens traced {self._lens_group!r} {self.__wrapped__!r}>"
