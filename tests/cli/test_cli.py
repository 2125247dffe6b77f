"""The `lens` command: subcommands wired, resolve and import-budget behave."""

import json
import subprocess
import sys

import pytest

from otel_bridge import cli


def test_resolve_lists_what_a_spec_enables_with_buckets():
    # a fresh process: --import must do the registering (in-process the module may be cached)
    proc = subprocess.run([sys.executable, "-m", "otel_bridge.cli", "resolve", "per_step,-job",
                           "--import", "lens_core.catalogs.rl", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "job" not in out["enabled"] and "step" in out["enabled"]
    assert out["buckets"]["generation"] == "productive" and out["buckets"]["step"] is None
    assert out["pending"] == []


def test_resolve_strict_fails_on_unknown_entries(capsys):
    import lens_core.catalogs.rl as rl

    rl.register()
    assert cli.main(["resolve", "per_step,nonsense", "--import", "lens_core.catalogs.rl", "--strict"]) == 1
    assert "unknown (pending): nonsense" in capsys.readouterr().out


def test_resolve_reports_a_module_that_cannot_be_imported(capsys):
    assert cli.main(["resolve", "all", "--import", "no_such_module_xyz"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_unknown_subcommand_is_rejected():
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_import_budget_fails_when_a_forbidden_module_is_imported():
    proc = subprocess.run([sys.executable, "-m", "lens_core.importbudget", "json", "--max-ms", "1000",
                           "--forbid", "json", "--runs", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "FORBIDDEN modules imported: json" in proc.stdout


def test_import_budget_passes_lens_core_with_a_generous_budget():
    proc = subprocess.run([sys.executable, "-m", "lens_core.importbudget", "lens_core", "--max-ms", "1000",
                           "--forbid", "opentelemetry", "--forbid", "numpy", "--runs", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("import lens_core: ")


def test_the_console_script_runs_the_report_subcommand(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "otel_bridge.cli", "report", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2  # no spans at all is its own exit status


def _emit(tmp_path, specs):
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(specs))
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    env.update(LENS_FILE_DIR=str(tmp_path / "out"), LENS_RUN_ID="emit")
    return subprocess.run([sys.executable, "-m", "otel_bridge.cli", "emit-spans", str(path), "--exporter", "file"],
                          capture_output=True, text=True, timeout=120, env=env)


def test_emit_spans_writes_spans_over_the_given_intervals(tmp_path):
    proc = _emit(tmp_path, [{"name": "process.start", "start": 1700000000.0, "end": 1700000002.5},
                            {"name": "first.step", "start": 1700000002.5, "end": 1700000003.0,
                             "attributes": {"phase": "warmup"}}])
    assert proc.returncode == 0, proc.stderr
    assert "emitted 2 span(s)" in proc.stdout
    lines = [json.loads(line) for f in (tmp_path / "out" / "emit").glob("traces-*.jsonl")
             for line in f.read_text().splitlines()]
    spans = {s["name"]: s for line in lines for rs in line["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"] if s["name"] != "lens.telemetry.loss"}
    assert spans["process.start"]["startTimeUnixNano"] == "1700000000000000000"
    assert spans["process.start"]["endTimeUnixNano"] == "1700000002500000000"
    assert set(spans) == {"process.start", "first.step"}


def test_emit_spans_emits_nothing_when_any_spec_is_bad(tmp_path):
    proc = _emit(tmp_path, [{"name": "ok", "start": 1.0, "end": 2.0},
                            {"name": "bad", "start": "soon", "end": 2.0}])
    assert proc.returncode == 1
    assert "nothing emitted" in proc.stderr and "spec 1: start must be a number" in proc.stderr
    assert "span-group spec" not in proc.stderr  # emit-spans involves no span groups
    assert not list((tmp_path / "out").rglob("traces-*.jsonl"))
