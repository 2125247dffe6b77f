"""Python logging -> OpenTelemetry logs, with trace and span ids on every record."""

from __future__ import annotations

import logging

from otel_bridge._log_mark import MARK as _MARK

__all__ = ["OTelLogHandler", "TraceIdFilter", "adopt_setup_provider", "detach_logging_bridge", "setup_logging_bridge"]

# The LoggerProvider of this process's exporting setup (setup_telemetry adopts it, its
# shutdown detaches it): held here, so the bridge never imports the handle that imports it.
_setup_provider = None


def __getattr__(name):
    # The handler subclasses opentelemetry-instrumentation-logging's: loaded on first use.
    if name == "OTelLogHandler":
        from otel_bridge._log_handler import OTelLogHandler

        return OTelLogHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TraceIdFilter(logging.Filter):
    """Adds ``otel_trace_id`` / ``otel_span_id`` (hex, or "0" outside a span) to records so a
    plain formatter can print them."""

    def filter(self, record: logging.LogRecord) -> bool:
        from opentelemetry import trace

        ctx = trace.get_current_span().get_span_context()
        record.otel_trace_id = f"{ctx.trace_id:032x}" if ctx.is_valid else "0"
        record.otel_span_id = f"{ctx.span_id:016x}" if ctx.is_valid else "0"
        return True


def setup_logging_bridge(logger_name: str = "", level: int | None = None, logger_provider=None):
    """Export the records of ``logger_name`` (default: the root logger, so every logger that
    propagates) as OpenTelemetry logs carrying trace/span ids and ``extra`` fields as
    attributes. ``setup_telemetry`` calls it for the root logger when logs are enabled.

    Idempotent: one handler per logger and LoggerProvider (a handler left from a provider
    since replaced is swapped out). Uses the active setup's LoggerProvider unless one is
    given; with none (logs disabled or a quiet rank) only the id filter is attached.

    ``level`` None exports what the logger lets through and changes no level. A level
    exports records at or above it; when the logger's effective level is higher, the
    logger's level is lowered to it, so those records also reach the logger's other
    handlers. The console is kept: a record no other handler takes still goes to
    ``logging.lastResort`` (stderr, WARNING and above), and ``logging.basicConfig`` still
    configures the root logger after the bridge is attached. Returns the handler, or
    None when only the filter was attached.
    """
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, TraceIdFilter) for f in logger.filters):
        logger.addFilter(TraceIdFilter())
    if logger_provider is None:
        logger_provider = _setup_provider
    if logger_provider is None:
        return None
    for handler in list(logger.handlers):
        if getattr(handler, _MARK, False):
            if getattr(handler, "logger_provider", None) is logger_provider:
                return handler
            logger.removeHandler(handler)  # it exported to a provider that has been replaced
            handler.close()
    from otel_bridge._log_handler import OTelLogHandler, keep_on_root_through_logging_config

    handler = OTelLogHandler(logger_provider, logging.NOTSET if level is None else level)
    logger.addHandler(handler)
    if logger is logging.getLogger():
        keep_on_root_through_logging_config()
    if level is not None and logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    return handler


def adopt_setup_provider(logger_provider):
    """setup_telemetry's call: ``logger_provider`` becomes the one ``setup_logging_bridge()``
    uses when given none, and the root logger's records are exported to it. Returns the
    handler."""
    global _setup_provider
    _setup_provider = logger_provider
    return setup_logging_bridge(logger_provider=logger_provider)


def detach_logging_bridge(logger_provider) -> int:
    """Remove (and close) every bridge handler that exports to ``logger_provider``; the
    handle's shutdown does it before the provider shuts down. Returns how many."""
    global _setup_provider
    if _setup_provider is logger_provider:
        _setup_provider = None
    loggers = [logging.getLogger()]
    loggers += [v for v in list(logging.Logger.manager.loggerDict.values()) if isinstance(v, logging.Logger)]
    removed = 0
    for logger in loggers:
        for handler in list(logger.handlers):
            if getattr(handler, _MARK, False) and getattr(handler, "logger_provider", None) is logger_provider:
                logger.removeHandler(handler)
                handler.close()
                removed += 1
    return removed
