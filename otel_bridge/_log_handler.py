"""The logging bridge's handler: OpenTelemetry's maintained LoggingHandler with lens's rules added.

Importing this module loads ``opentelemetry-instrumentation-logging``; the bridge imports
it only when a LoggerProvider exists (an exporting rank with logs enabled).
"""

from __future__ import annotations

import functools
import logging

try:
    from opentelemetry.instrumentation.logging.handler import LoggingHandler
except ImportError as exc:  # the otel extra brings it; name the package, not just the module
    raise ImportError(f"the lens logging bridge needs opentelemetry-instrumentation-logging ({exc}); "
                      "install 'lens-telemetry[otel]'") from exc

from lens_core import redact_value, semconv
from lens_core.redaction import redact_text

from otel_bridge._log_mark import MARK
from otel_bridge.sdk import upstream

# The redaction below overrides the method the upstream handler asks for a record's
# attributes: if that method were renamed, records would leave unredacted. Refuse to load.
_HOOK = upstream.log_record_attributes_hook(LoggingHandler)

__all__ = ["OTelLogHandler", "keep_on_root_through_logging_config"]

_EXPORTED = "_lens_log_exported"
# Record attributes that are not the caller's ``extra``: the ids TraceIdFilter (and the
# instrumentation's record factory) copy onto records for formatters, and our own mark.
_NOT_EXTRAS = frozenset({"otel_trace_id", "otel_span_id", "otelSpanID", "otelTraceID", "otelTraceSampled",
                         "otelServiceName", _EXPORTED})
_SCALARS = (bool, int, float, str)


def _attribute(key: str, value):
    """A log attribute value: scalars and homogeneous lists of them as they are, anything
    else as its text (an ``extra`` is free-form; its text is what a formatter would show),
    secrets redacted by key like span attributes."""
    if type(value) not in _SCALARS:
        if isinstance(value, (list, tuple)) and all(type(v) in _SCALARS and type(v) is type(value[0]) for v in value):
            value = list(value)
        else:
            try:
                value = str(value)
            except Exception:
                value = f"<unprintable {type(value).__name__}>"
    return redact_value(key, value)


def _reaches_another_handler(name: str) -> bool:
    """Whether a record of logger ``name`` reaches a handler that is not a bridge. When it
    does not, Python would have printed it through ``logging.lastResort``."""
    logger = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):  # the root logger, or a record made by hand
        logger = logging.getLogger()
    while logger is not None:
        if any(not getattr(h, MARK, False) for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


class OTelLogHandler(LoggingHandler):
    """Exports records at or above ``level`` to ``logger_provider`` as OpenTelemetry logs:
    the current trace and span ids, ``extra`` fields as attributes (secrets redacted,
    non-scalar values as text), code location, thread and exception attributes; credential
    shapes in the message body are redacted too.

    The bridge never changes what reaches the console: a record that reaches no other
    handler goes to ``logging.lastResort`` (stderr, WARNING and above), as it would without
    the bridge. Records of ``opentelemetry.*`` loggers are not exported (an export error
    logged into the export pipeline would feed itself), and a record that propagates past
    two bridge handlers is exported once.
    """

    def __init__(self, logger_provider, level: int = logging.NOTSET):
        # The handler's own level stays NOTSET so every record reaches emit(), where the
        # console rule needs it; ``level`` only gates the export.
        super().__init__(logging.NOTSET, logger_provider, log_code_attributes=True)
        self.logger_provider = logger_provider
        self.export_level = level
        setattr(self, MARK, True)

    def _get_attributes(self, record):
        attributes, event_name = super()._get_attributes(record)
        clean = {k: _attribute(k, v) for k, v in attributes.items() if k not in _NOT_EXTRAS and v is not None}
        clean[semconv.THREAD_NAME] = record.threadName
        return clean, event_name

    def _translate(self, record):
        # The message body is free text like any attribute: credential shapes in it are
        # redacted (extras and the exception attributes are, by _get_attributes above).
        log_record = super()._translate(record)
        body = log_record.body
        if isinstance(body, str):
            clean = redact_text(body)
            if clean is not body:
                log_record.body = clean
        return log_record

    def emit(self, record: logging.LogRecord) -> None:
        """Export the record (unless below the export level, an OpenTelemetry record, or
        already exported), then print it through ``logging.lastResort`` if nothing else will."""
        try:
            if (record.levelno >= self.export_level and not getattr(record, _EXPORTED, False)
                    and not record.name.startswith("opentelemetry")):
                setattr(record, _EXPORTED, True)
                super().emit(record)
            last_resort = logging.lastResort
            if last_resort is not None and record.levelno >= last_resort.level \
                    and not _reaches_another_handler(record.name):
                last_resort.handle(record)
        except Exception:  # logging must never raise into the caller
            self.handleError(record)

    def flush(self) -> None:
        """Nothing: the handle's shutdown flushes the LoggerProvider within its deadline.
        (The base class starts a thread here, which ``logging.shutdown`` would do at exit,
        where Python 3.12 refuses new threads.)"""


_config_wrapped = False


def keep_on_root_through_logging_config() -> None:
    """Make ``logging.basicConfig`` / ``dictConfig`` / ``fileConfig`` work as if no bridge
    handler were on the root logger: ``basicConfig`` does nothing once the root logger has
    a handler, and the other two remove it. Each is wrapped once to lift the bridge
    handlers off the root logger around the call and put them back after (what
    ``opentelemetry-instrumentation-logging`` does for its own handler)."""
    global _config_wrapped
    if _config_wrapped:
        return
    import logging.config

    def wrap(configure):
        @functools.wraps(configure)
        def without_bridge(*args, **kwargs):
            root = logging.getLogger()
            bridges = [h for h in root.handlers if getattr(h, MARK, False)]
            for handler in bridges:
                root.removeHandler(handler)
            try:
                return configure(*args, **kwargs)
            finally:
                for handler in bridges:
                    root.addHandler(handler)

        return without_bridge

    logging.basicConfig = wrap(logging.basicConfig)
    logging.config.dictConfig = wrap(logging.config.dictConfig)
    logging.config.fileConfig = wrap(logging.config.fileConfig)
    _config_wrapped = True
