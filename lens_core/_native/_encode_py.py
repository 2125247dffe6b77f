"""Pure-Python OTLP encoders for span records: protobuf ``ExportTraceServiceRequest`` bytes and
OTLP/JSON lines (the compiled twin is ``_encode.pyx``; both write the same bytes).

A record is anything with the ``_recorder_py.Span`` fields. Resource and scopes arrive
already encoded (protobuf bytes, and JSON text) because they are fixed per process.
The JSON is what protobuf's canonical mapping gives for OTLP (camelCase names, fields in
field-number order, 64-bit integers as strings, enums as integers) with OTLP/JSON's ids
as lowercase hex, i.e. what the OpenTelemetry Collector's file exporter writes.
"""

from __future__ import annotations

import json
import math
import struct

__all__ = ["encode_traces_json", "encode_traces_pb", "span_json", "span_pb"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT64 = (1 << 64) - 1
_FLAGS_HAS_IS_REMOTE, _FLAGS_IS_REMOTE = 0x100, 0x200
_THREAD_ID, _THREAD_NAME = "thread.id", "thread.name"
_pack_double = struct.Struct("<d").pack
_pack_fixed64 = struct.Struct("<Q").pack
_pack_fixed32 = struct.Struct("<I").pack


# ---- protobuf -----------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _uint64(value) -> int:
    """An event time as the compiled twin converts it: an SDK event's float truncated, and
    OverflowError (as there) for what fits no uint64."""
    if type(value) is not int:
        value = type(value).__int__(value)
    if not 0 <= value <= _UINT64:
        raise OverflowError(f"event time {value} ns does not fit 64 bits")
    return value


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _utf8(text: str) -> bytes:
    # str.encode, not text.encode: an SDK span keeps str subclasses as they are, and only
    # their text is written (as the compiled twin reads it).
    try:
        return str.encode(text, "utf-8")
    except UnicodeEncodeError:  # lone surrogates: never fail a whole batch over one string
        return str.encode(text, "utf-8", "replace")


def _any_value(value) -> bytes:
    if isinstance(value, bool):
        return _varint(2 << 3) + _varint(int(value))
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return _varint(3 << 3) + _varint(value)
        return _field(1, _utf8(str(value)))  # beyond int64: kept as its decimal text
    if isinstance(value, float):
        return _varint(4 << 3 | 1) + _pack_double(value)
    if isinstance(value, str):
        return _field(1, _utf8(value))
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, (list, tuple)):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    return _field(1, _utf8(str(value)))


def _key_value(key: str, value) -> bytes:
    return _field(1, _utf8(key)) + _field(2, _any_value(value))


def _attributes_pb(number: int, attrs) -> bytes:
    return b"".join(_field(number, _key_value(k, v)) for k, v in attrs.items()) if attrs else b""


def _flags(remote: bool) -> int:
    return _FLAGS_HAS_IS_REMOTE | (_FLAGS_IS_REMOTE if remote else 0)


def span_pb(r) -> bytes:
    """One record as an OTLP ``Span`` message."""
    out = [_field(1, r.trace_id.to_bytes(16, "big")), _field(2, r.span_id.to_bytes(8, "big"))]
    if r.trace_state:
        out.append(_field(3, _utf8(r.trace_state)))
    if r.parent_id:
        out.append(_field(4, r.parent_id.to_bytes(8, "big")))
    out.append(_field(5, _utf8(r.name)))
    out.append(_varint(6 << 3) + _varint(r.kind))
    # As the compiled twin's uint64 casts: a negative end a caller gave is its two's complement.
    out.append(_varint(7 << 3 | 1) + _pack_fixed64(r.start_ns & _UINT64))
    out.append(_varint(8 << 3 | 1) + _pack_fixed64(r.end_ns & _UINT64))
    out.append(_attributes_pb(9, r.attrs))
    if r.thread_name is not None:
        out.append(_field(9, _key_value(_THREAD_ID, r.thread_id)) + _field(9, _key_value(_THREAD_NAME, r.thread_name)))
    if r.dropped_attrs:
        out.append(_varint(10 << 3) + _varint(r.dropped_attrs))
    for name, time_ns, attrs in r.events or ():
        body = _varint(1 << 3 | 1) + _pack_fixed64(_uint64(time_ns)) + _field(2, _utf8(name)) + _attributes_pb(3, attrs)
        out.append(_field(11, body))
    if r.dropped_events:
        out.append(_varint(12 << 3) + _varint(r.dropped_events))
    for trace_id, span_id, state, attrs, remote in r.links or ():
        body = _field(1, trace_id.to_bytes(16, "big")) + _field(2, span_id.to_bytes(8, "big"))
        if state:
            body += _field(3, _utf8(state))
        body += _attributes_pb(4, attrs) + _varint(6 << 3 | 5) + _pack_fixed32(_flags(remote))
        out.append(_field(13, body))
    if r.dropped_links:
        out.append(_varint(14 << 3) + _varint(r.dropped_links))
    status = b""
    if r.status_msg:
        status += _field(2, _utf8(r.status_msg))
    if r.status_code:
        status += _varint(3 << 3) + _varint(r.status_code)
    out.append(_field(15, status))
    out.append(_varint(16 << 3 | 5) + _pack_fixed32(_flags(r.parent_remote)))
    return b"".join(out)


def _schema_url(urls, index: int) -> str:
    """``urls[index]``, or "" where ``urls`` is shorter (a scope without a declared schema)."""
    return urls[index] if index < len(urls) else ""


def encode_traces_pb(resource: bytes, scopes, records, resource_schema_url: str = "", scope_schema_urls=()) -> bytes:
    """An ``ExportTraceServiceRequest`` for ``records`` of one resource.

    ``resource`` is an encoded ``Resource``; ``scopes[i]`` an encoded
    ``InstrumentationScope`` for records whose ``scope`` is ``i``. ``resource_schema_url`` and
    ``scope_schema_urls[i]`` go to ResourceSpans.schema_url and ScopeSpans.schema_url (field
    3 of each); an empty one is omitted, as the SDK's exporters omit it."""
    by_scope: dict[int, list[bytes]] = {}
    for record in records:
        by_scope.setdefault(record.scope, []).append(_field(2, span_pb(record)))
    scope_spans = []
    for i, spans in by_scope.items():
        url = _schema_url(scope_schema_urls, i)
        scope_spans.append(_field(2, _field(1, scopes[i]) + b"".join(spans) + (_field(3, _utf8(url)) if url else b"")))
    tail = _field(3, _utf8(resource_schema_url)) if resource_schema_url else b""
    return _field(1, _field(1, resource) + b"".join(scope_spans) + tail)


# ---- OTLP/JSON ----------------------------------------------------------------------------

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _json_text(text: str) -> str:
    return _dumps(_utf8(text).decode("utf-8") if _has_surrogates(text) else text)


def _has_surrogates(text: str) -> bool:
    try:
        str.encode(text, "utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _json_double(value: float) -> str:
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    # float.__repr__, not repr: a float subclass an SDK span kept (numpy.float64's repr is
    # "np.float64(1.5)") is written as its value, as the compiled twin writes it.
    return float.__repr__(value)


def _json_value(value) -> str:
    if isinstance(value, bool):
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return '{"intValue":"%d"}' % value
        return '{"stringValue":%s}' % _json_text(str(value))
    if isinstance(value, float):
        return '{"doubleValue":%s}' % _json_double(value)
    if isinstance(value, str):
        return '{"stringValue":%s}' % _json_text(value)
    if isinstance(value, bytes):
        import base64

        return '{"bytesValue":"%s"}' % base64.b64encode(value).decode("ascii")
    if isinstance(value, (list, tuple)):
        if not value:
            return '{"arrayValue":{}}'
        return '{"arrayValue":{"values":[%s]}}' % ",".join(map(_json_value, value))
    return '{"stringValue":%s}' % _json_text(str(value))


def _json_kv(key: str, value) -> str:
    return '{"key":%s,"value":%s}' % (_json_text(key), _json_value(value))


def span_json(r) -> str:
    """One record as an OTLP/JSON ``Span`` object."""
    out = ['{"traceId":"%032x","spanId":"%016x"' % (r.trace_id, r.span_id)]
    if r.trace_state:
        out.append(',"traceState":%s' % _json_text(r.trace_state))
    if r.parent_id:
        out.append(',"parentSpanId":"%016x"' % r.parent_id)
    out.append(',"name":%s,"kind":%d,"startTimeUnixNano":"%d","endTimeUnixNano":"%d"'
               % (_json_text(r.name), r.kind, r.start_ns & _UINT64, r.end_ns & _UINT64))
    attrs = [_json_kv(k, v) for k, v in r.attrs.items()] if r.attrs else []
    if r.thread_name is not None:
        attrs += [_json_kv(_THREAD_ID, r.thread_id), _json_kv(_THREAD_NAME, r.thread_name)]
    if attrs:
        out.append(',"attributes":[%s]' % ",".join(attrs))
    if r.dropped_attrs:
        out.append(',"droppedAttributesCount":%d' % r.dropped_attrs)
    if r.events:
        events = []
        for name, time_ns, attrs in r.events:
            event = '{"timeUnixNano":"%d","name":%s' % (_uint64(time_ns), _json_text(name))
            if attrs:
                event += ',"attributes":[%s]' % ",".join(_json_kv(k, v) for k, v in attrs.items())
            events.append(event + "}")
        out.append(',"events":[%s]' % ",".join(events))
    if r.dropped_events:
        out.append(',"droppedEventsCount":%d' % r.dropped_events)
    if r.links:
        links = []
        for trace_id, span_id, state, attrs, remote in r.links:
            link = '{"traceId":"%032x","spanId":"%016x"' % (trace_id, span_id)
            if state:
                link += ',"traceState":%s' % _json_text(state)
            if attrs:
                link += ',"attributes":[%s]' % ",".join(_json_kv(k, v) for k, v in attrs.items())
            links.append(link + ',"flags":%d}' % _flags(remote))
        out.append(',"links":[%s]' % ",".join(links))
    if r.dropped_links:
        out.append(',"droppedLinksCount":%d' % r.dropped_links)
    status = []
    if r.status_msg:
        status.append('"message":%s' % _json_text(r.status_msg))
    if r.status_code:
        status.append('"code":%d' % r.status_code)
    out.append(',"status":{%s},"flags":%d}' % (",".join(status), _flags(r.parent_remote)))
    return "".join(out)


def encode_traces_json(resource: str, scopes, records, resource_schema_url: str = "", scope_schema_urls=()) -> str:
    """One OTLP/JSON ``ExportTraceServiceRequest`` line (no newline) for ``records``.

    ``resource`` is the Resource's JSON object text, ``scopes[i]`` the JSON text of an
    InstrumentationScope; the schema urls are written as ``"schemaUrl"`` of the
    ResourceSpans and of each ScopeSpans when not empty (see encode_traces_pb)."""
    by_scope: dict[int, list[str]] = {}
    for record in records:
        by_scope.setdefault(record.scope, []).append(span_json(record))
    scope_spans = []
    for i, spans in by_scope.items():
        url = _schema_url(scope_schema_urls, i)
        scope_spans.append('{"scope":%s,"spans":[%s]%s}' % (scopes[i], ",".join(spans),
                                                            ',"schemaUrl":%s' % _json_text(url) if url else ""))
    tail = ',"schemaUrl":%s' % _json_text(resource_schema_url) if resource_schema_url else ""
    return '{"resourceSpans":[{"resource":%s,"scopeSpans":[%s]%s}]}' % (resource, ",".join(scope_spans), tail)
