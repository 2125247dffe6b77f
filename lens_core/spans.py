"""Instrumentation primitives: managed_span, trace_fn, span_cm, umbrella_*, carriers, attribute safety."""

from __future__ import annotations

from . import _impl, _log, _stepping, scopes, semconv, state
from .registry import Bucket, SpanRegistry

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from types import TracebackType
    from typing import Any, Collection, Dict, Literal, Mapping, Optional, Type, TypeVar, Union

    from .attributes import describe_exception, dropped_attribute_count, sanitize_attributes
    from .redaction import DEFAULT_REDACT_KEYS, REDACTED, redact_value
    from .typing import Span, SpanContextManager, SpanDecorator

    _T = TypeVar("_T")

__all__ = [
    "DEFAULT_REDACT_KEYS",
    "REDACTED",
    "current_trace_carrier",
    "describe_exception",
    "dropped_attribute_count",
    "is_span_group_enabled",
    "managed_span",
    "redact_value",
    "remote_trace_context",
    "safe_set_span_attributes",
    "sanitize_attributes",
    "span_cm",
    "trace_fn",
    "umbrella_span",
    "umbrella_trace_fn",
]

if TYPE_CHECKING:  # checkers read the gate's stub (_gate.pyi), which both gates match
    from ._gate import is_enabled as is_span_group_enabled
    from ._gate import managed_span, umbrella_span
else:  # the disabled fast paths live in the gate; these names are rebound if tests switch it
    managed_span = _impl.gate.managed_span
    umbrella_span = _impl.gate.umbrella_span
    is_span_group_enabled = _impl.gate.is_enabled

# ---- attribute safety (lens_core.attributes; re-exported: public names of this module) -----
# Loaded when a backend is first installed or a name is first asked for, not at import: a
# quiet rank (no backend) imports managed_span and never loads redaction or attribute safety.

_warn_once = _log.warn_once

# public name -> the module that holds it
_LAZY = {
    "DEFAULT_REDACT_KEYS": "redaction",
    "REDACTED": "redaction",
    "describe_exception": "attributes",
    "dropped_attribute_count": "attributes",
    "redact_value": "redaction",
    "sanitize_attributes": "attributes",
}


def __getattr__(name: str) -> Any:
    """The re-exported names of redaction and attribute safety, loaded on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lens_core.spans' has no attribute {name!r}")
    if module == "redaction":
        from . import redaction as source
    else:
        from . import attributes as source
    value = getattr(source, name)
    globals()[name] = value
    return value


def _sanitize_into(merged, attrs):  # rebound to lens_core.attributes' own by _load_attribute_safety
    _load_attribute_safety()
    return _sanitize_into(merged, attrs)


def _load_attribute_safety() -> None:
    """Bind attribute safety and hand the compiled gate its attribute hooks; run once, when
    a backend is first installed (lens_core._impl.set_native) or an enabled span needs it."""
    global _sanitize_into
    from . import redaction
    from .attributes import _sanitize_into, _sanitize_one

    # The compiled recorder's fast path keeps a str under a key known not to be secret only
    # when redact_text returns it unchanged (credential shapes are checked in every text).
    _impl.set_attribute_hooks(scopes._ATTRS, scopes._BUCKET, redaction._key_cache, _sanitize_one,
                              _span_attributes, redaction.redact_text, redaction._clean_texts,
                              redaction._SHAPE_MIN)


def safe_set_span_attributes(span: Optional[Span], attrs: Optional[Mapping[str, object]],
                             redact_keys: Optional[Collection[str]] = None) -> None:
    """Set sanitised ``attrs`` on ``span``; a ``None`` span (a disabled group) is fine.
    ``redact_keys`` defaults to DEFAULT_REDACT_KEYS."""
    if span is None or not attrs:
        return
    from .attributes import sanitize_attributes

    clean = sanitize_attributes(attrs, redact_keys)
    if clean:
        backend = state.installed_backend()
        if backend is not None:
            backend.set_attributes(span, clean)
        else:
            span.set_attributes(clean)


# ---- the enabled path ---------------------------------------------------------------------


# Bound once: these run for every enabled span (module attribute and classmethod lookups
# measured as a visible share of the enabled path's cost).
_scope_attributes = scopes._ATTRS.get
_bucket_override = scopes._BUCKET.get
_LENS_GROUP = semconv.LENS_GROUP
_LENS_UMBRELLA = semconv.LENS_UMBRELLA
_BUCKETS = frozenset(Bucket.ALL)


def _span_attributes(group, name, attrs, umbrella_requested):
    """Scope attributes, then what the group stamps (``lens.group``, then the bucket or
    ``lens.umbrella``), then the call site's attributes (which win). Scope attributes were
    sanitised when the scope was entered."""
    scope = _scope_attributes()
    merged = dict(scope) if scope else {}
    if group is None:
        info = None
    else:  # _group_info inlined: this runs for every enabled span
        groups = SpanRegistry._view.groups
        info = groups.get(group)
        if info is None:
            info = groups.get(group.strip().lower())
    if info is not None:
        merged[_LENS_GROUP] = info.name
        if info.umbrella:
            merged[_LENS_UMBRELLA] = True
            if info.bucket_key in attrs:
                _log.warn_once_at_call_site("umbrella-bucket", f"span {name!r} of umbrella group {info.name!r} "
                                            f"was given {info.bucket_key}=; umbrellas are never bucketed, dropped")
                attrs = {k: v for k, v in attrs.items() if k != info.bucket_key}
        else:
            if umbrella_requested:
                _warn_once(("umbrella-leaf", name), f"umbrella span {name!r} was opened with leaf group "
                           f"{info.name!r}; emitting it as a leaf (bucket {info.bucket})")
            merged[info.bucket_key] = _bucket_override() or info.bucket
            given = attrs.get(info.bucket_key) if attrs else None
            if given is not None and (not isinstance(given, str) or given not in _BUCKETS):
                # refused where it is emitted: an unknown bucket would be summed nowhere (or
                # flagged by the report); the group's bucket stands instead
                _log.warn_once_at_call_site("unknown-bucket", f"span {name!r} was given {info.bucket_key}="
                                            f"{given!r}, not one of {', '.join(_BUCKETS)}; dropped, it keeps "
                                            f"{merged[info.bucket_key]!r}")
                attrs = {k: v for k, v in attrs.items() if k != info.bucket_key}
    elif attrs and semconv.RL_BUCKET in attrs:  # an ungated span (span_cm) is held to the same buckets
        given = attrs[semconv.RL_BUCKET]
        if not isinstance(given, str) or given not in _BUCKETS:
            _log.warn_once_at_call_site("unknown-bucket", f"span {name!r} was given {semconv.RL_BUCKET}="
                                        f"{given!r}, not one of {', '.join(_BUCKETS)}; dropped")
            attrs = {k: v for k, v in attrs.items() if k != semconv.RL_BUCKET}
    if attrs:
        _sanitize_into(merged, attrs)
    return merged


def _span_factory(group, name, tracer, attrs, umbrella):
    backend = state._backend
    if backend is None:  # uninstalled between the gate check and here
        return _impl.gate.null_span
    return backend.live(name, _span_attributes(group, name, attrs, umbrella), tracer)


def _call_factory(traced, args, kwargs):
    with _span_factory(traced._lens_group, traced._lens_name, traced._lens_tracer, {}, traced._lens_umbrella):
        return traced.__wrapped__(*args, **kwargs)


_impl.set_factories(_span_factory, _call_factory)
_impl.set_attribute_loader(_load_attribute_safety)


class _SpanSteps:
    """Step hooks for trace_fn on coroutines and generators: current only while running."""

    __slots__ = ("backend", "span")

    def __init__(self, backend, span):
        self.backend = backend
        self.span = span

    def enter(self):
        return self.backend.use(self.span)

    def leave(self, token):
        self.backend.release(token)

    def finish(self, exc):
        self.backend.end(self.span, None if isinstance(exc, GeneratorExit) else exc)


# Code flags (CPython's CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR): read from the code
# object rather than through `inspect`, whose import (13-15 ms: dis, ast, tokenize, ...) a
# library decorating a few functions at import time would otherwise pay.
_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200


def _function_kind(fn) -> str:
    """``coroutine``, ``async_generator``, ``generator`` or ``function``: what inspect's
    iscoroutinefunction / isasyncgenfunction / isgeneratorfunction would say of ``fn``."""
    marker = getattr(fn, "_is_coroutine_marker", None)
    if marker is not None:  # inspect.markcoroutinefunction (3.12+): inspect is loaded already
        import inspect

        if inspect.iscoroutinefunction(fn):
            return "coroutine"
    while True:  # what inspect unwraps: bound methods and functools.partial
        if type(fn).__name__ == "method" and hasattr(fn, "__func__"):
            fn = fn.__func__
        elif type(fn).__name__ == "partial" and hasattr(fn, "func"):
            fn = fn.func
        else:
            break
    if type(fn).__name__ != "function":  # builtins, classes, callables: plain calls
        return "function"
    flags = fn.__code__.co_flags
    if flags & _CO_COROUTINE:
        return "coroutine"
    if flags & _CO_ASYNC_GENERATOR:
        return "async_generator"
    if flags & _CO_GENERATOR:
        return "generator"
    return "function"


def _decorator(group, name, tracer, umbrella):
    if not isinstance(group, str):
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")

    def decorate(fn):
        import functools  # deferred to decoration time: keeps `import lens_core` cheap

        if isinstance(fn, (staticmethod, classmethod)):
            return type(fn)(decorate(fn.__func__))
        if not callable(fn):
            raise TypeError(f"trace_fn decorates callables, got {type(fn).__name__}: {fn!r}")
        span_name = name or getattr(fn, "__qualname__", None) or repr(fn)
        is_enabled = _impl.gate.is_enabled

        def start_hooks(args, kwargs):
            if not is_enabled(group):
                return None
            backend = state.installed_backend()
            if backend is None:
                return None
            attrs = _span_attributes(group, span_name, {}, umbrella)
            return _SpanSteps(backend, backend.start(span_name, attrs, tracer, None))

        kind = _function_kind(fn)
        if kind == "coroutine":
            wrapper = _stepping.wrap_coroutine_function(fn, start_hooks)
        elif kind == "async_generator":
            wrapper = _stepping.wrap_async_generator_function(fn, start_hooks)
        elif kind == "generator":
            wrapper = _stepping.wrap_generator_function(fn, start_hooks)
        else:
            wrapper = _impl.gate.wrap_function(fn, group, span_name, tracer, umbrella)
        functools.update_wrapper(wrapper, fn)
        return wrapper

    return decorate


def trace_fn(group: str, name: Optional[str] = None, tracer: Any = None) -> SpanDecorator:
    """Decorator: run each call in a span of ``group`` (decided per call; the span covers
    the awaited / iterated work of coroutines and generators). Keeps the metadata."""
    return _decorator(group, name, tracer, False)


def umbrella_trace_fn(group: str, name: Optional[str] = None, tracer: Any = None) -> SpanDecorator:
    """trace_fn for umbrella groups (never bucketed)."""
    return _decorator(group, name, tracer, True)


def span_cm(name: str, tracer: Any = None, record_exception: bool = True, context: Any = None,
            **attrs: object) -> SpanContextManager:
    """An ungated span (still off when no backend is installed). ``context`` parents it on
    a remote context: a W3C carrier mapping or a backend context object. A malformed
    carrier is ignored (counted and warned about once, see lens_core.carrier): the span
    is parented on the current context, as if none was given."""
    backend = state.installed_backend()
    if backend is None:
        return _impl.gate.null_span
    if context is not None:
        context = _remote_parent(backend, context, "span_cm")
    return backend.live(name, _span_attributes(None, name, attrs, False), tracer, context, record_exception)


def _remote_parent(backend, context, where):
    """``context`` as a backend may receive it: one of its own context objects as is, a
    carrier canonical, or None (a malformed or empty carrier: the current context)."""
    types = backend.context_types if hasattr(backend, "context_types") else ()
    if types and isinstance(context, types):
        return context
    from .carrier import usable_carrier

    return usable_carrier(context, where) or None


# ---- carriers -----------------------------------------------------------------------------


def current_trace_carrier() -> Dict[str, str]:
    """The current span's context as a W3C carrier; ``{}`` when nothing is recording."""
    backend = state.installed_backend()
    return backend.current_carrier() if backend is not None else {}


class remote_trace_context:
    """Attach a carrier's remote context in this thread for the block; a no-op for ``{}``,
    a malformed carrier (counted and warned about once, see lens_core.carrier), or when
    no backend is installed."""

    __slots__ = ("_carrier", "_backend", "_token")

    def __init__(self, carrier: Optional[Mapping[str, str]]) -> None:
        self._carrier = carrier
        self._backend = None
        self._token = None

    def __enter__(self) -> None:
        backend = state.installed_backend()
        if backend is not None:
            from .carrier import usable_carrier

            carrier = usable_carrier(self._carrier, "remote_trace_context")
            if carrier:
                self._token = backend.attach_carrier(carrier)
                self._backend = backend if self._token is not None else None
        return None

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if self._backend is not None:
            self._backend.release(self._token)
            self._backend = self._token = None
        return False
