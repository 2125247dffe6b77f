"""Every invariant is checked by what a span is (its group, umbrella status, category), not by sums."""

from __future__ import annotations

import pytest

from report_helpers import report_of

from lens_report import Rule
from lens_report.cli import main

S = 1_000_000_000


def _one_step(otlp, tmp_path, *extra, **resource):
    """Driver job and one 10 s step with 4 s of productive work, plus the ``extra`` spans."""
    spans = [otlp.span(1, "rl.grpo.job", 0, 20),
             otlp.span(2, "rl.grpo.step", 1, 11, 1, iteration=1),
             otlp.span(3, "rl.grpo.policy_training", 1, 5, 2, bucket="productive", iteration=1), *extra]
    return otlp.write(tmp_path / "t.jsonl", otlp.request(spans, **resource))


def test_a_bucketed_umbrella_is_flagged_and_not_counted(tmp_path, otlp):
    """Regression: rl.grpo.job carrying rl.bucket passed --strict with exit 0."""
    path = _one_step(otlp, tmp_path)
    text = path.read_text().replace('"name": "rl.grpo.job", "kind": 1, "startTimeUnixNano": "1700000000000000000", '
                                    '"endTimeUnixNano": "1700000020000000000", "attributes": []',
                                    '"name": "rl.grpo.job", "kind": 1, "startTimeUnixNano": "1700000000000000000", '
                                    '"endTimeUnixNano": "1700000020000000000", "attributes": '
                                    '[{"key": "rl.bucket", "value": {"stringValue": "productive"}}]')
    path.write_text(text)
    report = report_of(path)
    assert [(v.rule, v.span_name) for v in report.violations] == [(Rule.BUCKETED_UMBRELLA, "rl.grpo.job")]
    assert report.violations[0].reason.startswith("umbrella span of group job carries rl.bucket=productive")
    assert report.run.bucket_ns["productive"] == 4 * S
    assert main([str(path), "--strict"]) == 1


def test_a_bucketed_collector_loop_wait_is_flagged_and_not_added_to_idle(tmp_path, otlp):
    """Regression: 10 s of collector idle (rl.idle.refit_event_wait with a bucket) were added to
    the run's idle next to the driver's, the double count the catalog exists to prevent."""
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.idle.refit_event_wait", 0, 10, 1, bucket="idle",
                                                rl_efficiency_category="idle/refit_event_wait"))
    report = report_of(path)
    assert [(v.rule, v.span_name) for v in report.violations] == [(Rule.BUCKETED_OVERLAP, "rl.idle.refit_event_wait")]
    assert "collector-loop wait" in report.violations[0].reason
    assert report.run.bucket_ns["idle"] == 0


def test_a_bucketed_startup_span_and_a_bucketed_finalize_are_flagged(tmp_path, otlp):
    path = _one_step(otlp, tmp_path,
                     otlp.span(4, "rl.setup.workers", 0, 1, bucket="overhead"),
                     otlp.span(5, "rl.grpo.checkpointing", 5, 6, 2, bucket="overhead", iteration=1),
                     otlp.span(6, "rl.checkpoint.finalize", 5.5, 15, 5, bucket="overhead", iteration=1))
    report = report_of(path)
    found = sorted((v.rule, v.span_name) for v in report.violations)
    assert found == [(Rule.BUCKETED_OVERLAP, "rl.checkpoint.finalize"), (Rule.BUCKETED_UMBRELLA, "rl.setup.workers")]
    assert report.steps[0].totals.bucket_ns["overhead"] == S  # only the staging span


def test_a_timer_only_category_emitted_as_a_bucketed_span_is_flagged(tmp_path, otlp):
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.idle.validation", 5, 7, 2, bucket="idle", iteration=1))
    report = report_of(path)
    assert [(v.rule, v.span_name) for v in report.violations] == [(Rule.TIMER_ONLY, "rl.idle.validation")]
    assert report.violations[0].reason.startswith("efficiency category idle/validation is timer-only")


def test_lens_group_and_umbrella_stamps_classify_spans_the_catalog_does_not_know(tmp_path, otlp):
    path = _one_step(otlp, tmp_path,
                     otlp.span(4, "my.trainer.epoch", 1, 11, 1, bucket="productive", lens_group="epoch",
                               lens_umbrella=True),
                     otlp.span(5, "my.trainer.forward", 5, 6, 2, bucket="productive", lens_group="forward"),
                     # stamped as a leaf of an RL group: the stamp wins over the catalog's name
                     otlp.span(6, "rl.grpo.generation", 6, 7, 2, bucket="productive", lens_group="generation"))
    report = report_of(path)
    assert [(v.rule, v.span_name) for v in report.violations] == [(Rule.BUCKETED_UMBRELLA, "my.trainer.epoch")]
    assert report.violations[0].reason.startswith("umbrella span of group epoch carries")
    assert report.steps[0].totals.bucket_ns["productive"] == 6 * S


def test_lens_umbrella_as_text_or_a_number_reads_as_the_clickhouse_store_reads_it(tmp_path, otlp):
    """Regression: files read lens.umbrella only as a JSON boolean, the ClickHouse store (whose exporter writes
    every value as text) also as 'true'/'1'/'false'/'0' in any case, so one span gave two reports. Now both read
    true, 'TRUE', '1' and 1 as an umbrella, false, 'false' and 0 as a leaf, and other text ('yes') as absent."""
    umbrellas = {"a": True, "b": "TRUE", "c": "1", "d": 1}
    leaves = {"e": False, "f": "false", "g": 0, "h": "yes"}
    spans = [otlp.span(4 + i, f"my.{name}", 1 + i, 2 + i, 2, bucket="overhead", lens_umbrella=value)
             for i, (name, value) in enumerate({**umbrellas, **leaves}.items())]
    report = report_of(_one_step(otlp, tmp_path, *spans))
    assert sorted(v.span_name for v in report.violations if v.rule is Rule.BUCKETED_UMBRELLA) == [
        f"my.{name}" for name in umbrellas]
    assert report.steps[0].totals.bucket_ns["overhead"] == len(leaves) * S


def test_nested_bucketed_spans_and_step_overflow_are_flagged(tmp_path, otlp):
    path = _one_step(otlp, tmp_path,
                     otlp.span(4, "inner.copy", 2, 3, 3, bucket="overhead", iteration=1),
                     otlp.span(5, "side.work", 4, 11, 2, bucket="overhead", iteration=1))
    report = report_of(path)
    assert sorted((v.rule, v.span_name) for v in report.violations) == [
        (Rule.NESTED_BUCKET, "rl.grpo.policy_training"), (Rule.STEP_OVERFLOW, "rl.grpo.step")]


def test_cycles_and_bad_times_are_flagged_and_never_a_traceback(tmp_path, otlp, capsys):
    """Regression: a span starting at >= 1e21 ns crashed --html with a traceback."""
    huge = otlp.span(4, "far.future", 0, 1, 2, bucket="productive")
    huge["startTimeUnixNano"], huge["endTimeUnixNano"] = "1" + "0" * 21, "2" + "0" * 21
    path = _one_step(otlp, tmp_path, huge,
                     otlp.span(5, "loop.a", 0, 1, 6), otlp.span(6, "loop.b", 0, 1, 5),
                     otlp.span(7, "backwards", 3, 2, 2, bucket="idle"))
    assert main([str(path), "--html", str(tmp_path / "r.html"), "--perfetto", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "[bad-timing] far.future" in text and "out of range; skipped" in text
    assert "[bad-timing] backwards" in text and "ends 1.000000 s before it starts; skipped" in text
    report = report_of(path)
    assert sorted((v.rule, v.span_name) for v in report.violations) == [
        (Rule.BAD_TIMING, "backwards"), (Rule.BAD_TIMING, "far.future"),
        (Rule.PARENT_CYCLE, "loop.a"), (Rule.PARENT_CYCLE, "loop.b")]
    assert report.run.bucket_ns["productive"] == 4 * S


@pytest.mark.parametrize("limit", [1, 3])
def test_violations_are_all_counted_but_listed_up_to_the_limit(tmp_path, otlp, limit):
    spans = [otlp.span(n, f"bad{n}", 2, 1) for n in range(1, 6)]
    report = report_of(otlp.write(tmp_path / "t.jsonl", otlp.request(spans)), max_violations=limit)
    assert (report.violation_count, len(report.violations), report.rule_counts) == (5, limit, {Rule.BAD_TIMING: 5})
