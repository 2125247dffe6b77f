"""Rendering a report: the text table, the JSON dict and the self-contained HTML waterfall."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from report_helpers import html_of, report_of

from lens_report import render_text


def test_text_report_shows_step_rows_run_row_top_spans_and_problem_counts(two_step_file):
    with open(two_step_file, "a") as out:
        out.write("{truncated\n")
    text = render_text(report_of(two_step_file, top_n=2))
    lines = text.splitlines()
    assert lines[1] == "2 steps from step spans matching '(^|\\\\.)step$'"
    assert lines[3].split() == ["iteration", "wall", "s", "productive", "overhead", "idle", "wasted",
                                "unattributed", "goodput"]
    assert lines[5].split() == ["1", "8.000", "4.000", "2.000", "0.000", "0.000", "2.000", "50.0%"]
    assert lines[6].split() == ["2", "9.000", "6.000", "0.000", "2.000", "0.000", "1.000", "66.7%"]
    assert lines[7].split() == ["run", "20.000", "10.000", "2.000", "2.000", "0.000", "6.000", "50.0%"]
    assert lines[9] == "top 2 spans by total time"
    assert lines[12].split() == ["rl.grpo.job", "1", "20.000", "20.000"]
    assert lines[13].split() == ["rl.grpo.step", "2", "17.000", "8.500"]
    assert lines[15] == "problems: 1"
    assert lines[16].startswith(f"  {two_step_file}:2: invalid JSON")
    assert lines[18] == "violations: 0"


def test_text_report_counts_violations_by_rule(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([otlp.span(1, "x", 2, 1), otlp.span(2, "y", 0, 1,
                                                                                          bucket="great")]))
    text = render_text(report_of(path))
    assert "violations: 2 (bad-timing 1, unknown-bucket 1)" in text
    assert "no steps" in text


def test_json_report_is_serialisable_and_carries_the_numbers(two_step_file):
    data = json.loads(json.dumps(report_of(two_step_file).to_json()))
    assert [(s["iteration"], s["wall_s"], s["buckets_s"]["productive"], s["goodput"]) for s in data["steps"]] == [
        (1, 8.0, 4.0, 0.5), (2, 9.0, 6.0, 6 / 9)]
    assert data["run"] == {"wall_s": 20.0, "buckets_s": {"productive": 10.0, "overhead": 2.0, "idle": 2.0,
                                                         "wasted": 0.0},
                           "unattributed_s": 6.0, "goodput": 0.5}
    assert (data["spans"], data["violations"], data["problems"]) == (7, [], [])


def test_html_is_one_offline_file_with_one_bar_per_span_and_tooltips(two_step_file):
    page = html_of(two_step_file)
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "<script src" not in page and "@import" not in page
    assert page.count('<rect class="span') == 7
    assert len(re.findall(r'<rect class="span b-productive', page)) == 2
    assert len(re.findall(r'<rect class="span b-umbrella', page)) == 3
    assert "rl.grpo.checkpointing\nduration: 2.000000 s\nbucket: overhead\niteration: 1" in page
    assert "<td>run</td><td>20.000</td><td>10.000</td>" in page


def test_html_waterfall_is_well_formed_svg_with_a_lane_per_process_and_thread(tmp_path, otlp):
    driver = otlp.request([otlp.span(1, "step <&>", 0, 10, iteration=1)], service_name="driver",
                          service_instance_id="drv")
    worker = otlp.request([otlp.span(2, "train", 1, 5, 1, bucket="productive", thread_id=1),
                           otlp.span(3, "load", 1, 2, 1, bucket="overhead", thread_id=2),
                           otlp.span(4, "load", 2, 3, 1, bucket="overhead", thread_id=2)],
                          process_pid=77, host_name="node7", nv_dl_rank=5)
    page = html_of(otlp.write(tmp_path / "a.jsonl", driver, worker))
    svg = ET.fromstring(re.search(r'<svg id="waterfall".*?</svg>', page, re.S).group(0))
    lanes = [el.findtext("title") for el in svg.iter("text") if el.get("class") == "lane"]
    assert lanes == ["rank 5 · pid 77@node7 / thread 1", "rank 5 · pid 77@node7 / thread 2", "drv"]
    bars = {el.findtext("title").split("\n")[0]: float(el.get("y")) for el in svg.iter("rect")}
    assert bars.keys() == {"step <&>", "train", "load"}
    assert "step &lt;&amp;&gt;" in page


def test_html_stacks_nested_spans_by_depth_within_a_lane(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "outer", 0, 10),
        otlp.span(2, "middle", 1, 9, 1),
        otlp.span(3, "inner", 2, 3, 2, bucket="productive"),
        otlp.span(4, "after", 11, 12),
    ]))
    svg = ET.fromstring(re.search(r'<svg id="waterfall".*?</svg>', html_of(path), re.S).group(0))
    y = {el.findtext("title").split("\n")[0]: float(el.get("y")) for el in svg.iter("rect")}
    assert y["outer"] < y["middle"] < y["inner"]
    assert y["after"] == y["outer"]


def test_html_notes_spans_it_cannot_draw(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([otlp.span(1, "ok", 0, 1), otlp.span(2, "bad", 3, 2)]))
    page = html_of(path)
    assert page.count('<rect class="span') == 1
    assert "[bad-timing]" not in page and "ends 1.000000 s before it starts; skipped" in page


def test_html_waterfall_of_a_chosen_step_has_that_step_as_its_axis_and_clips_longer_spans(tmp_path, otlp):
    """Regression: with a job span present the waterfall's axis spanned the whole job, so the
    step asked for (--step 2) was a few pixels wide."""
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "rl.grpo.job", 0, 1000),
        otlp.span(2, "rl.grpo.step", 100, 110, 1, iteration=1),
        otlp.span(3, "rl.grpo.step", 200, 210, 1, iteration=2),
        otlp.span(4, "train", 200, 208, 3, bucket="productive", iteration=2),
    ], nv_dl_rank=0))
    page = html_of(path, steps={2})
    svg = ET.fromstring(re.search(r'<svg id="waterfall".*?</svg>', page, re.S).group(0))
    rects = {el.findtext("title").split("\n")[0]: el for el in svg.iter("rect")}
    assert set(rects) == {"rl.grpo.job", "rl.grpo.step", "train"}  # step 1 is outside the axis
    step, train, job = rects["rl.grpo.step"], rects["train"], rects["rl.grpo.job"]
    assert float(train.get("width")) == pytest.approx(0.8 * float(step.get("width")))
    assert "clipped" in job.get("class") and "clipped" not in step.get("class")
    assert (float(job.get("x")), float(job.get("width"))) == (float(step.get("x")), float(step.get("width")))
    assert "clipped: starts 200.000 s before the step; clipped: ends 790.000 s after the step" in job.findtext("title")
    assert sum(1 for el in svg.iter("path") if el.get("class") == "clip-mark") == 2


def test_span_names_cannot_break_out_of_the_pages_script_data(tmp_path, otlp):
    """The spans the script draws travel as JSON inside a <script> element: a name holding
    ``</script>`` must stay text there, or the page would run what follows it."""
    evil = "</script><script>document.title='owned'</script><!--"
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "rl.grpo.step", 0, 10, iteration=1), otlp.span(2, evil, 1, 5, 1, bucket="productive", iteration=1),
    ], nv_dl_rank=0))
    page = html_of(path)
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the page's own two, no more
    data = re.search(r'<script type="application/json" id="lens-data">(.*?)</script>', page, re.S)[1]
    assert evil in json.loads(data)["names"]
