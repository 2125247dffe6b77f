"""Processes, with real ones: pickling under both gates and a Ray actor and task defined in
__main__, multiprocessing children (fork and spawn, pools and processes), forks while the
parent exports over gRPC, and who each process says it is. A figure per case."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from trace_files import REPO_ROOT, count_spans, final_losses

from .figures import record_figure
from .processes import child_environ, program, start

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


# ---- pickling -------------------------------------------------------------------------------

_PICKLE_EVERY_PUBLIC_NAME = textwrap.dedent("""
    import pickle, sys
    import lens_core
    failed = []
    for name in lens_core.__all__:
        obj = getattr(lens_core, name)
        try:
            back = pickle.loads(pickle.dumps(obj))
        except Exception as exc:
            failed.append(f"{name}: {exc}")
            continue
        if back is not obj and back != obj:
            failed.append(f"{name}: came back as another object")
    print(lens_core.IMPLEMENTATION, len(lens_core.__all__), failed)
""")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_every_public_object_of_lens_core_pickles_by_reference_under_both_gates(pure):
    """Regression: the compiled gate's managed_span / umbrella_span could not be pickled
    ('cython_function_or_method' object has no attribute 'managed_span')."""
    proc = subprocess.run([sys.executable, "-c", _PICKLE_EVERY_PUBLIC_NAME], env=child_environ(LENS_PURE_PYTHON=pure),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    implementation, count, failed = proc.stdout.split(maxsplit=2)
    assert proc.returncode == 0 and failed.strip() == "[]", proc.stdout + proc.stderr
    assert implementation == ("python" if pure == "1" else "cython")
    record_figure(f"pickle ({implementation} gate)", public_names=int(count), failed=0)


def test_a_traced_function_pickles_and_still_traces_after_unpickling():
    """Pickled by value as Ray pickles code from __main__. Regression: in a fresh venv made by the
    README's test command this failed with "No module named 'cloudpickle'" (Ray vendors its own
    copy; the test extra now installs it)."""
    import lens_core

    @lens_core.trace_fn("g", "traced")
    def double(x):
        return 2 * x

    pickled = pickle.dumps(double) if double.__qualname__.count("<locals>") == 0 else None
    import cloudpickle  # what Ray uses for code defined in __main__

    back = cloudpickle.loads(cloudpickle.dumps(double))
    assert back(21) == 42 and back.__name__ == "double" and back.__wrapped__(2) == 4
    assert pickled is None or pickle.loads(pickled) is double


_POOL_MAIN = textwrap.dedent("""
    import concurrent.futures, copy, json, multiprocessing, pickle, sys
    import lens_core
    from lens_core import SpanRegistry, trace_fn

    SpanRegistry.register("lib", ["g"])


    @trace_fn("g", "work")
    def work(x):
        return 2 * x


    class Worker:
        @trace_fn("g", "method")
        def method(self, x):
            return x + 1


    if __name__ == "__main__":
        out = {"implementation": lens_core.IMPLEMENTATION}
        out["pickled_is_same"] = pickle.loads(pickle.dumps(work)) is work
        out["copies"] = [copy.copy(work)(2), copy.deepcopy(work)(3), pickle.loads(pickle.dumps(Worker.method))(None, 4)]
        for method in ("fork", "spawn"):
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
                out[method] = list(pool.map(work, range(4)))
        print(json.dumps(out))
""")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_traced_function_defined_in_main_runs_in_a_process_pool_under_both_gates(tmp_path, pure):
    """Regression: a compiled trace_fn function could not be pickled for a process pool
    ("it's not the same object as __main__.work"); it worked under the pure gate."""
    script = tmp_path / "pool_main.py"
    script.write_text(_POOL_MAIN)
    proc = subprocess.run([sys.executable, str(script)], env=child_environ(LENS_PURE_PYTHON=pure), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    record_figure(f"trace_fn in a process pool ({out['implementation']} gate)",
                  fork_results=len(out["fork"]), spawn_results=len(out["spawn"]))
    assert out["implementation"] == ("python" if pure == "1" else "cython")
    assert out["pickled_is_same"] and out["copies"] == [4, 6, 5]
    assert out["fork"] == out["spawn"] == [0, 2, 4, 6]


_RAY_MAIN = textwrap.dedent("""
    import json, os, sys
    import ray
    import lens_core
    from lens_core import LensConfig, SpanRegistry, managed_span, trace_fn, umbrella_span

    OUT = sys.argv[1]


    def telemetry(rank):
        # Ray runs this module's classes from pickles, not by importing __main__: register here
        # (a library registers when it is imported, which Ray workers do).
        if "raymain" not in SpanRegistry.namespaces():
            SpanRegistry.register("raymain", ["g", "u"], umbrellas=["u"])
        from otel_bridge.contrib.ray import init_actor_telemetry
        return init_actor_telemetry(LensConfig(enabled=True, exporter="file", file_dir=OUT, span_groups="all",
                                               metrics_enabled=False), rank=rank, world_size=3)


    @ray.remote
    class Worker:  # defined in __main__: Ray ships it by value
        def __init__(self):
            self.handle = telemetry(1)

        @trace_fn("g", "actor.traced")
        def traced(self, x):
            return x + 1

        def work(self):
            with umbrella_span("u", "actor.umbrella"):
                with managed_span("g", "actor.span", k=1):
                    pass
            return self.traced(1)

        def flush(self):
            return self.handle.shutdown()


    @ray.remote
    def task():
        handle = telemetry(2)
        assert lens_core.is_span_group_enabled("g")
        with managed_span("g", "task.span"):
            pass
        return handle.shutdown()


    if __name__ == "__main__":
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            worker = Worker.remote()
            result = ray.get(worker.work.remote(), timeout=120)
            flushed = ray.get(worker.flush.remote(), timeout=60)
            task_ok = ray.get(task.remote(), timeout=120)
        finally:
            ray.shutdown()
        print(json.dumps({"result": result, "flushed": flushed, "task": task_ok}))
""")


@pytest.mark.engines
def test_a_ray_actor_and_task_defined_in_main_use_lens_spans(tmp_path):
    """Regression: an actor defined in a script (pickled by value) that called managed_span
    died on the worker with "failed to import" under the compiled gate."""
    pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")
    script = tmp_path / "ray_main.py"
    script.write_text(_RAY_MAIN)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], env=child_environ(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"result": 2, "flushed": True, "task": True}
    names = {name: count_spans(tmp_path / "out", name) for name in
             ("actor.umbrella", "actor.span", "actor.traced", "task.span")}
    record_figure("ray __main__ actor and task", **{k.replace(".", "_"): v for k, v in names.items()})
    assert names == {"actor.umbrella": 1, "actor.span": 1, "actor.traced": 1, "task.span": 1}


# ---- multiprocessing ---------------------------------------------------------------------

@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("mode", ["pool-with", "pool-close", "process"])
def test_multiprocessing_children_deliver_every_span(tmp_path, method, mode, recorder):
    """Regression: children exit through os._exit or SIGTERM, so no exit hook ran: of 2,000
    spans, fork Pool delivered 512 or 0, fork Process 0, spawn `with Pool` 0."""
    out = tmp_path / "out"
    proc = start("mp_children.py", method, mode, LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="mp",
                 LENS_RECORDER=recorder)
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0 and stdout.strip() == "True", stderr[-3000:]
    delivered = count_spans(out, "child")
    losses = final_losses(out)
    lost = sum(v["lens.spans.dropped"] + v["lens.spans.failed"] + v["lens.spans.unended"] for v in losses.values())
    record_figure(f"multiprocessing {method} {mode} ({recorder})", created=2000, delivered=delivered,
                  reported_lost=lost, processes=len(losses))
    assert delivered == 2000 and lost == 0


# ---- gRPC and fork -------------------------------------------------------------------------

@pytest.mark.parametrize("fork_support", ["", "true", "0"])
def test_forked_children_export_over_grpc_without_touching_the_parents_channel(otlp_receiver, fork_support,
                                                                              recorder, tmp_path):
    """Regression: without GRPC_ENABLE_FORK_SUPPORT a child's shutdown broke the parent's
    exporter (it closed the channel it inherited); with it set, 4 of 8 children deadlocked.
    Each child builds its own exporter; 5 runs x 10 children, each run ending with the
    parent still exporting. Regression: with GRPC_ENABLE_FORK_SUPPORT=0 (gRPC's core without
    fork handlers) 16 of 20 children segfaulted building their channel; such a child now
    spools its spans (its shutdown says they were not sent by it: exit 3 here) and the
    parent delivers them."""
    env = {"LENS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.grpc_endpoint,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "LENS_RECORDER": recorder, "LENS_SPOOL_DIR": tmp_path / "spool"}
    if fork_support:
        env["GRPC_ENABLE_FORK_SUPPORT"] = fork_support
    codes, children, delivered, parent_ok = [], 0, 0, True
    for _ in range(5):
        otlp_receiver.clear()
        proc = start("grpc_fork.py", 10, **env)
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-3000:]
        *results, parent = stdout.split()
        codes += results
        children += len(results)
        parent_ok = parent_ok and parent == "True"
        delivered += sum(1 for s in otlp_receiver.spans() if s.name == "child")
    support = {"": "unset", "true": "on", "0": "off"}[fork_support]
    record_figure(f"grpc fork, GRPC_ENABLE_FORK_SUPPORT {support} ({recorder})", forks=children,
                  deadlocked=codes.count("hung"), crashed=sum(c.startswith("-") for c in codes),
                  child_spans_delivered=delivered, child_spans_created=children * 50, parent_ok=parent_ok)
    assert codes == ["3" if fork_support == "0" else "0"] * children and parent_ok
    assert delivered == children * 50


# ---- identity ------------------------------------------------------------------------------

def test_every_process_has_its_own_instance_id_and_service_version_is_the_applications():
    """Regression: the Ray driver and a rank-0 actor both got service.instance.id
    <run>-rank0; service.version was Lens's own version."""
    seen = []
    for env in ({}, {"OTEL_SERVICE_VERSION": "2.5.1"}):
        proc = subprocess.run([sys.executable, program("identity.py"), "run7"], env=child_environ(**env),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        seen.append(json.loads(proc.stdout))
    first, second = seen
    assert first["service.instance.id"] != second["service.instance.id"]
    assert first["service.instance.id"].startswith("run7-rank0-")
    assert first["service.version"] is None and second["service.version"] == "2.5.1"
    assert first["telemetry.distro.name"] == "lens"
    record_figure("identity", processes=2, distinct_instance_ids=len({s["service.instance.id"] for s in seen}))


def test_a_forked_child_names_its_own_pid_and_instance(tmp_path, recorder):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.path.dirname(program("common.py"))!r})
        from common import setup, span
        handle = setup()
        with span("g", "parent"): pass
        pid = os.fork()
        if pid == 0:
            with span("g", "child"): pass
            os._exit(0 if handle.shutdown() else 3)
        os.waitpid(pid, 0)
        handle.shutdown()
    """)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", script], env=child_environ(
        LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="fk", LENS_RECORDER=recorder),
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from trace_files import read_spans

    spans = {s["name"]: s["resource"] for s in read_spans(out)}
    assert spans["parent"]["process.pid"] != spans["child"]["process.pid"]
    assert spans["parent"]["service.instance.id"] != spans["child"]["service.instance.id"]
    assert f"-{spans['child']['process.pid']}-" in spans["child"]["service.instance.id"]


# ---- a rank killed mid-run --------------------------------------------------------------------

def test_a_killed_rank_is_named_by_the_report_and_the_ranks_that_shut_down_are_not(tmp_path, recorder):
    """SIGKILL leaves no loss record behind: what the killed rank still held is counted nowhere.
    Its output lacks the final loss record every rank writes at shutdown, and the report names it."""
    pytest.importorskip("duckdb", reason="needs DuckDB: pip install 'lens-telemetry[report]'")
    import lens_report

    out = tmp_path / "traces"
    env = dict(LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="job", LENS_RECORDER=recorder)
    ranks = 6
    killed = {2, 5}
    procs = {rank: start("rank_steps.py", 5, 40, "hang" if rank in killed else "exit", FAULT_RANK=rank,
                          FAULT_WORLD_SIZE=ranks, **env)
             for rank in range(ranks)}
    for rank, proc in procs.items():
        if rank in killed:
            assert proc.stdout.readline().strip() == "flushed", proc.stderr.read()
            proc.kill()
        out_text, err = proc.communicate(timeout=60)
        if rank not in killed:
            assert (proc.returncode, out_text.strip()) == (0, "True"), err
    report = lens_report.report(out)
    unfinished = {u.rank: u for u in report.unfinished}
    assert sorted(unfinished) == [f"rank {r}" for r in sorted(killed)]
    assert all(u.spans == 5 * 40 for u in unfinished.values())  # what they flushed before the kill was read
    assert len(report.ranks) == ranks and report.span_count == ranks * 5 * 40
    record_figure(f"killed ranks named by the report ({recorder})", ranks=ranks, killed=len(killed),
                  named=len(unfinished))
