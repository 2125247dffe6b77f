"""Fuzzed carriers through the OpenTelemetry backend and every otel_bridge entry point that
takes one: nothing raises, no invalid context is adopted, a valid one always is."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import lens_core  # noqa: E402
from carrier_fuzz import carrier_strategy, expected_parent  # noqa: E402
from lens_core import LensConfig, SpanRegistry, remote_trace_context  # noqa: E402
from lens_core.carrier import ignored_carrier_count  # noqa: E402
from otel_bridge import extract_context, setup_telemetry  # noqa: E402
from otel_bridge.contrib.nccl import deserialize_context, serialize_context  # noqa: E402
from otel_bridge.contrib.ray import TRACE_CARRIER_KWARG, accepts_trace_context  # noqa: E402
from otel_bridge.distributed import _decode, _encode, create_linked_span  # noqa: E402

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ids(span_context):
    return (span_context.trace_id, span_context.span_id) if span_context is not None else None


def _placed_under(span, expected):
    """True when ``span`` is parented on ``expected`` (trace id, span id). A span under an
    unsampled remote parent is not recorded and keeps no parent: its trace id must match."""
    if not span.is_recording():
        return span.get_span_context().trace_id == expected[0]
    return _ids(span.parent) == expected


def _link_ids(span):
    """(trace_id, span_id) of each of the span's links, from either recorder's span."""
    return [(link[0], link[1]) if isinstance(link, tuple) else _ids(link.context) for link in span.links or ()]


@pytest.fixture(params=["native", "sdk"])
def otel(request):
    """An exporting setup (in-memory exporter) with group ``g`` on, with each recorder."""
    SpanRegistry.register("t", ["g"])
    config = LensConfig(enabled=True, exporter="none", span_groups="g", metrics_enabled=False,
                        recorder=request.param)
    handle = setup_telemetry(config, span_exporter=InMemorySpanExporter(), _allow_reinit=True)
    yield handle
    handle.shutdown()


@accepts_trace_context
def _current_parent():
    """A Ray-style method: the context it runs under."""
    return _ids(trace.get_current_span().get_span_context())


@FUZZ
@given(carrier=carrier_strategy())
def test_fuzzed_carriers_through_the_otel_backend(otel, carrier):
    remote = expected_parent(carrier)
    with lens_core.span_cm("outer") as outer:
        here = _ids(outer.get_span_context())
        with lens_core.span_cm("span_cm", context=carrier) as by_span_cm:
            pass
        with remote_trace_context(carrier):
            with lens_core.managed_span("g", "remote") as by_remote:
                pass
            under_remote = _ids(trace.get_current_span().get_span_context())
        with lens_core.deferred_child_span("g", "deferred", carrier) as by_deferred:
            pass
        by_ray = _current_parent(**{TRACE_CARRIER_KWARG: carrier})
        with create_linked_span("linked", remote_carrier=carrier) as linked:
            pass
    expected = remote if remote is not None else here
    assert all(_placed_under(span, expected) for span in (by_span_cm, by_remote, by_deferred))
    assert under_remote == expected and by_ray == expected
    assert _link_ids(linked) == ([remote] if remote else [])
    assert _ids(trace.get_current_span(extract_context(carrier)).get_span_context()) == (remote or (0, 0))
    decoded = deserialize_context(serialize_context(carrier))
    assert (decoded is not None and expected_parent(decoded)) == (remote or False)
    broadcast = expected_parent(_decode(_encode(carrier)))  # sent whole when all str, else as {}
    assert broadcast is None or broadcast == remote


def test_a_valid_traceparent_beside_a_tracestate_otel_cannot_parse_is_adopted(otel):
    """Regression: is_valid_carrier passed {"traceparent": VALID, "tracestate": 0}, then
    OTel's extract raised AttributeError on the int (remote_trace_context and span_cm)."""
    valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    carrier = {"traceparent": valid, "tracestate": 0, "baggage": ["x"]}
    with lens_core.span_cm("child", context=carrier) as child:
        pass
    with remote_trace_context(carrier):
        assert _ids(trace.get_current_span().get_span_context()) == expected_parent(carrier)
    assert _ids(child.parent) == expected_parent(carrier)


def test_malformed_carriers_are_counted(otel):
    before = ignored_carrier_count()
    with lens_core.span_cm("a", context={"traceparent": 0}):
        pass
    extract_context("junk")
    assert ignored_carrier_count() == before + 2


def test_accepts_trace_context_never_takes_the_truth_value_of_a_carrier(otel):
    """Regression: `if carrier:` raised for carriers whose truth value raises (a numpy
    array does), before the method ran."""

    class Ambiguous:
        def __bool__(self):
            raise ValueError("truth value is ambiguous")

    assert _current_parent(**{TRACE_CARRIER_KWARG: Ambiguous()}) == (0, 0)
