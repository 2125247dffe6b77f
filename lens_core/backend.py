"""The protocol a span backend implements; with none installed every span group is off."""

from __future__ import annotations

from . import state

__all__ = ["SpanBackend", "install_backend", "installed_backend", "uninstall_backend"]


_REQUIRED = ("start", "use", "release", "end", "open", "close", "set_attributes", "current_carrier",
             "carrier_of", "attach_carrier")


class SpanBackend:
    """What lens_core needs from a tracing system (otel_bridge provides the OTel one).

    Subclassing is optional: any object with these methods will do. ``span`` and
    ``token`` values are opaque to lens_core. ``context`` may be ``None`` (the current
    context), a W3C carrier mapping, or a backend context object.
    """

    name = "abstract"

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

    def open(self, name, attributes, tracer=None, context=None):
        """start() then use(): returns ``(span, token)``. The enabled ``with`` path calls
        this and close(); a backend may fuse the steps to save calls per span."""
        span = self.start(name, attributes, tracer, context)
        return span, self.use(span)

    def close(self, span, token, exc=None):
        """release() then end(), ending the span even if release fails."""
        try:
            self.release(token)
        finally:
            self.end(span, exc)

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


def install_backend(backend: SpanBackend) -> None:
    """Install ``backend``: enabled span groups start producing spans through it."""
    missing = [m for m in _REQUIRED if not callable(getattr(backend, m, None))]
    if missing:
        raise TypeError(f"{backend!r} is not a SpanBackend: missing {', '.join(missing)}")
    state._set_backend(backend)


def uninstall_backend() -> None:
    """Remove the installed backend: every span group is off again."""
    state._set_backend(None)


installed_backend = state.installed_backend
