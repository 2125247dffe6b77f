"""The report's by-name rules: efficiency category vs bucket, validation under evaluate, umbrella-group stamps,
bucketed spans outside every catalog; each listed, counted and failing --strict."""

from __future__ import annotations

import json

from report_helpers import report_of

from lens_report import Rule
from lens_report.cli import main


def _one_step(otlp, tmp_path, *extra):
    """Driver job and one 10 s step with 4 s of productive work, plus the ``extra`` spans."""
    spans = [otlp.span(1, "rl.grpo.job", 0, 20),
             otlp.span(2, "rl.grpo.step", 1, 11, 1, iteration=1),
             otlp.span(3, "rl.grpo.policy_training", 1, 5, 2, bucket="productive", iteration=1), *extra]
    return otlp.write(tmp_path / "t.jsonl", otlp.request(spans))


def _found(report):
    return sorted((v.rule, v.span_name) for v in report.violations)


def test_the_clean_step_has_no_violation_and_passes_strict(tmp_path, otlp):
    path = _one_step(otlp, tmp_path)
    assert report_of(path).violations == ()
    assert main([str(path), "--strict"]) == 0


def test_an_efficiency_span_with_another_bucket_than_its_categorys_fails_strict(tmp_path, otlp):
    """Regression: rl.idle.refit_bubble with rl.bucket=productive passed --strict with exit 0."""
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.idle.refit_bubble", 5, 7, 2, bucket="productive", iteration=1,
                                               rl_efficiency_category="idle/refit_bubble"))
    report = report_of(path)
    assert _found(report) == [(Rule.EFFICIENCY_BUCKET, "rl.idle.refit_bubble")]
    assert "is bucketed idle but the span carries rl.bucket=productive" in report.violations[0].reason
    assert main([str(path), "--strict"]) == 1


def test_an_unregistered_category_is_held_to_its_prefix_bucket(tmp_path, otlp):
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.wasted.preemption", 5, 6, 2, bucket="overhead", iteration=1,
                                               rl_efficiency_category="wasted/preemption"))
    assert _found(report_of(path)) == [(Rule.EFFICIENCY_BUCKET, "rl.wasted.preemption")]


def test_productive_validation_generation_under_evaluate_fails_strict(tmp_path, otlp):
    """Regression: rl.vllm.generate marked productive under rl.grpo.evaluate passed --strict with exit 0."""
    path = _one_step(otlp, tmp_path,
                     otlp.span(4, "rl.grpo.evaluate", 5, 10, 2, iteration=1),
                     otlp.span(5, "rl.vllm.generate", 6, 8, 4, bucket="productive"),
                     otlp.span(6, "rl.vllm.generate_text", 8, 9, 4, bucket="overhead"))
    report = report_of(path)
    assert _found(report) == [(Rule.VALIDATION_PRODUCTIVE, "rl.vllm.generate")]
    assert "under evaluate span 'rl.grpo.evaluate'" in report.violations[0].reason
    assert main([str(path), "--strict"]) == 1


def test_a_bucketed_span_stamped_with_an_umbrella_group_fails_strict(tmp_path, otlp):
    """Regression: rl.data_plane.put with lens.group=per_prompt and rl.bucket=overhead passed --strict."""
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.data_plane.put", 5, 6, 2, bucket="overhead",
                                               lens_group="per_prompt"))
    report = report_of(path)
    assert _found(report) == [(Rule.UMBRELLA_GROUP_BUCKET, "rl.data_plane.put")]
    assert report.violations[0].reason.startswith("stamped lens.group=per_prompt, an umbrella group")
    assert main([str(path), "--strict"]) == 1


def test_the_same_put_stamped_data_plane_is_fine(tmp_path, otlp):
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.data_plane.put", 5, 6, 2, bucket="overhead",
                                               lens_group="data_plane"))
    assert report_of(path).violations == ()


def test_an_unstamped_bucketed_span_outside_every_catalog_fails_strict(tmp_path, otlp):
    """Regression: a foreign emitter's bucketed name the catalog does not know passed --strict with exit 0."""
    path = _one_step(otlp, tmp_path, otlp.span(4, "my.custom.phase", 5, 6, 2, bucket="overhead", unstamped=True))
    report = report_of(path)
    assert _found(report) == [(Rule.UNCATALOGUED_BUCKET, "my.custom.phase")]
    assert report.rule_counts[Rule.UNCATALOGUED_BUCKET] == 1
    assert main([str(path), "--strict"]) == 1
    assert main([str(path)]) == 0  # a warning without --strict


def test_an_unstamped_bucketed_sc_step_is_a_bucketed_umbrella(tmp_path, otlp):
    """Regression: rl.sc.step was not catalogued, so a bucketed one from another emitter passed --strict."""
    path = _one_step(otlp, tmp_path, otlp.span(4, "rl.sc.step", 12, 13, 1, bucket="productive", unstamped=True))
    assert _found(report_of(path)) == [("bucketed-umbrella", "rl.sc.step")]


def test_every_rule_keeps_its_name_in_the_output():
    """The Rule enum replaced string constants: each member is its name, in JSON, text and
    comparisons, so ``rule`` and ``violations_by_rule`` read as before."""
    assert [rule.value for rule in Rule] == [
        "bad-timing", "bucketed-overlap", "bucketed-umbrella", "efficiency-bucket", "nested-bucket", "parent-cycle",
        "rank-overflow", "step-overflow", "timer-only", "umbrella-group-bucket", "uncatalogued-bucket",
        "unknown-bucket", "validation-productive"]
    rule = Rule.EFFICIENCY_BUCKET
    assert (str(rule), f"[{rule}]", json.dumps({rule: rule}), rule == "efficiency-bucket") == (
        "efficiency-bucket", "[efficiency-bucket]", '{"efficiency-bucket": "efficiency-bucket"}', True)
    assert {rule: 1}["efficiency-bucket"] == 1 and Rule("efficiency-bucket") is rule
