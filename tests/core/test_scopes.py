"""Scopes: stamped attributes, iteration, bucket and per-prompt; where they reach and where not."""

import asyncio
import threading

import pytest

import lens_core
from lens_core import (
    SpanRegistry,
    bucket_scope,
    in_per_prompt_scope,
    iteration_scope,
    per_prompt_scope,
    span_attributes,
)


def enable():
    """'step' is a productive leaf, 'sync' an undeclared leaf, 'job' an umbrella; all on."""
    SpanRegistry.register("lib", ["job", "step", "sync"], umbrellas=["job"], buckets={"step": "productive"})
    lens_core.set_span_group_spec("all")


def attrs_of(recorder, name):
    return recorder.named(name).attributes


# ---- span_attributes / iteration_scope ----------------------------------------------------------


def test_span_attributes_stamp_every_span_inside(recorder):
    enable()
    with span_attributes(run="r1", rank=3):
        with lens_core.managed_span("job", "a"):
            pass
        with lens_core.span_cm("b"):
            pass
    assert attrs_of(recorder, "a") == {"run": "r1", "rank": 3}
    assert attrs_of(recorder, "b") == {"run": "r1", "rank": 3}


def test_inner_scope_overrides_outer_and_outer_is_restored(recorder):
    enable()
    with span_attributes(a=1, b=1):
        with span_attributes(b=2, c=2):
            with lens_core.managed_span("job", "inner"):
                pass
        with lens_core.managed_span("job", "outer"):
            pass
    with lens_core.managed_span("job", "none"):
        pass
    assert attrs_of(recorder, "inner") == {"a": 1, "b": 2, "c": 2}
    assert attrs_of(recorder, "outer") == {"a": 1, "b": 1}
    assert attrs_of(recorder, "none") == {}


def test_call_site_attribute_wins_over_the_scope(recorder):
    enable()
    with span_attributes(phase="scope", keep=True):
        with lens_core.managed_span("job", "s", phase="call"):
            pass
    assert attrs_of(recorder, "s") == {"phase": "call", "keep": True}


def test_scope_is_restored_after_an_exception(recorder):
    enable()
    with pytest.raises(RuntimeError):
        with span_attributes(x=1):
            raise RuntimeError
    with lens_core.managed_span("job", "after"):
        pass
    assert attrs_of(recorder, "after") == {}


def test_iteration_scope_sets_rl_iteration(recorder):
    enable()
    with iteration_scope(12):
        with lens_core.managed_span("step", "s"):
            pass
    assert attrs_of(recorder, "s") == {"rl.iteration": 12, "rl.bucket": "productive"}


def test_scope_attributes_reach_trace_fn_spans(recorder):
    enable()

    @lens_core.trace_fn("job", name="traced")
    def traced():
        pass

    with iteration_scope(4):
        traced()
    assert attrs_of(recorder, "traced") == {"rl.iteration": 4}


# ---- bucket_scope -------------------------------------------------------------------------------


def test_bucket_scope_reclassifies_leaf_spans(recorder):
    enable()
    with bucket_scope("wasted"):
        with lens_core.managed_span("step", "declared"):
            pass
        with lens_core.managed_span("sync", "undeclared"):
            pass
    with lens_core.managed_span("step", "after"):
        pass
    assert attrs_of(recorder, "declared") == {"rl.bucket": "wasted"}
    assert attrs_of(recorder, "undeclared") == {"rl.bucket": "wasted"}
    assert attrs_of(recorder, "after") == {"rl.bucket": "productive"}


def test_bucket_scope_leaves_umbrella_spans_unbucketed(recorder):
    enable()
    with bucket_scope("idle"):
        with lens_core.umbrella_span("job", "u"):
            pass
        with lens_core.managed_span("job", "m"):
            pass
    assert attrs_of(recorder, "u") == {}
    assert attrs_of(recorder, "m") == {}


def test_explicit_bucket_at_the_call_site_wins_over_bucket_scope(recorder):
    enable()
    with bucket_scope("idle"):
        with lens_core.managed_span("step", "s", **{"rl.bucket": "wasted"}):
            pass
    assert attrs_of(recorder, "s") == {"rl.bucket": "wasted"}


def test_inner_bucket_scope_wins(recorder):
    enable()
    with bucket_scope("idle"):
        with bucket_scope("wasted"):
            with lens_core.managed_span("step", "inner"):
                pass
        with lens_core.managed_span("step", "outer"):
            pass
    assert attrs_of(recorder, "inner") == {"rl.bucket": "wasted"}
    assert attrs_of(recorder, "outer") == {"rl.bucket": "idle"}


@pytest.mark.parametrize("bad", ["useful", "IDLE", "", None])
def test_invalid_bucket_raises_value_error(bad):
    with pytest.raises(ValueError, match="allowed buckets are productive, overhead, idle, wasted"):
        bucket_scope(bad)


# ---- per_prompt_scope ---------------------------------------------------------------------------


def test_per_prompt_scope_is_visible_inside_only():
    assert in_per_prompt_scope() is False
    with per_prompt_scope():
        assert in_per_prompt_scope() is True
        with per_prompt_scope():
            assert in_per_prompt_scope() is True
        assert in_per_prompt_scope() is True
    assert in_per_prompt_scope() is False


# ---- propagation --------------------------------------------------------------------------------


def test_scopes_reach_nested_calls(recorder):
    enable()

    def deep():
        with lens_core.managed_span("step", "deep"):
            return in_per_prompt_scope()

    def middle():
        return deep()

    with iteration_scope(2), bucket_scope("idle"), per_prompt_scope():
        assert middle() is True
    assert attrs_of(recorder, "deep") == {"rl.iteration": 2, "rl.bucket": "idle"}


def test_scopes_reach_coroutines_run_and_tasks_created_inside(recorder):
    enable()

    async def child(name):
        await asyncio.sleep(0)
        with lens_core.managed_span("step", name):
            return in_per_prompt_scope()

    async def main():
        task = asyncio.create_task(child("task"))
        return await child("awaited"), await task

    with iteration_scope(9), bucket_scope("wasted"), per_prompt_scope():
        assert asyncio.run(main()) == (True, True)
    assert attrs_of(recorder, "task") == {"rl.iteration": 9, "rl.bucket": "wasted"}
    assert attrs_of(recorder, "awaited") == {"rl.iteration": 9, "rl.bucket": "wasted"}


def test_scopes_do_not_reach_a_raw_thread(recorder):
    enable()
    seen = []

    def worker():
        with lens_core.managed_span("step", "threaded"):
            seen.append(in_per_prompt_scope())

    with iteration_scope(5), bucket_scope("idle"), per_prompt_scope():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(timeout=10)
    assert seen == [False]
    assert attrs_of(recorder, "threaded") == {"rl.bucket": "productive"}
