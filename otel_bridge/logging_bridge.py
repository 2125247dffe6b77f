"""Python logging -> OpenTelemetry logs, with trace and span ids on every record."""

from __future__ import annotations

import logging

from lens_core import semconv

__all__ = ["OTelLogHandler", "TraceIdFilter", "setup_logging_bridge"]

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


# Python level -> (OpenTelemetry SeverityNumber, severity text), largest level <= record's.
_SEVERITIES = ((logging.CRITICAL, 21, "FATAL"), (logging.ERROR, 17, "ERROR"), (logging.WARNING, 13, "WARN"),
               (logging.INFO, 9, "INFO"), (logging.DEBUG, 5, "DEBUG"), (0, 1, "TRACE"))


class OTelLogHandler(logging.Handler):
    """Emits each record as an OpenTelemetry log record through a LoggerProvider, with the
    current context (so trace and span ids ride along). Written here because the SDK's
    own LoggingHandler is deprecated."""

    def __init__(self, logger_provider, level: int = logging.NOTSET):
        super().__init__(level=level)
        self._provider = logger_provider

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from opentelemetry import context
            from opentelemetry._logs import SeverityNumber

            number, text = next((n, t) for floor, n, t in _SEVERITIES if record.levelno >= floor)
            attributes = {
                semconv.CODE_FILE_PATH: record.pathname,
                semconv.CODE_FUNCTION_NAME: record.funcName,
                semconv.CODE_LINE_NUMBER: record.lineno,
                semconv.THREAD_NAME: record.threadName,
            }
            exception = record.exc_info[1] if record.exc_info else None
            self._provider.get_logger(record.name).emit(
                timestamp=int(record.created * 1e9),
                context=context.get_current(),
                severity_number=SeverityNumber(number),
                severity_text=text,
                body=self.format(record) if self.formatter else record.getMessage(),
                attributes=attributes,
                exception=exception,
            )
        except Exception:  # logging must never raise into the caller
            self.handleError(record)


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
    handler = OTelLogHandler(logger_provider, level=level)
    setattr(handler, _MARK, True)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    return handler
