"""Trace context through raw bytes: serialize, deserialize (never raising), extract."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace

import lens_core
from otel_bridge.contrib.nccl import (
    MAX_CONTEXT_BYTES,
    deserialize_context,
    extract_nccl_context,
    serialize_context,
)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
CARRIER = {"traceparent": TRACEPARENT, "tracestate": "congo=t61rcWkgMzE"}


def test_a_carrier_round_trips_through_compact_json_bytes():
    data = serialize_context(CARRIER)
    assert data == json.dumps(CARRIER, separators=(",", ":")).encode()
    assert deserialize_context(data) == CARRIER


def test_only_w3c_headers_are_serialized():
    data = serialize_context(dict(CARRIER, baggage="k=v", other=3))
    assert json.loads(data) == CARRIER


def test_the_current_span_is_serialized_by_default(recorder):
    with lens_core.span_cm("send") as span:
        data = serialize_context()
    assert deserialize_context(data) == recorder.carrier_of(span)


def test_with_nothing_recording_an_empty_object_is_serialized_and_reads_back_as_none():
    assert serialize_context() == b"{}"
    assert deserialize_context(b"{}") is None


def test_an_oversized_tracestate_is_dropped_to_stay_within_the_limit():
    data = serialize_context({"traceparent": TRACEPARENT, "tracestate": "x" * MAX_CONTEXT_BYTES})
    assert deserialize_context(data) == {"traceparent": TRACEPARENT}


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_bytes_like_and_tobytes_objects_are_accepted(wrap):
    assert deserialize_context(wrap(serialize_context(CARRIER))) == CARRIER


def test_trailing_nul_padding_of_a_fixed_size_buffer_is_ignored():
    buffer = np.zeros(256, dtype=np.uint8)
    data = serialize_context(CARRIER)
    buffer[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    assert deserialize_context(buffer) == CARRIER


@pytest.mark.parametrize("data", [
    b"",
    b"\xff\xfe",  # not UTF-8
    b"not json",
    b"[1, 2]",  # not an object
    b'"traceparent"',
    b'{"traceparent": 5}',
    b'{"tracestate": "a=b"}',
    b'{"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"}',
    b'{"traceparent": "garbage"}',
    b"[" * 3000,  # nesting deep enough to exhaust the recursion limit
    b" " * (MAX_CONTEXT_BYTES + 1),
    ("{" + json.dumps(CARRIER)[1:-1] + ',"pad":"' + "x" * MAX_CONTEXT_BYTES + '"}').encode(),
    np.zeros(MAX_CONTEXT_BYTES + 1, dtype=np.uint8),
    "a str is not bytes",
    None,
    12,
])
def test_malformed_input_reads_as_none(data):
    assert deserialize_context(data) is None


def test_a_failing_tobytes_reads_as_none():
    class Broken:
        def tobytes(self):
            raise RuntimeError("device tensor")

    assert deserialize_context(Broken()) is None


@given(st.binary(max_size=MAX_CONTEXT_BYTES + 16))
def test_arbitrary_bytes_never_raise(data):
    result = deserialize_context(data)
    assert result is None or result["traceparent"]


@given(st.dictionaries(st.text(max_size=12), st.one_of(st.text(), st.integers(), st.none()), max_size=5))
def test_arbitrary_json_objects_never_raise(obj):
    assert deserialize_context(json.dumps(obj).encode()) is None or "traceparent" in obj


def test_extract_gives_a_context_whose_parent_is_the_sender(recorder):
    context = extract_nccl_context(serialize_context(CARRIER))
    parent = trace.get_current_span(context).get_span_context()
    assert parent.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert parent.span_id == 0xB7AD6B7169203331
    assert parent.is_remote


def test_extract_of_malformed_bytes_is_none():
    assert extract_nccl_context(b"\x00garbage") is None


def test_extract_is_a_no_op_importing_nothing_when_telemetry_is_off():
    """Regression: a quiet rank's extract_nccl_context loaded OpenTelemetry to parent spans nobody records."""
    assert lens_core.installed_backend() is None
    assert extract_nccl_context(serialize_context(CARRIER)) is None
