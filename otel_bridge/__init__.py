"""otel_bridge: builds OpenTelemetry providers lazily on exporting ranks and wires them to lens_core."""

from otel_bridge._extras import MissingExtraError
from otel_bridge.handle import TelemetryHandle, active_handle, setup_telemetry
from otel_bridge.propagation import extract_context, inject_context

__all__ = [
    "MissingExtraError",
    "TelemetryHandle",
    "active_handle",
    "extract_context",
    "inject_context",
    "setup_logging_bridge",
    "setup_telemetry",
]


def __getattr__(name):
    # logging costs several ms to import; quiet ranks that never bridge logs skip it.
    if name == "setup_logging_bridge":
        from otel_bridge.logging_bridge import setup_logging_bridge

        return setup_logging_bridge
    raise AttributeError(f"module 'otel_bridge' has no attribute {name!r}")
