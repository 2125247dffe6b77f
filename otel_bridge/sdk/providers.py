"""build_providers / build_noop_providers: the only place the OpenTelemetry SDK is constructed.

Every SDK import here happens inside a function, so importing this module loads no
``opentelemetry``; the bridge's own floors below it are imported at module level. A quiet
rank never imports this module (setup_telemetry does so only on an exporting rank).
"""

from __future__ import annotations

import os

from lens_core import semconv
from lens_core.export_ranks import ExportRanks

from otel_bridge import exporters
from otel_bridge.sdk import upstream
from otel_bridge.sdk.backend import OTelBackend
from otel_bridge.sdk.identity import SeedIndependentIdGenerator, instance_id, lens_version

__all__ = [
    "CountingSpanExporter",
    "Providers",
    "SeedIndependentIdGenerator",
    "build_counting_backend",
    "build_noop_providers",
    "build_providers",
    "build_resource",
    "instance_id",
    "lens_version",
]


class Providers:
    """What build_providers made: the providers, the span pipeline and recorder, exporters."""

    def __init__(self, tracer_provider=None, meter_provider=None, logger_provider=None,
                 pipeline=None, exporters=(), resource=None, noop=False, recorder=None):
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.logger_provider = logger_provider
        self.pipeline = pipeline
        self.exporters = list(exporters)
        self.resource = resource
        self.noop = noop
        self.recorder = recorder  # the native Recorder, when LENS_RECORDER=native


def build_resource(*, service_name: str, user=None, run_id: str, rank: int, world_size: int, local_rank: int,
                   resource_attributes=None, environ=None):
    """The Resource: detected host/process/cluster attributes, then lens's own (service,
    user, run, rank), then ``OTEL_RESOURCE_ATTRIBUTES``, then the caller's (which win)."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    from lens_core.config import DEFAULT_SERVICE_NAME
    from lens_core.redaction import redact_attributes

    from otel_bridge.resources import detect_resource_attributes
    from otel_bridge.resources.dl import detect_software, detect_topology, rank_numbers

    environ = os.environ if environ is None else environ
    caller = dict(resource_attributes or {})
    attrs = dict(Resource.create({}).attributes)  # telemetry.sdk.* and friends
    attrs.update(detect_resource_attributes(environ, local_rank=local_rank))
    # the nv.dl families a process can know: topology from the launcher, versions from the
    # installed packages' metadata (read here, on exporting ranks only: a quiet rank pays nothing)
    attrs.update(detect_topology(environ))
    attrs.update(detect_software())
    # OTEL_RESOURCE_ATTRIBUTES (text only: nv.dl.rank=7 is read as an int)
    environment = rank_numbers(OTELResourceDetector().detect().attributes)
    # the caller's rank, if given, else the environment's names the instance (a singleton
    # actor reports rank 0), as the seed resolves service.instance.id from nv.dl.rank
    instance_rank = caller.get(semconv.NV_DL_RANK, environment.get(semconv.NV_DL_RANK, rank))
    attrs.update({
        semconv.SERVICE_NAME: service_name,
        # service.version is the instrumented application's (OTEL_SERVICE_VERSION or the
        # caller's attributes); Lens names itself as the distribution instead.
        semconv.TELEMETRY_DISTRO_NAME: "lens",
        semconv.TELEMETRY_DISTRO_VERSION: lens_version(),
        semconv.SERVICE_INSTANCE_ID: instance_id(run_id, instance_rank),
        semconv.NEMO_RUN_ID: run_id,
        semconv.NV_DL_RANK: rank,
        semconv.NV_DL_WORLD_SIZE: world_size,
        semconv.NV_DL_LOCAL_RANK: local_rank,
    })
    if user:
        attrs[semconv.NV_DL_USER] = user
    version = environ.get("OTEL_SERVICE_VERSION", "").strip()
    if version:
        environment.setdefault(semconv.SERVICE_VERSION, version)
    if service_name != DEFAULT_SERVICE_NAME:
        # the config already chose (LENS_SERVICE_NAME, else OTEL_SERVICE_NAME): keep it
        environment.pop(semconv.SERVICE_NAME, None)
    attrs.update(environment)
    attrs.update(caller)
    # OTEL_RESOURCE_ATTRIBUTES (and a detected command line) may carry a credential
    # (db.password=..., a URL with user:password@): redacted by key and by shape like any
    # span attribute; the resource is exported with every batch.
    return Resource(redact_attributes(attrs), semconv.SCHEMA_URL)


def build_providers(config, *, run_id: str, rank: int = 0, world_size: int = 1, local_rank: int = 0,
                    resource_attributes=None, span_exporter=None, metric_reader=None) -> Providers:
    """Build the SDK providers and the span pipeline for an exporting rank, and set the
    global W3C propagator.

    Spans of both recorders (and of raw OpenTelemetry tracers on this TracerProvider)
    go through one SpanPipeline. Nothing is registered as the global tracer/meter
    provider here (setup_telemetry does that once).
    """
    from opentelemetry import propagate
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    exporters.set_file_mode(config.file_mode)
    resource = build_resource(service_name=config.service_name, user=config.user, run_id=run_id, rank=rank,
                              world_size=world_size, local_rank=local_rank, resource_attributes=resource_attributes)
    # The exporter name goes to each signal's builder unresolved: ``auto`` is decided per
    # signal, so an endpoint set for metrics alone sends metrics over OTLP and keeps
    # traces and logs in files.
    name = config.exporter
    built = []
    tracer_provider = meter_provider = logger_provider = pipeline = recorder = None
    try:
        if config.traces_enabled:
            from otel_bridge.sdk.recording import build_span_pipeline

            tracer_provider, pipeline, recorder = build_span_pipeline(
                name, resource, recorder_kind=config.recorder, max_open_spans=config.max_open_spans,
                buffer_mb=config.buffer_mb, file_dir=config.file_dir, file_line_mb=config.file_line_mb,
                spool_dir=config.spool_dir, spool_mb=config.spool_mb, run_id=run_id, rank=rank,
                device_timing=config.device_timing, device_events=config.device_events, nvtx=config.nvtx,
                span_exporter=span_exporter, sampler=_rank_sampler(config.trace_ranks, rank, world_size, local_rank))
        if config.metrics_enabled:
            meter_provider = _build_meter_provider(name, resource, file_dir=config.file_dir,
                                                   interval_ms=config.metric_export_interval_ms, run_id=run_id,
                                                   rank=rank, metric_reader=metric_reader, built=built)
        if config.logs_enabled:
            logger_provider = _build_logger_provider(name, resource, file_dir=config.file_dir, run_id=run_id,
                                                     rank=rank, built=built)
    except BaseException:
        for provider in (tracer_provider, meter_provider, logger_provider):
            if provider is not None:
                _quiet_shutdown(provider)
        if pipeline is not None:
            pipeline.abandon()
        raise
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    return Providers(tracer_provider, meter_provider, logger_provider, pipeline, built, resource, recorder=recorder)


def _rank_sampler(trace_ranks, rank, world_size, local_rank):
    """A RankSampler when ``trace_ranks`` leaves ranks out; None (the SDK's sampler from
    OTEL_TRACES_SAMPLER) when every rank records traces."""
    if trace_ranks == ExportRanks():
        return None
    from otel_bridge.sdk.sampling import RankSampler

    return RankSampler(trace_ranks, rank, world_size, local_rank)


def _build_meter_provider(name, resource, *, file_dir, interval_ms, run_id, rank, metric_reader, built):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = metric_reader
    if reader is None:
        exporter = exporters.build_metric_exporter(name, file_dir=file_dir, run_id=run_id, rank=rank)
        if exporter is not None:
            built.append(exporter)
            reader = PeriodicExportingMetricReader(
                exporter, export_interval_millis=interval_ms)
    readers = [reader] if reader is not None else []
    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)


def _build_logger_provider(name, resource, *, file_dir, run_id, rank, built):
    LoggerProvider = upstream.logs_module("sdk").LoggerProvider
    BatchLogRecordProcessor = upstream.logs_module("sdk.export").BatchLogRecordProcessor

    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    exporter = exporters.build_log_exporter(name, file_dir=file_dir, run_id=run_id, rank=rank)
    if exporter is not None:
        built.append(exporter)
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    return provider


def _quiet_shutdown(provider) -> None:
    try:
        provider.shutdown()
    except Exception:
        pass


def build_noop_providers() -> Providers:
    """No-op tracer and meter providers from the OpenTelemetry API (the SDK is not loaded)."""
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    return Providers(NoOpTracerProvider(), NoOpMeterProvider(), None, noop=True)


class CountingSpanExporter:
    """A span exporter that keeps nothing and counts what it was given (``count``)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans):
        """Count ``spans``; always a success."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


def build_counting_backend():
    """(span backend, TracerProvider, CountingSpanExporter): lens spans go through the SDK
    and are handed inline to an exporter that only counts them (the groups-on side of
    lens_ci's ``lens_overhead`` fixture). The caller shuts the provider down."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = CountingSpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OTelBackend(provider), provider, exporter
