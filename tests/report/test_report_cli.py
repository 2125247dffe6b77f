"""The ``lens report`` command line: output modes, exit statuses, stdout/stderr and the subcommand hook."""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from lens_core.exitcodes import EXIT_FAILED, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE
from lens_report.cli import build_parser, build_schema_parser, int_set, main, memory_size

REPO = Path(__file__).resolve().parents[2]


def test_plain_run_prints_the_table_and_exits_zero(two_step_file, capsys):
    assert main([str(two_step_file)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[7].split() == ["run", "20.000", "10.000", "2.000", "2.000", "0.000", "6.000", "50.0%"]


def test_json_flag_prints_parseable_json(two_step_file, capsys):
    assert main([str(two_step_file), "--json", "--top", "1"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["goodput"] == 0.5
    assert [t["name"] for t in data["top_spans"]] == ["rl.grpo.job"]
    assert data["rank_steps"]["rows"][0][:3] == [1, "pid 42@?", 8.0]


def test_html_flag_writes_the_page_and_says_so_on_stderr_only(two_step_file, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main([str(two_step_file), "--html", str(out)]) == EXIT_OK
    assert out.read_text().count('<rect class="span') == 7
    streams = capsys.readouterr()
    assert f"wrote {out}" in streams.err and "wrote" not in streams.out


def test_strict_exits_one_only_when_an_invariant_is_violated(two_step_file, tmp_path, otlp, capsys):
    bad = otlp.write(tmp_path / "bad.jsonl", otlp.request([otlp.span(1, "x", 0, 1, bucket="sideways")]))
    assert main([str(two_step_file), "--strict"]) == EXIT_OK
    assert main([str(bad)]) == EXIT_OK
    assert main([str(bad), "--strict"]) == EXIT_FAILED


def test_no_spans_at_all_exits_with_no_data_and_says_why_on_stderr(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    assert main([str(empty)]) == EXIT_NO_DATA
    streams = capsys.readouterr()
    # one problem: one line
    assert streams.err.startswith(f"lens report: no spans read: {empty}:1: invalid JSON")
    assert len(streams.err.splitlines()) == 1 and streams.out == ""


def test_a_mistyped_path_among_good_ones_is_a_usage_error(two_step_file, tmp_path, capsys):
    """Regression: a path that does not exist was a 'problem' and the report of the other
    paths exited 0, so a typo silently shrank the report."""
    assert main([str(two_step_file), str(tmp_path / "nowhere")]) == EXIT_USAGE
    streams = capsys.readouterr()
    assert streams.out == ""
    assert streams.err.strip() == f"lens report: {tmp_path / 'nowhere'}: no such file or directory"


def test_a_directory_of_metrics_and_logs_only_says_so(tmp_path, capsys):
    """Regression: a directory holding the file exporter's metrics-* and logs-* files but no
    traces (span groups off, or the traces exported elsewhere) said "no .jsonl, .json, ...
    files found", beside the .jsonl files it held. It now says what it found and what is read."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics-rank0-pid1.jsonl").write_text('{"resourceMetrics": []}\n')
    (run / "logs-rank0-pid1.jsonl").write_text('{"resourceLogs": []}\n')
    assert main([str(run)]) == EXIT_USAGE
    streams = capsys.readouterr()
    assert streams.out == ""
    assert streams.err.strip() == (f"lens report: {run}: holds 2 metrics/logs files (metrics-*, logs-*) and no "
                                   "trace file: lens report reads traces (the file exporter's traces-*.jsonl)")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (f"lens report: {empty}: no trace files found (lens report reads "
                                               ".jsonl, .json, .jsonl.gz, .json.gz, .jsonl.zst, .json.zst)")


def test_step_pattern_option_changes_which_spans_are_steps(tmp_path, otlp, capsys):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "train_iter", 0, 4, iteration=7),
        otlp.span(2, "fwd", 0, 3, 1, bucket="productive"),
    ]))
    assert main([str(path), "--json", "--step-pattern", "_iter$"]) == EXIT_OK
    (step,) = json.loads(capsys.readouterr().out)["steps"]
    assert (step["iteration"], step["method"], step["goodput"]) == (7, "pattern", 0.75)


def test_bad_option_values_are_usage_errors(two_step_file, capsys):
    codes = []
    for option in (["--step-pattern", "("], ["--top", "-3"], ["--ranks", "3-1"], ["--step", "x"]):
        with pytest.raises(SystemExit) as exit_info:
            main([str(two_step_file), *option])
        codes.append(exit_info.value.code)
    assert codes == [EXIT_USAGE] * 4
    err = capsys.readouterr().err
    assert "invalid regular expression" in err and "expected non-negative integers and ranges like '0-7,12'" in err


def test_memory_limit_reaches_the_engine_and_bad_sizes_are_usage_errors(two_step_file, capsys, monkeypatch):
    from lens_report import store

    limits = []
    set_up = store.TraceStore.__init__

    def spy(self, **kwargs):
        set_up(self, **kwargs)
        limits.append(self.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])

    monkeypatch.setattr(store.TraceStore, "__init__", spy)
    assert main([str(two_step_file), "--memory-limit", "300MB"]) == EXIT_OK
    assert main([str(two_step_file)]) == EXIT_OK
    # the engine reads within the limit less what the process holds besides it (DuckDB reports MiB)
    assert limits == ["232.6 MiB", "190.7 MiB"]  # 300 MB - 56 MB, and the default 256 MB - 56 MB
    assert (memory_size("2GiB"), memory_size(" 1.5gb ")) == ("2GiB", "1.5GB")
    for bad in ("lots", "10MB", "5", "-1GB"):
        with pytest.raises(SystemExit) as exit_info:
            main([str(two_step_file), "--memory-limit", bad])
        assert exit_info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "expected an amount like 512MB or 2GB" in err and "needs at least 256MB, got '10MB'" in err


def test_int_set_reads_numbers_and_ranges():
    assert int_set("0-3,7, 9") == {0, 1, 2, 3, 7, 9}
    with pytest.raises(argparse.ArgumentTypeError):
        int_set("-1")


def test_unwritable_html_path_is_a_one_line_error(two_step_file, tmp_path, capsys):
    assert main([str(two_step_file), "--html", str(tmp_path / "no" / "dir" / "x.html")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lens report: cannot write {tmp_path / 'no' / 'dir' / 'x.html'}: ")


def test_build_parser_adds_a_report_subcommand_that_runs_via_func(two_step_file, capsys):
    lens = argparse.ArgumentParser(prog="lens")
    build_parser(lens.add_subparsers(dest="command"))
    args = lens.parse_args(["report", str(two_step_file), "--json"])
    assert args.command == "report"
    assert args.func(args) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["spans"] == 7


def test_clickhouse_schema_prints_the_ddl_and_refuses_a_bad_table_name_in_one_line(capsys):
    """``lens clickhouse-schema`` (built by lens_report.cli with the report's other commands):
    the exporter's table, then the columns and the rollup, for the table named; a name that is
    not NAME or DB.NAME is one line on stderr and status 2, nothing on stdout."""
    lens = argparse.ArgumentParser(prog="lens")
    build_schema_parser(lens.add_subparsers(dest="command"))
    args = lens.parse_args(["clickhouse-schema", "--table", "otel.spans", "--exporter-table"])
    assert args.func(args) == EXIT_OK
    out = capsys.readouterr().out
    assert out.index("CREATE TABLE") < out.index("ALTER TABLE") and "`otel`.`spans`" in out
    args = lens.parse_args(["clickhouse-schema", "--table", "spans; DROP TABLE x"])
    assert args.func(args) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("lens clickhouse-schema: ")


def _lens_report(*args, stderr_tty=False, env=None):
    """Run ``python -m lens_report`` in a child; stderr on a pseudo-terminal when asked."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               **(env or {})}
    command = [sys.executable, "-m", "lens_report", *map(str, args)]
    if not stderr_tty:
        proc = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.returncode, out, b"".join(chunks).decode()


def test_progress_goes_to_stderr_only_when_it_is_a_terminal(two_step_file):
    code, out, err = _lens_report(two_step_file, stderr_tty=True)
    assert code == EXIT_OK and "read 1/1 files" in err and "read 1/1" not in out
    code, out, err = _lens_report(two_step_file)
    assert code == EXIT_OK and "read 1/1" not in err and out.startswith("lens report: 7 spans")


def test_without_duckdb_the_report_says_how_to_install_it(two_step_file, tmp_path):
    (tmp_path / "duckdb.py").write_text("raise ImportError('No module named duckdb')\n")
    code, out, err = _lens_report(two_step_file, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])})
    assert (code, out) == (EXIT_FAILED, "")
    # regression: the line said "lens report: lens report needs DuckDB, ..." (the prefix twice)
    assert err.strip() == ("lens report: DuckDB, the engine lens report runs on, is not installed: "
                           "pip install 'lens-telemetry[report]'")


def test_ctrl_c_stops_the_report_with_one_line_and_status_130_and_leaves_no_database(two_step_file, tmp_path,
                                                                                     capsys, monkeypatch, reader):
    """Regression: Ctrl-C during a long report printed a threading traceback (the reading
    statements run on worker threads) instead of one line and the shell's status for SIGINT.
    With either reader (its statement interrupted)."""
    import tempfile

    from lens_cli.main import main as lens_main
    from lens_core.exitcodes import EXIT_INTERRUPTED
    from lens_report import store

    def interrupted(self, cursor, batch, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.TraceStore, "_ingest_files" if reader == "sql" else "_insert_scanned", interrupted)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the store's database goes
    try:  # an escaping KeyboardInterrupt would stop the whole pytest run, not fail this test
        statuses = [main([str(two_step_file)]), lens_main(["report", str(two_step_file)])]
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped lens report")
    assert statuses == [EXIT_INTERRUPTED] * 2
    streams = capsys.readouterr()
    assert streams.err.splitlines() == ["lens report: interrupted"] * 2 and streams.out == ""
    assert not list(tmp_path.glob("lens-report-*"))
