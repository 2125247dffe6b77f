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
    "instance_id",
    "lens_version",
    "process_tag",
]


def lens_version() -> str:
    """The installed lens package version ("0+unknown" when run from a bare checkout)."""
    from importlib import metadata

    try:
        return metadata.version("lens-telemetry")
    except metadata.PackageNotFoundError:
        return "0+unknown"


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


_tags: dict = {}  # pid -> process_tag (a forked child computes its own)


def process_tag(pid: int = None) -> str:
    """Eight hex digits that tell apart processes sharing a host name and a pid: a CRC of
    the kernel's boot id, the pid namespace (its inode: containers on one host each have
    their own) and the process's start time (clock ticks since boot, /proc/<pid>/stat), so a
    pid reused later, or the same pid in two containers, gets another tag. Where /proc does
    not tell (not Linux), eight random hex digits per process."""
    pid = os.getpid() if pid is None else pid
    tag = _tags.get(pid)
    if tag is None:
        import zlib

        # /proc/self, not /proc/<pid>: in a pid namespace whose /proc is the host's, the pid
        # this process sees (say 1) names another process there.
        proc = "/proc/self" if pid == os.getpid() else f"/proc/{pid}"
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
                boot = fh.read().strip()
            namespace = os.stat(f"{proc}/ns/pid").st_ino
            with open(f"{proc}/stat", "rb") as fh:
                # the fields after the command name, which may hold spaces and parentheses
                started = fh.read().rsplit(b")", 1)[1].split()[19]
            tag = f"{zlib.crc32(b'%s/%d/%s' % (boot, namespace, started)):08x}"
        except (OSError, IndexError):
            tag = os.urandom(4).hex()
        _tags.clear()  # only this process's (and a fork's own) is ever asked for again
        _tags[pid] = tag
    return tag


def instance_id(run_id: str, rank, pid: int = None) -> str:
    """``service.instance.id``: unique per process (``<run>-rank<R>-<host>-<pid>-<tag>``, the
    tag from process_tag), so a Ray driver and its rank-0 actor, a forked child and its
    parent, or two containers on one host whose processes have the same pid never share one."""
    import socket

    pid = os.getpid() if pid is None else pid
    return f"{run_id}-rank{rank}-{socket.gethostname()}-{pid}-{process_tag(pid)}"


def build_resource(config, *, run_id: str, rank: int, world_size: int, local_rank: int,
                   resource_attributes=None, environ=None):
    """The Resource: detected host/process/cluster attributes, then lens's own (service,
    run, rank), then ``OTEL_RESOURCE_ATTRIBUTES``, then the caller's (which win)."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    from lens_core.config import DEFAULT_SERVICE_NAME
    from lens_core.redaction import redact_attributes

    from otel_bridge.resources import detect_resource_attributes

    environ = os.environ if environ is None else environ
    caller = dict(resource_attributes or {})
    attrs = dict(Resource.create({}).attributes)  # telemetry.sdk.* and friends
    attrs.update(detect_resource_attributes(environ, local_rank=local_rank))
    # the caller's rank, if given, names the instance (a singleton actor reports rank 0)
    instance_rank = caller.get(semconv.NV_DL_RANK, rank)
    attrs.update({
        semconv.SERVICE_NAME: config.service_name,
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
    if config.user:
        attrs[semconv.NV_DL_USER] = config.user
    environment = dict(OTELResourceDetector().detect().attributes)
    version = environ.get("OTEL_SERVICE_VERSION", "").strip()
    if version:
        environment.setdefault(semconv.SERVICE_VERSION, version)
    if config.service_name != DEFAULT_SERVICE_NAME:
        # the config already chose (LENS_SERVICE_NAME, else OTEL_SERVICE_NAME): keep it
        environment.pop(semconv.SERVICE_NAME, None)
    attrs.update(environment)
    attrs.update(caller)
    # OTEL_RESOURCE_ATTRIBUTES (and a detected command line) may carry a credential
    # (db.password=..., a URL with user:password@): redacted by key and by shape like any
    # span attribute; the resource is exported with every batch.
    return Resource(redact_attributes(attrs))


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

    from otel_bridge import exporters

    exporters.set_file_mode(config.file_mode)
    resource = build_resource(config, run_id=run_id, rank=rank, world_size=world_size,
                              local_rank=local_rank, resource_attributes=resource_attributes)
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
                config, name, resource, run_id=run_id, rank=rank, span_exporter=span_exporter,
                sampler=_rank_sampler(config, rank, world_size, local_rank))
        if config.metrics_enabled:
            meter_provider = _build_meter_provider(config, name, resource, run_id, rank, metric_reader, built)
        if config.logs_enabled:
            logger_provider = _build_logger_provider(config, name, resource, run_id, rank, built)
    except BaseException:
        for provider in (tracer_provider, meter_provider, logger_provider):
            if provider is not None:
                _quiet_shutdown(provider)
        if pipeline is not None:
            pipeline.abandon()
        raise
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    return Providers(tracer_provider, meter_provider, logger_provider, pipeline, built, resource, recorder=recorder)


def _rank_sampler(config, rank, world_size, local_rank):
    """A RankSampler when ``config.trace_ranks`` leaves ranks out; None (the SDK's sampler
    from OTEL_TRACES_SAMPLER) when every rank records traces."""
    from lens_core.export_ranks import ExportRanks

    if config.trace_ranks == ExportRanks():
        return None
    from otel_bridge.sdk.sampling import RankSampler

    return RankSampler(config.trace_ranks, rank, world_size, local_rank)


def _build_meter_provider(config, name, resource, run_id, rank, metric_reader, built):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from otel_bridge import exporters

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

    from otel_bridge import exporters

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
