"""setup_telemetry and TelemetryHandle: one call per process, bounded flush and shutdown.

Fork: a child forked from an exporting process keeps exporting through the setup it
inherited, which re-initialises itself in the child: the batch queues start empty (spans
the parent had queued stay the parent's, so each is exported once, by the parent), worker
threads, locks and the id generator are fresh, file exporters write a new file named for
the child's pid, and the child's shutdown report counts only the child's spans. The child
exports what it emits itself; it must call ``handle.shutdown()`` (or exit normally, which
runs the exit hook) before it ends; ``os._exit`` without a shutdown drops its queue. OTLP
over gRPC in a forked child needs gRPC's own fork support (``GRPC_ENABLE_FORK_SUPPORT``);
file and HTTP exporters need nothing.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

from lens_core import _log, install_backend, set_span_group_spec, uninstall_backend
from lens_core.config import LensConfig

from .runid import resolve_run_id

__all__ = ["TelemetryHandle", "active_handle", "resolve_rank", "setup_telemetry"]

# Re-entrant: a reinit shuts the previous handle down (which takes this lock) while
# holding it, and a SIGTERM handler may run shutdown on a thread that already holds it.
_setup_lock = threading.RLock()
_active = None  # the handle of the exporting setup in this process, if any
_global_providers_set = False


def _after_fork_in_child() -> None:
    # A parent thread may have held these locks at fork time; the child starts afresh.
    global _setup_lock
    _setup_lock = threading.RLock()
    if _active is not None:
        _active._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def active_handle():
    """The handle of this process's exporting setup, or None."""
    return _active


def _env_int(environ, names, default, label):
    for name in names:
        raw = environ.get(name, "").strip()
        if raw:
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{name}={raw!r}: {label} must be an integer") from None
            if value < 0:
                raise ValueError(f"{name}={raw!r}: {label} must not be negative")
            return value
    return default


def resolve_rank(rank=None, world_size=None, local_rank=None, environ=None):
    """(rank, world_size, local_rank): explicit values, then RANK / WORLD_SIZE / LOCAL_RANK,
    then SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, then 0 / 1 / 0."""
    env = os.environ if environ is None else environ
    if rank is None:
        rank = _env_int(env, ("RANK", "SLURM_PROCID"), 0, "rank")
    if world_size is None:
        world_size = _env_int(env, ("WORLD_SIZE", "SLURM_NTASKS"), 1, "world size")
    if local_rank is None:
        local_rank = _env_int(env, ("LOCAL_RANK", "SLURM_LOCALID"), 0, "local rank")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    return rank, world_size, local_rank


class TelemetryHandle:
    """What setup_telemetry returns: tracer, meter, who this rank is, flush and shutdown."""

    def __init__(self, config, *, rank, world_size, local_rank, run_id, providers=None, backend=None):
        self.config = config
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.run_id = run_id
        self.providers = providers
        self.backend = backend
        self._lock = threading.RLock()
        self._closed = False
        self._noop = None
        self._previous_handlers = {}

    @property
    def is_exporting(self) -> bool:
        """True when this rank built providers and exports telemetry."""
        return self.providers is not None

    def _fallback(self):
        if self._noop is None:
            from .providers import build_noop_providers

            self._noop = build_noop_providers()
        return self._noop

    @property
    def tracer(self):
        """The lens tracer (a no-op tracer on a quiet rank; the SDK is not loaded for it)."""
        if self.backend is not None:
            return self.backend.tracer
        return self._fallback().tracer_provider.get_tracer("lens")

    @property
    def meter(self):
        """A meter from this rank's MeterProvider (a no-op meter when not exporting metrics)."""
        provider = self.providers.meter_provider if self.providers else None
        return (provider or self._fallback().meter_provider).get_meter("lens")

    def force_flush(self, timeout_ms: int = None) -> bool:
        """Export what is buffered; True if everything went out within ``timeout_ms``."""
        if not self.is_exporting or self._closed:
            return True
        timeout_ms = timeout_ms or self.config.shutdown_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        results = []

        def flush():
            for provider in self._live_providers():
                results.append(bool(provider.force_flush(max(1, int((deadline - time.monotonic()) * 1000)))))

        finished = _run_bounded(flush, deadline, "lens-force-flush")
        return finished and all(results)

    def _live_providers(self):
        p = self.providers
        return [x for x in (p.tracer_provider, p.meter_provider, p.logger_provider) if x is not None]

    def shutdown(self, timeout_ms: int = None) -> bool:
        """Flush and shut down traces, metrics and logs; idempotent; returns by the deadline
        even when the collector is unreachable (what could not be exported is reported in
        one WARNING). True when everything was exported."""
        global _active
        with self._lock:
            if self._closed:
                return True
            self._closed = True
        if not self.is_exporting:
            return True
        timeout_ms = timeout_ms or self.config.shutdown_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        with _setup_lock:
            if _active is self:
                uninstall_backend()  # no new spans against providers that are closing
                _active = None
        providers = self._live_providers()

        def close():
            for provider in providers:
                remaining = max(1, int((deadline - time.monotonic()) * 1000))
                try:
                    if hasattr(provider, "get_meter"):  # MeterProvider takes a deadline
                        provider.shutdown(timeout_millis=remaining)
                    else:
                        provider.shutdown()
                except Exception as exc:
                    _log.warn(f"telemetry shutdown: {type(provider).__name__} failed: {exc}")

        finished = _run_bounded(close, deadline, "lens-shutdown")
        if not finished:
            # Stop exporter retry loops so the background thread ends soon too.
            for exporter in self.providers.exporters:
                try:
                    exporter.shutdown()
                except Exception:
                    pass
        return self._report(finished, timeout_ms)

    def _report(self, finished, timeout_ms) -> bool:
        ledger = self.providers.ledger
        counts = getattr(ledger, "exporter", None)
        lost = 0
        detail = ""
        if ledger is not None and counts is not None:
            lost = max(0, ledger.ended - counts.exported)
            if counts.last_error:
                detail = f"; last export error: {counts.last_error}"
        if finished and lost == 0:
            return True
        where = "" if finished else f"shutdown did not finish within {timeout_ms} ms; "
        _log.warn(f"lens telemetry (run {self.run_id}, rank {self.rank}): {where}{lost} of "
                  f"{getattr(ledger, 'ended', 0)} spans were not exported{detail}")
        return False

    def install_signal_handlers(self, signals=None) -> None:
        """On SIGTERM (or ``signals``), flush within the shutdown timeout, then run the
        handler that was installed before (the default one re-delivers the signal)."""
        import signal as _signal

        for signum in signals or (_signal.SIGTERM,):
            self._previous_handlers[signum] = _signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame):
        import signal as _signal

        self.shutdown()
        previous = self._previous_handlers.get(signum, _signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous == _signal.SIG_DFL or previous is None:  # None: installed from C
            _signal.signal(signum, _signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def __repr__(self):
        state = "exporting" if self.is_exporting else "quiet"
        return f"<TelemetryHandle run={self.run_id} rank={self.rank}/{self.world_size} {state}>"


def _run_bounded(fn, deadline, name) -> bool:
    """Run ``fn`` on a daemon thread; True if it finished before ``deadline``."""
    thread = threading.Thread(target=fn, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError:
        # Python 3.12 refuses new threads in exit hooks: run inline, bounded only by the
        # exporters' own timeouts (3.11 and 3.13 start the thread).
        fn()
        return True
    thread.join(max(0.0, deadline - time.monotonic()))
    return not thread.is_alive()


def _atexit_shutdown(handle_ref):
    handle = handle_ref()
    if handle is not None:
        handle.shutdown()


def setup_telemetry(config: LensConfig, *, resource_attributes=None, rank=None, world_size=None,
                    local_rank=None, span_exporter=None, metric_reader=None,
                    _allow_reinit: bool = False) -> TelemetryHandle:
    """Set up telemetry for this process and return its handle.

    A disabled config or a rank that ``export_ranks`` leaves quiet builds nothing, never
    imports the OpenTelemetry SDK and leaves every span group off. An exporting rank
    builds providers, installs the OTel span backend into lens_core and applies
    ``config.span_groups``. A second enabled call raises RuntimeError unless
    ``_allow_reinit`` (tests); a failure part-way leaves nothing installed.
    """
    global _active, _global_providers_set
    if not isinstance(config, LensConfig):
        raise TypeError(f"setup_telemetry expects a LensConfig, got {type(config).__name__}")
    rank, world_size, local_rank = resolve_rank(rank, world_size, local_rank)
    run_id = resolve_run_id(config.run_id)
    handle_args = dict(rank=rank, world_size=world_size, local_rank=local_rank, run_id=run_id)
    if not (config.enabled and config.export_ranks.exports(rank, world_size, local_rank)):
        return TelemetryHandle(config, **handle_args)

    from .backend import OTelBackend
    from .providers import build_providers, lens_version

    with _setup_lock:
        if _active is not None:
            if not _allow_reinit:
                raise RuntimeError(
                    f"setup_telemetry was already called with telemetry enabled in this process "
                    f"({_active!r}). OpenTelemetry's global providers cannot be replaced, so a second "
                    "setup would split this process's spans between two pipelines. Reuse the first "
                    "handle (otel_bridge.active_handle()), or shut it down and pass _allow_reinit=True."
                )
            previous, _active = _active, None
            previous.shutdown()
        providers = backend = None
        try:
            providers = build_providers(
                config, run_id=run_id, rank=rank, world_size=world_size, local_rank=local_rank,
                resource_attributes=resource_attributes, span_exporter=span_exporter,
                metric_reader=metric_reader)
            if providers.tracer_provider is not None:
                backend = OTelBackend(providers.tracer_provider, lens_version())
                install_backend(backend)
            set_span_group_spec(config.span_groups)
            if not _global_providers_set:
                _set_global_providers(providers)
                _global_providers_set = True
        except BaseException:
            uninstall_backend()
            if providers is not None:
                for provider in (providers.tracer_provider, providers.meter_provider, providers.logger_provider):
                    if provider is not None:
                        try:
                            provider.shutdown()
                        except Exception:
                            pass
            raise
        handle = TelemetryHandle(config, providers=providers, backend=backend, **handle_args)
        _active = handle
    import weakref

    atexit.register(_atexit_shutdown, weakref.ref(handle))
    return handle


def _set_global_providers(providers) -> None:
    # Instrumentations that read the globals (FastAPI, aiohttp) then reach our exporters.
    from opentelemetry import metrics, trace

    if providers.tracer_provider is not None:
        trace.set_tracer_provider(providers.tracer_provider)
    if providers.meter_provider is not None:
        metrics.set_meter_provider(providers.meter_provider)
    if providers.logger_provider is not None:
        from opentelemetry import _logs

        _logs.set_logger_provider(providers.logger_provider)
