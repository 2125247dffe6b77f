"""Trace context in and out of carriers: inject/extract, current_trace_carrier and
remote_trace_context across threads."""

import threading

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

# Recording paths: run under each gate-and-recorder twin (tests/twins.py).
pytestmark = pytest.mark.usefixtures("twin")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, current_trace_carrier, managed_span, remote_trace_context  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import extract_context, inject_context, setup_telemetry  # noqa: E402


@pytest.fixture
def finished():
    """An exporting setup with group ``g`` on; yields a function that flushes and returns
    the spans exported so far."""
    SpanRegistry.register("t", ["g"])
    spans = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g"), span_exporter=spans)

    def flushed():
        assert handle.force_flush(5000)
        return spans.get_finished_spans()

    yield flushed
    handle.shutdown()


def _ids(span):
    ctx = span.get_span_context()
    return ctx.trace_id, ctx.span_id


def test_inject_then_extract_round_trips_the_current_span(finished):
    with managed_span("g", "outer") as span:
        carrier = inject_context()
    parent = trace.get_current_span(extract_context(carrier)).get_span_context()
    assert (parent.trace_id, parent.span_id) == _ids(span) and parent.is_remote


def test_inject_writes_into_the_given_carrier(finished):
    carrier = {"other": "kept"}
    with managed_span("g", "outer"):
        assert inject_context(carrier) is carrier
    assert set(carrier) == {"other", "traceparent"}


@pytest.mark.parametrize("carrier", [{}, None, {"traceparent": "garbage"}])
def test_extract_context_of_an_empty_or_malformed_carrier_has_no_parent(carrier):
    assert not trace.get_current_span(extract_context(carrier)).get_span_context().is_valid


def test_current_trace_carrier_is_empty_without_a_backend():
    assert current_trace_carrier() == {}


def test_current_trace_carrier_is_empty_when_nothing_is_recording(finished):
    assert current_trace_carrier() == {}


def test_current_trace_carrier_names_the_current_span(finished):
    with managed_span("g", "outer") as span:
        carrier = current_trace_carrier()
    trace_id, span_id = _ids(span)
    assert carrier["traceparent"] == f"00-{trace_id:032x}-{span_id:016x}-03"


def test_spans_under_remote_trace_context_in_another_thread_join_the_parent_trace(finished):
    with managed_span("g", "parent") as parent:
        carrier = current_trace_carrier()

    def work():
        with remote_trace_context(carrier):
            with managed_span("g", "in-thread"):
                pass
        with managed_span("g", "after-block"):
            pass

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    spans = {s.name: s for s in finished()}
    child, after = spans["in-thread"], spans["after-block"]
    assert (child.context.trace_id, child.parent.span_id) == _ids(parent)
    assert after.parent is None and after.context.trace_id != child.context.trace_id


@pytest.mark.parametrize("carrier", [{}, {"traceparent": "00-zz-zz-01"}, {"traceparent": "00-" + "0" * 32 + "-" + "1" * 16 + "-01"}, None])
def test_remote_trace_context_is_a_no_op_for_empty_or_malformed_carriers(finished, carrier):
    with remote_trace_context(carrier):
        with managed_span("g", "root"):
            pass
    (span,) = finished()
    assert span.parent is None


def test_remote_trace_context_is_a_no_op_without_a_backend():
    with remote_trace_context({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}):
        assert lens_core.installed_backend() is None
