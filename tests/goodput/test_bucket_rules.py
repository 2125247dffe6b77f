"""Bucket rules of the RL catalog: umbrellas unbucketed, leaves stamped, and what bucket_scope may change."""

import pytest

import lens_core
from lens_core import (
    Bucket,
    SpanRegistry,
    bucket_scope,
    efficiency_span,
    managed_span,
    start_efficiency_span,
    trace_fn,
    umbrella_span,
    umbrella_trace_fn,
)
from lens_core.catalogs.rl import RLSpanGroup as G

BUCKET = "rl.bucket"
CATEGORY = "rl.efficiency.category"


@pytest.mark.parametrize("group", [G.U_JOB, G.U_STEP, G.U_ROLLOUT, G.U_MODEL_INIT, G.U_EVALUATE, G.U_SETUP,
                                   G.U_PER_PROMPT])
def test_umbrella_spans_carry_no_bucket_even_inside_bucket_scope(traced, group):
    with bucket_scope(Bucket.OVERHEAD):
        with umbrella_span(group, "umbrella"):
            pass
        with managed_span(group, "managed"):
            pass
    assert BUCKET not in traced.named("umbrella").attributes
    assert BUCKET not in traced.named("managed").attributes


def test_umbrella_trace_fn_span_carries_no_bucket(traced):
    @umbrella_trace_fn(G.U_JOB, "rl.grpo.job")
    def job():
        with managed_span(G.POLICY_UPDATE, "rl.grpo.policy_training"):
            pass

    job()
    assert BUCKET not in traced.named("rl.grpo.job").attributes
    assert traced.named("rl.grpo.policy_training").attributes[BUCKET] == Bucket.PRODUCTIVE


@pytest.mark.parametrize("group, bucket", [
    (G.GENERATION, Bucket.PRODUCTIVE), (G.REWARD, Bucket.PRODUCTIVE), (G.POLICY_UPDATE, Bucket.PRODUCTIVE),
    (G.DATA_PROCESSING, Bucket.OVERHEAD), (G.DATA_PLANE, Bucket.OVERHEAD), (G.CHECKPOINT, Bucket.OVERHEAD),
    (G.LOGPROB, Bucket.OVERHEAD), (G.ADVANTAGE, Bucket.OVERHEAD),
])
def test_leaf_spans_are_stamped_with_their_groups_bucket(traced, group, bucket):
    with managed_span(group, "leaf"):
        pass
    assert traced.named("leaf").attributes[BUCKET] == bucket


def test_bucket_scope_reclassifies_a_traced_generate_call_it_cannot_see(traced):
    @trace_fn(G.GENERATION, "rl.vllm.generate")
    def generate():
        return "tokens"

    generate()
    with umbrella_span(G.U_EVALUATE, "rl.grpo.evaluate"), bucket_scope(Bucket.OVERHEAD):
        generate()
    training, validation = traced.named("rl.vllm.generate")
    assert training.attributes[BUCKET] == Bucket.PRODUCTIVE
    assert validation.attributes[BUCKET] == Bucket.OVERHEAD


def test_an_explicit_bucket_at_the_call_site_wins_over_bucket_scope(traced):
    with bucket_scope(Bucket.OVERHEAD):
        with managed_span(G.GENERATION, "explicit", **{BUCKET: Bucket.WASTED}):
            pass
    assert traced.named("explicit").attributes[BUCKET] == Bucket.WASTED


@pytest.mark.parametrize("category", ["idle/buffer_starvation", "idle/refit_bubble"])
def test_driver_efficiency_spans_keep_their_idle_bucket_inside_bucket_scope(traced, category):
    with bucket_scope(Bucket.PRODUCTIVE):
        with efficiency_span(category):
            pass
        start_efficiency_span(category).end()
    spans = traced.named("rl." + category.replace("/", "."))
    assert [s.attributes[BUCKET] for s in spans] == [Bucket.IDLE, Bucket.IDLE]
    assert all(s.attributes[CATEGORY] == category for s in spans)


def test_an_efficiency_span_ignores_an_explicit_bucket_and_keeps_its_category(traced):
    with efficiency_span("idle/refit_bubble", **{BUCKET: Bucket.PRODUCTIVE}):
        pass
    assert traced.named("rl.idle.refit_bubble").attributes[BUCKET] == Bucket.IDLE


@pytest.mark.parametrize("category", ["idle/refit_event_wait", "idle/generation_limit_pause", "init/total"])
def test_collector_categories_and_init_total_carry_no_bucket_but_keep_their_category(traced, category):
    with bucket_scope(Bucket.OVERHEAD):
        with efficiency_span(category):
            pass
    span = traced.named("rl." + category.replace("/", "."))
    assert BUCKET not in span.attributes
    assert span.attributes[CATEGORY] == category


def test_unbucketed_category_lists_match_the_seed(rl):
    assert set(rl.COLLECTOR_LOOP_CATEGORIES) == {"idle/refit_event_wait", "idle/generation_limit_pause"}
    assert set(rl.UNBUCKETED_SPAN_CATEGORIES) == set(rl.COLLECTOR_LOOP_CATEGORIES) | {"init/total"}


def test_a_leaf_registered_without_a_bucket_counts_as_overhead(traced):
    SpanRegistry.register("toy", ["mystery"])
    lens_core.set_span_group_spec("all")
    with managed_span("mystery", "unknown.leaf"):
        pass
    assert traced.named("unknown.leaf").attributes[BUCKET] == Bucket.OVERHEAD


def test_the_bucket_key_is_configurable_per_namespace(traced):
    SpanRegistry.register("other", ["fit", "outer"], buckets={"fit": Bucket.PRODUCTIVE}, umbrellas=["outer"],
                          bucket_key="other.bucket")
    lens_core.set_span_group_spec("all")
    with umbrella_span("outer", "outer"), managed_span("fit", "fit"):
        pass
    with managed_span(G.POLICY_UPDATE, "rl.leaf"):
        pass
    with bucket_scope(Bucket.IDLE), managed_span("fit", "scoped.fit"):
        pass
    assert traced.named("fit").attributes == {"other.bucket": Bucket.PRODUCTIVE}
    assert traced.named("outer").attributes == {}
    assert traced.named("rl.leaf").attributes == {BUCKET: Bucket.PRODUCTIVE}
    assert traced.named("scoped.fit").attributes == {"other.bucket": Bucket.IDLE}


def test_an_efficiency_span_uses_its_groups_bucket_key(traced):
    SpanRegistry.register("other", ["waits"], bucket_key="other.bucket")
    lens_core.set_span_group_spec("all")
    with efficiency_span("idle/buffer_starvation", group="waits"):
        pass
    attrs = traced.named("rl.idle.buffer_starvation").attributes
    assert attrs["other.bucket"] == Bucket.IDLE and BUCKET not in attrs
