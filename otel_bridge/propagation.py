"""inject_context / extract_context: W3C trace context in and out of carrier dicts."""

from __future__ import annotations

__all__ = ["extract_context", "inject_context"]


def inject_context(carrier=None, context=None) -> dict:
    """Write the current (or ``context``'s) trace context into ``carrier`` (a new dict when
    None) with the global propagator, and return the carrier."""
    from opentelemetry import propagate

    carrier = {} if carrier is None else carrier
    propagate.inject(carrier, context=context)
    return carrier


def extract_context(carrier):
    """An OpenTelemetry Context from a carrier of W3C headers (``traceparent``,
    ``tracestate``, ``baggage``); an empty or malformed carrier (the latter counted and
    warned about once, see lens_core.carrier) gives a Context with no parent. Never
    raises for a bad carrier: the propagator only sees lens_core's canonical copy."""
    from opentelemetry import propagate

    from lens_core.carrier import usable_carrier

    return propagate.extract(usable_carrier(carrier, "extract_context"))
