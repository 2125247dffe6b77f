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

    __slots__ = ("_backend", "_name", "_attrs", "_tracer", "_context", "_record", "_span", "_token")

    def __init__(self, backend, name, attrs, tracer=None, context=None, record=True):
        self._backend = backend
        self._name = name
        self._attrs = attrs
        self._tracer = tracer
        self._context = context
        self._record = record

    def __enter__(self):
        backend = self._backend
        span = self._span = backend.start(self._name, self._attrs, self._tracer, self._context)
        self._token = backend.use(span)
        return span

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and (not self._record or isinstance(exc, GeneratorExit)):
            exc = None  # closing a generator is not a failure
        try:
            self._backend.release(self._token)
        finally:
            self._backend.end(self._span, exc)
        return False
