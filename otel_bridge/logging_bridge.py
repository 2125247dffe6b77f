"""Python logging -> OpenTelemetry logs, with trace and span ids on every record."""

from __future__ import annotations

import logging

__all__ = ["TraceIdFilter", "setup_logging_bridge"]

_MARK = "_lens_logging_bridge"


class TraceIdFilter(logging.Filter):
    """Adds ``otel_trace_id`` / ``otel_span_id`` (hex, or "0" outside a span) to records so a
    plain formatter can print them."""

    def filter(self, record: logging.LogRecord) -> bool:
        from opentelemetry import trace

        ctx = trace.get_current_span().get_span_context()
        record.otel_trace_id = f"{ctx.trace_id:032x}" if ctx.is_valid else "0"
        record.otel_span_id = f"{ctx.span_id:016x}" if ctx.is_valid else "0"
        return True


def setup_logging_bridge(logger_name: str = "", level: int = logging.INFO, logger_provider=None):
    """Attach one OTel handler to ``logger_name`` (idempotent) so its records export as OTel
    logs carrying trace/span ids. Uses the active setup's LoggerProvider unless one is
    given; with none (logs disabled or a quiet rank) only the id filter is attached.
    Returns the handler, or None when only the filter was attached."""
    from .handle import active_handle

    logger = logging.getLogger(logger_name)
    for handler in logger.handlers:
        if getattr(handler, _MARK, False):
            return handler
    if not any(isinstance(f, TraceIdFilter) for f in logger.filters):
        logger.addFilter(TraceIdFilter())
    if logger_provider is None:
        handle = active_handle()
        logger_provider = handle.providers.logger_provider if handle and handle.providers else None
    if logger_provider is None:
        return None
    from opentelemetry.sdk._logs import LoggingHandler

    handler = LoggingHandler(level=level, logger_provider=logger_provider)
    setattr(handler, _MARK, True)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    return handler
