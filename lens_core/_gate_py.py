"""Pure-Python gate: the disabled fast path of managed_span / trace_fn (same API as _gate.pyx)."""

from __future__ import annotations

import sys


TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from types import TracebackType
    from typing import Optional, Type

__all__ = [
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
    if not isinstance(group, str):  # as the compiled twin: refused when wrapped, not per call
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
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
