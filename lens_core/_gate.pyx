# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled gate: the disabled fast path of managed_span / trace_fn (same API as _gate_py)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

cdef extern from "Python.h":
    object PyMethod_New(object func, object self)

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

# Raw group spellings we cache per snapshot; beyond this, lookups normalise each call.
cdef Py_ssize_t _ALIAS_LIMIT = 1024


cdef class _NullSpan:
    """The one shared do-nothing context manager a disabled group hands out."""

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return False

    def __repr__(self):
        return "<lens null span>"


null_span = _NullSpan()
cdef _NullSpan _NULL = null_span


cdef class _Snapshot:
    # ids: spelling -> id (-1 = unknown); bits: little-endian bitset of enabled ids.
    cdef dict ids
    cdef bytes bits
    cdef bint anyon


cdef _Snapshot _snap = _Snapshot()
_snap.ids = {}
_snap.bits = b""
_snap.anyon = False

cdef object _span_factory = None
cdef object _call_factory = None


def set_factories(span_factory, call_factory):
    """Install the enabled-path builders: span_factory(group, name, tracer, attrs, umbrella)
    returns a context manager; call_factory(traced, args, kwargs) runs a traced call."""
    global _span_factory, _call_factory
    _span_factory = span_factory
    _call_factory = call_factory


def publish(ids, bits):
    """Swap in a new snapshot: ``ids`` (normalised name -> id), ``bits`` (int bitset)."""
    global _snap
    cdef _Snapshot s = _Snapshot()
    bits = int(bits)
    s.ids = dict(ids)
    s.bits = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
    s.anyon = bits != 0
    _snap = s  # one reference assignment: readers see the old or the new, never a mix


cdef Py_ssize_t _slow_id(dict ids, object group) except -2:
    # A spelling not seen yet: normalise it once and remember the answer.
    if not isinstance(group, str):
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
    gid = ids.get(group.strip().lower(), -1)
    if len(ids) < _ALIAS_LIMIT:
        ids[group] = gid
    return gid


cdef inline bint _on(_Snapshot s, object group) except -1:
    cdef PyObject* found
    cdef Py_ssize_t gid
    if not s.anyon:
        return False
    found = PyDict_GetItem(s.ids, group)
    if found is NULL:
        gid = _slow_id(s.ids, group)
    else:
        gid = <Py_ssize_t><object>found
    if gid < 0 or (gid >> 3) >= PyBytes_GET_SIZE(s.bits):
        return False
    return (PyBytes_AS_STRING(s.bits)[gid >> 3] >> (gid & 7)) & 1


def group_id(group):
    """The id of ``group`` (any spelling) in the current snapshot, or -1 if unregistered."""
    cdef _Snapshot s = _snap
    found = s.ids.get(group)
    return _slow_id(s.ids, group) if found is None else found


def is_enabled(group):
    """True when ``group`` is on (registered, enabled and a backend installed)."""
    return _on(_snap, group)


def any_enabled():
    """True when at least one group is on."""
    return _snap.anyon


def managed_span(group, name, tracer=None, **attrs):
    """Context manager for a span of ``group``; yields the span, or None when off."""
    if _on(_snap, group):
        return _span_factory(group, name, tracer, attrs, False)
    return _NULL


def umbrella_span(group, name, tracer=None, **attrs):
    """Like managed_span, for an umbrella (never bucketed) span."""
    if _on(_snap, group):
        return _span_factory(group, name, tracer, attrs, True)
    return _NULL


cdef class TracedFunction:
    """A plain function wrapped by trace_fn: checks the gate on each call."""

    cdef object _fn
    cdef object _group
    cdef dict __dict__

    def __init__(self, fn, group, name, tracer, umbrella):
        self._fn = fn
        self._group = group
        self.__wrapped__ = fn
        self._lens_group = group
        self._lens_name = name
        self._lens_tracer = tracer
        self._lens_umbrella = umbrella

    def __call__(self, *args, **kwargs):
        if _on(_snap, self._group):
            return _call_factory(self, args, kwargs)
        return self._fn(*args, **kwargs)

    def __get__(self, obj, objtype):
        # Behave like a function: bind as a method when looked up on an instance.
        if obj is None:
            return self
        return PyMethod_New(self, obj)

    def __repr__(self):
        return f"<lens traced {self._group!r} {self._fn!r}>"
