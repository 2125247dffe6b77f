"""Attribute safety: keep OpenTelemetry's value types, drop (counted) the rest, redact secrets.

Everything that records attributes (the gate's fast path, spans, scopes, both recorders,
the bridge's emitters) cleans them here, so there is one rule for what a value may be.
"""

from __future__ import annotations

from lens_core import _log, redaction
from lens_core.redaction import DEFAULT_REDACT_KEYS, redact_text, redact_value

__all__ = ["describe_exception", "dropped_attribute_count", "sanitize_attributes"]

_SCALARS = (bool, int, float, str)
_dropped = 0
_warn_once = _log.warn_once
# Bound once for the fast path below (read per attribute of every enabled span).
_secret_keys = redaction._key_cache  # attribute key -> secret? (cleared in place, never replaced)
_clean_texts = redaction._clean_texts
_SHAPE_MIN = redaction._SHAPE_MIN


def _clean_scalar(value):
    kind = type(value)
    if kind in _SCALARS:
        return value
    # subclasses (IntEnum, numpy float64, str enums) become their plain base type
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    return None


def _clean(value):
    if type(value) in _SCALARS:
        return value
    if isinstance(value, (list, tuple)):
        items = [_clean_scalar(v) for v in value]
        if None in items or len({type(v) for v in items}) > 1:
            return None  # OTel allows only homogeneous sequences of scalars
        return tuple(items)
    return _clean_scalar(value)


def sanitize_attributes(attrs, redact_keys=None) -> dict:
    """Keep bool/int/float/str and homogeneous sequences of them, redacting secrets
    (redact_value: by key, and credential shapes in text); drop None and other types
    (counted, and warned about once per key and type)."""
    out = {}
    if attrs:
        _sanitize_into(out, attrs, redact_keys)
    return out


def _sanitize_into(out, attrs, redact_keys=None) -> None:
    # sanitize_attributes, writing into ``out``: a kept value replaces what ``out`` had
    # under its key, a dropped one removes it (as if merged first, then sanitised).
    default_keys = redact_keys is None or redact_keys is DEFAULT_REDACT_KEYS
    secret_keys = _secret_keys
    for key, value in attrs.items():
        # Fast path (every enabled span runs this): a str key with a plain number is kept
        # as is; a plain str under a key already known not to be secret only has its text
        # checked for credential shapes, which short or recently seen clean text skips.
        if type(key) is str:
            kind = type(value)
            if kind is int or kind is float or kind is bool:
                out[key] = value
                continue
            if kind is str and default_keys and secret_keys.get(key) is False:
                out[key] = value if len(value) < _SHAPE_MIN or value in _clean_texts else redact_text(value)
                continue
        _sanitize_one(out, key, value, redact_keys)


def _sanitize_one(out, key, value, redact_keys) -> None:
    global _dropped
    clean = _clean(value) if value is not None else None
    if clean is None or not isinstance(key, str):
        if value is not None or not isinstance(key, str):
            _dropped += 1
            _warn_once(
                ("attr", key, type(value)),
                f"span attribute {key!r} dropped: {type(value).__name__} is not a "
                "bool/int/float/str or a homogeneous sequence of them",
            )
        out.pop(key, None)
        return
    out[key] = redact_value(key, clean, redact_keys)


def dropped_attribute_count() -> int:
    """How many attribute values were dropped because of their type (None is not counted)."""
    return _dropped


def describe_exception(exc: BaseException, with_type: bool = True) -> str:
    """``"TypeName: message"`` for a span's status and exception event (``message`` alone
    without ``with_type``; the type name alone when the message is empty). Never raises,
    even when the exception's ``__str__`` or ``__repr__`` raises or returns no str: then
    the repr, or ``<unprintable TypeName>``, stands in, so recording a failure can never
    replace the user's exception with one of its own. Credential shapes in the message are
    redacted (lens_core.redaction.redact_text)."""
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a broken __str__ must not replace the user's error
        try:
            message = f"<str() failed> {repr(exc)}"
        except BaseException:  # noqa: BLE001
            message = f"<unprintable {name}>"
    message = redact_text(message)
    if not with_type:
        return message
    return f"{name}: {message}" if message else name
