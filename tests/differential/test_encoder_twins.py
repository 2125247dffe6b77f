"""The compiled and pure OTLP encoders write the same bytes: generated records (what the recorders
and SDK spans can hold: every attribute type, surrogates, control characters, big and negative
integers, NaN and infinities, str/float/int subclasses from SDK spans, events, links, statuses,
several scopes, resource and scope schema urls or none) through both implementations give
identical protobuf bytes and OTLP/JSON text; the protobuf parses with opentelemetry-proto (the
schema urls where OTLP puts them) and the JSON with json.loads."""

import enum
import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from twins import count, encoder_pair, recorder_pair, require_pair, skip_in_pure_pass

pytestmark = skip_in_pure_pass

FAST = settings(max_examples=500, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(FAST, max_examples=20_000)


class _Str(str):
    """An SDK span keeps str subclasses as they are (OpenTelemetry's attribute cleaning does)."""

    def encode(self, *args, **kwargs):
        return b"not the text"

    def __str__(self):
        return "not the text"


class _Float(float):
    """Like numpy.float64, whose repr is ``np.float64(1.5)``: only its value may be written."""

    def __repr__(self):
        return f"np.float64({float(self)!r})"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 1 << 40


_TEXTS = ["", "a", "plain", "ünïcödé ✓ 日本", "quote\" back\\slash", "\n\r\t\b\f", "\x00\x01\x1f\x7f",
          "\u2028\u2029",
          "\ud800", "a\udfffb", "emoji 🎉", "x" * 300, "[REDACTED]", "</script>"]
_INTS = [0, 1, -1, 127, 128, 16383, 16384, 2 ** 31, -(2 ** 31), 2 ** 63 - 1, -(2 ** 63), 2 ** 63, -(2 ** 63) - 1,
         2 ** 64, 10 ** 40, -(10 ** 40)]
_FLOATS = [0.0, -0.0, 1.5, -2.25, 0.1, 1e16, 1e-7, 1e300, 5e-324, math.inf, -math.inf, math.nan, 123456789.0,
           2.0 ** 63]
_SUBCLASSES = [_Str("sub"), _Float(2.5), _Float(math.nan), _Level.HIGH, _Level.LOW]


def _scalar(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(_TEXTS)
    if kind == 1:
        return rng.choice(_INTS)
    if kind == 2:
        return rng.choice(_FLOATS)
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return rng.choice(_SUBCLASSES)
    return rng.choice(_TEXTS + [b"", b"\x00raw\xff"])


def _value(rng):
    if rng.randrange(5) == 0:  # a sequence: homogeneous as sanitised, or mixed / with None as SDK spans allow
        items = [_scalar(rng) for _ in range(rng.randrange(4))]
        if rng.randrange(3) == 0 and items:
            items[0] = None if rng.random() < 0.5 else [1, "nested"]
        return tuple(items) if rng.random() < 0.5 else items
    return _scalar(rng)


def _attrs(rng, size=4):
    return {rng.choice(_TEXTS[:10] + ["k", "rl.bucket", "lens.group"]): _value(rng)
            for _ in range(rng.randrange(size + 1))}


def _time(rng):
    # ints in int64's range, and floats an SDK span carries when its user gave one (written truncated)
    return rng.choice([0, 1, 1_700_000_000_123_456_789, 2 ** 63 - 1, rng.randrange(1 << 62), 1.7e18, 2.5, 1e3])


def _record(twin, rng, scopes):
    trace_id = rng.choice([1, (1 << 128) - 1, rng.randrange(1, 1 << 128)])
    start = _time(rng)
    record = twin.make_record(
        rng.randrange(scopes), rng.choice(_TEXTS), rng.randint(0, 5), trace_id, rng.randrange(1, 1 << 64),
        rng.choice([0, 0, rng.randrange(1, 1 << 64)]), rng.random() < 0.5, rng.choice([None, "", "a=1,b=2", "ü=1"]),
        start, rng.choice([min(start + rng.randrange(1 << 40), (1 << 63) - 1), start, -5]), _attrs(rng),
        rng.choice([None, [], [(rng.choice(_TEXTS), _time(rng), _attrs(rng, 2)) for _ in range(rng.randrange(4))]]),
        rng.choice([None, [], [(rng.randrange(1, 1 << 128), rng.randrange(1, 1 << 64), rng.choice([None, "", "k=v"]),
                                _attrs(rng, 2), rng.random() < 0.5) for _ in range(rng.randrange(3))]]),
        rng.randint(0, 2), rng.choice([None, "", "boom", "ValueError: \ud800 [REDACTED]"]),
        (rng.choice([0, 0, 3, (1 << 31) - 1]), rng.choice([0, 0, 1]), rng.choice([0, 0, 2])))
    if rng.randrange(3) == 0:  # what the recorder stamps on its own spans
        record.thread_id, record.thread_name = rng.choice([(1, "MainThread"), (2 ** 62, "ünï"), (0, "")])
    return record


_SCHEMA_URLS = ["", "", "https://opentelemetry.io/schemas/1.37.0", "ü\"\n\ud800", _Str("sub")]


def _build(twin, seed, size):
    rng = random.Random(seed)
    scopes = rng.randint(1, 3)
    # ResourceSpans' and ScopeSpans' schema_url; the scope list may be shorter than the scopes
    schemas = (rng.choice(_SCHEMA_URLS), [rng.choice(_SCHEMA_URLS) for _ in range(rng.randint(0, scopes))])
    return [_record(twin, rng, scopes) for _ in range(size)], scopes, schemas


_RESOURCE_PB = b"\n\x15\n\x0cservice.name\x12\x05\n\x03job"  # Resource{attributes: [service.name=job]}
_RESOURCE_JSON = '{"attributes":[{"key":"service.name","value":{"stringValue":"job"}}]}'
_SCOPES_PB = [b"\n\x04lens\x12\x031.0", b"\n\x07raw-lib", b""]
_SCOPES_JSON = ['{"name":"lens","version":"1.0"}', '{"name":"raw-lib"}', "{}"]


def _encode(encoder, records, scopes, schemas):
    return (encoder.encode_traces_pb(_RESOURCE_PB, _SCOPES_PB[:scopes], records, *schemas),
            encoder.encode_traces_json(_RESOURCE_JSON, _SCOPES_JSON[:scopes], records, *schemas))


def _check(seed, size):
    encoders = require_pair(encoder_pair())
    makers = require_pair(recorder_pair())
    out = []
    for maker, encoder in zip(makers, encoders):
        records, scopes, schemas = _build(maker, seed, size)  # each encoder gets its own twin's records
        out.append(_encode(encoder, records, scopes, schemas))
    # and the very same (compiled) record objects through the pure encoder, which reads any record
    out.append(_encode(encoders[1], *_build(makers[0], seed, size)))
    (c_pb, c_json), (p_pb, p_json), (same_pb, same_json) = out
    assert c_pb == p_pb == same_pb
    assert c_json == p_json == same_json
    _parses(p_pb, p_json, size, _build(makers[1], seed, size)[2])
    count("encoder", 1)
    count("encoder records", size)


def _parses(pb, text, size, schemas):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(pb)
    assert sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans) == size
    decoded = json.loads(text)
    assert sum(len(ss["spans"]) for rs in decoded["resourceSpans"] for ss in rs["scopeSpans"]) == size
    # the schema urls land where OTLP puts them, as the text (lone surrogates replaced) of the str
    resource_url, scope_urls = schemas
    expected = str.encode(resource_url, "utf-8", "replace").decode("utf-8")
    (rs,) = request.resource_spans
    assert rs.schema_url == decoded["resourceSpans"][0].get("schemaUrl", "") == expected
    for ss, ss_json in zip(rs.scope_spans, decoded["resourceSpans"][0]["scopeSpans"]):
        index = _SCOPES_PB.index(ss.scope.SerializeToString())  # the test's scopes re-serialise as given
        url = scope_urls[index] if index < len(scope_urls) else ""
        assert ss.schema_url == ss_json.get("schemaUrl", "") == str.encode(url, "utf-8", "replace").decode("utf-8")


@FAST
@given(st.integers(0, 2 ** 32), st.integers(0, 8))
def test_both_encoders_write_the_same_bytes_for_generated_records(seed, size):
    note(f"records: _build(twin, {seed}, {size})")
    _check(seed, size)


@pytest.mark.slow
@SLOW
@given(st.integers(0, 2 ** 32), st.integers(0, 8))
def test_both_encoders_write_the_same_bytes_many_batches(seed, size):
    _check(seed, size)
