"""The ``lens report`` command line: output modes, exit codes and the subcommand hook."""

from __future__ import annotations

import argparse
import json

import pytest

from otel_bridge.report.cli import build_parser, main


def test_plain_run_prints_the_table_and_exits_zero(two_step_file, capsys):
    assert main([str(two_step_file)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[7].split() == ["run", "20.000", "10.000", "2.000", "2.000", "0.000", "6.000", "50.0%"]


def test_json_flag_prints_parseable_json(two_step_file, capsys):
    assert main([str(two_step_file), "--json", "--top", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["goodput"] == 0.5
    assert [t["name"] for t in data["top_spans"]] == ["rl.grpo.job"]


def test_html_flag_writes_the_page(two_step_file, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main([str(two_step_file), "--html", str(out)]) == 0
    assert out.read_text().count('<rect class="span') == 7
    assert f"wrote {out}" in capsys.readouterr().err


def test_strict_exits_one_only_when_an_invariant_is_violated(two_step_file, tmp_path, otlp, capsys):
    bad = otlp.write(tmp_path / "bad.jsonl", otlp.request([otlp.span(1, "x", 0, 1, bucket="sideways")]))
    assert main([str(two_step_file), "--strict"]) == 0
    assert main([str(bad)]) == 0
    assert main([str(bad), "--strict"]) == 1


def test_no_spans_at_all_exits_two_with_a_message(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    assert main([str(empty)]) == 2
    err = capsys.readouterr().err
    assert f"no spans read from {empty}" in err
    assert f"{empty}:1: invalid JSON" in err
    assert main([str(tmp_path / "nowhere")]) == 2


def test_step_pattern_option_changes_which_spans_are_steps(tmp_path, otlp, capsys):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "train_iter", 0, 4, iteration=7),
        otlp.span(2, "fwd", 0, 3, 1, bucket="productive"),
    ]))
    assert main([str(path), "--json", "--step-pattern", "_iter$"]) == 0
    (step,) = json.loads(capsys.readouterr().out)["steps"]
    assert (step["iteration"], step["method"], step["goodput"]) == (7, "pattern", 0.75)


def test_bad_option_values_are_usage_errors(two_step_file, capsys):
    with pytest.raises(SystemExit) as bad_regex:
        main([str(two_step_file), "--step-pattern", "("])
    with pytest.raises(SystemExit) as bad_top:
        main([str(two_step_file), "--top", "-3"])
    assert (bad_regex.value.code, bad_top.value.code) == (2, 2)
    assert "invalid regular expression" in capsys.readouterr().err


def test_build_parser_adds_a_report_subcommand_that_runs_via_func(two_step_file, capsys):
    lens = argparse.ArgumentParser(prog="lens")
    build_parser(lens.add_subparsers(dest="command"))
    args = lens.parse_args(["report", str(two_step_file), "--json"])
    assert args.command == "report"
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["spans"] == 7
