"""Guards where spans are emitted: timer-only categories become metrics, unknown buckets are refused, an
efficiency span keeps its category's bucket; each warned about once per call site, naming it."""

import logging

import pytest

import lens_core
from lens_core import _impl, efficiency, efficiency_span, managed_span, start_efficiency_span
from lens_core.catalogs.rl import RLSpanGroup as G

BUCKET = "rl.bucket"


@pytest.fixture
def sink():
    """A recording efficiency sink: (metric, seconds, attributes) per recorded timer."""
    got = []
    efficiency.set_efficiency_sink(lambda name, seconds, attrs: got.append((name, seconds, attrs)))
    yield got
    efficiency.set_efficiency_sink(None)


def _lines(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


@pytest.mark.parametrize("category", ["idle/validation", "wasted/failed_trajectory", "idle/buffer_full_backoff"])
def test_a_timer_only_category_records_its_metric_and_emits_no_span(traced, sink, caplog, category):
    """Regression: efficiency_span("idle/validation") emitted a bucketed span the report then flagged."""
    with caplog.at_level(logging.WARNING, "lens_core"):
        with efficiency_span(category):
            pass
        start_efficiency_span(category).end()
    assert traced.names() == []
    assert [name for name, _, _ in sink] == [f"efficiency/{category}"] * 2
    assert all(seconds >= 0 for _, seconds, _ in sink)
    measurement = sink[0][2]["rl.efficiency.measurement"]
    assert measurement == ("driver_wall_clock" if category == "idle/validation" else "thread_seconds")
    warnings = _lines(caplog, "timer-only")
    assert len(warnings) == 2 and all(__file__ in w for w in warnings)  # two call sites, each named


def test_the_timer_only_warning_is_given_once_per_call_site(traced, sink, caplog):
    with caplog.at_level(logging.WARNING, "lens_core"):
        for _ in range(5):
            with efficiency_span("idle/validation"):
                pass
    assert len(_lines(caplog, "timer-only")) == 1
    assert len(sink) == 5


def test_collector_loop_metrics_are_labelled_collector_wall_clock(sink):
    efficiency.record_efficiency_time("idle/refit_event_wait", 2.5)
    assert sink == [("efficiency/idle/refit_event_wait", 2.5,
                     {"rl.efficiency.measurement": "collector_wall_clock",
                      "rl.efficiency.category": "idle/refit_event_wait"})]


def test_timer_only_category_with_its_group_off_records_nothing(traced, sink):
    lens_core.set_span_group_spec("default")
    with efficiency_span("idle/validation"):
        pass
    assert sink == [] and traced.names() == []
    assert efficiency_span("idle/validation") is _impl.gate.null_span


@pytest.mark.parametrize("bad", ["nonsense", "Productive", 3])
def test_an_unknown_bucket_value_is_dropped_with_a_warning_naming_the_call_site(traced, caplog, bad):
    """Regression: managed_span(..., rl.bucket="nonsense") passed the value through unchanged."""
    with caplog.at_level(logging.WARNING, "lens_core"):
        with managed_span(G.POLICY_UPDATE, "rl.grpo.policy_training", **{BUCKET: bad}):
            pass
    assert traced.named("rl.grpo.policy_training").attributes[BUCKET] == "productive"
    (warning,) = _lines(caplog, "not one of")
    assert f"{__file__}:" in warning


def test_a_known_bucket_override_still_wins(traced):
    with managed_span(G.GENERATION, "rl.vllm.generate", **{BUCKET: "overhead"}):
        pass
    assert traced.named("rl.vllm.generate").attributes[BUCKET] == "overhead"


def test_an_efficiency_span_keeps_its_categorys_bucket_whatever_is_passed(traced, caplog):
    """Regression: the override warning was keyed by category, so a second call site was never named."""
    with caplog.at_level(logging.WARNING, "lens_core"):
        with efficiency_span("idle/refit_bubble", **{BUCKET: "productive"}):
            pass
        span = start_efficiency_span("idle/refit_bubble", **{BUCKET: "wasted"})
        span.end()
    assert [s.attributes[BUCKET] for s in traced.spans] == ["idle", "idle"]
    assert len(_lines(caplog, "keeps its category's bucket")) == 2


def test_a_collector_category_stays_unbucketed_whatever_is_passed(traced):
    with efficiency_span("idle/refit_event_wait", **{BUCKET: "idle"}):
        pass
    assert BUCKET not in traced.named("rl.idle.refit_event_wait").attributes


def test_an_ungated_span_is_held_to_the_four_buckets_too(traced, caplog):
    """Regression: span_cm (no group) passed rl.bucket="nonsense" through unchecked."""
    with caplog.at_level(logging.WARNING, "lens_core"):
        with lens_core.span_cm("ungated", **{BUCKET: "nonsense"}):
            pass
        with lens_core.span_cm("ungated.ok", **{BUCKET: "idle"}):
            pass
    assert BUCKET not in traced.named("ungated").attributes
    assert traced.named("ungated.ok").attributes[BUCKET] == "idle"
    assert any(__file__ in m for m in _lines(caplog, "not one of"))


def test_a_bucket_on_an_umbrella_is_dropped_with_a_warning_naming_the_call_site(traced, caplog):
    with caplog.at_level(logging.WARNING, "lens_core"):
        with lens_core.umbrella_span(G.U_STEP, "rl.grpo.step", **{BUCKET: "productive"}):
            pass
    assert BUCKET not in traced.named("rl.grpo.step").attributes
    assert any(__file__ in m for m in _lines(caplog, "umbrellas are never bucketed"))
