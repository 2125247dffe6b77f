"""setup_telemetry: signature, rank and run id, quiet ranks, the one-setup guard, clean
failure, the Resource, providers, id generation, exporter selection, and a real OTLP
receiver reached through setup_telemetry."""

import logging
import os
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry import propagate  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import active_handle, setup_telemetry
from otel_bridge.sdk import providers as providers_module  # noqa: E402
from otel_bridge.sdk.backend import OTelBackend  # noqa: E402
from otel_bridge.sdk.identity import process_tag  # noqa: E402
from otel_bridge.handle import resolve_rank  # noqa: E402
from otel_bridge.sdk.providers import build_noop_providers  # noqa: E402
from trace_files import read_spans, run_script  # noqa: E402


def _without_thread(attributes):
    """Span attributes less the thread.id / thread.name every exported span carries."""
    return {k: v for k, v in dict(attributes).items() if not k.startswith("thread.")}

ON = LensConfig(enabled=True, exporter="none", span_groups="all")


def _user_spans(exporter):
    """What an in-memory exporter got, less the process's loss record."""
    return [s for s in exporter.get_finished_spans() if s.name != "lens.telemetry.loss"]


def _register():
    SpanRegistry.register("rlx", ["step", "gen"], buckets={"gen": "productive"}, umbrellas=["step"])


# -- signature, rank, run id -------------------------------------------------------------


def test_a_positional_argument_after_config_raises_type_error():
    with pytest.raises(TypeError):
        setup_telemetry(ON, {"team": "rl"})


def test_a_non_config_first_argument_raises_type_error():
    with pytest.raises(TypeError, match="LensConfig"):
        setup_telemetry({"enabled": True})


@pytest.mark.parametrize(("environ", "expected"), [
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}, (3, 8, 1)),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "2"}, (5, 6, 2)),
    ({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, (1, 2, 0)),
    ({}, (0, 1, 0)),
])
def test_rank_comes_from_torch_variables_then_slurm_then_defaults(environ, expected):
    assert resolve_rank(environ=environ) == expected


def test_explicit_rank_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    handle = setup_telemetry(ON, rank=2, world_size=4, local_rank=2, span_exporter=InMemorySpanExporter())
    assert (handle.rank, handle.world_size, handle.local_rank) == (2, 4, 2)


def test_rank_outside_world_size_raises_value_error():
    with pytest.raises(ValueError, match="outside world size"):
        setup_telemetry(LensConfig(), rank=4, world_size=4)


def test_run_id_comes_from_config_then_slurm_job_id_then_is_fresh(monkeypatch):
    assert setup_telemetry(LensConfig(run_id="cfg")).run_id == "cfg"
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert setup_telemetry(LensConfig(run_id="cfg")).run_id == "cfg"
    assert setup_telemetry(LensConfig()).run_id == "4242"
    monkeypatch.delenv("SLURM_JOB_ID")
    first, second = setup_telemetry(LensConfig()).run_id, setup_telemetry(LensConfig()).run_id
    assert first and second and first != second


def test_setup_does_not_mutate_the_config():
    config = LensConfig(enabled=True, exporter="none", span_groups="gen")
    before = repr(config)
    setup_telemetry(config, span_exporter=InMemorySpanExporter()).shutdown()
    assert repr(config) == before and config.run_id is None


# -- quiet and exporting ranks -----------------------------------------------------------


@pytest.mark.parametrize("config, rank, world", [
    (LensConfig(enabled=False, span_groups="all"), 0, 1),
    (LensConfig(enabled=True, span_groups="all", export_ranks="last"), 0, 4),
])
def test_a_disabled_config_or_quiet_rank_builds_nothing_and_leaves_every_group_off(config, rank, world):
    _register()
    handle = setup_telemetry(config, rank=rank, world_size=world)
    assert not handle.is_exporting and handle.providers is None
    assert lens_core.installed_backend() is None and active_handle() is None
    assert not lens_core.is_span_group_enabled("gen")
    assert handle.shutdown() is True


@pytest.mark.parametrize("config_ranks, strategy, exporting", [
    ("all", lambda rank, world_size, local_rank: False, False),
    ("last", lambda rank, world_size, local_rank: rank == 0, True),
    ("first", "last", False),
])
def test_an_export_strategy_passed_to_setup_wins_over_the_config(config_ranks, strategy, exporting):
    config = LensConfig(enabled=True, exporter="none", export_ranks=config_ranks)
    handle = setup_telemetry(config, rank=0, world_size=4, export_strategy=strategy)
    assert handle.is_exporting is exporting
    assert (active_handle() is handle) is exporting


def test_an_export_strategy_gets_rank_world_size_and_local_rank_and_is_not_asked_when_disabled():
    calls = []

    def strategy(rank, world_size, local_rank):
        calls.append((rank, world_size, local_rank))
        return False

    setup_telemetry(LensConfig(enabled=True), rank=5, world_size=8, local_rank=1, export_strategy=strategy)
    setup_telemetry(LensConfig(enabled=False), rank=5, world_size=8, local_rank=1, export_strategy=strategy)
    assert calls == [(5, 8, 1)]


def test_a_registered_strategy_named_in_lens_export_ranks_selects_the_exporting_ranks():
    lens_core.register_export_strategy("odd", lambda rank, world_size, local_rank: rank % 2 == 1)
    try:
        config = LensConfig.from_env(environ={"LENS_ENABLED": "1", "LENS_EXPORTER": "none",
                                              "LENS_EXPORT_RANKS": "odd"})
        assert not setup_telemetry(config, rank=0, world_size=2).is_exporting
        assert setup_telemetry(config, rank=1, world_size=2).is_exporting
    finally:
        lens_core.unregister_export_strategy("odd")


def _rank_warnings(caplog):
    return [m for m in caplog.messages if "outside world size" in m]


@pytest.mark.parametrize("ranks, world, message", [
    ("8,16", 8, "export_ranks=8,16 names rank(s) 8,16 outside world size 8; no rank is selected"),
    ("0,3,9", 4, "export_ranks=0,3,9 names rank(s) 9 outside world size 4; they are ignored"),
])
def test_a_rank_list_naming_ranks_outside_the_world_is_warned_about_on_rank_0(caplog, ranks, world, message):
    config = LensConfig(enabled=True, exporter="none", export_ranks=ranks)
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        setup_telemetry(config, rank=1, world_size=world)
        assert _rank_warnings(caplog) == []  # every rank sees the same list: rank 0 alone says so
        setup_telemetry(config, rank=0, world_size=world, _allow_reinit=True)
    assert _rank_warnings(caplog) == [f"lens telemetry: {message}"]


def test_a_rank_list_inside_the_world_is_not_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        setup_telemetry(LensConfig(enabled=True, exporter="none", export_ranks="0,3"), rank=0, world_size=4)
    assert _rank_warnings(caplog) == []


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_an_exporting_rank_installs_its_recorder_as_the_backend_and_applies_the_spec(recorder):
    _register()
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="gen", recorder=recorder),
                             span_exporter=InMemorySpanExporter())
    assert handle.is_exporting and active_handle() is handle
    if recorder == "native":
        assert lens_core.installed_backend() is handle.providers.recorder is not None
    else:
        assert isinstance(lens_core.installed_backend(), OTelBackend) and handle.providers.recorder is None
    assert lens_core.enabled_span_groups() == {"gen"}
    handle.shutdown()
    assert lens_core.installed_backend() is None and active_handle() is None


def test_a_second_enabled_setup_raises_runtime_error_explaining_why():
    first = setup_telemetry(ON, span_exporter=InMemorySpanExporter())
    with pytest.raises(RuntimeError, match="already called.*_allow_reinit"):
        setup_telemetry(ON, span_exporter=InMemorySpanExporter())
    assert active_handle() is first


@pytest.mark.parametrize("later", [
    dict(config=LensConfig()),
    dict(config=LensConfig(enabled=True, export_ranks="last"), rank=0, world_size=2),
], ids=["disabled", "quiet rank"])
def test_a_disabled_setup_after_an_enabled_one_turns_every_group_off(later):
    """Regression (issue 41): a disabled (or quiet-rank) setup_telemetry after an enabled one
    left the first handle exporting with every group on; the seed turns every group off
    (set_enabled_span_groups(frozenset())) and the docstring said so. The first handle stays
    active and exports what it recorded before."""
    _register()
    exporter = InMemorySpanExporter()
    first = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="all", metrics_enabled=False),
                            span_exporter=exporter)
    with managed_span("gen", "before"):
        pass
    assert lens_core.is_span_group_enabled("gen")
    assert not setup_telemetry(**later).is_exporting
    assert active_handle() is first and first.is_exporting
    assert lens_core.enabled_span_groups() == frozenset() and not lens_core.is_span_group_enabled("gen")
    with managed_span("gen", "after") as span:
        assert span is None
    assert first.shutdown() is True
    assert [s.name for s in exporter.get_finished_spans() if s.name != "lens.telemetry.loss"] == ["before"]


def test_allow_reinit_replaces_a_still_active_setup_without_deadlocking():
    """Regression: setup_telemetry held its non-reentrant lock while shutting the previous
    handle down, and shutdown takes the same lock, so _allow_reinit deadlocked."""
    script = textwrap.dedent("""
        from lens_core import LensConfig
        from otel_bridge import active_handle, setup_telemetry
        config = LensConfig(enabled=True, exporter="none")
        first = setup_telemetry(config)
        second = setup_telemetry(config, _allow_reinit=True)
        assert active_handle() is second and first.closed
        print("ok")
    """)
    result = run_script(script, timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _assert_nothing_installed():
    assert lens_core.installed_backend() is None
    assert active_handle() is None
    assert lens_core.enabled_span_groups() == frozenset()
    # the guard is unset: a fresh setup succeeds without _allow_reinit
    setup_telemetry(ON, span_exporter=InMemorySpanExporter()).shutdown()


def test_an_exporter_that_fails_to_build_leaves_nothing_installed(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="http/json"):
        setup_telemetry(LensConfig(enabled=True, exporter="otlp"))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    _assert_nothing_installed()


def test_a_resource_attribute_that_breaks_the_resource_leaves_nothing_installed():
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no text form")

    with pytest.raises(RuntimeError, match="no text form"):
        setup_telemetry(ON, resource_attributes={"bad": Unprintable()}, span_exporter=InMemorySpanExporter())
    _assert_nothing_installed()


def test_a_meter_provider_that_fails_to_build_shuts_down_the_tracer_provider(monkeypatch):
    exporter = InMemorySpanExporter()

    def fail(*args, **kwargs):
        raise OSError("meter provider unavailable")

    monkeypatch.setattr(providers_module, "_build_meter_provider", fail)
    with pytest.raises(OSError, match="meter provider unavailable"):
        setup_telemetry(ON, span_exporter=exporter)
    assert exporter._stopped  # the tracer provider built first was shut down
    monkeypatch.undo()
    _assert_nothing_installed()


# -- resource ------------------------------------------------------------------------------


def test_resource_has_service_run_rank_user_and_host_attributes(monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,team=env")
    config = LensConfig(enabled=True, exporter="none", service_name="trainer", run_id="r1", user="ada")
    handle = setup_telemetry(config, rank=3, world_size=8, local_rank=1, resource_attributes={"team": "caller"})
    attrs = handle.providers.resource.attributes
    assert attrs["service.name"] == "trainer"
    assert "service.version" not in attrs  # the application's, not Lens's
    assert attrs["telemetry.distro.name"] == "lens"
    assert attrs["telemetry.distro.version"] == providers_module.lens_version()
    assert attrs["service.instance.id"] == f"r1-rank3-{attrs['host.name']}-{os.getpid()}-{process_tag()}"
    assert attrs["nemo.run.id"] == "r1"
    assert (attrs["nv.dl.rank"], attrs["nv.dl.world_size"], attrs["nv.dl.local_rank"]) == (3, 8, 1)
    assert attrs["nv.dl.user"] == "ada"
    assert attrs["host.name"] and attrs["process.pid"] > 0
    assert attrs["deployment.environment"] == "test"
    assert attrs["team"] == "caller"  # the caller wins over OTEL_RESOURCE_ATTRIBUTES


def test_a_caller_service_instance_id_is_kept():
    handle = setup_telemetry(ON, resource_attributes={"service.instance.id": "mine"})
    assert handle.providers.resource.attributes["service.instance.id"] == "mine"


# -- providers -----------------------------------------------------------------------------


def test_logger_provider_exists_only_when_logs_are_enabled():
    handle = setup_telemetry(ON)
    assert handle.providers.logger_provider is None
    handle.shutdown()
    assert setup_telemetry(ON.replace(logs_enabled=True)).providers.logger_provider is not None


def test_setup_installs_the_w3c_trace_context_and_baggage_propagator():
    setup_telemetry(ON)
    assert {"traceparent", "tracestate", "baggage"} <= set(propagate.get_global_textmap().fields)


def test_noop_providers_hand_out_non_recording_spans():
    noop = build_noop_providers()
    assert noop.noop
    span = noop.tracer_provider.get_tracer("lens").start_span("x")
    assert not span.is_recording()
    noop.meter_provider.get_meter("lens").create_counter("c").add(1)


def test_metrics_are_exported_every_metric_export_interval(tmp_path):
    import time

    config = LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="m",
                        metric_export_interval_ms=50)
    handle = setup_telemetry(config)
    handle.meter.create_counter("lens.test.ticks").add(1)
    deadline = time.monotonic() + 10
    while not list(tmp_path.rglob("metrics-*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.rglob("metrics-*.jsonl")), "no periodic export before shutdown"


def test_exported_spans_use_the_lens_scope_and_start_with_their_attributes():
    _register()
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="gen"), span_exporter=exporter)
    with lens_core.span_attributes(run="r"):
        with managed_span("gen", "generate", n=2):
            pass
    handle.shutdown()
    (span,) = _user_spans(exporter)
    assert span.instrumentation_scope.name == "lens"
    assert _without_thread(span.attributes) == {"run": "r", "lens.group": "gen", "rl.bucket": "productive", "n": 2}


@pytest.mark.parametrize("exc_type", [ValueError, KeyboardInterrupt])
def test_an_exception_escaping_a_span_is_recorded_with_error_status(exc_type):
    _register()
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="gen"), span_exporter=exporter)
    with pytest.raises(exc_type):
        with managed_span("gen", "boom"):
            raise exc_type("bad")
    handle.shutdown()
    (span,) = _user_spans(exporter)
    assert span.status.status_code.name == "ERROR"
    assert [e.name for e in span.events] == ["exception"]
    assert span.events[0].attributes["exception.type"] == exc_type.__name__


# -- ids -----------------------------------------------------------------------------------

_IDS_SCRIPT = textwrap.dedent("""
    import os, random
    from lens_core import LensConfig
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otel_bridge import setup_telemetry
    random.seed(0)
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none"), span_exporter=InMemorySpanExporter())
    read, write = os.pipe()
    pid = os.fork()
    ctx = handle.tracer.start_span("x").get_span_context()
    line = f"{ctx.trace_id:032x} {ctx.span_id:016x}\\n"
    if pid == 0:
        os.write(write, line.encode())
        os._exit(0)
    os.waitpid(pid, 0)
    print(line.strip())
    print(os.read(read, 100).decode().strip())
    os._exit(0)
""")


def test_ids_differ_across_processes_with_the_same_random_seed_and_across_forks():
    ids = []
    for _ in range(2):
        result = run_script(_IDS_SCRIPT)
        assert result.returncode == 0, result.stderr
        ids += result.stdout.split()
    trace_ids, span_ids = ids[0::2], ids[1::2]
    assert len(set(trace_ids)) == 4 and len(set(span_ids)) == 4


def test_traceparent_keeps_the_random_trace_id_flag():
    _register()
    setup_telemetry(LensConfig(enabled=True, span_groups="gen"), span_exporter=InMemorySpanExporter())
    with managed_span("gen", "x"):
        traceparent = lens_core.current_trace_carrier()["traceparent"]
    assert traceparent.endswith("-03")


# -- exporter selection --------------------------------------------------------------------


def test_auto_exporter_writes_files_under_lens_traces_run_id_without_an_endpoint(tmp_path, monkeypatch):
    _register()
    monkeypatch.chdir(tmp_path)
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="gen", run_id="run7"))
    with managed_span("gen", "generate"):
        pass
    handle.shutdown()
    (span,) = read_spans(tmp_path / "lens-traces" / "run7")
    assert span["name"] == "generate"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_auto_exporter_sends_traces_metrics_and_logs_to_an_otlp_receiver(otlp_receiver, monkeypatch, protocol):
    from otel_bridge import setup_logging_bridge

    endpoint = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
    _register()
    config = LensConfig(enabled=True, exporter="auto", span_groups="step,gen", logs_enabled=True,
                        service_name="rl-trainer", run_id="job9")
    handle = setup_telemetry(config, rank=1, world_size=2, resource_attributes={"team": "rl"})
    setup_logging_bridge("lens.test.receiver")
    with managed_span("step", "train_step", iteration=4) as outer:
        with managed_span("gen", "generate", prompts=8) as inner:
            logging.getLogger("lens.test.receiver").warning("inside generate")
    handle.meter.create_counter("lens.test.samples").add(3)
    assert handle.shutdown() is True

    spans = {s.name: s for s in otlp_receiver.wait_for_spans(2)}
    step, gen = spans["train_step"], spans["generate"]
    assert gen.parent_span_id == step.span_id == f"{outer.get_span_context().span_id:016x}"
    assert gen.trace_id == step.trace_id and step.parent_span_id == ""
    assert gen.span_id == f"{inner.get_span_context().span_id:016x}"
    assert _without_thread(gen.attributes) == {"lens.group": "gen", "rl.bucket": "productive", "prompts": 8}
    # an umbrella is never bucketed
    assert _without_thread(step.attributes) == {"iteration": 4, "lens.group": "step", "lens.umbrella": True}
    assert gen.attributes["thread.name"] == "MainThread"
    assert gen.scope == "lens" and {s.transport for s in spans.values()} == {protocol.split("/")[0]}
    resource = gen.resource
    assert resource["service.name"] == "rl-trainer"
    assert resource["nv.dl.rank"] == 1
    assert resource["service.instance.id"] == f"job9-rank1-{resource['host.name']}-{os.getpid()}-{process_tag()}"
    assert resource["nemo.run.id"] == "job9"
    assert resource["deployment.environment"] == "ci"
    assert resource["team"] == "rl"

    (metric,) = [m for m in otlp_receiver.wait_for_metrics(1) if m.name == "lens.test.samples"]
    assert metric.proto.sum.data_points[0].as_int == 3
    (log,) = [r for r in otlp_receiver.wait_for_logs(1) if r.body == "inside generate"]
    assert log.trace_id == gen.trace_id and log.span_id == gen.span_id


@pytest.mark.parametrize("signal", ["metrics", "traces", "logs"])
def test_auto_exporter_is_decided_per_signal(otlp_receiver, monkeypatch, tmp_path, signal):
    """Regression: ``auto`` was resolved once, for traces, so an endpoint set for metrics
    alone (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) sent nothing over OTLP and wrote metric
    files; and a traces-only endpoint took metrics and logs off the files too."""
    from otel_bridge import setup_logging_bridge

    monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", f"{otlp_receiver.http_endpoint}/v1/{signal}")
    _register()
    config = LensConfig(enabled=True, exporter="auto", span_groups="gen", logs_enabled=True,
                        file_dir=str(tmp_path), run_id="r")
    handle = setup_telemetry(config)
    setup_logging_bridge("lens.test.per_signal")
    with managed_span("gen", "generate"):
        logging.getLogger("lens.test.per_signal").warning("hello")
    handle.meter.create_counter("lens.test.ticks").add(1)
    assert handle.shutdown() is True

    received = {s: bool(otlp_receiver.requests(s)) for s in ("traces", "metrics", "logs")}
    written = {s: bool(list(tmp_path.rglob(f"{s}-rank0-*.jsonl"))) for s in ("traces", "metrics", "logs")}
    assert received == {s: s == signal for s in received}
    assert written == {s: s != signal for s in written}


_QUIET_SCRIPT = textwrap.dedent("""
    import os, sys
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry
    SpanRegistry.register("t", ["g"])
    config = LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], span_groups="all",
                        export_ranks="last")
    handle = setup_telemetry(config, rank=0, world_size=4)
    assert not handle.is_exporting
    with managed_span("g", "quiet") as span:
        assert span is None
    with handle.tracer.start_as_current_span("noop") as span:
        assert not span.is_recording()
    handle.meter.create_counter("c").add(1)
    handle.meter.create_histogram("h").record(1.5)
    assert handle.force_flush() and handle.shutdown()
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk"))
    print(loaded)
""")


def test_a_quiet_rank_imports_no_sdk_writes_nothing_and_hands_out_working_no_ops(tmp_path):
    result = run_script(_QUIET_SCRIPT, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert list(tmp_path.iterdir()) == []
