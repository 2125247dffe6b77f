"""The protocol a span backend implements; with none installed every span group is off.

Installing one is lens_core.state's (install_backend / uninstall_backend); this module
imports nothing of lens_core, so a recorder can build on it from any floor."""

from __future__ import annotations


__all__ = ["REQUIRED_METHODS", "LiveSpan", "SpanBackend"]


REQUIRED_METHODS = ("start", "use", "release", "end", "live", "set_attributes", "current_carrier", "carrier_of",
             "attach_carrier")


class SpanBackend:
    """What lens_core needs from a tracing system (otel_bridge provides the OTel one).

    Subclassing is optional: any object with these methods will do. ``span`` and
    ``token`` values are opaque to lens_core. ``context`` may be ``None`` (the current
    context), a W3C carrier dict that lens_core has validated and made canonical, or an
    instance of one of ``context_types``.
    """

    name = "abstract"
    #: Types of this backend's own context objects: ``context=`` values of these types
    #: reach start()/live() as they are; any other value is treated as a W3C carrier,
    #: validated by lens_core and passed on canonical (lens_core.carrier) or not at all.
    context_types = ()

    def start(self, name, attributes, tracer=None, context=None, links=None):
        """Start a span (not made current) with ``attributes`` set at start."""
        raise NotImplementedError

    def use(self, span):
        """Make ``span`` current in this execution context; return a token for release()."""
        raise NotImplementedError

    def release(self, token):
        """Undo the matching use() / attach_carrier()."""
        raise NotImplementedError

    def end(self, span, exc=None):
        """End ``span``; when ``exc`` is given, record it and set ERROR status first."""
        raise NotImplementedError

    def live(self, name, attributes, tracer=None, context=None, record=True):
        """The context manager of an enabled ``with`` block: on entry start the span and
        make it current (yielding it); on exit undo that and end it, recording an
        exception (unless ``record`` is false or it is a GeneratorExit). A backend may
        return its own, fusing the steps to save calls on every span."""
        return LiveSpan(self, name, attributes, tracer, context, record)

    def set_attributes(self, span, attributes):
        """Set already-sanitised attributes on a live span."""
        raise NotImplementedError

    def current_carrier(self):
        """The current span's context as a W3C carrier dict; ``{}`` when nothing is recording."""
        raise NotImplementedError

    def carrier_of(self, span):
        """``span``'s context as a W3C carrier dict."""
        raise NotImplementedError

    def attach_carrier(self, carrier):
        """Make the carrier's remote context current; a token, or None if it is unusable."""
        raise NotImplementedError


class LiveSpan:
    """SpanBackend.live's generic context manager, built on start/use/release/end."""

    __slots__ = ("_backend", "_name", "_attrs", "_tracer", "_context", "_record", "_span", "_token", "_thread")

    def __init__(self, backend, name, attrs, tracer=None, context=None, record=True):
        self._backend = backend
        self._name = name
        self._attrs = attrs
        self._tracer = tracer
        self._context = context
        self._record = record

    def __enter__(self):
        backend = self._backend
        thread = self._thread = _get_ident()
        if thread in _stale:  # a span entered here was exited on another thread: reset its context first
            _release_stale(thread)
        span = self._span = backend.start(self._name, self._attrs, self._tracer, self._context)
        self._token = backend.use(span)
        return span

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and (not self._record or isinstance(exc, GeneratorExit)):
            exc = None  # closing a generator is not a failure
        try:
            if _get_ident() == self._thread:
                self._backend.release(self._token)
            else:
                # Exited on another thread: the context token is the entering thread's and
                # cannot be reset here; that thread resets it before its next span.
                _stale.setdefault(self._thread, []).append((self._backend, self._token))
                _warn_foreign_exit(self._name)
        finally:
            self._backend.end(self._span, exc)
        return False


from _thread import get_ident as _get_ident  # noqa: E402 - a builtin module: free to import

# thread id -> [(backend, token)] of spans entered on it and exited on another thread
_stale: dict = {}
_warned_foreign = False


def _release_stale(thread) -> None:
    for backend, token in reversed(_stale.pop(thread, ())):
        try:
            backend.release(token)
        except Exception:  # a context that moved on: nothing to reset
            pass


def _warn_foreign_exit(name) -> None:
    global _warned_foreign
    if not _warned_foreign:
        _warned_foreign = True
        import warnings

        warnings.warn(f"span {name!r} was exited on a thread other than the one that entered it; it is ended, and "
                      "the entering thread's current span is restored before its next span (exit a with-block on "
                      "the thread that entered it)", RuntimeWarning, stacklevel=3)
