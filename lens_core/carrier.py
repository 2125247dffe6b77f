"""W3C trace-context carriers: parse and format ``traceparent`` headers (stdlib only)."""

from __future__ import annotations

from . import _log

__all__ = [
    "BAGGAGE",
    "TRACEPARENT",
    "TRACESTATE",
    "TraceParent",
    "canonical_carrier",
    "format_traceparent",
    "ignored_carrier_count",
    "is_valid_carrier",
    "parse_traceparent",
    "usable_carrier",
]

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
BAGGAGE = "baggage"
_HEX = frozenset("0123456789abcdef")
_MAX_HEADER = 512
_MAX_BAGGAGE = 8192  # W3C baggage: a propagator may drop a header longer than 8192 bytes
_OWS = " \t"  # W3C: the only optional whitespace around a header value
_ignored = 0


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


def _plain(value: object):
    """``value`` as an exact str, or None when it is none. A str subclass counts as its
    characters (copied by str's own method), so its strip, split, __len__ and the rest,
    which may raise or lie, are never called; an object that only claims to be a str
    (``__class__ = str``) is not one: ``type()`` is what is checked, not ``isinstance``."""
    kind = type(value)
    if kind is str:
        return value
    if issubclass(kind, str):
        try:
            return str.__str__(value)
        except Exception:  # noqa: BLE001 - a header we cannot read is a malformed one
            return None
    return None


def _hex(text: str, width: int) -> bool:
    return len(text) == width and _HEX.issuperset(text)


def parse_traceparent(value: object):
    """Parse a ``traceparent`` header into a TraceParent; ``None`` if malformed or all-zero.
    Never raises, whatever ``value`` is (a str subclass counts as its characters)."""
    value = _plain(value)
    if value is None or len(value) > _MAX_HEADER:
        return None
    # Only space and tab may pad the value (str.strip() would also take \n, \x85, \u3000);
    # W3C: hex must be lowercase; uppercase is invalid.
    fields = value.strip(_OWS).split("-")
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


def _traceparent_of(carrier):
    # (entry, parsed): entry is the traceparent value (None when absent), or _BROKEN when
    # carrier is no mapping or its get() fails; parsed is its TraceParent or None.
    try:
        value = carrier.get(TRACEPARENT)
    except Exception:  # not a mapping, or a mapping that fails: never a usable carrier
        return _BROKEN, None
    return value, parse_traceparent(value)


_BROKEN = object()


def is_valid_carrier(carrier: object) -> bool:
    """True when ``carrier`` is a dict-like holding a well-formed ``traceparent``. Never raises."""
    return _traceparent_of(carrier)[1] is not None


_tracestate_member = _baggage_member = None


def _compile() -> None:
    global _tracestate_member, _baggage_member
    import re  # deferred: only carriers with a tracestate or baggage need it

    key = r"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
    _tracestate_member = re.compile(rf"({key})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{{0,255}}[\x21-\x2b\x2d-\x3c\x3e-\x7e]").fullmatch
    token, octets = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
    _baggage_member = re.compile(
        rf"{token}[ \t]*=[ \t]*{octets}(?:[ \t]*;[ \t]*{token}(?:[ \t]*=[ \t]*{octets})?)*").fullmatch


def _members(value, header: str, limit: int, max_members: int):
    # The comma-separated members of a W3C list header (tracestate or baggage) without
    # empty ones, or None when it is no str, too long, has too many members or a bad one.
    value = _plain(value)
    if value is None or len(value) > limit:
        return None
    if _tracestate_member is None:
        _compile()
    match = _tracestate_member if header == TRACESTATE else _baggage_member
    members = [m.strip(_OWS) for m in value.split(",")]
    members = [m for m in members if m]
    if not members or len(members) > max_members or not all(match(m) for m in members):
        return None
    return members


def _tracestate(value):
    # W3C tracestate: at most 32 key=value members, keys unique.
    members = _members(value, TRACESTATE, _MAX_HEADER, 32)
    if members is None or len({m.split("=", 1)[0] for m in members}) != len(members):
        return None
    return ",".join(members)


def _baggage(value):
    # W3C baggage: at most 180 key=value members (with ;properties), 8192 characters.
    members = _members(value, BAGGAGE, _MAX_BAGGAGE, 180)
    return None if members is None else ",".join(members)


def canonical_carrier(carrier: object) -> dict:
    """A fresh W3C carrier for ``carrier``'s context: its ``traceparent`` re-formatted as
    version 00, plus its ``tracestate`` and ``baggage`` when they are well-formed (without
    empty list members; a malformed one is dropped, as W3C allows). ``{}`` when
    ``carrier`` holds no valid ``traceparent``. Never raises; what a backend is given is
    only ever this, so no backend parser sees (or warns about) a malformed header."""
    parsed = _traceparent_of(carrier)[1]
    if parsed is None:
        return {}
    out = {TRACEPARENT: format_traceparent(parsed[0], parsed[1], parsed[2])}
    try:
        state, baggage = carrier.get(TRACESTATE), carrier.get(BAGGAGE)
    except Exception:  # its get() worked a moment ago; keep the traceparent alone
        return out
    state, baggage = _tracestate(state), _baggage(baggage)
    if state:
        out[TRACESTATE] = state
    if baggage:
        out[BAGGAGE] = baggage
    return out


def usable_carrier(carrier: object, where: str) -> dict:
    """canonical_carrier(carrier), counting a malformed one: anything but ``None``, a
    mapping without a ``traceparent`` (both mean "no remote parent") or a valid carrier is
    counted in ignored_carrier_count() and warned about once per ``where`` (the entry
    point's name). The caller then goes on as if no carrier was given."""
    global _ignored
    if carrier is None:
        return {}
    out = canonical_carrier(carrier)
    if out:
        return out
    if _traceparent_of(carrier)[0] is None:
        return {}  # a mapping with no traceparent: nothing was captured
    _ignored += 1
    _log.warn_once(("malformed-carrier", where),
                   f"{where}: ignored a malformed trace carrier (a {type(carrier).__name__} without a valid "
                   "W3C traceparent); the span is parented on the current context as if none was given. "
                   "Further ones are counted in lens_core.carrier.ignored_carrier_count()")
    return {}


def ignored_carrier_count() -> int:
    """How many malformed carriers the entry points ignored in this process."""
    return _ignored
