"""Server spans for a FastAPI app, parented on the incoming traceparent, through lens's providers."""

from __future__ import annotations

from lens_core.semconv import SERVICE_NAME

from otel_bridge.contrib._active import active_providers, missing_extra

__all__ = ["instrument_fastapi"]

_EXTRA_HINT = "pip install 'lens-telemetry[fastapi]'"


def instrument_fastapi(app, service_name: str = None, **instrumentor_kwargs) -> bool:
    """Instrument ``app`` with OpenTelemetry's FastAPI instrumentation; True if it was.

    Server spans go to the ACTIVE lens setup's tracer provider (passed explicitly: the
    global one may belong to an earlier setup) and are parented on the request's
    ``traceparent`` header, so a caller instrumented with instrument_aiohttp_client
    sees the server's spans in its own trace. ``service_name``, when given, is set as
    ``service.name`` on every server span (one process may serve several apps).
    ``instrumentor_kwargs`` go to ``FastAPIInstrumentor.instrument_app``; the
    per-message ASGI ``receive``/``send`` spans are left out unless ``exclude_spans``
    says otherwise. Call it after setup_telemetry and before the app serves requests.
    When telemetry is off or this rank is quiet it warns once and returns False, importing
    nothing; without ``pip install 'lens-telemetry[fastapi]'`` it warns once and returns False
    (never raises: a server's startup must not fail for its telemetry).
    """
    providers = active_providers("instrument_fastapi", instrumentor_kwargs)
    if providers is None:  # before any import: a quiet rank loads no OpenTelemetry for this
        return False
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError as exc:
        missing_extra("instrument_fastapi", _EXTRA_HINT, exc)
        return False
    tracer_provider, meter_provider = providers
    if service_name is not None:
        user_hook = instrumentor_kwargs.pop("server_request_hook", None)

        def server_request_hook(span, scope):
            if span is not None and span.is_recording():
                span.set_attribute(SERVICE_NAME, service_name)
            if user_hook is not None:
                user_hook(span, scope)

        instrumentor_kwargs["server_request_hook"] = server_request_hook
    instrumentor_kwargs.setdefault("exclude_spans", ["receive", "send"])
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider,
                                       meter_provider=meter_provider, **instrumentor_kwargs)
    return True
