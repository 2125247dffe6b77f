"""Scopes reach nested calls and coroutines started inside them, but not raw threads."""

import asyncio
import threading

from lens_core import Bucket, bucket_scope, iteration_scope, managed_span, per_prompt_scope
from lens_core.catalogs.rl import RLSpanGroup as G
from lens_core.scopes import in_per_prompt_scope

ITER = "rl.iteration"
BUCKET = "rl.bucket"


def _leaf(name):
    with managed_span(G.GENERATION, name):
        pass


def _nested(depth, name):
    if depth:
        _nested(depth - 1, name)
    else:
        _leaf(name)


def test_iteration_and_bucket_scopes_reach_deeply_nested_calls(traced):
    with iteration_scope(7), bucket_scope(Bucket.OVERHEAD):
        _nested(5, "deep")
    assert traced.named("deep").attributes == {ITER: 7, BUCKET: Bucket.OVERHEAD}


def test_scopes_reach_a_coroutine_run_with_asyncio_run_inside_them(traced):
    async def rollout():
        await asyncio.sleep(0)
        _leaf("in-coroutine")

    with iteration_scope(3), bucket_scope(Bucket.OVERHEAD):
        asyncio.run(rollout())
    assert traced.named("in-coroutine").attributes == {ITER: 3, BUCKET: Bucket.OVERHEAD}


def test_scopes_reach_tasks_created_inside_them_and_not_tasks_created_outside(traced):
    async def leaf_after(name, started, release):
        started.set()
        await release.wait()
        _leaf(name)

    async def main():
        release = asyncio.Event()
        outside_started = asyncio.Event()
        outside = asyncio.create_task(leaf_after("task-outside", outside_started, release))
        await outside_started.wait()
        with iteration_scope(4), bucket_scope(Bucket.OVERHEAD), per_prompt_scope():
            inside_started = asyncio.Event()
            inside = asyncio.create_task(leaf_after("task-inside", inside_started, release))
            await inside_started.wait()
        release.set()  # both run their span after the scope block has exited
        await asyncio.gather(inside, outside)

    asyncio.run(main())
    assert traced.named("task-inside").attributes == {ITER: 4, BUCKET: Bucket.OVERHEAD}
    assert traced.named("task-outside").attributes == {BUCKET: Bucket.PRODUCTIVE}


def test_a_raw_thread_inherits_no_scope(traced):
    seen = {}

    def worker():
        seen["per_prompt"] = in_per_prompt_scope()
        _leaf("in-thread")

    with iteration_scope(9), bucket_scope(Bucket.OVERHEAD), per_prompt_scope():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        _leaf("in-driver")
    assert traced.named("in-thread").attributes == {BUCKET: Bucket.PRODUCTIVE}
    assert seen["per_prompt"] is False
    assert traced.named("in-driver").attributes == {ITER: 9, BUCKET: Bucket.OVERHEAD}


def test_a_scope_entered_inside_a_thread_applies_there_only(traced):
    def worker():
        with iteration_scope(2):
            _leaf("thread-scoped")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    _leaf("driver-unscoped")
    assert traced.named("thread-scoped").attributes[ITER] == 2
    assert ITER not in traced.named("driver-unscoped").attributes


def test_scopes_are_restored_when_the_block_exits(traced):
    with iteration_scope(1):
        with iteration_scope(2), bucket_scope(Bucket.WASTED):
            _leaf("inner")
        _leaf("outer")
    _leaf("none")
    assert traced.named("inner").attributes == {ITER: 2, BUCKET: Bucket.WASTED}
    assert traced.named("outer").attributes == {ITER: 1, BUCKET: Bucket.PRODUCTIVE}
    assert traced.named("none").attributes == {BUCKET: Bucket.PRODUCTIVE}
