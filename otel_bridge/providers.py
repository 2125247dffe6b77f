"""build_providers / build_noop_providers: the only place the OpenTelemetry SDK is constructed.

Every SDK import here happens inside a function, so importing this module is cheap and a
quiet rank that never calls build_providers never loads ``opentelemetry.sdk``.
"""

from __future__ import annotations

import os
import random
import threading

from lens_core import semconv

__all__ = [
    "Providers",
    "SeedIndependentIdGenerator",
    "build_noop_providers",
    "build_providers",
    "build_resource",
    "lens_version",
]


def lens_version() -> str:
    """The installed lens package version ("0+unknown" when run from a bare checkout)."""
    from importlib import metadata

    try:
        return metadata.version("lens-telemetry")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class Providers:
    """What build_providers made: the providers, exporters and export accounting."""

    def __init__(self, tracer_provider=None, meter_provider=None, logger_provider=None,
                 ledger=None, exporters=(), resource=None, noop=False):
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.logger_provider = logger_provider
        self.ledger = ledger
        self.exporters = list(exporters)
        self.resource = resource
        self.noop = noop


class SeedIndependentIdGenerator:
    """Trace and span ids from a private generator seeded by the OS, not the ``random``
    module: ranks that all call ``random.seed(1234)`` still get distinct ids. Reseeded in
    forked children. Ids are uniformly random, so the W3C random-trace-id flag stays on."""

    def __init__(self):
        self._reseed()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self):
        self._random = random.Random(os.urandom(32))

    def generate_span_id(self) -> int:
        """A non-zero 64-bit span id."""
        span_id = 0
        while span_id == 0:
            span_id = self._random.getrandbits(64)
        return span_id

    def generate_trace_id(self) -> int:
        """A non-zero 128-bit trace id."""
        trace_id = 0
        while trace_id == 0:
            trace_id = self._random.getrandbits(128)
        return trace_id

    def is_trace_id_random(self) -> bool:
        """All 128 bits are random."""
        return True


class _SpanLedger:
    """A span processor that keeps the spans still open, so shutdown can end them
    (innermost first, marked truncated), and counts ended spans for the exit report."""

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        # After fork the parent's open spans are not ours, and its lock may be held.
        self._lock = threading.Lock()
        self._open = {}
        self.ended = 0
        self.truncated = 0
        counts = getattr(self, "exporter", None)
        if counts is not None:  # the child's report must not count the parent's exports
            counts.exported = counts.failed = 0
            counts.last_error = None

    def on_start(self, span, parent_context=None):
        # on_start runs in the starting thread: record it, so a report can give each
        # thread its own lane (the SDK records no thread identity itself).
        thread = threading.current_thread()
        span.set_attributes({semconv.THREAD_ID: thread.ident, semconv.THREAD_NAME: thread.name})
        with self._lock:
            self._open[span.context.span_id] = span

    def on_end(self, span):
        # on_end receives a ReadableSpan copy, not the Span from on_start: key by span id.
        with self._lock:
            self._open.pop(span.context.span_id, None)
            self.ended += 1

    def _on_ending(self, span):
        # The SDK calls this hook on every processor; the ledger is duck-typed (subclassing
        # SpanProcessor would import the SDK with this module), so it must exist.
        pass

    def end_open_spans(self):
        """End every span still open, innermost (latest started) first."""
        with self._lock:
            still_open = sorted(self._open.values(), key=lambda s: s.start_time or 0, reverse=True)
        for span in still_open:
            try:
                span.set_attribute(semconv.LENS_SPAN_TRUNCATED, True)
                span.end()
                self.truncated += 1
            except Exception:  # a span ended by its owner meanwhile: nothing to do
                pass

    def shutdown(self):
        self.end_open_spans()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _counting_exporter(exporter, ledger):
    """Wrap a SpanExporter so the ledger knows how many spans really went out."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class CountingSpanExporter(SpanExporter):
        def __init__(self):
            self.exported = 0
            self.failed = 0
            self.last_error = None

        def export(self, spans):
            try:
                result = exporter.export(spans)
            except Exception as exc:  # an exporter bug must not kill the batch thread
                self.failed += len(spans)
                self.last_error = f"{type(exc).__name__}: {exc}"
                return SpanExportResult.FAILURE
            if result == SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failed += len(spans)
                self.last_error = f"{type(exporter).__name__} returned {result.name}"
            return result

        def shutdown(self):
            return exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            flush = getattr(exporter, "force_flush", None)
            return flush(timeout_millis) if flush else True

    counting = CountingSpanExporter()
    ledger.exporter = counting
    return counting


def build_resource(config, *, run_id: str, rank: int, world_size: int, local_rank: int,
                   resource_attributes=None, environ=None):
    """The Resource: detected host/process/cluster attributes, then lens's own (service,
    run, rank), then ``OTEL_RESOURCE_ATTRIBUTES``, then the caller's (which win)."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    from lens_core.config import DEFAULT_SERVICE_NAME

    from .resources import detect_resource_attributes

    environ = os.environ if environ is None else environ
    caller = dict(resource_attributes or {})
    attrs = dict(Resource.create({}).attributes)  # telemetry.sdk.* and friends
    attrs.update(detect_resource_attributes(environ, local_rank=local_rank))
    # the caller's rank, if given, names the instance (a singleton actor reports rank 0)
    instance_rank = caller.get(semconv.NV_DL_RANK, rank)
    attrs.update({
        semconv.SERVICE_NAME: config.service_name,
        semconv.SERVICE_VERSION: lens_version(),
        semconv.SERVICE_INSTANCE_ID: f"{run_id}-rank{instance_rank}",
        semconv.NEMO_RUN_ID: run_id,
        semconv.NV_DL_RANK: rank,
        semconv.NV_DL_WORLD_SIZE: world_size,
        semconv.NV_DL_LOCAL_RANK: local_rank,
    })
    if config.user:
        attrs[semconv.NV_DL_USER] = config.user
    environment = dict(OTELResourceDetector().detect().attributes)
    if config.service_name != DEFAULT_SERVICE_NAME:
        # the config already chose (LENS_SERVICE_NAME, else OTEL_SERVICE_NAME): keep it
        environment.pop(semconv.SERVICE_NAME, None)
    attrs.update(environment)
    attrs.update(caller)
    return Resource(attrs)


def build_providers(config, *, run_id: str, rank: int = 0, world_size: int = 1, local_rank: int = 0,
                    resource_attributes=None, span_exporter=None, metric_reader=None) -> Providers:
    """Build the SDK providers for an exporting rank and set the global W3C propagator.

    Nothing is registered as the global tracer/meter provider here (setup_telemetry does
    that once); lens spans use these providers directly.
    """
    from opentelemetry import propagate
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from . import exporters

    resource = build_resource(config, run_id=run_id, rank=rank, world_size=world_size,
                              local_rank=local_rank, resource_attributes=resource_attributes)
    # The exporter name goes to each signal's builder unresolved: ``auto`` is decided per
    # signal, so an endpoint set for metrics alone sends metrics over OTLP and keeps
    # traces and logs in files.
    name = config.exporter
    built = []
    tracer_provider = meter_provider = logger_provider = ledger = None
    try:
        if config.traces_enabled:
            exporter = span_exporter or exporters.build_span_exporter(
                name, file_dir=config.file_dir, run_id=run_id, rank=rank)
            ledger = _SpanLedger()
            # shutdown_on_exit=False: the SDK's own exit hook has no deadline; ours does.
            tracer_provider = TracerProvider(resource=resource, id_generator=SeedIndependentIdGenerator(),
                                             sampler=_rank_sampler(config, rank, world_size, local_rank),
                                             shutdown_on_exit=False)
            # The ledger comes first so, at shutdown, the spans it ends still reach the
            # batch processor before that one flushes and stops.
            tracer_provider.add_span_processor(ledger)
            if exporter is not None:
                built.append(exporter)
                tracer_provider.add_span_processor(BatchSpanProcessor(_counting_exporter(exporter, ledger)))
        if config.metrics_enabled:
            meter_provider = _build_meter_provider(config, name, resource, run_id, rank, metric_reader, built)
        if config.logs_enabled:
            logger_provider = _build_logger_provider(config, name, resource, run_id, rank, built)
    except BaseException:
        for provider in (tracer_provider, meter_provider, logger_provider):
            if provider is not None:
                _quiet_shutdown(provider)
        raise
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    return Providers(tracer_provider, meter_provider, logger_provider, ledger, built, resource)


def _rank_sampler(config, rank, world_size, local_rank):
    """A RankSampler when ``config.trace_ranks`` leaves ranks out; None (the SDK's sampler
    from OTEL_TRACES_SAMPLER) when every rank records traces."""
    from lens_core.export_ranks import ExportRanks

    if config.trace_ranks == ExportRanks():
        return None
    from .sampling import RankSampler

    return RankSampler(config.trace_ranks, rank, world_size, local_rank)


def _build_meter_provider(config, name, resource, run_id, rank, metric_reader, built):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from . import exporters

    reader = metric_reader
    if reader is None:
        exporter = exporters.build_metric_exporter(name, file_dir=config.file_dir, run_id=run_id, rank=rank)
        if exporter is not None:
            built.append(exporter)
            reader = PeriodicExportingMetricReader(
                exporter, export_interval_millis=config.metric_export_interval_ms)
    readers = [reader] if reader is not None else []
    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)


def _build_logger_provider(config, name, resource, run_id, rank, built):
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    from . import exporters

    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    exporter = exporters.build_log_exporter(name, file_dir=config.file_dir, run_id=run_id, rank=rank)
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
