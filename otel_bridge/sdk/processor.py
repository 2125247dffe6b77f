"""SDK spans into the span pipeline: the span processor, the scope table both recorders share, the loss counts."""

from __future__ import annotations

import os
import threading

from lens_core import semconv

from otel_bridge.lifecycle import on_fork

__all__ = [
    "LossCounts",
    "ScopeTable",
    "SdkSpanProcessor",
]

_MISSING = object()


class LossCounts:
    """A process's span accounting (what the loss record and the shutdown warning say)."""

    __slots__ = ("created", "exported", "dropped", "failed", "unended", "truncated", "spooled", "replayed",
                 "invalid", "torn", "restarts", "fields_invalid", "device_untimed")

    def __init__(self, created=0, exported=0, dropped=0, failed=0, unended=0, truncated=0, spooled=0,
                 replayed=0, invalid=0, torn=0, restarts=0, fields_invalid=0, device_untimed=0):
        self.created, self.exported, self.dropped = created, exported, dropped
        self.failed, self.unended, self.truncated = failed, unended, truncated
        self.spooled, self.replayed, self.invalid, self.torn, self.restarts = spooled, replayed, invalid, torn, restarts
        self.fields_invalid = fields_invalid
        self.device_untimed = device_untimed  # device-timed spans exported host-only (not lost)

    @property
    def lost(self) -> int:
        """Spans that will never be delivered: dropped + failed + unended."""
        return self.dropped + self.failed + self.unended

    def as_attributes(self) -> dict:
        """The loss record's attributes (the spool's and the export thread's only when not zero)."""
        attributes = {
            semconv.LENS_SPANS_CREATED: self.created,
            semconv.LENS_SPANS_DROPPED: self.dropped,
            semconv.LENS_SPANS_FAILED: self.failed,
            semconv.LENS_SPANS_UNENDED: self.unended,
            semconv.LENS_SPANS_TRUNCATED: self.truncated,
        }
        for key, value in ((semconv.LENS_SPANS_SPOOLED, self.spooled), (semconv.LENS_SPANS_REPLAYED, self.replayed),
                           (semconv.LENS_SPANS_INVALID, self.invalid), (semconv.LENS_SPOOL_TORN, self.torn),
                           (semconv.LENS_EXPORT_RESTARTS, self.restarts),
                           (semconv.LENS_FIELDS_INVALID, self.fields_invalid),
                           (semconv.LENS_DEVICE_UNTIMED, self.device_untimed)):
            if value:
                attributes[key] = value
        return attributes

    def key(self):
        return (self.dropped, self.failed, self.unended, self.invalid, self.torn, self.restarts, self.fields_invalid,
                self.device_untimed)


class ScopeTable:
    """Instrumentation scopes seen in this process, each encoded once (index 0: Lens's)."""

    def __init__(self, name: str, version: str):
        self._lock = threading.Lock()
        self._index = {}
        self.pb = []
        self.json = []
        self.schema_urls = []  # ScopeSpans.schema_url per scope ("" when undeclared)
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
                self.schema_urls.append(key[2])
                self.objects.append(_sdk_scope(key))
                found = self._index[key] = len(self.pb) - 1
        return found


class _Scope:
    __slots__ = ("name", "version", "schema_url")

    def __init__(self, name, version):
        # Lens's own scope declares the semantic conventions its names follow; the SDK
        # tracer's scope says the same, so both recorders' spans share this entry
        self.name, self.version, self.schema_url = name, version, semconv.SCHEMA_URL


def _sdk_scope(key):
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    return InstrumentationScope(key[0], key[1] or None, key[2] or None)


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
        on_fork("otel_bridge.pipeline", after_in_child=type(self)._reset, owner=self)  # called with the owner

    def _reset(self):
        # A forked child forgets the parent's open spans: ending them there would export
        # (and count) spans the parent is still running.
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
