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
