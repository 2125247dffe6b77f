"""emit_span over explicit intervals: exact timestamps, clamping, strict all-or-nothing validation."""

import logging
import math

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lens_core import semconv
from otel_bridge.emit import emit_span, emit_spans_from_specs, validate_span_spec

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_ID = 0xB7AD6B7169203331
CARRIER = {"traceparent": f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"}


@pytest.fixture
def exporter():
    """An in-memory exporter behind a TracerProvider whose tracer is ``exporter.tracer``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.tracer = provider.get_tracer("test")
    yield exporter
    provider.shutdown()


def test_integer_seconds_become_exact_nanoseconds(exporter):
    emit_span("startup", 1_700_000_000, 1_700_000_042, tracer=exporter.tracer)
    [span] = exporter.get_finished_spans()
    assert (span.start_time, span.end_time) == (1_700_000_000 * 10**9, 1_700_000_042 * 10**9)


def test_float_seconds_keep_nanosecond_precision(exporter):
    emit_span("startup", 1_700_000_000.5, 1_700_000_001.25, tracer=exporter.tracer)
    [span] = exporter.get_finished_spans()
    assert (span.start_time, span.end_time) == (1_700_000_000_500_000_000, 1_700_000_001_250_000_000)


def test_sub_microsecond_floats_round_to_the_nearest_nanosecond(exporter):
    start = 1_700_000_000.000123  # the float is 1700000000.0001230239868164...
    emit_span("tiny", start, start, tracer=exporter.tracer)
    [span] = exporter.get_finished_spans()
    assert span.start_time == 1_700_000_000_000_123_024


def test_attributes_are_set_and_sanitized(exporter):
    emit_span("load", 10, 20, tracer=exporter.tracer, attributes={"rl.backend": "vllm", "bad": object()})
    [span] = exporter.get_finished_spans()
    assert dict(span.attributes) == {"rl.backend": "vllm"}


def test_a_carrier_parent_makes_the_span_its_remote_child(exporter):
    emit_span("child", 1, 2, tracer=exporter.tracer, parent=CARRIER)
    [span] = exporter.get_finished_spans()
    assert span.context.trace_id == TRACE_ID
    assert span.parent.span_id == PARENT_ID and span.parent.is_remote


def test_a_context_parent_is_used_as_is(exporter):
    with exporter.tracer.start_as_current_span("outer") as outer:
        parent = otel_context.get_current()
    emit_span("inner", 1, 2, tracer=exporter.tracer, parent=parent)
    inner = [s for s in exporter.get_finished_spans() if s.name == "inner"][0]
    assert inner.parent.span_id == outer.get_span_context().span_id


def test_without_a_parent_the_current_span_is_the_parent_as_in_opentelemetry(exporter):
    with exporter.tracer.start_as_current_span("outer") as outer:
        emit_span("inner", 1, 2, tracer=exporter.tracer)
    inner = [s for s in exporter.get_finished_spans() if s.name == "inner"][0]
    assert inner.parent.span_id == outer.get_span_context().span_id


def test_start_after_end_is_clamped_to_a_marked_zero_length_span(exporter, caplog):
    with caplog.at_level(logging.WARNING):
        emit_span("backwards", 100.5, 99, tracer=exporter.tracer)
    [span] = exporter.get_finished_spans()
    assert span.start_time == span.end_time == 100_500_000_000
    assert span.attributes[semconv.LENS_SPAN_CLAMPED] is True
    assert "'backwards' starts after it ends" in caplog.text


@pytest.mark.parametrize("field, start, end", [
    ("start", math.nan, 1),
    ("end", 1, math.inf),
    ("start", -math.inf, 1),
    ("start", "1700000000", 1),
    ("end", 1, None),
    ("start", True, 2),
    ("start", -1, 2),
    ("end", 1, 1_700_000_000_000),  # milliseconds, not seconds
    ("end", 1, 10**400),
])
def test_bad_times_are_rejected_naming_the_field(exporter, field, start, end):
    with pytest.raises(ValueError, match=field):
        emit_span("x", start, end, tracer=exporter.tracer)
    assert exporter.get_finished_spans() == ()


@pytest.mark.parametrize("kwargs, message", [
    ({"name": ""}, "name"),
    ({"name": 3}, "name"),
    ({"attributes": ["a"]}, "attributes"),
    ({"attributes": {1: "a"}}, "attributes"),
    ({"parent": {"traceparent": "bogus"}}, "parent"),
])
def test_bad_names_attributes_and_parents_are_rejected(exporter, kwargs, message):
    args = {"name": "x", "attributes": None, "parent": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        emit_span(args.pop("name"), 1, 2, tracer=exporter.tracer, **args)


def test_a_spec_is_normalized_with_every_key():
    assert validate_span_spec({"name": "n", "start": 1, "end": 2}) == {
        "name": "n", "start": 1, "end": 2, "attributes": None, "parent": None}


@pytest.mark.parametrize("spec, message", [
    ({"name": "n", "start": 1}, "missing 'end'"),
    ({"name": "n", "start": 1, "end": 2, "stop": 3}, "unknown key 'stop'"),
    ({"name": "n", "start": "soon", "end": 2}, "start must be a number"),
    (["n", 1, 2], "must be a mapping"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        validate_span_spec(spec)


def test_specs_are_emitted_and_counted(exporter):
    specs = [{"name": "a", "start": 1, "end": 2},
             {"name": "b", "start": 2, "end": 3, "attributes": {"k": 1}, "parent": CARRIER}]
    assert emit_spans_from_specs(specs, exporter.tracer) == 2
    assert [s.name for s in exporter.get_finished_spans()] == ["a", "b"]


def test_one_bad_spec_means_none_is_emitted_and_each_bad_one_is_listed(exporter):
    specs = [{"name": "good", "start": 1, "end": 2},
             {"name": "nan", "start": math.nan, "end": 2},
             {"name": "good2", "start": 1, "end": 2},
             {"start": 1, "end": 2}]
    with pytest.raises(ValueError) as info:
        emit_spans_from_specs(specs, exporter.tracer)
    message = str(info.value)
    assert "2 invalid" in message and "spec 1: start must be finite" in message
    assert "spec 3: missing 'name'" in message and "spec 0" not in message
    assert exporter.get_finished_spans() == ()


def test_the_global_tracer_is_the_default(exporter, monkeypatch):
    monkeypatch.setattr(trace, "get_tracer", lambda name: exporter.tracer)
    emit_span("global", 1, 2)
    assert [s.name for s in exporter.get_finished_spans()] == ["global"]
