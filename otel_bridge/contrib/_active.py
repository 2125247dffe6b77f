"""The active lens setup's providers, for instrumentations that must not use the global ones."""

from __future__ import annotations

from lens_core import _log

__all__ = ["active_providers", "missing_extra"]


def active_providers(what: str, instrumentor_kwargs=None):
    """``(tracer_provider, meter_provider)`` of the active exporting setup, or None after
    warning once that ``what`` is a no-op because telemetry is not set up. The meter
    provider is a no-op one when the setup exports no metrics. Passing the providers in
    ``instrumentor_kwargs`` is a TypeError: they are always the active setup's."""
    from otel_bridge.handle import active_handle

    for reserved in ("tracer_provider", "meter_provider"):
        if reserved in (instrumentor_kwargs or ()):
            raise TypeError(f"{what} sets {reserved} itself (the active lens setup's)")

    handle = active_handle()
    providers = handle.providers if handle is not None else None
    if providers is None or providers.tracer_provider is None:
        _log.warn_once(("contrib-no-telemetry", what),
                       f"{what}: telemetry is not set up in this process (no exporting "
                       "otel_bridge.setup_telemetry with traces), so nothing is instrumented")
        return None
    meter_provider = providers.meter_provider
    if meter_provider is None:
        from opentelemetry.metrics import NoOpMeterProvider

        meter_provider = NoOpMeterProvider()
    return providers.tracer_provider, meter_provider


def missing_extra(what: str, hint: str, exc: ImportError) -> None:
    """Warn once that ``what`` is a no-op because its optional dependency is not installed
    (an integration must never fail the code it instruments: a rollout actor's constructor)."""
    _log.warn_once(("contrib-missing-extra", what),
                   f"{what}: its optional dependency is not installed ({exc}), so nothing is instrumented; "
                   f"{hint}")
