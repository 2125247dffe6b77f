"""The span pipeline both recorders share: records in, OTLP out on one thread, every loss counted.

Lens spans (native records) and SDK spans (turned into records by ``SdkSpanProcessor``)
queue in the process's ``Recorder``. One export thread takes batches, encodes them with
Lens's encoders and hands them to a sink: OTLP (the SDK exporters' transport, retries and
``OTEL_EXPORTER_OTLP_*`` configuration, fed pre-encoded bytes), OTLP/JSON lines in a
file, or any SDK ``SpanExporter`` (records turned back into ReadableSpans).

Signal safety: an application thread never takes a lock the shutdown path needs (a
SIGTERM handler runs shutdown on the interrupted thread). The export thread polls; a
flush or shutdown request is an attribute write; only exporting code takes the export
lock. Fork: a fork waits for the export under way; the child starts with an empty queue,
fresh counters and a fresh sink built for it (the parent's HTTP connections and gRPC
channel are never touched, not even by gRPC's own fork handlers), and exports on its own
thread; a multiprocessing child flushes before it exits (otel_bridge.handle).
"""

from __future__ import annotations

import os
import threading
import time
import weakref

from lens_core import _log, semconv
from lens_core.redaction import redact_span_fields

from otel_bridge._signals import signals_to_main_thread

__all__ = [
    "FileSink",
    "LossCounts",
    "NullSink",
    "OtlpSink",
    "ScopeTable",
    "SdkExporterSink",
    "SdkSpanProcessor",
    "SpanPipeline",
]

_MISSING = object()
_POLL_S = 0.02  # how often the export thread looks at the queue (and at flush requests)
FORK_WAIT_S = 2.0  # the longest a fork waits for an export under way


class LossCounts:
    """A process's span accounting (what the loss record and the shutdown warning say)."""

    __slots__ = ("created", "exported", "dropped", "failed", "unended", "truncated")

    def __init__(self, created=0, exported=0, dropped=0, failed=0, unended=0, truncated=0):
        self.created, self.exported, self.dropped = created, exported, dropped
        self.failed, self.unended, self.truncated = failed, unended, truncated

    @property
    def lost(self) -> int:
        """Spans that will never be delivered: dropped + failed + unended."""
        return self.dropped + self.failed + self.unended

    def as_attributes(self) -> dict:
        """The loss record's attributes."""
        return {
            semconv.LENS_SPANS_CREATED: self.created,
            semconv.LENS_SPANS_DROPPED: self.dropped,
            semconv.LENS_SPANS_FAILED: self.failed,
            semconv.LENS_SPANS_UNENDED: self.unended,
            semconv.LENS_SPANS_TRUNCATED: self.truncated,
        }

    def key(self):
        return (self.dropped, self.failed, self.unended)


class ScopeTable:
    """Instrumentation scopes seen in this process, each encoded once (index 0: Lens's)."""

    def __init__(self, name: str, version: str):
        self._lock = threading.Lock()
        self._index = {}
        self.pb = []
        self.json = []
        self.objects = []
        self.index(_Scope(name, version))

    def index(self, scope) -> int:
        """The index of ``scope`` (an SDK InstrumentationScope or a name/version pair)."""
        key = (getattr(scope, "name", ""), getattr(scope, "version", None) or "",
               getattr(scope, "schema_url", None) or "")
        found = self._index.get(key)
        if found is not None:
            return found
        with self._lock:  # app threads add scopes; readers index the lists without it
            found = self._index.get(key)
            if found is None:
                from otel_bridge.exporters._otlp_json import to_otlp_json
                from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
                import json

                message = InstrumentationScope(name=key[0], version=key[1])
                self.pb.append(message.SerializeToString())
                self.json.append(json.dumps(to_otlp_json(message), separators=(",", ":"), ensure_ascii=False))
                self.objects.append(_sdk_scope(key))
                found = self._index[key] = len(self.pb) - 1
        return found


class _Scope:
    __slots__ = ("name", "version", "schema_url")

    def __init__(self, name, version):
        self.name, self.version, self.schema_url = name, version, ""


def _sdk_scope(key):
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    return InstrumentationScope(key[0], key[1] or None, key[2] or None)


# ---- sinks ---------------------------------------------------------------------------------


class _Encoded:
    """A pre-encoded batch handed through the SDK gRPC exporter's retry loop."""

    __slots__ = ("data", "count")

    def __init__(self, data, count):
        self.data, self.count = data, count


class OtlpSink:
    """OTLP over the SDK exporter's own transport: the request bytes are Lens's."""

    def __init__(self, factory, encoder):
        self._factory = factory  # builds the SDK exporter (again in a forked child)
        self._encode = encoder
        self._exporter = None

    @property
    def exporter(self):
        """The SDK exporter (built on first use)."""
        if self._exporter is None:
            self._exporter = _adapt_otlp(self._factory())
        return self._exporter

    def send(self, pipeline, records):
        data = self._encode(pipeline.resource_pb, pipeline.scopes.pb, records)
        exporter = self.exporter
        if hasattr(exporter, "_lens_grpc"):
            result = exporter._export(_Encoded(data, len(records)))
            ok = getattr(result, "name", "") == "SUCCESS"
            return ok, None if ok else f"{type(exporter).__name__} returned {getattr(result, 'name', result)}"
        result = exporter._client.export(data)
        if result.success:
            return True, None
        detail = result.error or (f"HTTP {result.status_code} {result.reason or ''}".strip() if result.status_code else "")
        return False, f"{type(exporter).__name__}: {detail or 'export failed'}"

    def shutdown(self, timeout_s):
        if self._exporter is not None:
            self._exporter.shutdown()

    def for_child(self):
        return OtlpSink(self._factory, self._encode)

    def before_fork(self):
        # With GRPC_ENABLE_FORK_SUPPORT, gRPC's fork handlers reach into every channel it
        # knows of, in the child, and can deadlock there on a lock one of gRPC's own threads
        # held at the fork. The child never uses the parent's channel: take it off gRPC's
        # list for the fork, so the child never touches it; the parent puts it back after.
        self._hidden = None
        channel = getattr(self._exporter, "_channel", None) if hasattr(self._exporter, "_lens_grpc") else None
        if channel is not None:
            try:
                from grpc._cython import cygrpc

                cygrpc.fork_unregister_channel(channel)
                self._hidden = channel
            except Exception:  # another gRPC: its fork handling stays as it is
                pass

    def after_fork_in_parent(self):
        channel, self._hidden = getattr(self, "_hidden", None), None
        if channel is not None:
            from grpc._cython import cygrpc

            cygrpc.fork_register_channel(channel)


def _adapt_otlp(exporter):
    """Let the SDK exporter send Lens's bytes: gRPC through its retry loop (the request is
    parsed back into the protobuf message the stub wants), HTTP through its client."""
    if hasattr(exporter, "_translate_data") and hasattr(exporter, "_export"):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        parse = ExportTraceServiceRequest.FromString
        exporter._translate_data = lambda batch: parse(batch.data)
        exporter._count_data = lambda batch: batch.count
        exporter._lens_grpc = True
        return exporter
    client = getattr(exporter, "_client", None)
    if client is None or not callable(getattr(client, "export", None)):
        raise RuntimeError(
            f"{type(exporter).__name__} has no serialized-payload client (opentelemetry-exporter-otlp-proto-http "
            "1.45 or newer has one); install a newer exporter or use LENS_RECORDER=sdk with a custom exporter")
    return exporter


class FileSink:
    """OTLP/JSON lines in ``<dir>/<run_id>/traces-rank<R>-pid<P>-<tag>.jsonl``, each at most
    ``max_line_bytes``: a batch that would write a longer line has its values past
    ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (1 MiB characters when unset) cut, listed in
    ``lens.truncated_keys``, and is split (otel_bridge.exporters._file.write_records)."""

    def __init__(self, writer, encoder, max_line_bytes: int = 8 << 20):
        from otel_bridge.exporters._file import value_limit

        self._writer = writer
        self._encode = encoder
        self.max_line_bytes = max_line_bytes
        self.value_limit = value_limit()
        self._lost_seen = 0

    @property
    def path(self):
        return self._writer.path

    def send(self, pipeline, records):
        from otel_bridge.exporters._file import write_records

        try:
            write_records(self._writer, self._encode, pipeline.resource_json, pipeline.scopes.json, records,
                          max_line_bytes=self.max_line_bytes, limit=self.value_limit)
        except (OSError, ValueError) as exc:
            return False, f"could not write {self._writer.path}: {exc}"
        finally:
            # Spans already counted exported into a file that was deleted since (or whose
            # directory was): lost after all. The loss record counts them as failed.
            lost = self._writer.lost_spans - self._lost_seen
            if lost:
                self._lost_seen += lost
                pipeline.exported -= lost
                pipeline.failed += lost
        return True, None

    def shutdown(self, timeout_s):
        self._writer.close()

    def for_child(self):
        return self  # the writer opens the child's own file on its first write


class NullSink:
    """``LENS_EXPORTER=none``: spans are recorded (for propagation) and discarded."""

    def send(self, pipeline, records):
        return True, None

    def shutdown(self, timeout_s):
        pass

    def for_child(self):
        return self


class SdkExporterSink:
    """Any SDK SpanExporter (console, in-memory, a user's): records become ReadableSpans."""

    def __init__(self, exporter):
        self.exporter = exporter

    def send(self, pipeline, records):
        spans = [_readable(pipeline, r) for r in records]
        try:
            result = self.exporter.export(spans)
        except Exception as exc:  # an exporter bug must not kill the export thread
            return False, f"{type(self.exporter).__name__} raised {type(exc).__name__}: {exc}"
        ok = getattr(result, "name", "") == "SUCCESS"
        return ok, None if ok else f"{type(self.exporter).__name__} returned {getattr(result, 'name', result)}"

    def shutdown(self, timeout_s):
        self.exporter.shutdown()

    def for_child(self):
        return self


def _readable(pipeline, r):
    """A record as an SDK ReadableSpan."""
    if r.sdk_span is not None:
        return r.sdk_span
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

    def context(trace_id, span_id, remote, flags, state):
        return SpanContext(trace_id, span_id, remote, TraceFlags(flags),
                           TraceState.from_header([state]) if state else None)

    attrs = dict(r.attrs)
    if r.thread_name is not None:
        attrs[semconv.THREAD_ID] = r.thread_id
        attrs[semconv.THREAD_NAME] = r.thread_name
    return ReadableSpan(
        name=r.name,
        context=context(r.trace_id, r.span_id, False, 1, r.trace_state),
        parent=context(r.trace_id, r.parent_id, r.parent_remote, 1, None) if r.parent_id else None,
        resource=pipeline.resource,
        attributes=attrs,
        events=[Event(name, attributes or None, ts) for name, ts, attributes in r.events or ()],
        links=[Link(context(t, s, remote, 1, state), attributes or None) for t, s, state, attributes, remote in r.links or ()],
        kind=SpanKind(r.kind - 1),
        status=Status(StatusCode(r.status_code), r.status_msg),
        start_time=r.start_ns,
        end_time=r.end_ns,
        instrumentation_scope=pipeline.scopes.objects[r.scope],
    )


# ---- SDK spans into the pipeline -----------------------------------------------------------


class SdkSpanProcessor:
    """The TracerProvider's span processor: stamps the thread, keeps SDK spans that are
    still open (bounded, for truncation at shutdown), and queues ended ones as records.

    Duck-typed (subclassing SpanProcessor would import the SDK with this module). No
    lock on the span path: dict operations are atomic, so a signal handler's shutdown
    never waits on an interrupted thread."""

    #: Evicted span ids remembered so a late end is not mistaken for an untracked span;
    #: past this many, the oldest is taken as never ending.
    EVICTED_MEMORY = 65_536

    def __init__(self, pipeline, max_open: int):
        self._pipeline = pipeline
        self.max_open = max_open
        self._reset()

    def _reset(self):
        self._open = {}
        self._evicted = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()  # app threads' counter updates; the shutdown path never takes it
        self.created = self.evicted = self.evicted_ended = self.truncated = self.skipped = 0

    def on_start(self, span, parent_context=None):
        if self._pid != os.getpid():
            self._reset()  # a forked child: the parent's open spans are not ours
        if semconv.THREAD_ID not in span.attributes:  # Lens's own SDK spans start with it
            thread = threading.current_thread()
            span.set_attributes({semconv.THREAD_ID: thread.ident, semconv.THREAD_NAME: thread.name})
        if self._pipeline.closed:
            return  # started after shutdown: not tracked, not exported
        # Counted before it can be exported: a thread stopped between the two steps (a
        # signal running shutdown) leaves a span counted and lost, never exported uncounted.
        with self._lock:
            self.created += 1
        opened = self._open
        opened[span.context.span_id] = span
        if len(opened) > self.max_open:
            self._evict(opened)

    def _evict(self, opened):
        try:
            span_id = next(iter(opened))
            del opened[span_id]  # the oldest: it no longer holds memory
        except (StopIteration, KeyError, RuntimeError):  # raced with its own end
            return
        with self._lock:
            self.evicted += 1
        evicted = self._evicted
        evicted[span_id] = None
        if len(evicted) > self.EVICTED_MEMORY:
            try:
                del evicted[next(iter(evicted))]
            except (StopIteration, KeyError, RuntimeError):
                pass

    def on_end(self, span):
        span_id = span.context.span_id
        if self._open.pop(span_id, None) is None:
            if self._evicted.pop(span_id, _MISSING) is _MISSING:
                return  # not tracked: started after shutdown, or before a fork
            with self._lock:
                self.evicted_ended += 1
        # Queued as it is: the export thread turns it into a record, off the app thread.
        self._pipeline.recorder._enqueue(span)

    def _on_ending(self, span):
        # The SDK calls this hook on every processor; it must exist.
        pass

    def end_open_spans(self) -> int:
        """End every SDK span still open, newest first, marked truncated."""
        count = 0
        for span_id, span in reversed(list(self._open.items())):
            lock = getattr(span, "_lock", None)
            if lock is not None and lock.locked():
                # Its owner is inside end() or set_attribute() right now (or was interrupted
                # there by the signal running this shutdown): taking the span's lock would
                # wait for it. Counted as never ended.
                self.skipped += 1
                continue
            if getattr(span, "end_time", None) is not None:
                # Ended, but its owner has not reached on_end yet (or never will: the signal
                # running this shutdown interrupted it there). Whoever takes it out of the
                # ledger first queues it; the other then finds nothing to do.
                if self._open.pop(span_id, None) is not None:
                    self._pipeline.recorder._enqueue(span)
                continue
            try:
                span.add_event(semconv.LENS_SPAN_TRUNCATED, {semconv.LENS_TRUNCATION_REASON: "shutdown"})
                span.set_attribute(semconv.LENS_SPAN_TRUNCATED, True)
                span.end()
                count += 1
            except Exception:  # ended by its owner meanwhile: nothing to do
                pass
        self.truncated += count
        return count

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._pipeline.flush(timeout_millis / 1000)


# ---- the pipeline --------------------------------------------------------------------------


class SpanPipeline:
    """Exports what the recorder queues, on one daemon thread; bounded flush and shutdown."""

    def __init__(self, recorder, sink, *, resource, scopes, encoders, retarget=None,
                 batch_records: int = 4096, schedule_delay_s: float = 1.0):
        self.recorder = recorder
        self.sink = sink
        self._retarget = retarget  # resource -> this process's resource (after a fork)
        self.set_resource(resource)
        self.scopes = scopes
        self.encoders = encoders
        self.batch_records = batch_records
        self.schedule_delay_s = schedule_delay_s
        self.sdk = None  # the SdkSpanProcessor, set by build_providers
        self.closed = False
        self._fresh_state()
        self._parent_sinks = []
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(before=lambda: (p := ref()) is not None and p._before_fork(),
                                after_in_parent=lambda: (p := ref()) is not None and p._after_fork_in_parent(),
                                after_in_child=lambda: (p := ref()) is not None and p._after_fork())

    def set_resource(self, resource) -> None:
        """Use ``resource`` for every export (encoded once here)."""
        from otel_bridge.sdk.recording import encode_resource

        self.resource = resource
        self.resource_pb, self.resource_json = encode_resource(resource)

    def _fresh_state(self):
        self.exported = self.failed = 0
        self.last_error = None
        self._reported = None
        self._export_lock = threading.Lock()
        self._flush_requested = self._flush_done = 0
        self._stopping = False
        self._thread = None
        self._pid = os.getpid()

    # ---- records ----------------------------------------------------------------------

    def record_of(self, span):
        """An SDK ReadableSpan as a record."""
        ctx, parent = span.context, span.parent
        state = ctx.trace_state.to_header() if ctx.trace_state else None
        events = [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events] or None
        links = [(l.context.trace_id, l.context.span_id,
                  (l.context.trace_state.to_header() if l.context.trace_state else None) or None,
                  dict(l.attributes or {}), bool(l.context.is_remote)) for l in span.links] or None
        status = span.status
        name, attrs = span.name, dict(span.attributes or {})
        message = status.description if status.status_code.value == 2 else None
        # Secrets are redacted here, off the app thread, for every SDK span: the SDK
        # recorder's (whose set_attribute / add_event / record_exception Lens never sees)
        # and raw OpenTelemetry tracers' alike. A changed span is no longer handed on as the
        # SDK object (an SDK exporter sink rebuilds it from the record).
        clean = redact_span_fields(name, attrs, events, links, message)
        if clean is not None:
            name, attrs, events, links, message = clean
        return self.encoders.make_record(
            self.scopes.index(span.instrumentation_scope), name, span.kind.value + 1,
            ctx.trace_id, ctx.span_id, parent.span_id if parent else 0, bool(parent and parent.is_remote),
            state or None, span.start_time, span.end_time, attrs, events, links,
            status.status_code.value, message,
            (span.dropped_attributes, span.dropped_events, span.dropped_links), span if clean is None else None)

    def final_counts(self) -> LossCounts:
        """The accounting at the end: whatever was counted as created but neither exported
        nor lost otherwise (a span whose thread stopped mid-way, one still queued) will not
        be delivered now, and counts as never ended."""
        counts = self.counts()
        pending = counts.created - counts.exported - counts.lost
        if pending > 0:
            counts.unended += pending
        return counts

    def counts(self) -> LossCounts:
        """The accounting now: native and SDK spans together."""
        rec, sdk = self.recorder, self.sdk
        created, truncated = rec.created, rec.truncated
        unended = rec.evicted - rec.evicted_ended
        if sdk is not None:
            created += sdk.created
            truncated += sdk.truncated
            unended += sdk.evicted - sdk.evicted_ended + sdk.skipped
        return LossCounts(created, self.exported, rec.dropped, self.failed, max(0, unended), truncated)

    # ---- the export thread ---------------------------------------------------------------

    def start(self):
        """Start the export thread (idempotent)."""
        if self._thread is None and not self._stopping:
            thread = threading.Thread(target=self._run, name="lens-export", daemon=True)
            self._thread = thread
            with signals_to_main_thread():  # SIGTERM and the like stay with the main thread
                thread.start()

    def _run(self):
        last = time.monotonic()
        while not self._stopping:
            time.sleep(_POLL_S)
            queued = self.recorder.queued()
            flush = self._flush_requested != self._flush_done
            if not (flush or queued >= self.batch_records or (queued and time.monotonic() - last >= self.schedule_delay_s)):
                continue
            target = self._flush_requested
            self._drain(None)
            last = time.monotonic()
            self._flush_done = target

    def _drain(self, deadline) -> bool:
        """Export everything queued, one batch per hold of the export lock (a fork waits
        for one batch at most); False if out of time. The export thread (``deadline`` None)
        stops once shutdown has begun: close() drains the rest."""
        ok = True
        while True:
            if deadline is None:
                acquired = self._export_lock.acquire()
            else:
                acquired = self._export_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
            if not acquired:
                return False
            try:
                if deadline is None and self._stopping:
                    return ok
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                batch = self.recorder.take(self.batch_records)
                record_type = self.encoders.Span
                batch = [r if type(r) is record_type else self.record_of(r) for r in batch]
                counts = self.counts()
                losses = counts if counts.lost and counts.key() != self._reported else None
                if not batch and losses is None:
                    return ok
                sent = self._send(batch, losses)
            finally:
                self._export_lock.release()
            ok = sent and ok
            if not sent and not batch:  # only the loss record, and it failed: next time
                return ok

    def _send(self, batch, losses=None, final=False) -> bool:
        """Send ``batch`` (plus a loss record for ``losses``, marked ``final`` at shutdown); count the outcome."""
        records = batch + [self._loss_record(losses, final)] if losses is not None else batch
        try:
            ok, error = self.sink.send(self, records)
        except Exception as exc:  # never let a sink bug kill the export thread
            ok, error = False, f"{type(exc).__name__}: {exc}"
        if ok:
            self.exported += len(batch)
            if losses is not None:
                self._reported = losses.key()
        else:
            self.failed += len(batch)
            self.last_error = error
        return ok

    def _loss_record(self, counts, final=False):
        now = time.time_ns()
        ids = os.urandom(24)
        attributes = counts.as_attributes()
        if final:
            attributes[semconv.LENS_TELEMETRY_FINAL] = True
        return self.encoders.make_record(
            0, semconv.LENS_LOSS_SPAN_NAME, 1, int.from_bytes(ids[:16], "big") or 1,
            int.from_bytes(ids[16:], "big") or 1, 0, False, None, now, now, attributes,
            None, None, 0, None)

    # ---- flush and shutdown ---------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Ask the export thread to export everything queued now; True when it did within
        ``timeout_s``. Waits without holding any lock."""
        if self._pid != os.getpid():
            self._after_fork()
        if self._thread is None or self._stopping:
            return self.recorder.queued() == 0
        self._flush_requested += 1
        wanted = self._flush_requested
        deadline = time.monotonic() + timeout_s
        while self._flush_done < wanted:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return self.recorder.queued() == 0

    def close(self, deadline: float) -> bool:
        """Final export (truncated open spans, a closing loss record) and sink shutdown.

        Runs on the shutdown thread; True when everything was exported before
        ``deadline`` (a ``time.monotonic()`` value)."""
        self.closed = True
        self.recorder.close()
        self._stopping = True
        self.recorder.end_open_spans()
        if self.sdk is not None:
            self.sdk.end_open_spans()
        ok = self._drain(deadline)
        if not self._export_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        try:
            counts = self.final_counts()
            if ok and counts.created:  # the final loss record: zeros say "nothing lost"
                ok = self._send([], counts, final=True)
        finally:
            self._export_lock.release()
        return ok

    def stop_sink(self, timeout_s: float) -> None:
        """Shut the sink down (stops exporter retry loops)."""
        try:
            self.sink.shutdown(timeout_s)
        except Exception as exc:
            _log.warn(f"lens telemetry: shutting down the span exporter failed: {exc}")

    def abandon(self) -> None:
        """Stop the export thread without exporting and shut the sink down (a setup that
        failed part-way)."""
        self.closed = self._stopping = True
        self.recorder.close()
        self.stop_sink(0.0)

    def _before_fork(self):
        # No export in flight while the process forks: gRPC's own fork handlers (with
        # GRPC_ENABLE_FORK_SUPPORT) cancel the inherited channel's calls in the child and
        # deadlock on a call state a parent thread held mid-export. Waits for the export
        # under way, at most FORK_WAIT_S (a dead collector must not stall a fork for long).
        self._held_for_fork = self._export_lock.acquire(timeout=FORK_WAIT_S)
        hook = getattr(self.sink, "before_fork", None)
        if hook is not None:
            hook()

    def _after_fork_in_parent(self):
        hook = getattr(self.sink, "after_fork_in_parent", None)
        if hook is not None:
            hook()
        if getattr(self, "_held_for_fork", False):
            self._held_for_fork = False
            self._export_lock.release()

    def _after_fork(self):
        # The parent's sink (sockets, channels) must not be touched: keep a reference so
        # nothing is closed by the garbage collector, and build the child's own.
        self._held_for_fork = False
        if self._pid == os.getpid():
            return
        self._parent_sinks.append(self.sink)
        self.sink = self.sink.for_child()
        if self._retarget is not None:
            self.set_resource(self._retarget(self.resource))
        was_running = self._thread is not None and not self._stopping
        self._fresh_state()
        self.closed = False
        if was_running:
            self.start()
