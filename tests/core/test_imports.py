"""Import hygiene: lens_core works with OpenTelemetry unimportable and never pulls in heavy modules."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("opentelemetry", "torch", "ray", "numpy")

# Runs in a fresh interpreter. A meta-path finder refuses (and records) any import of a
# heavy package, and a fake opentelemetry package that raises sits first on sys.path, so
# OpenTelemetry is unimportable however it is reached.
SCRIPT = textwrap.dedent("""
    import json, sys

    HEAVY = {heavy!r}
    attempts = []

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                attempts.append(name)
                raise ImportError(f"{{name}} is blocked in this test")
            return None

    sys.meta_path.insert(0, Refuse())
    sys.path.insert(0, {fake_dir!r})

    def loaded():
        return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)

    report = {{}}
    import lens_core
    report["after_import"] = loaded()
    report["implementation"] = lens_core.IMPLEMENTATION

    lens_core.SpanRegistry.register("lib", ["on", "off"])
    lens_core.set_span_group_spec("on")
    with lens_core.managed_span("on", "n", a=1) as span:   # no backend: everything is off
        assert span is None
    with lens_core.managed_span("off", "n"):
        pass

    @lens_core.trace_fn("on")
    def f(x):
        return x + 1

    @lens_core.trace_fn("on")
    def g():
        yield 1

    assert f(1) == 2 and list(g()) == [1]
    with lens_core.span_cm("free"), lens_core.iteration_scope(1), lens_core.bucket_scope("idle"):
        pass
    assert lens_core.current_trace_carrier() == {{}}
    lens_core.LensConfig.from_env(environ={{"LENS_ENABLED": "1"}})
    report["after_use"] = loaded()
    report["attempts"] = attempts
    print(json.dumps(report))
""")


def run_isolated(tmp_path, gate_implementation):
    fake = tmp_path / "fake"
    (fake / "opentelemetry").mkdir(parents=True)
    (fake / "opentelemetry" / "__init__.py").write_text("raise ImportError('opentelemetry is not installed here')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "PYTHON"))}
    if gate_implementation == "python":
        env["LENS_PURE_PYTHON"] = "1"
    script = SCRIPT.format(heavy=HEAVY, fake_dir=str(fake))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_lens_core_loads_no_heavy_module(tmp_path, gate_implementation):
    report = run_isolated(tmp_path, gate_implementation)
    assert report["implementation"] == gate_implementation
    assert report["after_import"] == []


def test_using_lens_core_without_a_backend_loads_no_heavy_module(tmp_path, gate_implementation):
    report = run_isolated(tmp_path, gate_implementation)
    assert report["after_use"] == []
    assert report["attempts"] == []


def test_the_blocker_really_blocks(tmp_path):
    """Guards the two tests above: in the same harness, importing opentelemetry fails."""
    fake = tmp_path / "fake"
    (fake / "opentelemetry").mkdir(parents=True)
    (fake / "opentelemetry" / "__init__.py").write_text("raise ImportError('not here')\n")
    code = f"import sys; sys.path.insert(0, {str(fake)!r})\nimport opentelemetry"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode != 0
    assert "ImportError: not here" in out.stderr
