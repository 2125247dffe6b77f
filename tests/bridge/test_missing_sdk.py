"""Without OpenTelemetry installed: enabling telemetry says which extra to install; quiet ranks still work."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HINT = "pip install 'lens-telemetry[otel]'"

# A fresh interpreter in which every opentelemetry module is missing, as in a core-only install.
PRELUDE = textwrap.dedent("""
    import json, sys

    class NoOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoOpenTelemetry())
""")


def run(body, *args):
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_enabling_telemetry_without_the_sdk_names_the_extra_to_install():
    """Regression: setup_telemetry raised a bare ModuleNotFoundError when the SDK was missing."""
    proc = run("""
        from lens_core import LensConfig
        from otel_bridge import setup_telemetry
        try:
            setup_telemetry(LensConfig(enabled=True, exporter="none"), rank=0, world_size=1)
        except ModuleNotFoundError as exc:
            print(json.dumps([type(exc).__name__, str(exc), exc.name]))
    """)
    kind, message, name = json.loads(proc.stdout)
    assert kind == "MissingExtraError" and name.startswith("opentelemetry")
    assert message.startswith("setup_telemetry (telemetry is enabled on this rank): OpenTelemetry is not installed")
    assert message.endswith(HINT) and "constraints" not in message


def test_a_quiet_rank_needs_no_sdk_and_its_tracer_and_meter_are_no_ops():
    """A quiet rank's handle.tracer / handle.meter used to need the OpenTelemetry API (an
    ImportError naming the extra here); they are lens's own no-ops now, which need nothing."""
    proc = run("""
        from lens_core import LensConfig, managed_span
        from otel_bridge import setup_telemetry
        handle = setup_telemetry(LensConfig(enabled=True, export_ranks="first"), rank=3, world_size=8)
        with managed_span("g", "n") as span:
            assert span is None
        with handle.tracer.start_as_current_span("x") as span:
            recording = span.is_recording()
        handle.meter.create_counter("c").add(1)
        print(json.dumps([handle.is_exporting, recording]))
    """)
    assert json.loads(proc.stdout) == [False, False]


def test_lens_emit_spans_without_the_sdk_fails_in_one_line(tmp_path):
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps([{"name": "a", "start": 1.0, "end": 2.0}]))
    proc = run("""
        from lens_cli.main import main
        sys.exit(main(sys.argv[1:]))
    """, "emit-spans", str(spans), "--exporter", "none")
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("lens emit-spans: setup_telemetry") and line.endswith(HINT)


def test_every_install_hint_in_the_package_works_for_wheel_users():
    """Hints name a quoted extra of the published package (zsh globs unquoted brackets), never a
    checkout-only command like `-c constraints.txt -e .`."""
    hints = []
    for path in sorted([*REPO.glob("lens_core/**/*.py"), *REPO.glob("otel_bridge/**/*.py")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            hints += [(f"{path.relative_to(REPO)}:{number}", m) for m in re.findall(r"pip install[^`\"]*", line)]
    assert len(hints) >= 8  # the contrib modules, nccl, gpu, the demo and _extras all give one
    good = re.compile(r"pip install '(lens-telemetry\[[a-z,]+\]|lens-telemetry\[\{[^}]*\}\])'")
    bad = [(where, hint) for where, hint in hints if not good.match(hint)]
    assert bad == []


def test_enabling_telemetry_without_the_sdk_uncaught_is_one_line_naming_the_extra():
    """Regression (issue 41): LENS_ENABLED=1 without the otel extra printed two chained
    tracebacks (the ModuleNotFoundError, then the MissingExtraError raised from it) before
    the line that says what to install."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        from lens_core import LensConfig
        from otel_bridge import setup_telemetry
        setup_telemetry(LensConfig.from_env(), rank=0, world_size=1)
    """)], capture_output=True, text=True, timeout=120, cwd=REPO, env={**__import__("os").environ, "LENS_ENABLED": "1"})
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("lens: setup_telemetry (telemetry is enabled on this rank): OpenTelemetry is not installed")
    assert line.endswith(HINT)


def test_the_missing_extra_error_can_be_caught_as_itself_or_as_an_import_error():
    """Enabling without the SDK still raises (documented): a caller may catch the public
    otel_bridge.MissingExtraError, or any ImportError, and carry on with telemetry off;
    a caught error is not printed, and other uncaught errors keep their traceback."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        import otel_bridge
        from lens_core import LensConfig
        for kind in (otel_bridge.MissingExtraError, ImportError):
            try:
                otel_bridge.setup_telemetry(LensConfig(enabled=True, exporter="none"), rank=0, world_size=1)
            except kind as exc:
                assert exc.__cause__ is None and exc.__suppress_context__
                print(type(exc).__name__)
        handle = otel_bridge.setup_telemetry(LensConfig(enabled=False))
        print(handle.is_exporting)
        raise KeyError("other")
    """)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.stdout.split() == ["MissingExtraError", "MissingExtraError", "False"]
    assert "Traceback" in proc.stderr and proc.stderr.rstrip().endswith("KeyError: 'other'")
    assert "lens:" not in proc.stderr
