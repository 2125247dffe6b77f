"""The OpenTelemetry span backend that setup_telemetry installs into lens_core."""

from __future__ import annotations

import threading

from lens_core import semconv
from lens_core.backend import LiveSpan, SpanBackend, _get_ident, _release_stale, _stale, _warn_foreign_exit
from otel_bridge.sdk.failure import record_failure

__all__ = ["INSTRUMENTATION_SCOPE", "OTelBackend"]

#: The instrumentation scope every lens span is created under.
INSTRUMENTATION_SCOPE = "lens"


class OTelBackend(SpanBackend):
    """lens_core's SpanBackend over an SDK TracerProvider (imported lazily by the caller).

    Spans come from one cached tracer; attributes are passed at start; ``use`` attaches
    the span to the current OTel context and ``release`` detaches it.
    """

    name = "opentelemetry"

    def __init__(self, tracer_provider, version: str = "", device=None, nvtx=None):
        from opentelemetry import context, propagate, trace
        from opentelemetry.context import Context

        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE, version or None,
                                                  schema_url=semconv.SCHEMA_URL)
        self._attach = context.attach
        # release() is context.detach itself: one Python frame less on every span's exit.
        self.release = self._detach = context.detach
        self._set_span_in_context = trace.set_span_in_context
        self._get_current_span = trace.get_current_span
        self._inject = propagate.inject
        self._extract = propagate.extract
        self._context_type = Context
        # lens_core passes these through; every other context= value reaches us only as a
        # carrier it has validated and made canonical.
        self.context_types = (Context,)
        # a lens_core._device.DeviceTimer (device timing on): device-timed spans record their
        # events here and hand the marks over by span id (the record is made on export)
        self._device = device
        # (push, pop) of an NVTX range API (LENS_NVTX=1): a range named after every span
        self._nvtx_push, self._nvtx_pop = nvtx if nvtx is not None else (None, None)

    @property
    def tracer(self):
        """The cached tracer lens spans are created from."""
        return self._tracer

    def _context(self, context):
        # None = the current context; a Context is used as is; a mapping is W3C headers.
        if context is None or isinstance(context, self._context_type):
            return context
        return self._extract(context)

    def start(self, name, attributes, tracer=None, context=None, links=None):
        """Start a span with ``attributes`` (not made current)."""
        if context is not None:  # the common case (None: the current context) skips a call
            context = self._context(context)
        return (tracer or self._tracer).start_span(name, context, attributes=_with_thread(attributes), links=links)

    def live(self, name, attributes, tracer=None, context=None, record=True):
        """The enabled ``with`` block's context manager, with start+attach and detach+end
        fused (fewer calls on every span than the generic one)."""
        return _LiveOTelSpan(self, name, attributes, tracer, context, record)

    def use(self, span):
        """Make ``span`` current; returns the token for release()."""
        return self._attach(self._set_span_in_context(span))

    def release(self, token):  # replaced per instance by context.detach (see __init__)
        """Detach the context attached by use() / attach_carrier()."""
        from opentelemetry import context

        context.detach(token)

    def end(self, span, exc=None):
        """Record ``exc`` (if any) with ERROR status, then end the span. Never raises
        because of ``exc``: not the SDK's record_exception (it calls str(exc), which a
        user's ``__str__`` may make raise) but the same event from failure.exception_attributes."""
        if exc is not None:
            try:
                self.record_failure(span, exc)
            finally:
                span.end()
        else:
            span.end()

    #: ``exc`` on a live OTel span: the ``exception`` event and ERROR status.
    record_failure = staticmethod(record_failure)

    def set_attributes(self, span, attributes):
        """Set sanitised attributes on a live span."""
        span.set_attributes(attributes)

    def current_carrier(self):
        """The current recording span's context as W3C headers, or ``{}``."""
        span = self._get_current_span()
        if not span.is_recording():
            return {}
        carrier = {}
        self._inject(carrier)
        return carrier

    def carrier_of(self, span):
        """``span``'s context as W3C headers."""
        carrier = {}
        self._inject(carrier, context=self._set_span_in_context(span))
        return carrier

    def attach_carrier(self, carrier):
        """Attach the carrier's remote context; None when it holds no valid span context."""
        ctx = self._extract(carrier)
        if not self._get_current_span(ctx).get_span_context().is_valid:
            return None
        return self._attach(ctx)


_current_thread = threading.current_thread
_THREAD_ID, _THREAD_NAME = semconv.THREAD_ID, semconv.THREAD_NAME


def _with_thread(attributes):
    # The thread goes in with the start attributes: the SDK cleans attributes once, where
    # the span processor setting them in on_start would make it a second pass.
    thread = _current_thread()
    attributes[_THREAD_ID] = thread.ident
    attributes[_THREAD_NAME] = thread.name
    return attributes


class _LiveOTelSpan(LiveSpan):
    """OTelBackend.live's context manager: the generic LiveSpan with start+attach and
    detach+end inlined (no backend method calls in between)."""

    __slots__ = ("_mark", "_ranged")

    def __enter__(self):
        backend = self._backend
        thread = self._thread = _get_ident()
        if thread in _stale:  # a span entered here was exited on another thread: reset its context first
            _release_stale(thread)
        context = self._context
        if context is not None:
            context = backend._context(context)
        span = self._span = (self._tracer or backend._tracer).start_span(
            self._name, context, attributes=_with_thread(self._attrs))
        self._token = backend._attach(backend._set_span_in_context(span))
        device = backend._device
        recording = span.is_recording()
        self._mark = device.enter(self._attrs) if device is not None and recording else None
        self._ranged = recording and backend._nvtx_push is not None
        if self._ranged:
            backend._nvtx_push(self._name)
        return span

    def __exit__(self, exc_type, exc, tb):
        if self._ranged:
            self._backend._nvtx_pop()
        mark = self._mark
        if mark:  # the device's end event first, then the span's end (as the native recorders)
            device = self._backend._device
            device.exit(mark)
            device.hand_over(self._span.get_span_context().span_id, mark)
        try:
            if _get_ident() == self._thread:
                self._backend._detach(self._token)
            else:  # exited on another thread: the entering thread resets the context (LiveSpan)
                _stale.setdefault(self._thread, []).append((self._backend, self._token))
                _warn_foreign_exit(self._name)
        finally:
            if exc is None or not self._record or isinstance(exc, GeneratorExit):
                self._span.end()  # closing a generator is not a failure
            else:
                self._backend.end(self._span, exc)
        return False
