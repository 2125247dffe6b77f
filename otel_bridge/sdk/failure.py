"""An exception on a span: the ``exception`` event's attributes and ERROR status, never raising."""

from __future__ import annotations

from lens_core.attributes import describe_exception
from lens_core.redaction import redact_text

__all__ = ["exception_attributes", "record_failure"]


def exception_attributes(exc, escaped=False) -> dict:
    """The ``exception`` event's attributes, as the SDK's record_exception writes them;
    never raises, even for an exception whose ``__str__`` does. Credential shapes in the
    message and the stack trace are redacted (lens_core.redaction.redact_text)."""
    import traceback

    kind = type(exc)
    module, qualname = kind.__module__, kind.__qualname__
    try:
        stacktrace = redact_text("".join(traceback.format_exception(kind, exc, exc.__traceback__)))
    except Exception:
        stacktrace = f"{qualname}: {describe_exception(exc, with_type=False)}"
    return {
        "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
        "exception.message": describe_exception(exc, with_type=False),
        "exception.stacktrace": stacktrace,
        "exception.escaped": str(escaped),
    }


def record_failure(span, exc) -> None:
    """``exc`` on a live OTel span: the ``exception`` event and ERROR status."""
    from opentelemetry.trace import Status, StatusCode

    span.add_event("exception", exception_attributes(exc, escaped=True))
    span.set_status(Status(StatusCode.ERROR, describe_exception(exc)))
