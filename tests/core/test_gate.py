"""The gate: the shared null span on the disabled path, call shapes, and both implementations."""

import inspect

import pytest

import lens_core
from lens_core import SpanRegistry, _gate_py, _impl
from recording import RecordingBackend

try:
    from lens_core import _gate
except ImportError:  # pragma: no cover - the compiled gate was not built
    _gate = None


class ExplodingBackend(RecordingBackend):
    """A backend that fails the test if the gate ever hands it a span to start."""

    name = "exploding"

    def start(self, *args, **kwargs):
        raise AssertionError("the backend was called for a disabled group")

    use = release = end = set_attributes = start


def enable(*groups):
    """Register groups 'on' and 'off' and enable ``groups`` (a backend is installed separately)."""
    SpanRegistry.register("lib", ["on", "off"])
    lens_core.set_span_group_spec(",".join(groups))


def span_function(kind):
    """The current implementation's managed_span or umbrella_span (rebound on a switch)."""
    return getattr(lens_core, kind)


# ---- the disabled path ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["managed_span", "umbrella_span"])
def test_disabled_span_is_the_shared_null_span(kind, recorder):
    enable("on")
    assert span_function(kind)("off", "n") is _impl.gate.null_span
    assert span_function(kind)("unregistered", "n", None, attr=1) is _impl.gate.null_span


def test_null_span_enter_yields_none():
    with lens_core.managed_span("off", "n") as span:
        assert span is None


def test_body_runs_under_a_disabled_span():
    ran = []
    with lens_core.managed_span("off", "n", step=3):
        ran.append(True)
    assert ran == [True]


def test_exception_propagates_out_of_a_disabled_span():
    with pytest.raises(ZeroDivisionError):
        with lens_core.managed_span("off", "n"):
            1 / 0


def test_base_exception_propagates_out_of_a_disabled_span():
    with pytest.raises(KeyboardInterrupt):
        with lens_core.managed_span("off", "n"):
            raise KeyboardInterrupt


def test_disabled_group_never_calls_the_backend():
    enable("on")
    lens_core.install_backend(ExplodingBackend())

    @lens_core.trace_fn("off")
    def work(x):
        return x * 2

    with lens_core.managed_span("off", "n", a=1) as span:
        assert span is None
    with lens_core.umbrella_span("off", "n"):
        pass
    assert work(21) == 42


def test_enabled_group_does_call_the_backend():
    """The counterpart of the test above: the exploding backend really is reachable."""
    enable("on")
    lens_core.install_backend(ExplodingBackend())
    with pytest.raises(AssertionError, match="backend was called"):
        with lens_core.managed_span("on", "n"):
            pass


def test_unregistered_group_is_off(recorder):
    enable("on")
    with lens_core.managed_span("nobody_registered_this", "n"):
        pass
    assert recorder.spans == []


@pytest.mark.parametrize("spelling", [" On ", "ON", "on\t"])
def test_group_spellings_resolve_to_the_registered_group(spelling, recorder):
    enable("on")
    assert lens_core.is_span_group_enabled(spelling) is True
    with lens_core.managed_span(spelling, "spelled"):
        pass
    assert recorder.names() == ["spelled"]


# ---- call shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [False, True], ids=["disabled", "enabled"])
@pytest.mark.parametrize("group", [5, None, b"on", ["on"]], ids=["int", "None", "bytes", "list"])
def test_non_str_group_raises_type_error(group, enabled, recorder):
    """Regression: the compiled gate returned the null span for a non-str group while no
    group at all was enabled (the pure-Python gate raised TypeError)."""
    if enabled:
        enable("on")
    with pytest.raises(TypeError):
        lens_core.managed_span(group, "n")
    with pytest.raises(TypeError):
        lens_core.umbrella_span(group, "n")
    with pytest.raises(TypeError):
        lens_core.is_span_group_enabled(group)


@pytest.mark.parametrize("enabled", [False, True], ids=["disabled", "enabled"])
@pytest.mark.parametrize("args, kwargs", [
    ((), {}),
    (("on",), {}),
    ((), {"group": "on"}),
    ((), {"name": "n"}),
    (("on",), {"tracer": None, "attr": 1}),
    (("on", "n", None, "extra"), {}),
], ids=["no-args", "group-only", "group-keyword-only", "name-keyword-only", "no-name-with-keywords",
        "four-positional"])
def test_bad_call_shapes_raise_type_error(args, kwargs, enabled, recorder):
    if enabled:
        enable("on")
    with pytest.raises(TypeError):
        lens_core.managed_span(*args, **kwargs)
    with pytest.raises(TypeError):
        lens_core.umbrella_span(*args, **kwargs)
    assert recorder.spans == []


@pytest.mark.parametrize("enabled", [False, True], ids=["disabled", "enabled"])
@pytest.mark.parametrize("args, kwargs", [
    (("on", "n"), {"name": "again"}),
    (("on", "n"), {"group": "again"}),
    (("on", "n", None), {"tracer": None}),
    (("on",), {"group": "again", "name": "n"}),
], ids=["name-twice", "group-twice", "tracer-twice", "group-twice-keyword-name"])
def test_parameter_given_twice_raises_type_error(args, kwargs, enabled, recorder):
    """Regression: the compiled gate's disabled fast path ignored keyword names, so a
    parameter passed both positionally and by keyword silently returned the null span."""
    if enabled:
        enable("on")
    with pytest.raises(TypeError, match="multiple values"):
        lens_core.managed_span(*args, **kwargs)
    with pytest.raises(TypeError, match="multiple values"):
        lens_core.umbrella_span(*args, **kwargs)


@pytest.mark.parametrize("enabled", [False, True], ids=["disabled", "enabled"])
def test_keyword_form_works(enabled, recorder):
    if enabled:
        enable("on")
    with lens_core.managed_span(group="on", name="kw", tracer=None, step=7) as span:
        assert (span is not None) == enabled
    with lens_core.managed_span("on", name="kw2", tracer="t"):
        pass
    with lens_core.managed_span("on", "kw3", tracer="t"):
        pass
    expected = [("kw", None, 7), ("kw2", "t", None), ("kw3", "t", None)] if enabled else []
    assert [(s.name, s.tracer, s.attributes.get("step")) for s in recorder.spans] == expected


def test_tracer_is_passed_to_the_backend(recorder):
    enable("on")
    tracer = object()
    with lens_core.managed_span("on", "positional", tracer):
        pass
    with lens_core.umbrella_span("on", "keyword", tracer=tracer):
        pass
    with lens_core.managed_span("on", "default"):
        pass
    assert [s.tracer for s in recorder.spans] == [tracer, tracer, None]


def test_attribute_named_like_a_parameter_prefix_is_an_attribute(recorder):
    enable("on")
    with lens_core.managed_span("on", "n", names=1, groups="g", tracers=2.5):
        pass
    assert {k: v for k, v in recorder.spans[0].attributes.items() if k != "rl.bucket"} == {
        "names": 1, "groups": "g", "tracers": 2.5}


# ---- the two implementations -----------------------------------------------------------------


def test_the_selected_gate_is_the_one_in_use(gate_implementation):
    expected_module = {"cython": "lens_core._gate", "python": "lens_core._gate_py"}[gate_implementation]
    assert lens_core.IMPLEMENTATION == gate_implementation
    assert _impl.gate.__name__ == expected_module
    assert lens_core.managed_span.__module__ == "lens_core"  # pickled by its public name
    assert lens_core.is_span_group_enabled.__module__ == expected_module
    assert lens_core.managed_span is _impl.gate.managed_span
    assert lens_core.spans.managed_span is _impl.gate.managed_span
    assert lens_core.is_span_group_enabled is _impl.gate.is_enabled


@pytest.mark.skipif(_gate is None, reason="compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
def test_both_gate_modules_expose_the_same_public_names():
    """The compiled gate is the small accelerated surface: exactly the pure gate's names
    (the recorder and encoders live in lens_core._native, not in the gate)."""
    assert set(_gate.__all__) == set(_gate_py.__all__)
    assert _gate.__all__ == sorted(_gate.__all__)
    for name in _gate_py.__all__:
        assert hasattr(_gate, name) and hasattr(_gate_py, name), name


@pytest.mark.skipif(_gate is None, reason="compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
def test_both_native_wing_modules_expose_the_same_names_as_their_twins():
    from lens_core._native import _encode, _encode_py, _recorder, _recorder_py

    assert set(_recorder.__all__) == set(_recorder_py.__all__)
    assert set(_encode.__all__) == {"encode_traces_json", "encode_traces_pb"} <= set(_encode_py.__all__)
    for name in _recorder_py.__all__:
        assert hasattr(_recorder, name), name


def test_the_native_wing_follows_the_gate(gate_implementation):
    """lens_core._impl.recorder() is the native wing of the active gate (the compiled gate
    records straight into the compiled recorder, so they are chosen together)."""
    assert _impl.recorder().IMPLEMENTATION == gate_implementation


@pytest.mark.parametrize("kind", ["managed_span", "umbrella_span"])
def test_span_function_signature_is_group_name_tracer_attrs(kind):
    assert str(inspect.signature(span_function(kind))) == "(group, name, tracer=None, **attrs)"


def test_null_span_is_a_context_manager_whose_exit_does_not_swallow():
    null = _impl.gate.null_span
    assert null.__enter__() is None
    assert not null.__exit__(ValueError, ValueError("x"), None)
    assert repr(null) == "<lens null span>"


def test_switching_implementation_keeps_the_enabled_set(recorder, gate_implementation):
    enable("on")
    other = "python" if gate_implementation == "cython" else "cython"
    if other == "cython" and _gate is None:
        pytest.skip("compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
    try:
        _impl.use(other)
        assert lens_core.is_span_group_enabled("on") is True
        assert lens_core.is_span_group_enabled("off") is False
        lens_core.set_span_group_spec("off")
        assert lens_core.is_span_group_enabled("on") is False
    finally:
        _impl.use(gate_implementation)
    assert lens_core.is_span_group_enabled("off") is True


def test_disabled_traced_calls_leak_no_reference_to_the_result_and_propagate_errors():
    """Guards the compiled fast path that calls the wrapped function's vectorcall entry
    directly: the result must be handed over, not increfed again, and NULL must raise."""
    import sys

    result = object()

    @lens_core.trace_fn("off.group")
    def returns():
        return result

    @lens_core.trace_fn("off.group")
    def raises():
        raise LookupError("boom")

    before = sys.getrefcount(result)
    for _ in range(1000):
        returns()
    assert sys.getrefcount(result) == before
    with pytest.raises(LookupError, match="boom"):
        raises()
