"""A real local Ray: the carrier kwarg joins sync, async, generator and async-generator actor spans to the driver's trace."""

import logging
import os

import pytest

import lens_core
from contrib_helpers import HERE, ROOT, read_run, run_python, telemetry_config
from otel_bridge import setup_telemetry
from otel_bridge.contrib.ray import (
    TRACE_CARRIER_KWARG,
    accepts_trace_context,
    dispatch_with_trace_context,
    ray_cluster_source,
)

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")

GET_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module; workers import this worktree and the actor module."""
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


@pytest.mark.engines
def test_actor_spans_of_every_method_kind_join_the_driver_trace(local_ray, tmp_path, caplog):
    from ray_actors import TracedActor

    handle = setup_telemetry(telemetry_config(tmp_path, "ray"), rank=0, world_size=2, local_rank=0,
                             _allow_reinit=True)
    actor = ray.remote(TracedActor).remote(str(tmp_path), "ray")
    try:
        with lens_core.span_cm("driver.root") as root:
            driver_trace = format(root.get_span_context().trace_id, "032x")
            sync_value, sync_ids = ray.get(dispatch_with_trace_context(actor.sync_work, 1),
                                           timeout=GET_TIMEOUT_S)
            async_value, async_ids = ray.get(dispatch_with_trace_context(actor.async_work, value=2),
                                             timeout=GET_TIMEOUT_S)
            generated = [ray.get(ref, timeout=GET_TIMEOUT_S)
                         for ref in dispatch_with_trace_context(actor.gen_work, 2)]
            agenerated = [ray.get(ref, timeout=GET_TIMEOUT_S)
                          for ref in dispatch_with_trace_context(actor.agen_work, 2)]
            with caplog.at_level(logging.WARNING, logger="lens_core"):
                fallback = [ray.get(dispatch_with_trace_context(actor.undecorated, n), timeout=GET_TIMEOUT_S)
                            for n in (5, 6)]
            # A real argument error is raised, not mistaken for a method without the keyword.
            with pytest.raises(TypeError, match="value"):
                dispatch_with_trace_context(actor.sync_work)
        assert ray.get(actor.flush.remote(), timeout=GET_TIMEOUT_S) is True
    finally:
        ray.kill(actor)
    assert handle.shutdown()

    assert (sync_value, async_value) == (1, 2)
    assert [index for index, _ in generated] == [0, 1]
    assert [index for index, _ in agenerated] == [0, 1]
    # Inside the actor the current span is the actor's own, in the driver's trace.
    for ids in [sync_ids, async_ids] + [i for _, i in generated + agenerated]:
        assert ids.split("-")[1] == driver_trace
    # The undecorated method warned once, ran without the carrier and returned normally.
    assert [value for value, _ in fallback] == [5, 6]
    warnings = [r.getMessage() for r in caplog.records if "undecorated" in r.getMessage()]
    assert len(warnings) == 1 and "@accepts_trace_context" in warnings[0]

    spans = {span.name: span for span in read_run(tmp_path, "ray")}
    driver = spans["driver.root"]
    actor_names = ["actor.sync", "actor.async", "actor.gen.0", "actor.gen.1", "actor.agen.0", "actor.agen.1"]
    for name in actor_names:
        span = spans[name]
        assert span.trace_id == driver.trace_id, name
        assert span.parent_span_id == driver.span_id, name
        assert span.resource.get(lens_core.semconv.NV_DL_RANK) == 1
    # Without the carrier, the undecorated method's spans start their own traces.
    assert spans["actor.undecorated"].trace_id != driver.trace_id
    assert spans["actor.undecorated"].parent_span_id is None


# ---- the decorator without Ray ------------------------------------------------------------

CARRIER = {"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"}


def _current_parent(recorder):
    with lens_core.span_cm("probe") as span:
        return format(span.trace_id, "032x"), format(span.parent_id or 0, "016x")


def test_the_wrapper_signature_advertises_a_keyword_only_trace_carrier():
    import inspect

    @accepts_trace_context
    def method(self, a, *rest, b=1, **extra):
        return a

    parameters = inspect.signature(method).parameters
    assert list(parameters) == ["self", "a", "rest", "b", TRACE_CARRIER_KWARG, "extra"]
    assert parameters[TRACE_CARRIER_KWARG].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters[TRACE_CARRIER_KWARG].default is None
    assert method.__name__ == "method"


def test_a_function_that_already_takes_trace_carrier_is_refused():
    with pytest.raises(TypeError, match=TRACE_CARRIER_KWARG):
        @accepts_trace_context
        def method(self, trace_carrier=None):
            pass


def test_sync_and_coroutine_bodies_run_under_the_carrier_and_without_it_unchanged(recorder):
    import asyncio

    @accepts_trace_context
    def sync(value):
        return value, _current_parent(recorder)

    @accepts_trace_context
    async def coro(value):
        await asyncio.sleep(0)
        return value, _current_parent(recorder)

    remote = ("ab" * 16, "cd" * 8)
    assert sync(1, trace_carrier=CARRIER) == (1, remote)
    assert asyncio.run(coro(2, trace_carrier=CARRIER)) == (2, remote)
    assert sync(3)[1] != remote and sync(4, trace_carrier={})[1] != remote


def test_generators_hold_the_remote_context_only_while_running(recorder):
    import asyncio

    remote = ("ab" * 16, "cd" * 8)

    @accepts_trace_context
    def gen():
        yield _current_parent(recorder)
        yield _current_parent(recorder)

    @accepts_trace_context
    async def agen():
        yield _current_parent(recorder)
        await asyncio.sleep(0)
        yield _current_parent(recorder)

    seen, between = [], []
    for item in gen(trace_carrier=CARRIER):
        seen.append(item)
        between.append(lens_core.current_trace_carrier())

    async def consume():
        async for item in agen(trace_carrier=CARRIER):
            seen.append(item)
            between.append(lens_core.current_trace_carrier())

    asyncio.run(consume())
    assert seen == [remote] * 4
    assert between == [{}] * 4  # the consumer never runs inside the remote context


def test_dispatch_without_ray_warns_once_and_calls_the_method_without_a_carrier():
    """Regression: dispatch_with_trace_context raised ImportError without the ray extra."""
    code = ("import logging, sys\nsys.modules['ray'] = None\n"
            "records = []\n"
            "class H(logging.Handler):\n    def emit(self, r): records.append(r.getMessage())\n"
            "logging.getLogger('lens_core').addHandler(H())\n"
            "import otel_bridge.contrib.ray as r\n"
            "class Method:\n    def remote(self, *a, **k): return (a, k)\n"
            "assert r.dispatch_with_trace_context(Method(), 1) == ((1,), {})  # telemetry off\n"
            "assert not [n for n in sys.modules if n.startswith('opentelemetry')]\n"
            "assert records == []\n"
            "import otel_bridge\nfrom lens_core import LensConfig\n"
            "otel_bridge.setup_telemetry(LensConfig(enabled=True, exporter='none'))\n"
            "assert r.dispatch_with_trace_context(Method(), 2) == ((2,), {})\n"
            "assert r.dispatch_with_trace_context(Method(), 3) == ((3,), {})\n"
            "assert len([m for m in records if 'lens-telemetry[ray]' in m]) == 1, records\n")
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.engines
def test_cluster_source_tells_a_booted_cluster_from_one_joined(local_ray):
    """After ray.init the source is what happened: this process's ray.init booted the fixture's
    cluster (started_local, whatever RAY_ADDRESS says now); a second driver that connects to it
    by its address joined one already running (attached_external, reused_local when it says so)."""
    assert ray_cluster_source() == "started_local"
    assert ray_cluster_source("10.0.0.7:6379", reused=True) == "started_local"
    address = local_ray.get_runtime_context().gcs_address
    proc = run_python(
        "import ray\n"
        "from otel_bridge.contrib.ray import ray_cluster_source\n"
        f"ray.init(address={address!r}, include_dashboard=False, log_to_driver=False)\n"
        "print(ray_cluster_source(), ray_cluster_source(reused=True))\n"
        "ray.shutdown()\n"
        "print(ray_cluster_source('local'))\n", timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split()[-3:] == ["attached_external", "reused_local", "started_local"]
