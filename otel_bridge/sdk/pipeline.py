"""The span pipeline both recorders share: records in, OTLP out on one thread, every loss counted.

Lens spans (native records) and SDK spans (turned into records by ``SdkSpanProcessor``)
queue in the process's ``Recorder``. One export thread takes batches, encodes them with
Lens's encoders and hands them to a sink (``otel_bridge.sdk.sinks``): OTLP (the SDK
exporters' transport, retries and ``OTEL_EXPORTER_OTLP_*`` configuration, fed pre-encoded
bytes), OTLP/JSON lines in a file, or any SDK ``SpanExporter`` (records turned back into
ReadableSpans). Bad values in a span are fixed and counted by ``otel_bridge.sdk.values``.

Signal safety: an application thread never takes a lock the shutdown path needs (a
SIGTERM handler runs shutdown on the interrupted thread). The export thread polls; a
flush or shutdown request is an attribute write; only exporting code takes the export
lock. Fork: a fork waits for the export under way; the child starts with an empty queue,
fresh counters and a fresh sink built for it (the parent's HTTP connections and gRPC
channel are never touched, not even by gRPC's own fork handlers), and exports on its own
thread; a multiprocessing child flushes before it exits (otel_bridge.handle).
"""

from __future__ import annotations

import collections
import os
import threading
import time

from lens_core import _log, semconv
from lens_core.redaction import redact_span_fields

from otel_bridge._signals import signals_to_main_thread
from otel_bridge.lifecycle import on_fork
from otel_bridge.sdk import upstream
from otel_bridge.sdk.processor import LossCounts
from otel_bridge.sdk.values import ValueFixer

__all__ = ["SpanPipeline"]

_POLL_S = 0.02  # how often the export thread looks at the queue (and at flush requests)
FORK_WAIT_S = 2.0  # the longest a fork waits for an export under way


# ---- the pipeline --------------------------------------------------------------------------

_RETRY_S = (0.25, 0.5, 1.0, 2.0, 4.0)  # the sender's waits between tries of a request the collector did not take
_RECORD_BYTES_GUESS = 512  # a record's size when the recorder does not say (an older recorder)
_ADOPT_EVERY_S = 2.0  # how often the sender looks for spool segments that ended processes left


class _InOutbox:
    """Where the request being delivered came from: the outbox (not the spool)."""

    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item


class SpanPipeline:
    """Exports what the recorder queues, on one daemon thread; bounded flush and shutdown.

    With a spool (OTLP sinks, LENS_SPOOL_MB > 0) a second thread sends: the export thread
    encodes batches into an outbox bounded in bytes and, when the outbox is full (the
    collector is slow or down), appends them to the spool on disk instead; the sender
    delivers the outbox first, then the spool, oldest first, retrying what the collector
    did not take. Spans are lost only when the spool's budget is spent too."""

    def __init__(self, recorder, sink, *, resource, scopes, encoders, retarget=None,
                 batch_records: int = 4096, schedule_delay_s: float = 1.0, spool_factory=None,
                 batch_bytes: int = 4 << 20):
        self.recorder = recorder
        self.sink = sink
        self._retarget = retarget  # resource -> this process's resource (after a fork)
        self.set_resource(resource)
        self.scopes = scopes
        self.encoders = encoders
        self.batch_records = batch_records
        # A batch in flight is held twice (records and their encoding): an eighth of the buffer each.
        self.batch_bytes = max(1 << 20, min(batch_bytes, getattr(recorder, "buffer_bytes", 16 << 20) // 8))
        self.schedule_delay_s = schedule_delay_s
        # () -> Spool (raises OSError when the directory is unusable); None: no spool
        self._spool_factory = spool_factory if getattr(sink, "spoolable", False) else None
        self.sdk = None  # the SdkSpanProcessor, set by build_providers
        # called with every drained batch of ended records, on the export (or closing) thread:
        # live goodput rolls them up there, off the application's span path
        self.observer = None
        # a lens_core._device.DeviceTimer (device timing on): device-timed records wait here,
        # on the export thread, until the device has reached their events
        self.device = None
        self.nvtx = None  # (push, pop) of an NVTX range API (LENS_NVTX=1), for the SDK recorder's spans
        self._settle_by = None
        self.closed = False
        self.finished = False  # close() or abandon() has returned: a child forked after stays closed
        self.restarts = 0
        self._warned = set()
        self.spool = None
        self._fresh_state()
        self._parent_sinks = []
        on_fork("otel_bridge.pipeline", before=SpanPipeline._before_fork,
                after_in_parent=SpanPipeline._after_fork_in_parent, after_in_child=SpanPipeline._after_fork, owner=self)

    def set_resource(self, resource) -> None:
        """Use ``resource`` for every export (encoded once here)."""
        from otel_bridge.exporters._otlp_json import to_otlp_json
        import json

        message = upstream.encode_resource(resource)
        self.resource = resource
        self.resource_pb = message.SerializeToString()
        self.resource_json = json.dumps(to_otlp_json(message), separators=(",", ":"), ensure_ascii=False)
        # ResourceSpans.schema_url: not part of the Resource message, so the encoders write it
        self.resource_schema_url = resource.schema_url or ""

    def _fresh_state(self):
        self.exported = self.failed = self.invalid = self.replayed = self.spill_dropped = 0
        self.fields_invalid = 0
        self.last_error = None
        self._reported = None
        self._export_lock = threading.Lock()
        self._send_lock = threading.Lock()  # held by the sender around one delivery
        self._box_lock = threading.Lock()  # the outbox and the spool's order; never an app thread's
        self._outbox = collections.deque()  # (payload, spans, bytes), oldest first
        self._outbox_bytes = 0
        self._flush_requested = self._flush_done = 0
        self._last_delivery_ok = True
        self._stopping = self._sender_stopping = False
        self._thread = self._sender = None
        # until the sender has adopted what ended processes of the run left, this process's spans
        # queue behind it in the spool, not in the outbox ahead of it
        self._adoption_seen = False
        self._pid = os.getpid()
        if self.spool is not None:
            self.spool.forget()  # a forked child: the parent's spool stays the parent's
        self.spool = None
        if self._spool_factory is not None:
            try:
                self.spool = self._spool_factory()
            except OSError as exc:
                self._warn_once("spool", f"lens telemetry: no disk spool ({exc}); spans are dropped when the "
                                         "buffer is full and lost when the collector is down")

    def _warn_once(self, what, message):
        if what not in self._warned:
            self._warned.add(what)
            _log.warn(message)

    # ---- records ----------------------------------------------------------------------

    def record_of(self, span):
        """An SDK ReadableSpan as a record; bad values (a name, times, a status description,
        events, links) are dropped or replaced here, counted in ``fields_invalid``."""
        fix = ValueFixer()
        ctx, parent = span.context, span.parent
        state = ctx.trace_state.to_header() if ctx.trace_state else None
        events = [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events] or None
        links = [(l.context.trace_id, l.context.span_id,
                  (l.context.trace_state.to_header() if l.context.trace_state else None) or None,
                  dict(l.attributes or {}), bool(l.context.is_remote)) for l in span.links] or None
        status = span.status
        code = fix.status_code(getattr(status.status_code, "value", status.status_code))
        start_ns, end_ns = fix.times(span.start_time, span.end_time)
        name, attrs = fix.name(span.name), dict(span.attributes or {})
        events, links = fix.events(events, start_ns), fix.links(links)
        message = fix.description(status.description) if code == 2 else None
        # Secrets are redacted here, off the app thread, for every SDK span: the SDK
        # recorder's (whose set_attribute / add_event / record_exception Lens never sees)
        # and raw OpenTelemetry tracers' alike. A changed span is no longer handed on as the
        # SDK object (an SDK exporter sink rebuilds it from the record).
        clean = redact_span_fields(name, attrs, events, links, message)
        if clean is not None:
            name, attrs, events, links, message = clean
        record = self.encoders.make_record(
            self.scopes.index(span.instrumentation_scope), name, fix.kind(span.kind.value + 1),
            ctx.trace_id, ctx.span_id, parent.span_id if parent else 0, bool(parent and parent.is_remote),
            state or None, start_ns, end_ns, attrs, events, links, code, message,
            tuple(fix.count(n) for n in (span.dropped_attributes, span.dropped_events, span.dropped_links)),
            span if clean is None and not fix.fixed else None)
        self._count_fixed(fix)
        return record

    def _count_fixed(self, fix):
        if fix.fixed:
            self.fields_invalid += fix.fixed
            self._warn_once("fields", f"lens telemetry: a span carried a bad value ({fix.first}); it was dropped "
                                      f"or replaced and the span kept (counted in {semconv.LENS_FIELDS_INVALID})")

    def final_counts(self) -> LossCounts:
        """The accounting at the end: whatever was counted as created but neither exported,
        spooled for a later process, nor lost otherwise (a span whose thread stopped
        mid-way, one still queued) will not be delivered now, and counts as never ended."""
        counts = self.counts()
        pending = counts.created - counts.exported - counts.lost - counts.spooled
        if pending > 0:
            counts.unended += pending
        return counts

    def counts(self) -> LossCounts:
        """The accounting now: native and SDK spans together."""
        rec, sdk, spool = self.recorder, self.sdk, self.spool
        created, truncated = rec.created, rec.truncated
        unended = rec.evicted - rec.evicted_ended
        if sdk is not None:
            created += sdk.created
            truncated += sdk.truncated
            unended += sdk.evicted - sdk.evicted_ended + sdk.skipped
        spooled = spool.pending_spans if spool is not None else 0
        torn = spool.torn if spool is not None else 0
        return LossCounts(created, self.exported, rec.dropped + self.spill_dropped, self.failed, max(0, unended),
                          truncated, spooled=spooled, replayed=self.replayed, invalid=self.invalid, torn=torn,
                          restarts=self.restarts,
                          fields_invalid=self.fields_invalid + getattr(rec, "fields_invalid", 0),
                          device_untimed=self.device.untimed if self.device is not None else 0)

    # ---- the threads -----------------------------------------------------------------------

    def start(self):
        """Start the export thread, and the sender when there is a spool (idempotent)."""
        if self._stopping:
            return
        if self._thread is None:
            self._thread = self._start_thread(self._run, "lens-export")
        if self.spool is not None and self._sender is None and not getattr(self.sink, "deferred", False):
            self._sender = self._start_thread(self._send_loop, "lens-send")

    @staticmethod
    def _start_thread(target, name):
        thread = threading.Thread(target=target, name=name, daemon=True)
        with signals_to_main_thread():  # SIGTERM and the like stay with the main thread
            thread.start()
        return thread

    def _ensure_threads(self):
        """Replace an export thread or sender that died (counted in the loss record)."""
        for attr, target, name in (("_thread", self._run, "lens-export"), ("_sender", self._send_loop, "lens-send")):
            thread = getattr(self, attr)
            if thread is not None and not thread.is_alive() and not (self._stopping if attr == "_thread"
                                                                      else self._sender_stopping):
                self.restarts += 1
                self._warn_once("restart", f"lens telemetry: the {name} thread died; a new one took over")
                setattr(self, attr, self._start_thread(target, name))

    def _run(self):
        last = time.monotonic()
        while not self._stopping:
            time.sleep(_POLL_S)
            try:
                queued = self.recorder.queued()
                flush = self._flush_requested != self._flush_done
                waiting = self.device is not None and self.device.held
                if not (flush or queued >= self.batch_records or self._queued_bytes() >= self.batch_bytes
                        or ((queued or waiting) and time.monotonic() - last >= self.schedule_delay_s)):
                    continue
                target = self._flush_requested
                self._drain(None)
                last = time.monotonic()
                self._flush_done = target
                if self._sender is not None:
                    self._ensure_threads()
            except Exception as exc:  # a bug here must not end exporting: counted, retried next poll
                self._internal_error(exc)

    def _internal_error(self, exc):
        self.last_error = f"export thread: {type(exc).__name__}: {exc}"
        self._warn_once("internal", f"lens telemetry: {self.last_error} (exporting continues)")

    def _queued_bytes(self) -> int:
        fn = getattr(self.recorder, "queued_bytes", None)
        return fn() if fn is not None else self.recorder.queued() * _RECORD_BYTES_GUESS

    def _take(self):
        """The next batch: at most batch_records records and about batch_bytes bytes."""
        rec = self.recorder
        queued = rec.queued()
        limit = self.batch_records
        if queued:
            average = max(1, self._queued_bytes() // queued)
            limit = max(1, min(limit, self.batch_bytes // average))
        return rec.take(limit)

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
                batch = self._records(self._take())
                if self.device is not None:
                    batch = self.device.settle(batch, self._settle_by, final=self._settle_by is not None)
                if batch and self.observer is not None:
                    try:
                        self.observer(batch)
                    except Exception as exc:  # an observer's bug must not stop the export
                        self.observer = None
                        _log.warn(f"lens telemetry: live goodput stopped after an error: {exc!r}")
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

    def _records(self, taken):
        """Queued items as records: an SDK span that cannot become one costs only itself."""
        record_type = self.encoders.Span
        batch = []
        for r in taken:
            if type(r) is record_type:
                batch.append(r)
                continue
            try:
                batch.append(self.record_of(r))
            except Exception as exc:
                self._invalid(1, exc)
        return batch

    def _invalid(self, count, exc):
        self.invalid += count
        self.failed += count
        self._warn_once("invalid", f"lens telemetry: a span could not be encoded and was dropped "
                                   f"({type(exc).__name__}: {exc}); further ones are counted in "
                                   f"{semconv.LENS_SPANS_INVALID}")

    def _encode(self, records):
        """(payload, records encoded): a record the encoder refuses has its bad values
        dropped or replaced (counted) and is tried again; if it still fails it is dropped
        alone and counted, never the batch."""
        encode = self.sink.encode
        try:
            return encode(self, records), records
        except Exception:
            pass
        good = []
        for r in records:
            try:
                encode(self, [r])
                good.append(r)
                continue
            except Exception as exc:
                error = exc
            fix = ValueFixer()
            try:
                fix.record(r)
                encode(self, [r])
            except Exception as exc:
                self._invalid(1, exc if fix.fixed else error)
                continue
            self._count_fixed(fix)
            good.append(r)
        return encode(self, good), good

    def _send(self, batch, losses=None, final=False) -> bool:
        """Send ``batch`` (plus a loss record for ``losses``, marked ``final`` at shutdown); count the outcome.
        With a spool, the encoded batch goes to the outbox or the spool, and True means it
        was accepted there."""
        records = batch + [self._loss_record(losses, final)] if losses is not None else batch
        try:
            payload, kept = self._encode(records)
        except Exception as exc:  # even the good records cannot be encoded: an encoder bug
            self.failed += len(batch)
            self.last_error = f"encoding failed: {type(exc).__name__}: {exc}"
            return False
        spans = len(kept)
        if losses is not None and kept and kept[-1] is records[-1]:
            spans -= 1  # the loss record is not a span
        if self.spool is not None:
            accepted = self._accept(payload, spans)
            if accepted and losses is not None:
                self._reported = losses.key()
            return accepted
        try:
            ok, error, _ = self.sink.deliver(payload, spans)
        except Exception as exc:  # never let a sink bug kill the export thread
            ok, error = False, f"{type(exc).__name__}: {exc}"
        except BaseException:
            self.failed += spans
            raise
        if ok:
            self.exported += spans
            if losses is not None:
                self._reported = losses.key()
        else:
            self.failed += spans
            self.last_error = error
        return ok

    def _accept(self, payload, spans) -> bool:
        """Into the outbox (room left, nothing spooled before it, and the sender has looked for
        spans ended processes of the run left) or else the spool; spans are dropped, counted,
        only when both are full."""
        size = len(payload)
        with self._box_lock:
            spool = self.spool
            if getattr(self.sink, "deferred", False):
                pass  # nothing is sent from this process: straight to the spool
            elif self._adoption_seen and not spool.has_pending() and (
                    not self._outbox or self._outbox_bytes + size <= self._outbox_limit()):
                self._outbox.append((payload, spans, size))
                self._outbox_bytes += size
                return True
        if spool.append(payload, spans):
            return True
        self.spill_dropped += spans
        self.last_error = "the in-memory buffer and the disk spool are both full"
        self._warn_once("spool-full", f"lens telemetry: the disk spool ({spool.limit_bytes >> 20} MB in "
                                      f"{spool.directory}) is full; spans are dropped and counted")
        return False

    def _outbox_limit(self) -> int:
        # Encoded requests waiting in memory: an eighth of LENS_BUFFER_MB on top of the
        # recorder's queue (the spool takes the rest).
        return max(1 << 20, getattr(self.recorder, "buffer_bytes", 16 << 20) // 8)

    def _head(self):
        """(payload, spans, adopted, where) of the oldest undelivered request, or None."""
        with self._box_lock:
            if self._outbox:
                item = self._outbox[0]
                return item[0], item[1], False, _InOutbox(item)
        return self.spool.peek()

    def _delivered(self, where, spans, adopted, ok):
        with self._box_lock:
            if type(where) is _InOutbox:
                if not self._outbox or self._outbox[0] is not where.item:
                    return  # shutdown moved it to the spool meanwhile: it stays there
                _, _, size = self._outbox.popleft()
                self._outbox_bytes -= size
            elif ok:
                self.spool.done(where)
            else:
                # Rejected (HTTP 4xx): a spooled record leaves the disk only once delivered
                # (or given up by `lens replay --drop-rejected`); it stays, counted spooled.
                self.spool.keep(where)
                self._warn_once("rejected", f"lens telemetry: the collector rejected spooled spans ({self.last_error}); "
                                            f"they stay in {self.spool.directory} for `lens replay`")
                return
        if not ok:
            self.failed += spans
        elif adopted:
            self.replayed += spans
        else:
            self.exported += spans

    def _send_loop(self):
        """The sender: delivers the outbox, then the spool, oldest first."""
        try:
            if self.spool.adopt():  # spans an ended process of this run left behind
                self._warn_once("adopted", f"lens telemetry: replaying {self.spool.adopted_spans} spooled spans "
                                           f"of an earlier process of this run")
            self._warn_refused()
        except OSError as exc:
            if self._sender_stopping:  # the spool was closed under it: shutdown came first
                return
            self._internal_error(exc)
        finally:
            self._adoption_seen = True
        tries = 0
        next_adopt = time.monotonic() + _ADOPT_EVERY_S
        while not self._sender_stopping:
            try:
                tries = self._send_one(tries)
                if time.monotonic() >= next_adopt:
                    # Ended processes of this run (forked children that could not send
                    # themselves, restarted ranks) may have left spans: adopt them.
                    next_adopt = time.monotonic() + _ADOPT_EVERY_S
                    self.spool.adopt()
                    self._warn_refused()
            except Exception as exc:
                if self._sender_stopping:
                    # close() closed the spool under a delivery or a read already under way
                    # (it does not wait for the network): what that step had not marked sent
                    # stays spooled, sent twice at worst. Not an error to report.
                    break
                self._internal_error(exc)
                time.sleep(_POLL_S)
            self._ensure_threads()

    def _warn_refused(self):
        refused = self.spool.refused
        if refused:
            name, why = next(iter(refused.items()))
            self._warn_once("refused", f"lens telemetry: {len(refused)} spool files in {self.spool.directory} are not "
                                       f"this user's alone (e.g. {name}: {why}); they are not sent and left as they are")

    def _send_one(self, tries) -> int:
        """Deliver the oldest request once: the next retry count (0 after a success)."""
        head = self._head()
        if head is None:
            time.sleep(_POLL_S)
            return 0
        payload, spans, adopted, where = head
        with self._send_lock:
            if self._sender_stopping:
                return tries
            try:
                ok, error, retryable = self.sink.deliver(payload, spans)
            except Exception as exc:
                ok, error, retryable = False, f"{type(exc).__name__}: {exc}", True
        self._last_delivery_ok = ok
        if ok or not retryable:
            if not ok:
                self.last_error = error
            self._delivered(where, spans, adopted, ok)
            return 0
        self.last_error = error
        wait_until = time.monotonic() + _RETRY_S[min(tries, len(_RETRY_S) - 1)]
        while time.monotonic() < wait_until and not self._sender_stopping:
            time.sleep(_POLL_S)
        return tries + 1

    def _in_flight(self) -> bool:
        return bool(self._outbox) or (self.spool is not None and self.spool.has_pending())

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
        """Ask the export thread to export everything queued now; True when it did (and,
        with a spool, the sender delivered it) within ``timeout_s``. Waits without holding
        any lock."""
        if self._pid != os.getpid():
            self._after_fork()
        if self._thread is None or self._stopping:
            return self.recorder.queued() == 0
        self._ensure_threads()
        self._flush_requested += 1
        wanted = self._flush_requested
        deadline = time.monotonic() + timeout_s
        while self._flush_done < wanted or (self._sender is not None and self._in_flight()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
            if not self._thread.is_alive():
                self._ensure_threads()  # it died on this flush's batch: a new one finishes the flush
        return self.recorder.queued() == 0

    def close(self, deadline: float) -> bool:
        """Final export (truncated open spans, a closing loss record) and sink shutdown.

        Runs on the shutdown thread; True when everything was exported before
        ``deadline`` (a ``time.monotonic()`` value). With a spool, what the collector did
        not take by then stays spooled (counted as such) for the next process of the run
        or ``lens replay``, and so does the final record if it cannot be sent."""
        try:
            return self._close(deadline)
        finally:
            self.finished = True

    def _close(self, deadline: float) -> bool:
        self.closed = True
        self.recorder.close()
        self._stopping = True
        self.recorder.end_open_spans()
        if self.sdk is not None:
            self.sdk.end_open_spans()
        if self.device is not None:  # records waiting for the device get half the time left
            self._settle_by = time.monotonic() + max(0.0, deadline - time.monotonic()) / 2
        ok = self._drain(deadline)
        if self.device is not None:
            self.device.close()
        if self.spool is not None:
            return self._close_spooled(deadline, ok)
        if not self._export_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        try:
            counts = self.final_counts()
            if ok and counts.created:  # the final loss record: zeros say "nothing lost"
                ok = self._send([], counts, final=True)
        finally:
            self._export_lock.release()
        return ok

    def _close_spooled(self, deadline, ok) -> bool:
        # Let the sender deliver until a little before the deadline, then stop it and keep
        # the rest on disk. A delivery still under way is not waited for: its request stays
        # where it is (sent twice at worst, never lost).
        spool = self.spool
        if self._sender is not None and self._sender.is_alive():
            try:
                spool.adopt()  # children that ended since the last look: delivered with ours
            except OSError:
                pass
            margin = min(0.5, max(0.0, deadline - time.monotonic()) / 5)
            while self._in_flight() and time.monotonic() < deadline - margin:
                time.sleep(0.002)
        self._sender_stopping = True
        if not self._export_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        try:
            with self._box_lock:
                outbox, self._outbox, self._outbox_bytes = self._outbox, collections.deque(), 0
                for payload, spans, _ in outbox:  # in order: the spool was empty while the outbox held any
                    if not spool.append(payload, spans):
                        self.failed += spans
                        ok = False
                behind = bool(outbox) or spool.has_pending()
            counts = self.final_counts()
            if counts.created:
                spool_it = behind or not self._last_delivery_ok or getattr(self.sink, "deferred", False)
                ok = self._final_record(counts, spool_it) and ok
        finally:
            self._export_lock.release()
            spool.close()
        return ok and not counts.spooled

    def _final_record(self, counts, spool_it) -> bool:
        """Send the final loss record now, or (``spool_it``: spans wait before it, or the
        collector did not answer last time) spool it behind the spans it counts."""
        payload, kept = self._encode([self._loss_record(counts, final=True)])
        if not kept:
            return False
        if not spool_it:
            try:
                sent, error, _ = self.sink.deliver(payload, 0)
            except Exception as exc:
                sent, error = False, f"{type(exc).__name__}: {exc}"
            if sent:
                return True
            self.last_error = error
        self.spool.append(payload, 0)
        return False

    def stop_sink(self, timeout_s: float) -> None:
        """Shut the sink down (stops exporter retry loops)."""
        try:
            self.sink.shutdown(timeout_s)
        except Exception as exc:
            _log.warn(f"lens telemetry: shutting down the span exporter failed: {exc}")

    def abandon(self) -> None:
        """Stop the export thread without exporting and shut the sink down (a setup that
        failed part-way)."""
        self.closed = self._stopping = self._sender_stopping = True
        self.recorder.close()
        if self.spool is not None:
            self.spool.close()
        self.stop_sink(0.0)
        self.finished = True

    def _before_fork(self):
        # No export in flight while the process forks: gRPC's own fork handlers (with
        # GRPC_ENABLE_FORK_SUPPORT) cancel the inherited channel's calls in the child and
        # deadlock on a call state a parent thread held mid-export. Waits for the export
        # under way, at most FORK_WAIT_S (a dead collector must not stall a fork for long).
        deadline = time.monotonic() + FORK_WAIT_S
        self._held_for_fork = self._export_lock.acquire(timeout=FORK_WAIT_S)
        self._send_held_for_fork = self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        hook = getattr(self.sink, "before_fork", None)
        if hook is not None:
            hook()

    def _after_fork_in_parent(self):
        hook = getattr(self.sink, "after_fork_in_parent", None)
        if hook is not None:
            hook()
        if getattr(self, "_send_held_for_fork", False):
            self._send_held_for_fork = False
            self._send_lock.release()
        if getattr(self, "_held_for_fork", False):
            self._held_for_fork = False
            self._export_lock.release()

    def _after_fork(self):
        # The parent's sink (sockets, channels) must not be touched: keep a reference so
        # nothing is closed by the garbage collector, and build the child's own.
        self._held_for_fork = self._send_held_for_fork = False
        if self._pid == os.getpid():
            return
        if self.finished:
            # Closed in the parent: nothing to build here, and a child that only execs (a
            # subprocess with a preexec_fn runs fork hooks too) opens no spool or transport.
            self._pid = os.getpid()
            self.spool = None  # the parent's, closed
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
