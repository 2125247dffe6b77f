"""Runs are never merged: one report per run id; a folder with several runs lists them."""

from __future__ import annotations

import json

import pytest

from report_helpers import report_of
from multirank import write_ddp_run

from lens_core.exitcodes import EXIT_OK, EXIT_USAGE
from lens_report import RunChoiceError
from lens_report.cli import main

pytest.importorskip("opentelemetry.sdk")


@pytest.fixture
def two_runs(tmp_path):
    write_ddp_run(tmp_path, run_id="first", ranks=2)
    write_ddp_run(tmp_path, run_id="second", ranks=3)
    return tmp_path


def test_a_folder_with_two_runs_lists_them_and_asks_for_one(two_runs, capsys):
    """Regression: a folder holding two runs was reported as one (4.2 s unattributed, 16.4 % goodput)."""
    assert main([str(two_runs)]) == EXIT_USAGE
    streams = capsys.readouterr()
    rows = [line.split() for line in streams.out.splitlines()[2:]]
    assert [(row[0], row[1], row[2], row[3]) for row in rows] == [("first", "2", "2", "26"), ("second", "3", "3", "39")]
    assert streams.err.strip() == "lens report: the input holds 2 runs; choose one with --run ID: 'first', 'second'"
    assert main([str(two_runs), "--json"]) == EXIT_USAGE
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["first", "second"]


def test_run_picks_one_run_and_reports_only_its_ranks_and_spans(two_runs, capsys):
    assert main([str(two_runs), "--run", "second", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert (data["run_id"], data["spans"], len(data["ranks"])) == ("second", 39, 3)
    report = report_of(two_runs, run="first")
    assert (report.run_id, report.span_count, [r.rank for r in report.ranks]) == ("first", 26, ["rank 0", "rank 1"])
    assert report.run.wall_ns == 2 * 212 * 1_000_000_000


def test_an_unknown_run_is_a_usage_error_naming_the_runs(two_runs, capsys):
    assert main([str(two_runs), "--run", "third"]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "lens report: no run 'third' in the input; runs: 'first', 'second'"
    with pytest.raises(RunChoiceError) as error:
        report_of(two_runs)
    assert [info.run_id for info in error.value.runs] == ["first", "second"]
