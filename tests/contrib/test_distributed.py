"""broadcast_trace_context over real gloo ranks joins every rank's spans into rank 0's trace; linked spans."""

import json
import subprocess
import sys

import pytest

import lens_core
from contrib_helpers import HERE, ROOT, child_env, free_port, read_run, run_python
from otel_bridge.distributed import MAX_CARRIER_BYTES, broadcast_trace_context, create_linked_span

RANK_TIMEOUT_S = 90


def _run_ranks(scenario, world_size, file_dir, run_id):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(HERE / "dist_worker.py"), scenario, str(rank),
                               str(world_size), str(port), str(file_dir), run_id],
                              cwd=ROOT, env=child_env(GLOO_SOCKET_IFNAME="lo"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(world_size)]
    results = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=RANK_TIMEOUT_S)
            assert proc.returncode == 0, stderr[-3000:]
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return sorted(results, key=lambda r: r["rank"])


def _by_name(spans):
    return {span.name: span for span in spans}


@pytest.mark.engines
@pytest.mark.parametrize("world_size", [2, 4])
def test_every_rank_receives_rank0_carrier_and_its_span_joins_rank0_trace(tmp_path, world_size):
    results = _run_ranks("basic", world_size, tmp_path, "dist")
    root = results[0]
    assert all(r["shutdown_ok"] for r in results)
    for result in results:
        assert result["carrier"] == root["carrier"]
        assert root["root_trace_id"] in result["carrier"]["traceparent"]

    spans = _by_name(read_run(tmp_path, "dist"))
    root_span = spans["rank0.root"]
    assert root_span.span_id == root["root_span_id"]
    assert root_span.parent_span_id is None
    for rank in range(world_size):
        work = spans[f"rank{rank}.work"]
        assert work.trace_id == root_span.trace_id
        assert work.parent_span_id == root_span.span_id
        assert work.resource.get(lens_core.semconv.NV_DL_RANK) == rank
    assert len({s.trace_id for s in spans.values()}) == 1


@pytest.mark.engines
def test_oversized_malformed_and_nonzero_source_carriers_and_linked_spans(tmp_path):
    results = _run_ranks("extras", 2, tmp_path, "extras")
    for result in results:
        assert result["oversized"] == {}
        assert result["malformed"] == {}
        assert result["from_last"] == results[-1]["own_carrier"]

    spans = _by_name(read_run(tmp_path, "extras"))
    root = spans["rank0.root"]
    for rank, result in enumerate(results):
        stage = spans[f"rank{rank}.stage"]
        assert stage.span_id == result["linked_span_id"]
        # Linked, not parented: a root span of its own trace with one link to rank 0's span.
        assert stage.parent_span_id is None
        assert stage.trace_id != root.trace_id
        assert stage.links == ((root.trace_id, root.span_id),)
        assert stage.attributes["stage"] == rank
        # With no carrier given, the pipeline carrier is the link target.
        assert spans[f"rank{rank}.pp_stage"].links == ((root.trace_id, root.span_id),)


def test_broadcast_returns_none_when_torch_distributed_is_not_initialised():
    import torch.distributed as dist

    assert not dist.is_initialized()
    assert broadcast_trace_context() is None


def test_linked_span_is_off_without_a_backend():
    with create_linked_span("x", remote_carrier={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) as span:
        assert span is None


def test_linked_span_links_a_remote_context_object_and_has_no_link_without_one(active_telemetry, tmp_path):
    from otel_bridge import extract_context

    carrier = {"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"}
    with lens_core.span_cm("parent") as parent:
        with create_linked_span("from_context", remote_context=extract_context(carrier)):
            pass
        with create_linked_span("no_remote", remote_carrier={}):
            pass
    active_telemetry.shutdown()
    spans = _by_name(read_run(tmp_path, "run"))
    assert spans["from_context"].parent_span_id == format(parent.get_span_context().span_id, "016x")
    assert spans["from_context"].links == (("ab" * 16, "cd" * 8),)
    assert spans["no_remote"].links == ()


def test_broadcast_returns_none_and_imports_cleanly_without_torch():
    code = ("import sys\nsys.modules['torch'] = None\nsys.modules['torch.distributed'] = None\n"
            "import otel_bridge.distributed as d\nassert d.broadcast_trace_context() is None\n"
            "assert 'opentelemetry' not in sys.modules\n")
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr



@pytest.mark.engines
def test_a_carrier_of_exactly_the_bound_arrives_and_one_byte_more_arrives_empty():
    import json

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        base = {"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", "tracestate": ""}
        padding = MAX_CARRIER_BYTES - len(json.dumps(base, separators=(",", ":")))
        exact = dict(base, tracestate="k=" + "v" * (padding - 2))
        assert broadcast_trace_context(carrier=exact) == exact
        assert broadcast_trace_context(carrier=dict(exact, tracestate=exact["tracestate"] + "v")) == {}
        assert broadcast_trace_context(carrier={"traceparent": base["traceparent"], "n": 1}) == {}
        assert broadcast_trace_context() == {}  # nothing is recording here
    finally:
        dist.destroy_process_group()
    assert broadcast_trace_context() is None
