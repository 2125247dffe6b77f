"""The native recorder respects the configured sampler without asking it per span: the SDK's
built-in samplers (OTEL_TRACES_SAMPLER) are decided in C, children follow their parent
under parent-based sampling, and a sampled-out span still carries its context."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

# Recording paths: run under each gate-and-recorder twin (tests/twins.py).
pytestmark = pytest.mark.usefixtures("twin")

from child_env import without_settings  # noqa: E402
from trace_files import REPO_ROOT, read_spans  # noqa: E402

_SCRIPT = textwrap.dedent("""
    import json, sys
    import lens_core
    from lens_core import LensConfig, SpanRegistry
    from otel_bridge import setup_telemetry
    from opentelemetry import trace
    SpanRegistry.register("s", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], run_id="s",
                                        span_groups="g", metrics_enabled=False))
    decisions = []
    for i in range(2000):
        with lens_core.managed_span("g", "root") as root:
            with lens_core.managed_span("g", "child") as child:
                inner = trace.get_current_span().get_span_context()
                decisions.append([root.is_recording(), child.is_recording(), inner.trace_flags.sampled,
                                  inner.trace_id == root.get_span_context().trace_id])
    print(json.dumps({"backend": type(lens_core.installed_backend()).__name__, "decisions": decisions}))
    handle.shutdown()
""")


@pytest.mark.parametrize("sampler, arg", [("parentbased_traceidratio", "0.25"), ("traceidratio", "0.25"),
                                          ("always_off", ""), ("parentbased_always_on", "")])
def test_the_native_recorder_samples_as_otel_traces_sampler_says(tmp_path, sampler, arg):
    import json

    env = without_settings()
    env.update(PYTHONPATH=str(REPO_ROOT), LENS_RECORDER="native", OTEL_TRACES_SAMPLER=sampler,
               OTEL_TRACES_SAMPLER_ARG=arg)
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["backend"] == "Recorder"
    decisions = result["decisions"]
    sampled_roots = sum(root for root, _, _, _ in decisions)
    # a child follows its root (ratio samplers decide by trace id, so the same way too),
    # and the current context says so, in the same trace
    assert all(root == child == flag and same for root, child, flag, same in decisions)
    expected = {"parentbased_traceidratio": 0.25, "traceidratio": 0.25, "always_off": 0.0,
                "parentbased_always_on": 1.0}[sampler]
    assert abs(sampled_roots / len(decisions) - expected) < 0.05
    exported = [s for s in read_spans(tmp_path) if s["name"] in ("root", "child")]
    assert len(exported) == 2 * sampled_roots
