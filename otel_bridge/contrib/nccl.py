"""Trace context as raw bytes, for collectives (NCCL broadcasts) that move tensors, not headers."""

from __future__ import annotations

import json

from lens_core import current_trace_carrier
from lens_core.carrier import TRACEPARENT, TRACESTATE, parse_traceparent

__all__ = ["MAX_CONTEXT_BYTES", "deserialize_context", "extract_nccl_context", "serialize_context"]

MAX_CONTEXT_BYTES = 4096
"""Largest serialized context accepted; a receive buffer of this size always fits one."""


def _encode(headers) -> bytes:
    return json.dumps(headers, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def serialize_context(carrier=None) -> bytes:
    """Compact UTF-8 JSON of the W3C headers (``traceparent``, ``tracestate``) in ``carrier``,
    by default the current span's; ``b"{}"`` when there is none. ``tracestate`` is left out
    if it would push the result past ``MAX_CONTEXT_BYTES``."""
    if carrier is None:
        carrier = current_trace_carrier()
    headers = {key: carrier[key] for key in (TRACEPARENT, TRACESTATE)
               if isinstance(carrier.get(key), str)}
    data = _encode(headers)
    if len(data) > MAX_CONTEXT_BYTES:
        headers.pop(TRACESTATE, None)
        data = _encode(headers)
    return data


def _as_bytes(data) -> bytes | None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        return None if view.nbytes > MAX_CONTEXT_BYTES else view.tobytes()
    tobytes = getattr(data, "tobytes", None)
    if tobytes is None or getattr(data, "nbytes", 0) > MAX_CONTEXT_BYTES:
        return None
    raw = tobytes()
    return raw if isinstance(raw, bytes) and len(raw) <= MAX_CONTEXT_BYTES else None


def deserialize_context(data) -> dict | None:
    """The W3C carrier in ``data`` (bytes-like, or anything with ``tobytes()`` such as a numpy
    uint8 array), ignoring trailing NUL padding; ``None`` for anything else: over
    ``MAX_CONTEXT_BYTES``, not UTF-8 JSON of an object, or without a valid ``traceparent``.
    Never raises."""
    try:
        raw = _as_bytes(data)
        if raw is None:
            return None
        decoded = json.loads(raw.rstrip(b"\x00").decode("utf-8"))
    except Exception:  # malformed input of any kind, or a tobytes() that fails
        return None
    if not isinstance(decoded, dict) or parse_traceparent(decoded.get(TRACEPARENT)) is None:
        return None
    carrier = {TRACEPARENT: decoded[TRACEPARENT]}
    if isinstance(decoded.get(TRACESTATE), str):
        carrier[TRACESTATE] = decoded[TRACESTATE]
    return carrier


def extract_nccl_context(data):
    """An OpenTelemetry ``Context`` parented on the carrier in ``data``; ``None`` if it has none.

    Needs the OpenTelemetry API (``pip install 'lens-telemetry[otel]'``).
    """
    carrier = deserialize_context(data)
    if carrier is None:
        return None
    try:
        from opentelemetry.propagate import extract
    except ImportError as exc:
        raise ImportError("extract_nccl_context needs OpenTelemetry: pip install 'lens-telemetry[otel]'") from exc
    return extract(carrier)
