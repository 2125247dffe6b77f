"""setup_telemetry and TelemetryHandle: one call per process, bounded flush and shutdown.

Fork: a child forked from an exporting process keeps exporting through the setup it
inherited, which re-initialises itself in the child: the span queue starts empty (spans
the parent had queued stay the parent's, so each is exported once, by the parent), the
export thread, locks and the id generator are fresh, the exporter is built anew for the
child (it never touches the parent's connections or gRPC channel), file exporters write a
new file named for the child's pid, the resource names the child's pid and instance, and
the child's shutdown report counts only the child's spans. The child exports what it
emits itself: a multiprocessing child flushes in multiprocessing's exit path and on
SIGTERM (pool workers are terminated so); a raw ``os.fork()`` child must call
``handle.shutdown()`` (or exit normally, which runs the exit hook) before ``os._exit``.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from lens_core import _log
from lens_core.config import LensConfig
from lens_core.semconv import SCHEMA_URL
from lens_core.export_ranks import export_decision

from otel_bridge._extras import missing_otel, one_line_if_uncaught
from otel_bridge.lifecycle import exit_through_multiprocessing, on_exit, on_fork

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and OpenTelemetry are imported by checkers only
    from typing import Any, Iterable, Mapping, Optional, Tuple

    from opentelemetry.metrics import Meter
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

    from lens_core.backend import SpanBackend

    from otel_bridge.sdk.providers import Providers

from otel_bridge.runid import resolve_run_id

__all__ = ["TelemetryHandle", "active_handle", "resolve_rank", "setup_telemetry"]

# Re-entrant: a reinit shuts the previous handle down (which takes this lock) while
# holding it, and a SIGTERM handler may run shutdown on a thread that already holds it.
_setup_lock = threading.RLock()
_active = None  # the handle of the exporting setup in this process, if any
_global_providers_set = False


def _after_fork_in_child() -> None:
    # A parent thread may have held this lock at fork time; the child starts afresh (each
    # exporting handle resets its own lock and shutdown state: TelemetryHandle._after_fork).
    global _setup_lock
    _setup_lock = threading.RLock()


on_fork("otel_bridge.handle", after_in_child=_after_fork_in_child)


def active_handle() -> Optional[TelemetryHandle]:
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


def resolve_rank(rank: Optional[int] = None, world_size: Optional[int] = None, local_rank: Optional[int] = None,
                 environ: Optional[Mapping[str, str]] = None) -> Tuple[int, int, int]:
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

    config: LensConfig
    rank: int
    world_size: int
    local_rank: int
    run_id: str
    providers: Optional[Providers]
    backend: Optional[SpanBackend]

    def __init__(self, config: LensConfig, *, rank: int, world_size: int, local_rank: int, run_id: str,
                 providers: Optional[Providers] = None, backend: Optional[SpanBackend] = None) -> None:
        self.config = config
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.run_id = run_id
        self.providers = providers
        self.backend = backend
        self._lock = threading.RLock()
        self._deadline = None  # set by the first shutdown()
        self._timeout_ms = None
        self._result = None  # the first shutdown's result, once known
        self._claims = {}
        self._close_started = False  # the closing thread was started
        self._shutdown_thread = None  # the thread that called shutdown() first
        self._noop = None
        self._tracer = None
        self.goodput = None  # the LiveGoodput of an exporting rank with traces and metrics
        self._previous_handlers = {}
        if providers is not None:  # only an exporting handle has a shutdown that takes time
            on_fork("otel_bridge.handle", after_in_child=TelemetryHandle._after_fork, owner=self)

    def _after_fork(self) -> None:
        """In a forked child: a fresh lock, and a shutdown the parent had under way is not
        the child's (its closing thread stayed in the parent): the child's own shutdown()
        starts afresh, within its own deadline, and closes the child's pipeline."""
        self._lock = threading.RLock()
        if self._deadline is not None and self._result is None:
            self._deadline = self._timeout_ms = self._shutdown_thread = None
            self._claims = {}
            self._close_started = False

    @property
    def is_exporting(self) -> bool:
        """True when this rank built providers and exports telemetry."""
        return self.providers is not None

    @property
    def closed(self) -> bool:
        """True once shutdown() has been called."""
        return self._deadline is not None

    @property
    def pipeline(self):
        """The span pipeline (records in, OTLP out), or None on a quiet rank."""
        return self.providers.pipeline if self.providers is not None else None

    def _fallback(self):
        if self._noop is None:
            from otel_bridge.sdk.providers import build_noop_providers

            try:
                self._noop = build_noop_providers()
            except ModuleNotFoundError as exc:
                missing = missing_otel(exc, "handle.tracer / handle.meter (no-op ones on this quiet rank)")
                if missing is None:
                    raise
                raise missing from exc
        return self._noop

    @property
    def tracer(self) -> Tracer:
        """A tracer on this rank's TracerProvider, under the ``lens`` scope (a no-op tracer
        on a quiet rank, where OpenTelemetry is not even imported for it)."""
        if self.providers is None:  # quiet: the API's import alone costs ~85 ms and 19 modules
            from otel_bridge._noop import NOOP_TRACER

            return NOOP_TRACER  # type: ignore[return-value]
        if self._tracer is None:
            provider = self.providers.tracer_provider if self.providers else None
            if provider is None:
                return self._fallback().tracer_provider.get_tracer("lens")
            from otel_bridge.sdk.backend import INSTRUMENTATION_SCOPE
            from otel_bridge.sdk.providers import lens_version

            self._tracer = provider.get_tracer(INSTRUMENTATION_SCOPE, lens_version(), schema_url=SCHEMA_URL)
        return self._tracer

    @property
    def meter(self) -> Meter:
        """A meter from this rank's MeterProvider (a no-op meter when not exporting metrics; on a
        quiet rank one that does not import OpenTelemetry)."""
        if self.providers is None:
            from otel_bridge._noop import NOOP_METER

            return NOOP_METER  # type: ignore[return-value]
        provider = self.providers.meter_provider if self.providers else None
        if provider is None:
            return self._fallback().meter_provider.get_meter("lens")
        from otel_bridge.sdk.backend import INSTRUMENTATION_SCOPE
        from otel_bridge.sdk.providers import lens_version

        return provider.get_meter(INSTRUMENTATION_SCOPE, lens_version(), schema_url=SCHEMA_URL)

    def force_flush(self, timeout_ms: Optional[int] = None) -> bool:
        """Export what is buffered; True if everything went out within ``timeout_ms``."""
        if not self.is_exporting or self._deadline is not None:
            return True
        timeout_ms = timeout_ms or self.config.shutdown_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        ok = True
        if self.pipeline is not None:  # waits without a lock: a signal may interrupt it
            ok = self.pipeline.flush(timeout_ms / 1000)
        results = []

        def flush_others():
            p = self.providers
            for provider in (p.meter_provider, p.logger_provider):
                if provider is not None:
                    results.append(bool(provider.force_flush(max(1, int((deadline - time.monotonic()) * 1000)))))

        return _run_bounded(flush_others, deadline, "lens-force-flush") and ok and all(results)

    def _live_providers(self):
        p = self.providers
        return [x for x in (p.tracer_provider, p.meter_provider, p.logger_provider) if x is not None]

    def shutdown(self, timeout_ms: Optional[int] = None) -> bool:
        """Flush and shut down traces, metrics and logs; returns by the deadline even when
        the collector is unreachable (what could not be exported is reported in one
        WARNING). True when everything was exported.

        Spans still open are ended first, marked truncated. A second call (another thread,
        or a SIGTERM handler that interrupted the first call) waits for the first one and
        returns its result."""
        global _active
        with self._lock:  # re-entrant: a signal handler may run this on the same thread
            first = self._deadline is None
            if first:  # (what a signal landing here sees: _deadline, set last, decides "first")
                self._timeout_ms = timeout_ms or self.config.shutdown_timeout_ms
                self._shutdown_thread = threading.get_ident()
                if not self.is_exporting:
                    self._result = True
                self._deadline = time.monotonic() + self._timeout_ms / 1000
        if not first:
            if self.is_exporting and self._shutdown_thread == threading.get_ident() and not self._close_started:
                # A signal handler interrupted this thread's own shutdown() before it started
                # the closing thread: that call resumes only after this one returns, so
                # waiting for it would wait out the whole deadline. Start it from here.
                self._start_close()
            return self._await_result()
        if not self.is_exporting:
            return True
        from lens_core.efficiency import set_efficiency_sink
        from lens_core.state import uninstall_backend

        with _setup_lock:
            if _active is self:
                uninstall_backend()  # no new spans against providers that are closing
                set_efficiency_sink(None)
                _active = None
        if self.providers.logger_provider is not None:  # no new records either
            from otel_bridge.logging_bridge import detach_logging_bridge

            detach_logging_bridge(self.providers.logger_provider)
        self._start_close()
        return self._await_result()

    def _start_close(self) -> None:
        # Flagged only once started: a signal landing in between may start a second thread,
        # which finds the close claimed and returns (never a thread that nobody starts).
        _start_bounded(self._close_once, "lens-shutdown")
        self._close_started = True

    def _close_once(self) -> None:
        if self._claim("close"):
            self._close()

    def _await_result(self) -> bool:
        # Polls rather than joins or waits on an Event: a signal handler that interrupted
        # this thread inside a lock's critical section must not need that lock again.
        while self._result is None:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                return self._time_out()
            time.sleep(min(remaining, 0.002))
        return self._result

    def _claim(self, what) -> bool:
        token = object()
        return self._claims.setdefault(what, token) is token  # one atomic step: one winner

    def _close(self) -> None:
        """The shutdown itself, on the bounded thread: final export, providers, report."""
        p = self.providers
        deadline = self._deadline
        ok = True
        if p.pipeline is not None:
            try:
                ok = p.pipeline.close(deadline)
            except Exception as exc:
                ok = False
                _log.warn(f"telemetry shutdown: the span pipeline failed: {exc}")
        if self.goodput is not None:  # every span is rolled up now: the metrics' final figures
            self.goodput.publish()
        for provider in self._live_providers():
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            try:
                if hasattr(provider, "get_meter"):  # MeterProvider takes a deadline
                    provider.shutdown(timeout_millis=remaining)
                else:
                    provider.shutdown()
            except Exception as exc:
                _log.warn(f"telemetry shutdown: {type(provider).__name__} failed: {exc}")
        if p.pipeline is not None:
            p.pipeline.stop_sink(max(0.0, deadline - time.monotonic()))
        if self._claim("outcome"):
            self._result = self._report(finished=True, ok=ok)

    def _time_out(self) -> bool:
        if self._claim("outcome"):
            pipeline = self.pipeline
            if pipeline is not None:  # stop exporter retry loops, so the thread ends soon too
                pipeline.stop_sink(0.0)
            self._result = self._report(finished=False, ok=False)
        while self._result is None:  # the other claimant is writing it now
            time.sleep(0.001)
        return self._result

    def _report(self, *, finished, ok) -> bool:
        pipeline = self.pipeline
        if pipeline is None:
            return finished and ok
        counts = pipeline.final_counts()
        lost = max(0, counts.created - counts.exported - counts.spooled)
        if finished and ok and lost == 0 and not counts.spooled:
            return True
        where = "" if finished else f"shutdown did not finish within {self._timeout_ms} ms; "
        parts = [f"{n} {what}" for n, what in ((counts.dropped, "dropped (buffer full)"),
                                                (counts.failed, "failed to export"),
                                                (counts.unended, "never ended or still queued")) if n]
        detail = f" ({', '.join(parts)})" if parts else ""
        if pipeline.last_error:
            detail += f"; last export error: {pipeline.last_error}"
        spooled = ""
        if counts.spooled:  # not lost: the next process of the run, or `lens replay`, sends them
            spooled = (f"{counts.spooled} of {counts.created} spans wait in the disk spool "
                       f"({pipeline.spool.directory}) for the next process of this run or `lens replay`")
            if not lost:
                _log.warn(f"lens telemetry (run {self.run_id}, rank {self.rank}): {where}{spooled}{detail}")
                return False
            spooled = "; " + spooled
        _log.warn(f"lens telemetry (run {self.run_id}, rank {self.rank}): {where}{lost} of "
                  f"{counts.created} spans were not exported{detail}{spooled}")
        return False

    def install_signal_handlers(self, signals: Optional[Iterable[int]] = None) -> None:
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

    def __repr__(self) -> str:
        state = "exporting" if self.is_exporting else "quiet"
        return f"<TelemetryHandle run={self.run_id} rank={self.rank}/{self.world_size} {state}>"


def _start_bounded(fn, name) -> None:
    """Run ``fn`` on a daemon thread (inline where no thread can start: exit hooks on 3.12)."""
    from otel_bridge._signals import signals_to_main_thread

    thread = threading.Thread(target=fn, name=name, daemon=True)
    try:
        with signals_to_main_thread():  # a second SIGTERM during shutdown reaches the main thread too
            thread.start()
    except RuntimeError:
        # Python 3.12 refuses new threads in exit hooks: run inline, bounded only by the
        # exporters' own timeouts (3.11 and 3.13 start the thread).
        fn()


def _run_bounded(fn, deadline, name) -> bool:
    """Run ``fn`` on a daemon thread; True if it finished before ``deadline``."""
    done = []

    def run():
        fn()
        done.append(True)

    _start_bounded(run, name)
    while not done and time.monotonic() < deadline:
        time.sleep(0.002)
    return bool(done)


def _shutdown_at_exit(handle) -> None:
    handle.shutdown()


def _warn_outside(selector, world_size: int, what: str) -> None:
    outside = selector.outside(world_size)
    if outside:
        none_left = len(outside) == len(selector.ranks)
        _log.warn(f"lens telemetry: {what}={selector} names rank(s) {','.join(map(str, outside))} outside world "
                  f"size {world_size}" + ("; no rank is selected" if none_left else "; they are ignored"))


def _every_group_off() -> None:
    """A disabled or quiet setup: every span group off (the empty set pinned), as the seed's
    ``set_enabled_span_groups(frozenset())``. A process that never loaded the gate's state has
    every group off already, so a quiet rank loads nothing for this."""
    import sys

    state = sys.modules.get("lens_core.state")
    if state is not None:
        state.set_enabled_span_groups(())


def _apply_redact_allow(keys) -> None:
    """lens_core.redaction.set_redact_allow(keys), without loading redaction for an empty list
    it does not hold yet (its list starts empty): a quiet rank never loads it."""
    if keys or "lens_core.redaction" in sys.modules:
        from lens_core.redaction import set_redact_allow

        set_redact_allow(keys)


def setup_telemetry(config: LensConfig, *, resource_attributes: Optional[Mapping[str, Any]] = None,
                    rank: Optional[int] = None, world_size: Optional[int] = None, local_rank: Optional[int] = None,
                    span_exporter: Optional[SpanExporter] = None, metric_reader: Optional[MetricReader] = None,
                    export_strategy: Any = None,
                    _allow_reinit: bool = False) -> TelemetryHandle:
    """Set up telemetry for this process and return its handle.

    A disabled config or a rank that ``export_ranks`` leaves quiet builds nothing, never
    imports the OpenTelemetry SDK and turns every span group off (pins the empty set), also
    after an earlier enabled setup, whose handle stays active and exports what was recorded
    (as the seed's ``set_enabled_span_groups(frozenset())``). ``export_strategy``
    (a callable ``(rank, world_size, local_rank) -> bool``, or a spec such as ``first``
    or a registered strategy's name) decides instead of ``config.export_ranks``. An
    exporting rank builds providers, installs the OTel span backend into lens_core and
    applies ``config.span_groups``. A second enabled call raises RuntimeError unless
    ``_allow_reinit`` (tests); a failure part-way leaves nothing installed. A rank list
    naming ranks outside the world is warned about (once, on rank 0). ``config.redact_allow``
    replaces the redaction allow-list (lens_core.redaction.set_redact_allow). Enabled
    without the OpenTelemetry SDK it raises MissingExtraError (an ImportError) naming the
    extra to install; left uncaught, that error prints as its one line.
    """
    global _active, _global_providers_set
    if not isinstance(config, LensConfig):
        raise TypeError(f"setup_telemetry expects a LensConfig, got {type(config).__name__}")
    rank, world_size, local_rank = resolve_rank(rank, world_size, local_rank)
    _apply_redact_allow(config.redact_allow)
    run_id = resolve_run_id(config.run_id)
    handle_args = dict(rank=rank, world_size=world_size, local_rank=local_rank, run_id=run_id)
    if not config.enabled:
        _every_group_off()  # as the seed does: after an enabled setup too
        return TelemetryHandle(config, **handle_args)
    if rank == 0:  # every rank sees the same lists: say it once
        if export_strategy is None:
            _warn_outside(config.export_ranks, world_size, "export_ranks")
        _warn_outside(config.trace_ranks, world_size, "trace_ranks")
    if not export_decision(config.export_ranks if export_strategy is None else export_strategy,
                           rank, world_size, local_rank):
        _every_group_off()
        return TelemetryHandle(config, **handle_args)

    # An exporting rank's imports: a quiet rank (above) never loads the gate or the recorder.
    from lens_core.state import install_backend, set_span_group_spec, uninstall_backend

    from otel_bridge._signals import signals_to_main_thread
    from otel_bridge.sdk.backend import OTelBackend
    from otel_bridge.sdk.providers import build_providers, lens_version

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
            with signals_to_main_thread():  # the threads the SDK, gRPC and Lens start here
                providers = build_providers(
                    config, run_id=run_id, rank=rank, world_size=world_size, local_rank=local_rank,
                    resource_attributes=resource_attributes, span_exporter=span_exporter,
                    metric_reader=metric_reader)
            # A rank the trace sampler leaves out gets no span backend: every group reads
            # off, so its lens spans cost what they cost on a quiet rank (the sampler
            # still drops spans made on the provider directly).
            sampler = getattr(providers.tracer_provider, "sampler", None)
            if providers.tracer_provider is None or not getattr(sampler, "selected", True):
                backend = None
            elif providers.recorder is not None:
                backend = providers.recorder
            else:
                backend = OTelBackend(providers.tracer_provider, lens_version(),
                                      device=getattr(providers.pipeline, "device", None),
                                      nvtx=getattr(providers.pipeline, "nvtx", None))
            if backend is not None:
                install_backend(backend)
            set_span_group_spec(config.span_groups)
            if not _global_providers_set:
                _set_global_providers(providers)
                _global_providers_set = True
            if providers.logger_provider is not None:  # logs enabled: Python logging goes there
                from otel_bridge.logging_bridge import adopt_setup_provider

                adopt_setup_provider(providers.logger_provider)
        except BaseException as exc:
            uninstall_backend()
            if providers is not None and providers.logger_provider is not None:
                from otel_bridge.logging_bridge import detach_logging_bridge

                detach_logging_bridge(providers.logger_provider)
            if providers is not None:
                for provider in (providers.tracer_provider, providers.meter_provider, providers.logger_provider):
                    if provider is not None:
                        try:
                            provider.shutdown()
                        except Exception:
                            pass
                if providers.pipeline is not None:
                    providers.pipeline.abandon()
            missing = missing_otel(exc, "setup_telemetry (telemetry is enabled on this rank)")
            if missing is not None:  # one line, not two chained tracebacks, if the caller lets it go
                one_line_if_uncaught()
                raise missing from None
            raise
        handle = TelemetryHandle(config, providers=providers, backend=backend, **handle_args)
        _install_vocabulary_metrics(handle)
        _active = handle
    import weakref

    on_exit("otel_bridge.handle", _shutdown_at_exit, owner=handle)
    _flush_multiprocessing_children(weakref.ref(handle))
    return handle


def _flush_multiprocessing_children(handle_ref) -> None:
    """A multiprocessing child ends through ``os._exit`` (no exit hook runs) or, for a pool
    worker, by the parent's SIGTERM: in such a child, flush and shut down in the exit path
    multiprocessing does run (its finalizers) and on SIGTERM. Forked children get this
    from the parent's setup; spawned ones when they call setup_telemetry themselves."""
    import multiprocessing
    import multiprocessing.util as mp_util
    import signal

    from otel_bridge._signals import watch_for_lost_signal

    def in_child(_handle=None):
        handle = handle_ref()
        if handle is None or handle.closed:
            return
        exit_through_multiprocessing()  # the exit participants (this handle's shutdown) run there
        try:
            handle.install_signal_handlers()
        except ValueError:  # not the main thread: the finalizer still flushes a normal exit
            return
        if handle._previous_handlers.get(signal.SIGTERM) in (signal.SIG_DFL, None):
            # SIGTERM would have ended this child: a SIGTERM whose handler never runs (a pool
            # worker blocked on its task queue) is flushed and ends it all the same
            watch_for_lost_signal(signal.SIGTERM, lambda: _closing(handle_ref), lambda: _end_on_sigterm(handle_ref))

    handle = handle_ref()
    mp_util.register_after_fork(handle, in_child)  # runs in each forked multiprocessing child
    if multiprocessing.parent_process() is not None:  # this process is such a child itself
        in_child()


def _closing(handle_ref) -> bool:
    handle = handle_ref()
    return handle is None or handle.closed


def _end_on_sigterm(handle_ref) -> None:
    """What a SIGTERM whose handler never ran does: flush, then end the process (exit status
    143, as a shell reports SIGTERM; a thread other than the main one cannot restore the
    default action and re-deliver the signal)."""
    import signal

    _log.warn("lens telemetry: SIGTERM's handler could not run (the main thread is blocked in C); "
              f"flushed from a thread and exiting with status {128 + signal.SIGTERM}")
    handle = handle_ref()
    if handle is not None:
        handle.shutdown()
    os._exit(128 + signal.SIGTERM)


def _install_vocabulary_metrics(handle) -> None:
    """On an exporting rank with metrics: efficiency/* timer seconds go to its meter (the efficiency
    sink), and, with traces too and ``goodput_metrics``, its spans feed the live goodput (its ratio
    only with ``goodput_ratio``)."""
    from lens_core.efficiency import set_efficiency_sink

    providers = handle.providers
    if providers.meter_provider is None:
        set_efficiency_sink(None)
        return
    from otel_bridge.instruments.efficiency import EfficiencyTimers

    meter = handle.meter
    set_efficiency_sink(EfficiencyTimers(meter).record)
    if handle.config.goodput_metrics and providers.pipeline is not None and handle.backend is not None:
        from otel_bridge.sdk.goodput import LiveGoodput

        handle.goodput = LiveGoodput(meter, run_id=handle.run_id, rank=handle.rank,
                                     ratio=handle.config.goodput_ratio)
        providers.pipeline.observer = handle.goodput.observe


def _set_global_providers(providers) -> None:
    # Instrumentations that read the globals (FastAPI, aiohttp) then reach our exporters.
    from opentelemetry import metrics, trace

    if providers.tracer_provider is not None:
        trace.set_tracer_provider(providers.tracer_provider)
    if providers.meter_provider is not None:
        metrics.set_meter_provider(providers.meter_provider)
    if providers.logger_provider is not None:
        from otel_bridge.sdk import upstream

        upstream.logs_module("api").set_logger_provider(providers.logger_provider)
