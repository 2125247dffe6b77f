"""Rank-aware trace sampling: RankSampler on its own and wired by LENS_TRACE_RANKS, with the
real SDK and real exports (files and the OTLP receiver); metrics and logs keep exporting."""

import logging

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Decision  # noqa: E402
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from otel_bridge.sdk.sampling import RankSampler  # noqa: E402
from trace_files import read_logs, read_spans  # noqa: E402

ATTRS = {"k": "v", "n": 3}


def _selected(ranks, world_size):
    return [r for r in range(world_size) if RankSampler(ranks, r, world_size, delegate=ALWAYS_ON).selected]


def test_the_selected_ranks_are_those_lens_export_ranks_would_pick_and_the_same_every_time():
    assert _selected("sample:0.25", 64) == _selected("sample:0.25", 64)
    assert _selected("sample:0.25", 64) == [r for r in range(64) if lens_core.get_export_strategy("sample:0.25")(r, 64, 0)]
    assert _selected("sample:0.25", 64)[0] == 0 and len(_selected("sample:0.25", 64)) == 16
    assert _selected("0,5", 8) == [0, 5]
    assert _selected(lambda rank, world_size, local_rank: rank == world_size - 1, 4) == [3]


def test_a_selected_rank_delegates_and_passes_the_attributes_through():
    sampler = RankSampler("first", 0, 4, delegate=ALWAYS_ON)
    assert sampler.selected and sampler.delegate is ALWAYS_ON
    result = sampler.should_sample(None, 0xABC, "span", attributes=ATTRS)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert dict(result.attributes) == ATTRS


def test_a_selected_rank_follows_its_delegate_when_that_drops():
    result = RankSampler("all", 3, 4, delegate=ALWAYS_OFF).should_sample(None, 0xABC, "span", attributes=ATTRS)
    assert result.decision is Decision.DROP


def test_a_rank_left_out_drops_with_no_attributes_and_keeps_the_parent_trace_state():
    sampler = RankSampler("first", 1, 4, delegate=ALWAYS_ON)
    assert not sampler.selected
    parent = NonRecordingSpan(SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1),
                                          trace_state=TraceState([("vendor", "x")])))
    result = sampler.should_sample(trace.set_span_in_context(parent), 0xABC, "span", attributes=ATTRS)
    assert result.decision is Decision.DROP
    assert dict(result.attributes) == {}
    assert result.trace_state == TraceState([("vendor", "x")])
    assert sampler.should_sample(None, 0xABC, "root").trace_state is None


def test_the_description_names_the_ranks_the_decision_and_the_delegate():
    assert RankSampler("sample:0.1", 3, 8, delegate=ALWAYS_ON).get_description() == (
        "RankSampler{ranks=sample:0.1,rank=3,selected=false,delegate=AlwaysOnSampler}")
    assert "selected=true" in RankSampler("first", 0, 8, delegate=ALWAYS_ON).get_description()


def test_the_default_delegate_is_the_sampler_otel_traces_sampler_names(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    sampler = RankSampler("all", 0, 1)
    assert sampler.delegate.get_description().startswith("ParentBased{root:TraceIdRatioBased{0.5}")
    monkeypatch.delenv("OTEL_TRACES_SAMPLER")
    assert RankSampler("all", 0, 1).delegate.get_description().startswith("ParentBased{root:AlwaysOnSampler")


def test_a_bad_trace_ranks_spec_names_the_variable():
    with pytest.raises(ValueError, match=r"^LENS_TRACE_RANKS='half': allowed: all, first"):
        LensConfig.from_env(environ={"LENS_TRACE_RANKS": "half"})
    with pytest.raises(ValueError, match=r"^trace_ranks='sample:2': the sample fraction"):
        RankSampler("sample:2", 0, 1)


def test_an_sdk_tracer_provider_with_the_sampler_exports_only_on_selected_ranks():
    exported = {}
    for rank in range(4):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(sampler=RankSampler("0,2", rank, 4, delegate=ALWAYS_ON))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("work", attributes=ATTRS):
            pass
        exported[rank] = [(s.name, dict(s.attributes)) for s in exporter.get_finished_spans()]
    assert exported == {0: [("work", ATTRS)], 1: [], 2: [("work", ATTRS)], 3: []}


# -- wired by config, real exports ------------------------------------------------------------


def _job(tmp_path, rank, world_size=4, **config):
    SpanRegistry.register("t", ["g"], allow_override=True)
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="r",
                                        span_groups="g", logs_enabled=True, **config),
                             rank=rank, world_size=world_size, _allow_reinit=True)
    with managed_span("g", "work", rank_index=rank):  # logs_enabled attaches the bridge to the root logger
        logging.getLogger("lens.test.sampling").warning("from rank %d", rank)
    handle.meter.create_counter("lens.test.steps").add(1)
    assert handle.shutdown() is True
    return handle


def _files(tmp_path, kind, rank):
    return list(tmp_path.rglob(f"{kind}-rank{rank}-*.jsonl"))


def test_trace_ranks_sample_traces_per_rank_while_metrics_and_logs_keep_exporting(tmp_path):
    for rank in range(4):
        _job(tmp_path, rank, trace_ranks="sample:0.5")
    spans = read_spans(tmp_path)
    assert sorted(s["attributes"]["rank_index"] for s in spans) == [0, 2]
    assert all(s["attributes"]["rank_index"] == s["resource"]["nv.dl.rank"] for s in spans)
    for rank in range(4):
        assert _files(tmp_path, "metrics", rank), f"rank {rank} exported no metrics"
    assert sorted(r["body"] for r in read_logs(tmp_path)) == [f"from rank {r}" for r in range(4)]


def test_a_rank_left_out_installs_no_span_backend_so_its_groups_read_off(tmp_path):
    SpanRegistry.register("t", ["g"])
    config = LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), span_groups="g", trace_ranks="first")
    handle = setup_telemetry(config, rank=1, world_size=2)
    assert handle.is_exporting and handle.providers.meter_provider is not None
    assert isinstance(handle.providers.tracer_provider.sampler, RankSampler)
    assert not handle.providers.tracer_provider.sampler.selected
    assert lens_core.installed_backend() is None and not lens_core.is_span_group_enabled("g")
    with managed_span("g", "work") as span:
        assert span is None
        assert lens_core.current_trace_carrier() == {}
    handle.shutdown()
    assert read_spans(tmp_path) == []


def test_with_every_rank_tracing_no_rank_sampler_is_installed():
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none"))
    assert not isinstance(handle.providers.tracer_provider.sampler, RankSampler)


def test_a_selected_rank_composes_with_otel_traces_sampler(otlp_receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
    SpanRegistry.register("t", ["g"])
    config = LensConfig(enabled=True, span_groups="g", trace_ranks="first", run_id="r")

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    handle = setup_telemetry(config, rank=0, world_size=2)
    assert handle.providers.tracer_provider.sampler.get_description() == (
        "RankSampler{ranks=first,rank=0,selected=true,delegate=AlwaysOffSampler}")
    with managed_span("g", "dropped by always_off"):
        pass
    handle.meter.create_counter("lens.test.steps").add(1)
    assert handle.shutdown() is True
    assert otlp_receiver.spans() == []
    assert [m.name for m in otlp_receiver.wait_for_metrics(1)] == ["lens.test.steps"]

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    handle = setup_telemetry(config, rank=0, world_size=2)
    with managed_span("g", "kept", n=1):
        pass
    assert handle.shutdown() is True
    (span,) = otlp_receiver.wait_for_spans(1)
    assert span.name == "kept" and span.attributes["n"] == 1


def test_a_trace_ranks_list_outside_the_world_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        setup_telemetry(LensConfig(enabled=True, exporter="none", trace_ranks="4"), rank=0, world_size=4)
    assert "lens telemetry: trace_ranks=4 names rank(s) 4 outside world size 4; no rank is selected" in caplog.messages
