"""Builds an exporting rank's span recording: the TracerProvider, the span pipeline and its sink,
and (``LENS_RECORDER=native``) the native recorder bound to OpenTelemetry's context."""

from __future__ import annotations

import os

from lens_core import _impl, semconv
from lens_core._native._shared import Limits, set_record_reader

from otel_bridge import exporters
from otel_bridge.sdk import upstream
from otel_bridge.sdk.failure import exception_attributes, record_failure
from otel_bridge.sdk.identity import SeedIndependentIdGenerator, instance_id, lens_version
from otel_bridge.sdk.pipeline import SpanPipeline
from otel_bridge.sdk.processor import ScopeTable, SdkSpanProcessor
from otel_bridge.sdk.sinks import FileSink, NullSink, OtlpSink, SdkExporterSink

__all__ = ["RECORDERS", "build_span_pipeline", "exception_attributes", "sampling_mode"]

#: Values of ``LENS_RECORDER``: ``native`` records Lens spans as compact records (no SDK
#: span object per span); ``sdk`` creates SDK spans (for span processors of your own).
RECORDERS = ("native", "sdk")


def build_span_pipeline(exporter_name, resource, *, recorder_kind, max_open_spans, buffer_mb, file_dir, file_line_mb,
                        spool_dir, spool_mb, run_id, rank, device_timing="off", device_events=4096, nvtx=False,
                        span_exporter=None, sampler=None):
    """(tracer_provider, pipeline, native recorder or None); the pipeline's export thread is
    running. The keyword arguments are LensConfig's fields of the same names (``recorder_kind``
    is ``recorder``); ``exporter_name`` may be ``auto`` (decided for traces); ``sampler`` None
    means the SDK's (OTEL_TRACES_SAMPLER)."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider

    impl = _impl.recorder()
    recorder = impl.Recorder(max_open=max_open_spans, buffer_bytes=buffer_mb << 20)
    sink = _sink(exporters.resolve_exporter_name(exporter_name, signal="traces"), span_exporter, impl,
                 file_dir=file_dir, file_line_mb=file_line_mb, run_id=run_id, rank=rank)
    # One set of OpenTelemetry span limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the rest, the
    # SDK's 128 defaults) for SDK spans and the native recorder alike: both write the same data.
    limits = SpanLimits()
    recorder.set_limits(Limits.of(limits))
    # shutdown_on_exit=False: the SDK's own exit hook has no deadline; ours does.
    tracer_provider = TracerProvider(resource=resource, id_generator=SeedIndependentIdGenerator(),
                                     sampler=sampler, shutdown_on_exit=False, span_limits=limits)
    pipeline = SpanPipeline(recorder, sink, scopes=ScopeTable("lens", lens_version()), encoders=impl,
                            resource=resource, retarget=_retargeter(run_id),
                            spool_factory=_spool_factory(spool_dir, spool_mb, run_id, rank))
    pipeline.sdk = SdkSpanProcessor(pipeline, max_open_spans)
    tracer_provider.add_span_processor(pipeline.sdk)
    # The recorder budgets every queued SDK span (record_size) on the thread that ends it:
    # read from the dicts behind its public views, 0.5 µs a span instead of 2.0-2.4 here
    # (3.8 on a loaded machine), where the views are read a key at a time.
    span_types, reader = upstream.sdk_span_reader()
    for span_type in span_types:
        set_record_reader(span_type, reader)
    native = None
    if recorder_kind == "native":
        _bind(recorder, tracer_provider, impl)
        native = recorder
    if device_timing != "off":  # device-timed groups (docs/guide/gpu-timing.md)
        from lens_core import _device

        pipeline.device = recorder._device = _device.timer_for(device_timing, device_events)
    if nvtx:  # LENS_NVTX=1: an NVTX range named after every enabled span
        from otel_bridge._nvtx import find_nvtx

        pipeline.nvtx = find_nvtx()
        if pipeline.nvtx is not None and native is not None:
            recorder._nvtx_push, recorder._nvtx_pop = pipeline.nvtx
    pipeline.start()
    return tracer_provider, pipeline, native


def _sink(exporter_name, span_exporter, impl, *, file_dir, file_line_mb, run_id, rank):
    if span_exporter is not None:
        return SdkExporterSink(span_exporter)
    if exporter_name == "none":
        return NullSink()
    if exporter_name == "otlp":
        protocol = exporters.resolve_otlp_protocol("traces")
        sink = OtlpSink(lambda: exporters.otlp_span_exporter(protocol), impl.encode_traces_pb)
        sink.exporter  # built now, so a bad OTEL_EXPORTER_OTLP_* setting fails setup, not the first export
        return sink
    if exporter_name == "file":
        from otel_bridge.exporters._file import JsonLinesWriter

        return FileSink(JsonLinesWriter(file_dir or exporters.DEFAULT_FILE_DIR, run_id, rank, "traces"),
                        impl.encode_traces_json, max_line_bytes=file_line_mb << 20)
    return SdkExporterSink(exporters.console_span_exporter())


def _spool_factory(spool_dir, spool_mb, run_id, rank):
    """() -> this process's Spool under ``<spool_dir>/<run_id>``; None when LENS_SPOOL_MB is 0."""
    if not spool_mb:
        return None
    from otel_bridge.sdk.spool import Spool, default_spool_dir, spool_run_dir

    directory = os.path.join(spool_dir or default_spool_dir(), spool_run_dir(run_id))
    return lambda: Spool(directory, spool_mb << 20, rank=rank)


def _retargeter(run_id):
    """resource -> the same resource for this process (a forked child gets its own pid and
    service.instance.id)."""

    def retarget(resource):
        from opentelemetry.sdk.resources import Resource

        attrs = dict(resource.attributes)
        pid = os.getpid()
        if attrs.get(semconv.PROCESS_PID) == pid:
            return resource
        attrs[semconv.PROCESS_PID] = pid
        attrs[semconv.SERVICE_INSTANCE_ID] = instance_id(run_id, attrs.get(semconv.NV_DL_RANK, 0), pid)
        return Resource(attrs, resource.schema_url)

    return retarget


# ---- the native recorder and OpenTelemetry ----------------------------------------------


def _bind(recorder, tracer_provider, impl) -> None:
    from opentelemetry import context, trace
    from opentelemetry.context.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    recorder.bind_otel(
        contextvar=upstream.runtime_contextvar(),
        context_type=Context, span_key=upstream.span_key(), span_context_type=SpanContext, trace_flags_type=TraceFlags,
        trace_state_type=TraceState, non_recording_span_type=NonRecordingSpan,
        get_current=context.get_current, attach=context.attach, detach=context.detach,
        format_exc=exception_attributes, fail_span=record_failure)
    recorder.set_sampler(*sampling_mode(tracer_provider.sampler, impl))
    if not issubclass(impl.Span, trace.Span):
        trace.Span.register(impl.Span)  # isinstance(span, opentelemetry.trace.Span) holds


def sampling_mode(sampler, impl):
    """(mode, ratio, sampler) for Recorder.set_sampler: the SDK's built-in samplers are
    decided natively; any other sampler is asked for every span."""
    from opentelemetry.sdk.trace import sampling

    if hasattr(sampler, "selected") and hasattr(sampler, "delegate"):  # otel_bridge.sdk.sampling.RankSampler
        if not sampler.selected:
            return impl.SAMPLE_ALWAYS_OFF, 1.0, None
        sampler = sampler.delegate

    def static(s):
        decision = upstream.static_decision(s)
        if decision is not None:
            return 1.0 if decision is sampling.Decision.RECORD_AND_SAMPLE else 0.0
        return None

    if static(sampler) is not None:
        return (impl.SAMPLE_ALWAYS_ON if static(sampler) else impl.SAMPLE_ALWAYS_OFF), 1.0, None
    if type(sampler) is sampling.TraceIdRatioBased:
        return impl.SAMPLE_RATIO, sampler.rate, None
    if type(sampler) is sampling.ParentBased and _default_delegates(sampler, static):
        root = upstream.parent_based_delegates(sampler)[0]
        if static(root) is not None:
            return impl.SAMPLE_PARENT_RATIO, static(root), None
        if type(root) is sampling.TraceIdRatioBased:
            return impl.SAMPLE_PARENT_RATIO, root.rate, None
    return impl.SAMPLE_CUSTOM, 1.0, sampler


def _default_delegates(sampler, static) -> bool:
    _, remote_sampled, local_sampled, remote_not, local_not = upstream.parent_based_delegates(sampler)
    return (static(remote_sampled) == 1.0 and static(local_sampled) == 1.0
            and static(remote_not) == 0.0 and static(local_not) == 0.0)
