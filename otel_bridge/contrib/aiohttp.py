"""Client spans and traceparent headers for every aiohttp request, through lens's providers."""

from __future__ import annotations

import threading

from otel_bridge.contrib._active import active_providers, missing_extra

__all__ = ["instrument_aiohttp_client", "uninstrument_aiohttp_client"]

_EXTRA_HINT = "pip install 'lens-telemetry[aiohttp]'"
_lock = threading.Lock()
_instrumented_with = None  # the tracer provider the client is instrumented with, if any


def _instrumentor(what):
    """The instrumentor, or None (warned once) when the aiohttp extra is not installed."""
    try:
        from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    except ImportError as exc:
        missing_extra(what, _EXTRA_HINT, exc)
        return None
    return AioHttpClientInstrumentor()


def instrument_aiohttp_client(**instrumentor_kwargs) -> bool:
    """Patch ``aiohttp.ClientSession`` so every request made afterwards opens a client span
    and carries a ``traceparent`` header from the current context; True if instrumented.

    Spans go to the ACTIVE lens setup's tracer provider (passed explicitly: the global
    one may belong to an earlier setup). Sessions created before the call are not
    instrumented. Calling it again is harmless; after a new setup it re-instruments with
    the new providers. ``instrumentor_kwargs`` (``url_filter``, ``request_hook``, ...)
    go to ``AioHttpClientInstrumentor.instrument``. Every request then costs a span,
    whatever span groups are on: call it only where that volume is wanted. When
    telemetry is off or this rank is quiet it warns once and returns False, importing
    nothing; without ``pip install 'lens-telemetry[aiohttp]'`` it warns once and returns
    False (never raises: an actor's constructor calling it must not fail).
    """
    global _instrumented_with
    providers = active_providers("instrument_aiohttp_client", instrumentor_kwargs)
    if providers is None:  # before any import: a quiet rank loads no OpenTelemetry for this
        return False
    instrumentor = _instrumentor("instrument_aiohttp_client")
    if instrumentor is None:
        return False
    tracer_provider, meter_provider = providers
    with _lock:
        if instrumentor.is_instrumented_by_opentelemetry:
            if _instrumented_with is tracer_provider and not instrumentor_kwargs:
                return True
            instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider,
                                **instrumentor_kwargs)
        _instrumented_with = tracer_provider
    return True


def uninstrument_aiohttp_client() -> None:
    """Undo instrument_aiohttp_client for sessions created from now on."""
    global _instrumented_with
    if _instrumented_with is None:  # never instrumented here: nothing to import or undo
        return
    instrumentor = _instrumentor("uninstrument_aiohttp_client")
    if instrumentor is None:
        return
    with _lock:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        _instrumented_with = None
