"""W3C trace-context carriers: parse and format ``traceparent`` headers (stdlib only)."""

from __future__ import annotations

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "TraceParent",
    "format_traceparent",
    "is_valid_carrier",
    "parse_traceparent",
]

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_HEX = frozenset("0123456789abcdef")
_MAX_HEADER = 512


class TraceParent(tuple):
    """The fields of a ``traceparent`` header: (trace_id, span_id, flags, version)."""

    __slots__ = ()

    def __new__(cls, trace_id: int, span_id: int, flags: int, version: int = 0):
        return tuple.__new__(cls, (trace_id, span_id, flags, version))

    trace_id = property(lambda self: self[0], doc="128-bit trace id")
    span_id = property(lambda self: self[1], doc="64-bit parent span id")
    flags = property(lambda self: self[2], doc="trace flags byte")
    version = property(lambda self: self[3], doc="header version")

    @property
    def sampled(self) -> bool:
        """True when the sampled flag is set."""
        return bool(self[2] & 0x01)


def _hex(text: str, width: int) -> bool:
    return len(text) == width and _HEX.issuperset(text)


def parse_traceparent(value: object):
    """Parse a ``traceparent`` header into a TraceParent; ``None`` if malformed or all-zero."""
    if not isinstance(value, str) or len(value) > _MAX_HEADER:
        return None
    fields = value.strip().split("-")  # W3C: hex must be lowercase; uppercase is invalid
    if len(fields) < 4:
        return None
    version, trace_hex, span_hex, flags_hex = fields[:4]
    if not (_hex(version, 2) and _hex(trace_hex, 32) and _hex(span_hex, 16) and _hex(flags_hex, 2)):
        return None
    # version ff is invalid; version 00 has exactly four fields; later ones may add more.
    if version == "ff" or (version == "00" and len(fields) != 4):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if trace_id == 0 or span_id == 0:
        return None
    return TraceParent(trace_id, span_id, int(flags_hex, 16), int(version, 16))


def format_traceparent(trace_id: int, span_id: int, flags: int = 1) -> str:
    """Format a version-00 ``traceparent`` header."""
    if not (0 < trace_id < 1 << 128 and 0 < span_id < 1 << 64 and 0 <= flags < 256):
        raise ValueError(f"invalid trace context: trace_id={trace_id!r} span_id={span_id!r} flags={flags!r}")
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def is_valid_carrier(carrier: object) -> bool:
    """True when ``carrier`` is a dict-like holding a well-formed ``traceparent``."""
    get = getattr(carrier, "get", None)
    return get is not None and parse_traceparent(get(TRACEPARENT)) is not None
