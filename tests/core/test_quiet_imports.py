"""A quiet rank (no backend) imports only the gate's disabled path; the rest loads at install."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what only the enabled path and the rare paths need
LATER = ("lens_core.attributes", "lens_core.carrier", "lens_core.redaction", "lens_core._native._shared")

SCRIPT = textwrap.dedent("""
    import json, sys

    LATER = {later!r}
    report = {{}}
    from lens_core import SpanRegistry, managed_span, trace_fn
    import lens_core

    SpanRegistry.register("q", ["fwd", "bwd"])
    lens_core.set_span_group_spec("all")  # enabled, but no backend: the disabled path
    with managed_span("fwd", "train.forward", api_key="s3cret") as span:
        assert span is None

    @trace_fn("bwd")
    def f(x):
        return x + 1

    assert f(1) == 2
    report["quiet"] = [m for m in LATER if m in sys.modules]

    from lens_core import _impl
    from opentelemetry.sdk.trace import TracerProvider
    from otel_bridge.sdk import recording

    twin = _impl.recorder()
    rec = twin.Recorder()
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
    lens_core.install_backend(rec)
    try:
        with managed_span("fwd", "train.forward", api_key="s3cret", note="ghp_" + "a" * 36, n=1):
            pass
        assert f(1) == 2
    finally:
        lens_core.uninstall_backend()
    report["implementation"] = _impl.IMPLEMENTATION
    report["records"] = sorted([r.name, {{k: r.attrs.get(k) for k in ("api_key", "note", "n")}}]
                               for r in rec.take(100))
    print(json.dumps(report))
""")


def _run(pure: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LENS_PURE_PYTHON", None)
    if pure:
        env["LENS_PURE_PYTHON"] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(later=LATER)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("pure", [False, True], ids=["default-gate", "pure-gate"])
def test_a_quiet_rank_loads_no_attribute_safety_redaction_or_carriers(pure):
    """Regression: `from lens_core import managed_span` loaded redaction, carriers, attribute
    safety and the recorder's shared rare paths on every rank, quiet ones too (0.6-0.7x
    `import dataclasses`); a rank with no backend runs none of them."""
    report = _run(pure)
    assert report["quiet"] == []
    if pure:
        assert report["implementation"] == "python"


@pytest.mark.parametrize("pure", [False, True], ids=["default-gate", "pure-gate"])
def test_installing_a_backend_loads_redaction_before_the_first_span(pure):
    """Attribute safety loaded late must still be in place for the first enabled span: the
    compiled gate's fast path gets its redaction hooks when the backend is installed."""
    report = _run(pure)
    assert report["records"] == [
        ["f", {"api_key": None, "note": None, "n": None}],
        ["train.forward", {"api_key": "[REDACTED]", "note": "[REDACTED]", "n": 1}],
    ]


def test_the_compiled_span_type_is_known_to_shared_code_loaded_after_it():
    """The compiled recorder no longer loads lens_core._native._shared at import; the shared
    code loaded afterwards by another route still counts the compiled Span as a Lens span."""
    code = textwrap.dedent("""
        import sys
        from lens_core._native import _recorder
        assert "lens_core._native._shared" not in sys.modules
        from lens_core._native import _recorder_py, _shared
        assert _recorder.Span in _shared.SPAN_TYPES and _recorder_py.Span in _shared.SPAN_TYPES
        assert len(_shared.SPAN_TYPES) == 2
        _recorder._shared.Limits  # the stand-in's first use: counted once, not twice
        assert len(_shared.SPAN_TYPES) == 2
    """)
    try:
        import lens_core._native._recorder  # noqa: F401
    except ImportError:
        pytest.skip("the compiled recorder is not built")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_quiet_ranks_setup_loads_no_redaction_or_shared_code():
    """Regression: setup_telemetry on a quiet rank loaded lens_core.redaction (to apply an
    empty allow-list that redaction starts with anyway), and through the recorder the
    attribute safety and carriers; an allow-list given is still applied (loading it)."""
    code = textwrap.dedent("""
        import json, sys
        import otel_bridge
        from lens_core import LensConfig, managed_span
        handle = otel_bridge.setup_telemetry(LensConfig(enabled=True, export_ranks="first"), rank=1, world_size=8)
        assert not handle.is_exporting, handle
        quiet = [m for m in {later!r} if m in sys.modules]
        handle = otel_bridge.setup_telemetry(LensConfig(enabled=False, redact_allow=("api_key",)), rank=1,
                                             world_size=8)
        from lens_core.redaction import redact_allow
        print(json.dumps([quiet, sorted(redact_allow())]))
    """).format(later=LATER)
    pytest.importorskip("opentelemetry.sdk")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [[], ["api_key"]]


@pytest.mark.parametrize("pure", [False, True], ids=["default-gate", "pure-gate"])
def test_spans_first_imported_after_a_backend_is_installed_still_get_attribute_safety(pure):
    """Regression: with attribute safety loaded at the first backend install, a program that
    installed its backend before anything imported lens_core.spans (setup first, then
    `lens_core.managed_span`) never got the gate's hooks: a span with a sequence or other
    non-scalar attribute raised TypeError ('NoneType' object is not callable) in the job."""
    code = textwrap.dedent("""
        import json, sys
        import lens_core
        from lens_core import _impl
        assert "lens_core.spans" not in sys.modules
        from opentelemetry.sdk.trace import TracerProvider
        from otel_bridge.sdk import recording

        twin = _impl.recorder()
        rec = twin.Recorder()
        recording._bind(rec, TracerProvider(shutdown_on_exit=False), twin)
        lens_core.install_backend(rec)
        lens_core.SpanRegistry.register("q", ["fwd"])
        lens_core.set_span_group_spec("all")
        with lens_core.managed_span("fwd", "train.forward", tokens=["ghp_" + "a" * 36, "b"], cfg={"x": 1}, n=2):
            pass
        lens_core.uninstall_backend()
        (record,) = rec.take(10)
        print(json.dumps({k: record.attrs.get(k) for k in ("tokens", "cfg", "n")}))
    """)
    pytest.importorskip("opentelemetry.sdk")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LENS_PURE_PYTHON", None)
    if pure:
        env["LENS_PURE_PYTHON"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    attrs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert attrs["n"] == 2 and attrs["cfg"] is None and "ghp_" not in json.dumps(attrs["tokens"])
