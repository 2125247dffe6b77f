"""Enabled spans: attributes at start, context, errors, span_cm, umbrellas and goodput buckets."""

import logging

import pytest

import lens_core
from lens_core import Bucket, SpanRegistry, _impl
from lens_core.carrier import format_traceparent

REMOTE_TRACE, REMOTE_SPAN = 0x1234567890ABCDEF1234567890ABCDEF, 0xFEDCBA9876543210


def register_lib(**kwargs):
    """Groups: 'job' (umbrella), 'step' (productive leaf), 'sync' (leaf, no bucket declared)."""
    SpanRegistry.register("lib", ["job", "step", "sync"], umbrellas=["job"],
                          buckets={"step": Bucket.PRODUCTIVE}, **kwargs)
    lens_core.set_span_group_spec("all")


def lens_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "lens_core" and r.levelno == logging.WARNING]


# ---- attributes and context -------------------------------------------------------------------


def test_enabled_span_yields_the_backend_span(recorder):
    register_lib()
    with lens_core.managed_span("step", "train.step") as span:
        assert span is recorder.spans[0]
    assert span.name == "train.step"


def test_attributes_are_given_at_start(recorder):
    register_lib()
    with lens_core.managed_span("step", "train.step", iteration=42, lr=0.5, tag="a", ok=True):
        started = dict(recorder.spans[0].attributes)
    assert started == {"iteration": 42, "lr": 0.5, "tag": "a", "ok": True, "rl.bucket": "productive"}


def test_nested_span_is_parented_on_the_outer_span(recorder):
    register_lib()
    with lens_core.managed_span("job", "outer") as outer:
        with lens_core.managed_span("step", "inner") as inner:
            pass
    assert inner.parent_id == outer.span_id
    assert inner.trace_id == outer.trace_id
    assert outer.parent_id is None


def test_span_is_current_inside_and_detached_after(recorder):
    register_lib()
    with lens_core.managed_span("step", "s") as span:
        inside = lens_core.current_trace_carrier()
    assert inside == {"traceparent": format_traceparent(span.trace_id, span.span_id)}
    assert lens_core.current_trace_carrier() == {}
    with lens_core.managed_span("step", "next") as following:
        pass
    assert following.parent_id is None


def test_span_is_ended_on_normal_exit(recorder):
    register_lib()
    with lens_core.managed_span("step", "s") as span:
        assert not span.ended
    assert span.ended
    assert span.error is None


def test_exception_is_recorded_reraised_and_the_span_ended(recorder):
    register_lib()
    boom = ValueError("boom")
    with pytest.raises(ValueError) as err:
        with lens_core.managed_span("step", "s"):
            raise boom
    assert err.value is boom
    span = recorder.named("s")
    assert span.error is boom
    assert span.ended
    assert lens_core.current_trace_carrier() == {}


def test_base_exception_is_recorded_reraised_and_the_span_ended(recorder):
    register_lib()
    try:
        with lens_core.managed_span("step", "s"):
            raise KeyboardInterrupt
    except KeyboardInterrupt as caught:
        interrupt = caught
    else:  # pragma: no cover
        pytest.fail("KeyboardInterrupt was swallowed")
    span = recorder.named("s")
    assert span.error is interrupt
    assert span.ended
    assert lens_core.current_trace_carrier() == {}


def test_span_factory_returns_the_null_span_if_the_backend_vanished(recorder):
    """A backend uninstalled between the gate check and the span start yields no span."""
    register_lib()
    lens_core.uninstall_backend()
    assert lens_core.spans._span_factory("step", "late", None, {}, False) is _impl.gate.null_span


# ---- span_cm ------------------------------------------------------------------------------------


def test_span_cm_is_ungated(recorder):
    with lens_core.span_cm("free", a=1) as span:
        assert span is recorder.spans[0]
    assert recorder.spans[0].attributes == {"a": 1}
    assert recorder.spans[0].ended


def test_span_cm_is_off_without_a_backend():
    assert lens_core.span_cm("free") is _impl.gate.null_span
    with lens_core.span_cm("free") as span:
        assert span is None


def test_span_cm_context_carrier_parents_the_span_remotely(recorder):
    carrier = {"traceparent": format_traceparent(REMOTE_TRACE, REMOTE_SPAN)}
    with lens_core.span_cm("remote.child", context=carrier) as span:
        pass
    assert (span.trace_id, span.parent_id) == (REMOTE_TRACE, REMOTE_SPAN)


def test_span_cm_context_wins_over_the_current_span(recorder):
    carrier = {"traceparent": format_traceparent(REMOTE_TRACE, REMOTE_SPAN)}
    with lens_core.span_cm("local"):
        with lens_core.span_cm("remote.child", context=carrier) as span:
            pass
    assert span.parent_id == REMOTE_SPAN


def test_span_cm_records_exceptions_by_default(recorder):
    with pytest.raises(RuntimeError):
        with lens_core.span_cm("free"):
            raise RuntimeError("x")
    assert isinstance(recorder.named("free").error, RuntimeError)


def test_span_cm_with_record_exception_false_records_no_error(recorder):
    with pytest.raises(RuntimeError):
        with lens_core.span_cm("quiet", record_exception=False):
            raise RuntimeError("expected")
    span = recorder.named("quiet")
    assert span.error is None
    assert span.ended


def test_span_cm_passes_the_tracer(recorder):
    tracer = object()
    with lens_core.span_cm("t", tracer=tracer):
        pass
    assert recorder.spans[0].tracer is tracer


# ---- umbrellas and buckets ----------------------------------------------------------------------


def test_umbrella_span_on_an_umbrella_group_has_no_bucket(recorder):
    register_lib()
    with lens_core.umbrella_span("job", "job", run="r1"):
        pass
    assert recorder.spans[0].attributes == {"run": "r1"}


def test_managed_span_on_an_umbrella_group_has_no_bucket(recorder):
    register_lib()
    with lens_core.managed_span("job", "job"):
        pass
    assert recorder.spans[0].attributes == {}


def test_explicit_bucket_on_an_umbrella_group_is_dropped_with_a_warning(recorder, caplog):
    caplog.set_level(logging.WARNING, logger="lens_core")
    register_lib()
    with lens_core.managed_span("job", "job", **{"rl.bucket": "idle"}):
        pass
    assert recorder.spans[0].attributes == {}
    (warning,) = lens_warnings(caplog)  # prefixed with the call site (this file's line)
    assert warning.startswith(__file__ + ":") and warning.endswith(
        "span 'job' of umbrella group 'job' was given rl.bucket=; umbrellas are never bucketed, dropped")


def test_umbrella_span_on_a_leaf_group_warns_once_per_name_and_keeps_the_bucket(recorder, caplog):
    caplog.set_level(logging.WARNING, logger="lens_core")
    register_lib()
    for name in ("a", "a", "b"):
        with lens_core.umbrella_span("step", name):
            pass
    assert [s.attributes for s in recorder.spans] == [{"rl.bucket": "productive"}] * 3
    assert lens_warnings(caplog) == [
        "umbrella span 'a' was opened with leaf group 'step'; emitting it as a leaf (bucket productive)",
        "umbrella span 'b' was opened with leaf group 'step'; emitting it as a leaf (bucket productive)",
    ]


def test_leaf_with_a_declared_bucket_is_stamped_with_it(recorder):
    register_lib()
    with lens_core.managed_span("step", "s"):
        pass
    assert recorder.spans[0].attributes == {"rl.bucket": "productive"}


def test_leaf_without_a_declared_bucket_is_stamped_overhead(recorder):
    register_lib()
    with lens_core.managed_span("sync", "s"):
        pass
    assert recorder.spans[0].attributes == {"rl.bucket": "overhead"}


def test_namespace_bucket_key_is_the_stamped_attribute(recorder):
    register_lib(bucket_key="x.bucket")
    with lens_core.managed_span("step", "s"):
        pass
    with lens_core.managed_span("sync", "t"):
        pass
    assert [s.attributes for s in recorder.spans] == [{"x.bucket": "productive"}, {"x.bucket": "overhead"}]


def test_shared_group_keeps_the_declaring_owners_bucket(recorder):
    register_lib()
    SpanRegistry.register("other", ["step"], allow_override=True, bucket_key="other.bucket")
    with lens_core.managed_span("step", "s"):
        pass
    assert recorder.spans[0].attributes == {"rl.bucket": "productive"}


def test_attributes_of_unsupported_types_are_dropped_at_start(recorder):
    register_lib()
    with lens_core.managed_span("sync", "s", good=[1, 2], bad={"a": 1}, gone=None):
        pass
    assert recorder.spans[0].attributes == {"good": (1, 2), "rl.bucket": "overhead"}


def test_secret_attributes_are_redacted_at_start(recorder):
    register_lib()
    with lens_core.managed_span("job", "s", api_key="sk-123", num_tokens=5):
        pass
    assert recorder.spans[0].attributes == {"api_key": "[REDACTED]", "num_tokens": 5}
