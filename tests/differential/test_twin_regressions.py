"""Divergences between the compiled and pure twins that the differential tests found, one
regression test each (both twins, same process)."""

import contextvars
import json
import math

import pytest
from twins import encoder_pair, recorder_pair, require_pair

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


def _record(twin, **fields):
    base = dict(scope=0, name="n", kind=1, trace_id=1, span_id=2, parent_id=0, parent_remote=False,
                trace_state=None, start_ns=10, end_ns=20, attrs={}, events=None, links=None, status_code=0,
                status_msg=None)
    base.update(fields)
    return twin.make_record(**base)


def _encode_both(**fields):
    """(pb, json) of one record made by each twin's make_record and encoded by the same twin."""
    out = []
    for maker, encoder in zip(require_pair(recorder_pair()), require_pair(encoder_pair())):
        records = [_record(maker, **fields)]
        out.append((encoder.encode_traces_pb(b"", [b""], records), encoder.encode_traces_json("{}", ["{}"], records)))
    return out


class _Float(float):
    def __repr__(self):
        return f"np.float64({float(self)!r})"


class _Str(str):
    def encode(self, *args, **kwargs):
        return b"not the text"


def test_a_float_subclass_from_an_sdk_span_is_written_as_its_value():
    """Regression: the pure OTLP/JSON encoder wrote a float subclass with its repr, so a
    numpy.float64 attribute on a raw OpenTelemetry span became ``np.float64(1.5)``: a line
    no JSON reader parses. The compiled one wrote 1.5."""
    compiled, pure = _encode_both(attrs={"loss": _Float(1.5), "nan": _Float(math.nan)})
    assert compiled == pure
    attrs = json.loads(pure[1])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    assert attrs[0]["value"] == {"doubleValue": 1.5} and attrs[1]["value"] == {"doubleValue": "NaN"}


def test_a_numpy_float_attribute_is_written_as_its_value():
    """Regression (the real type): numpy.float64 on a raw OTel span made invalid OTLP/JSON
    under the pure encoder."""
    numpy = pytest.importorskip("numpy", reason="needs NumPy: pip install numpy")
    compiled, pure = _encode_both(attrs={"loss": numpy.float64(0.25)})
    assert compiled == pure
    assert '"doubleValue":0.25' in pure[1]


def test_a_str_subclass_is_written_as_its_text():
    """Regression: the pure encoders called a str subclass's own encode() (an SDK span keeps
    str subclasses), the compiled ones read its text."""
    compiled, pure = _encode_both(name=_Str("name"), attrs={"k": _Str("text")}, status_code=2,
                                  status_msg=_Str("boom"))
    assert compiled == pure
    assert b"not the text" not in pure[0] and '"stringValue":"text"' in pure[1]


def test_float_times_of_an_sdk_span_are_written_truncated_by_both():
    """Regression: an SDK span's float start/end time (a user's ``start_time=``) and float event
    time were kept by the pure make_record and failed the pure protobuf encoder (struct.error:
    the whole batch counted failed); the compiled twin truncated them."""
    compiled, pure = _encode_both(start_ns=1.7e18, end_ns=1.7e18 + 5.5, events=[("e", 1.7e18 + 2.5, {})])
    assert compiled == pure
    span = json.loads(pure[1])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["startTimeUnixNano"] == str(int(1.7e18)) and span["events"][0]["timeUnixNano"] == str(int(1.7e18 + 2.5))


def test_a_negative_end_time_is_written_alike():
    """Regression: a negative end time (``span.end(end_time=-5)``, kept by both recorders) made
    the pure protobuf encoder raise and its JSON say "-5", where the compiled twin writes the
    uint64 the field holds."""
    compiled, pure = _encode_both(end_ns=-5)
    assert compiled == pure
    assert '"endTimeUnixNano":"18446744073709551611"' in pure[1]


def _recorded(twin, body, out=None):
    from opentelemetry.sdk.trace import TracerProvider

    from otel_bridge.sdk import recording

    rec = twin.Recorder()
    if out is not None:
        out["rec"] = rec
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
    span = rec.start("s", {})
    body(span)
    return span


@pytest.mark.parametrize("end_time, expected", [(7.9, 7), (2 ** 40, 2 ** 40)])
def test_an_end_time_is_kept_as_an_int_by_both_recorders(end_time, expected):
    """Regression: ``span.end(end_time=7.9)`` kept 7.9 in the pure recorder (whose protobuf
    encoder then failed the batch) and 7 in the compiled one."""
    for twin in require_pair(recorder_pair()):
        span = contextvars.Context().run(_recorded, twin, lambda s: s.end(end_time))
        assert span.end_ns == expected and type(span.end_ns) is int, twin


@pytest.mark.parametrize("end_time", [math.nan, math.inf, 2 ** 63, -5, "12", True])
def test_an_end_time_that_is_no_time_ends_the_span_now_in_both_recorders(end_time):
    """Regression: the pure recorder stored any end time (NaN, "12", 2**63), to fail the export
    batch later; the compiled one raised into the caller. Both now end the span now and count
    the bad value (lens.fields.invalid); OpenTelemetry's API never raises."""
    for twin in require_pair(recorder_pair()):
        out = {}
        span = contextvars.Context().run(_recorded, twin, lambda s: s.end(end_time), out)
        assert not span.is_recording() and span.end_ns >= span.start_ns > 10 ** 18, twin
        assert out["rec"].fields_invalid == 1, twin


@pytest.mark.parametrize("stamp", [2.5e15, math.nan, -3, "soon", 2 ** 70, math.inf])
def test_an_event_time_is_an_int_both_twins_can_write(stamp):
    """Regression: an event's float timestamp failed the pure protobuf encoder (the compiled
    one truncated it), and a negative, NaN or oversized one failed either encoder: one bad
    timestamp lost the whole export batch. Both recorders now keep a finite number's int part
    and drop (and count) an event whose time is no time."""
    for twin, encoder in zip(require_pair(recorder_pair()), require_pair(encoder_pair())):
        span = contextvars.Context().run(_recorded, twin, lambda s: (s.add_event("e", None, stamp), s.end()))
        if stamp == 2.5e15:
            (_, when, _), = span.events
            assert type(when) is int and when == int(stamp)
        else:
            assert not span.events
        encoder.encode_traces_pb(b"", [b""], [span])


def _trace_fn_ending_its_own_span(twin):
    """(trace_fn span, child span, current span after the call) under ``twin``'s gate and recorder."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    import lens_core
    from lens_core import _impl, state
    from lens_core.registry import SpanRegistry
    from otel_bridge.sdk import recording

    _impl.use(twin.impl)
    SpanRegistry.clear()
    state._reset_for_tests()
    SpanRegistry.register("regress", ["fn", "child"])
    rec = twin.Recorder()
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
    lens_core.install_backend(rec)
    try:
        lens_core.set_span_group_spec("all")

        @lens_core.trace_fn("fn", "traced")
        def traced():
            trace.get_current_span().end()  # the function ends its own span early
            with lens_core.managed_span("child", "child"):
                pass

        traced()
        after = rec._current_span()
    finally:
        lens_core.uninstall_backend()
        SpanRegistry.clear()
        state._reset_for_tests()
    records = {r.name: r for r in rec.take(100)}
    return records["traced"], records["child"], after


def test_a_trace_fn_that_ends_its_own_span_stays_its_childrens_parent():
    """Regression (twins diverged after the foreign-thread exit work): the compiled gate's
    trace_fn holds its span's context token outside any with-block, so a function that ended
    its own span early (``trace.get_current_span().end()``) looked to the compiled recorder
    like a span exited on another thread: its next span reset the function's context and
    started a new trace (a root), where the pure gate and recorder kept the ended span as the
    parent. Both now mark a foreign-thread exit where it happens (Span.__exit__)."""
    from lens_core import _impl

    before = _impl.IMPLEMENTATION
    try:
        for twin in require_pair(recorder_pair()):
            fn_span, child, after = contextvars.Context().run(_trace_fn_ending_its_own_span, twin)
            assert child.trace_id == fn_span.trace_id, twin
            assert child.parent_id == fn_span.span_id, twin
            assert after is None, twin  # the function's context is reset once, when it returns
    finally:
        _impl.use(before)


def _budgeted_failure(twin):
    """(stack trace, budgeted bytes) of a failing trace_fn's span under ``twin``'s gate and recorder."""
    from opentelemetry.sdk.trace import TracerProvider

    import lens_core
    from lens_core import _impl, state
    from lens_core._native import _shared
    from lens_core.registry import SpanRegistry
    from otel_bridge.sdk import recording

    _impl.use(twin.impl)
    SpanRegistry.clear()
    state._reset_for_tests()
    SpanRegistry.register("regress", ["fn"])
    rec = twin.Recorder()
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
    lens_core.install_backend(rec)
    try:
        lens_core.set_span_group_spec("all")

        @lens_core.trace_fn("fn", "inner")
        def inner():
            raise KeyError("boom")

        @lens_core.trace_fn("fn", "outer")
        def outer():
            inner()

        with pytest.raises(KeyError):
            outer()
    finally:
        lens_core.uninstall_backend()
        SpanRegistry.clear()
        state._reset_for_tests()
    return [(r.events[0][2]["exception.stacktrace"], _shared.record_size(r)) for r in rec.take(100)]


def test_a_failing_trace_fn_is_budgeted_alike_by_both_twins():
    """Regression (twins diverged once the buffer bounded bytes): a trace_fn's exception event
    wrote the gate's own wrapper frames (the compiled gate's one _gate.pyx frame, the pure
    gate's _gate_py.traced and spans._call_factory frames), so the same failure made stack
    traces of different lengths, the span was budgeted at different sizes, and a nearly full
    buffer kept different spans under each twin. The wrapper frames are no longer written."""
    from lens_core import _impl

    before = _impl.IMPLEMENTATION
    try:
        compiled, pure = (contextvars.Context().run(_budgeted_failure, twin)
                          for twin in require_pair(recorder_pair()))
        compiled, pure = list(compiled), list(pure)
    finally:
        _impl.use(before)
    assert compiled == pure
    (inner_trace, _), (outer_trace, _) = pure
    assert "_gate" not in outer_trace and "_call_factory" not in outer_trace
    assert "in inner" in inner_trace and "in outer" in outer_trace and "in inner" in outer_trace
