"""Efficiency spans: names from categories, hand-managed spans that are not current, coalesced poll loops."""

import asyncio

import pytest

import lens_core
from lens_core import IdleWait, efficiency_span, managed_span, start_efficiency_span, umbrella_span
from lens_core.catalogs.rl import RLSpanGroup as G
from lens_core.efficiency import span_name_for

POLLS = "rl.idle.polls"


@pytest.mark.parametrize("category, name", [
    ("idle/buffer_starvation", "rl.idle.buffer_starvation"),
    ("idle/refit_bubble", "rl.idle.refit_bubble"),
    ("idle/refit_event_wait", "rl.idle.refit_event_wait"),
    ("idle/generation_limit_pause", "rl.idle.generation_limit_pause"),
    ("init/total", "rl.init.total"),
    ("wasted/preemption", "rl.wasted.preemption"),  # unregistered: its prefix names the bucket
])
def test_span_name_is_rl_plus_the_category_with_slashes_as_dots(traced, category, name):
    assert span_name_for(category) == name
    with efficiency_span(category):
        pass
    start_efficiency_span(category).end()
    assert traced.names() == [name, name]


def test_efficiency_span_is_current_for_its_block(traced):
    with efficiency_span("idle/refit_bubble") as wait:
        with managed_span(G.DATA_PLANE, "inside"):
            pass
    assert traced.named("inside").parent_id == wait.span_id


def test_start_efficiency_span_is_not_current_so_work_during_the_wait_is_not_its_child(traced):
    with umbrella_span(G.U_STEP, "rl.grpo.step") as step:
        idle = start_efficiency_span("idle/buffer_starvation")
        with managed_span(G.DATA_PLANE, "during-the-wait"):
            pass
        idle.end()
    during = traced.named("during-the-wait")
    assert idle.span.parent_id == step.span_id
    assert during.parent_id == step.span_id


def test_tasks_created_during_a_hand_managed_wait_are_not_reparented_under_it(traced):
    async def rollout():
        with managed_span(G.GENERATION, "rollout-task"):
            await asyncio.sleep(0)

    async def pump():
        with umbrella_span(G.U_PER_PROMPT, "pump") as pump_span:
            idle = start_efficiency_span("idle/buffer_starvation")
            task = asyncio.create_task(rollout())
            await asyncio.sleep(0)
            idle.end()
            await task
        return pump_span

    pump_span = asyncio.run(pump())
    assert traced.named("rollout-task").parent_id == pump_span.span_id


def test_idle_wait_coalesces_n_starved_polls_into_one_span_with_the_poll_count(traced):
    wait = IdleWait("idle/buffer_starvation")
    for _ in range(37):
        wait.starved()
    assert wait.done() == 37
    span = traced.named("rl.idle.buffer_starvation")
    assert span.attributes[POLLS] == 37
    assert span.ended and span.attributes["rl.bucket"] == "idle"


def test_idle_wait_opens_nothing_when_no_poll_starved(traced):
    wait = IdleWait("idle/buffer_starvation")
    assert wait.done() == 0
    assert traced.spans == []


def test_idle_wait_reused_gives_one_span_per_wait(traced):
    wait = IdleWait("idle/buffer_starvation")
    for polls in (3, 0, 5):
        for _ in range(polls):
            wait.starved()
        wait.done()
    assert [s.attributes[POLLS] for s in traced.named("rl.idle.buffer_starvation")] == [3, 5]


def test_idle_wait_in_a_poll_loop_is_a_child_of_the_step_and_spans_the_whole_wait(traced):
    remaining = iter([None, None, None, "batch"])
    with umbrella_span(G.U_STEP, "rl.grpo.step") as step:
        wait = IdleWait("idle/buffer_starvation")
        while (batch := next(remaining)) is None:
            wait.starved()
        wait.done()
    span = traced.named("rl.idle.buffer_starvation")
    assert batch == "batch"
    assert span.parent_id == step.span_id and span.attributes[POLLS] == 3


def test_efficiency_spans_are_off_with_their_group(traced):
    lens_core.set_span_group_spec("default")
    wait = IdleWait("idle/buffer_starvation")
    wait.starved()
    wait.done()
    with efficiency_span("idle/refit_bubble") as span:
        assert span is None
    assert traced.spans == []


def test_ending_a_hand_managed_span_twice_ends_it_once(traced):
    idle = start_efficiency_span("idle/refit_bubble")
    idle.poll(2)
    idle.end()
    first_end = idle.span.end_ns
    idle.end()
    assert idle.span.end_ns == first_end and idle.span.attributes[POLLS] == 2


def test_idle_wait_with_its_group_off_counts_each_waits_own_polls(traced):
    """Regression: with the group off, IdleWait.done() returned the polls of every wait so far
    (they piled up on the shared do-nothing span) instead of this wait's."""
    lens_core.set_span_group_spec("default")
    counts = []
    for polls in (3, 2, 4):
        wait = IdleWait("idle/buffer_starvation")
        for _ in range(polls):
            wait.starved()
        counts.append(wait.done())
    assert counts == [3, 2, 4] and traced.spans == []
    assert start_efficiency_span("idle/refit_bubble").polls == 0
