"""Trace context as raw bytes, for collectives (NCCL broadcasts) that move tensors, not headers."""

from __future__ import annotations

import json

from lens_core import current_trace_carrier, state
from lens_core.carrier import TRACEPARENT, TRACESTATE, canonical_carrier, usable_carrier

from otel_bridge.contrib._active import missing_extra

__all__ = ["MAX_CONTEXT_BYTES", "deserialize_context", "extract_nccl_context", "serialize_context"]

MAX_CONTEXT_BYTES = 4096
"""Largest serialized context accepted; a receive buffer of this size always fits one."""


def _encode(headers) -> bytes:
    return json.dumps(headers, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def serialize_context(carrier=None) -> bytes:
    """Compact UTF-8 JSON of the W3C headers (``traceparent``, ``tracestate``) in ``carrier``,
    by default the current span's; ``b"{}"`` when there is none or it is malformed (counted
    and warned about once, see lens_core.carrier). ``tracestate`` is left out if it would
    push the result past ``MAX_CONTEXT_BYTES``."""
    if carrier is None:
        carrier = current_trace_carrier()
    canonical = usable_carrier(carrier, "serialize_context")
    headers = {key: canonical[key] for key in (TRACEPARENT, TRACESTATE) if key in canonical}
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
    The carrier is lens_core's canonical copy (a malformed ``tracestate`` is dropped).
    Never raises."""
    try:
        raw = _as_bytes(data)
        if raw is None:
            return None
        decoded = json.loads(raw.rstrip(b"\x00").decode("utf-8"))
    except Exception:  # malformed input of any kind, or a tobytes() that fails
        return None
    canonical = canonical_carrier(decoded) if isinstance(decoded, dict) else {}
    if not canonical:
        return None
    return {key: canonical[key] for key in (TRACEPARENT, TRACESTATE) if key in canonical}


def extract_nccl_context(data):
    """An OpenTelemetry ``Context`` parented on the carrier in ``data``; ``None`` if it has none.

    ``None`` too, importing nothing, when telemetry is off or this rank is quiet (no span
    backend: nothing would be parented on it), and, warned once, without the OpenTelemetry
    API (``pip install 'lens-telemetry[otel]'``).
    """
    if state.installed_backend() is None:
        return None
    carrier = deserialize_context(data)
    if carrier is None:
        return None
    try:
        from opentelemetry.propagate import extract
    except ImportError as exc:
        missing_extra("extract_nccl_context", "pip install 'lens-telemetry[otel]'", exc)
        return None
    return extract(carrier)
