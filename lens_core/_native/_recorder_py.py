"""Pure-Python span recorder: Lens spans as compact records, no SDK span object (same API as the compiled one).

A ``Recorder`` is the process's span store. Enabled Lens spans are ``Span`` objects that
it creates; the object is the record: after ``end()`` it is queued as it is, and the
export pipeline (otel_bridge.sdk.pipeline) takes batches of them and encodes OTLP. Spans of
other origins (raw OpenTelemetry tracers, the SDK recorder) enter the same queue as
records made by ``make_record``.

OpenTelemetry sees a Lens span as the current span: entering one sets OTel's context
(the ContextVar behind ``opentelemetry.context``) to a copy naming the span, so a raw
OTel span started inside is its child, and ``get_span_context()`` gives the ids that
propagators and the logging bridge read. The OTel names are bound at run time by
``Recorder.bind_otel`` (lens_core never imports OpenTelemetry).

Every enabled span passes through exactly one state at a time: open (in the ledger),
queued, then exported, failed or dropped; the counters say how many took each path. The
hot path takes no lock that a signal handler's shutdown could need.
"""

from __future__ import annotations

import os
import sys
import time
from _thread import get_ident as _get_ident

from lens_core import _lifecycle, semconv
from lens_core._native import _shared
from lens_core._native._shared import STATUS_ERROR, STATUS_OK, STATUS_UNSET

__all__ = [
    "KIND_INTERNAL",
    "RECORD_BYTES",
    "Recorder",
    "SAMPLE_ALWAYS_OFF",
    "SAMPLE_ALWAYS_ON",
    "SAMPLE_CUSTOM",
    "SAMPLE_PARENT_RATIO",
    "SAMPLE_RATIO",
    "Span",
    "make_record",
]

KIND_INTERNAL = 1  # OTLP SpanKind values: 1 internal, 2 server, 3 client, 4 producer, 5 consumer

RECORD_BYTES = _shared.RECORD_BYTES
_record_size = _shared.record_size

# Sampling modes a Recorder decides itself (the SDK's built-in samplers); anything else is
# SAMPLE_CUSTOM: the SDK sampler object is asked for every span.
SAMPLE_ALWAYS_ON, SAMPLE_ALWAYS_OFF, SAMPLE_RATIO, SAMPLE_PARENT_RATIO, SAMPLE_CUSTOM = range(5)
_TRACE_ID_LIMIT = (1 << 64) - 1

_OPEN, _ENDED = 1, 2
_RANDOM_TRACE_ID = 0x02  # Span._state bits; 0 = created, not started


class Span:
    """A Lens span: the live object while it runs (OpenTelemetry's Span API) and its own
    record once ended. ``with`` on an unstarted span starts it and makes it current."""

    __slots__ = (
        "_rec", "_state", "_token", "_context", "_cm", "_foreign", "_record_exc", "_ctx_cache", "_pid",
        "trace_id", "span_id", "parent_id", "parent_remote", "trace_state", "sampled", "flags", "name", "kind",
        "start_ns", "end_ns", "attrs", "events", "links", "status_code", "status_msg", "scope",
        "thread_id", "thread_name", "dropped_attrs", "dropped_events", "dropped_links", "sdk_span",
        "_prev", "_next", "_evicted", "_size", "dev_mark",
    )

    def __init__(self, rec, name, attrs, context=None, kind=KIND_INTERNAL, links=None, record_exception=True):
        self._rec = rec
        self._state = 0
        self._token = None
        self._context = context  # what to parent on: None = the current OTel context
        self._cm = False
        self._foreign = False  # its with-block exited on another thread (Span.__exit__)
        self._record_exc = record_exception
        self._ctx_cache = None
        self._pid = 0
        self.name = _shared.redact_name(name) if rec is not None else name  # a make_record name is clean
        self.kind = kind
        self.attrs = {} if attrs is None else attrs
        self.events = None
        self.links = links
        self.status_code = STATUS_UNSET
        self.status_msg = None
        self.scope = 0
        self.trace_state = None
        self.thread_id = 0
        self.thread_name = None
        self.dropped_attrs = self.dropped_events = self.dropped_links = 0
        self.sdk_span = None
        self.parent_id = 0
        self.parent_remote = False
        self.sampled = False
        self.flags = 0  # W3C trace flags: 0x01 sampled, 0x02 random trace id
        self.trace_id = self.span_id = 0
        self.start_ns = self.end_ns = 0
        self._prev = self._next = None
        self._evicted = False
        self._size = 0  # the bytes it was budgeted at when queued (record_size), given back at take
        self.dev_mark = None  # a device-timed span's events until resolved (lens_core._device)

    # ---- the with-block (Lens semantics: start + make current; undo + end) ---------------

    def __enter__(self):
        if self._state == 0:  # built by managed_span / live(): start it and make it current
            self._cm = True
            self._rec._start(self)
            self._token = self._rec._attach(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._cm:  # an OTel-style `with span:` on a started span just ends it
            self.end()
            return False
        self._cm = False
        if self.sampled and self.thread_id != _get_ident():
            # Exited on another thread: its context cannot be reset here; the entering
            # thread resets it when it next looks for its current span (Recorder._repair).
            self._foreign = True
            _shared.foreign_exit(self)
        else:
            self._rec._detach(self._token)
            self._token = None
        if exc is not None and self._record_exc and not isinstance(exc, GeneratorExit):
            self._rec._fail(self, exc)
        self._rec._end(self, 0)
        return False

    # ---- OpenTelemetry's Span API ------------------------------------------------------

    def get_span_context(self):
        """This span's OpenTelemetry SpanContext (built on first use)."""
        ctx = self._ctx_cache
        if ctx is None:
            ctx = self._ctx_cache = self._rec._span_context(self)
        return ctx

    def is_recording(self) -> bool:
        """True while the span is open and sampled."""
        return self.sampled and self._state == _OPEN

    def set_attribute(self, key, value) -> None:
        """Set one attribute (sanitised and redacted like every Lens attribute)."""
        self.set_attributes({key: value})

    def set_attributes(self, attributes) -> None:
        """Set attributes (sanitised and redacted); ignored once the span has ended."""
        if self._state == _OPEN and self.sampled and attributes:
            self._rec._merge_attributes(self, attributes)

    def add_event(self, name, attributes=None, timestamp=None) -> None:
        """Record an event (time now unless ``timestamp`` in ns is given)."""
        if self._state == _OPEN and self.sampled:
            self._rec._add_event(self, name, attributes, timestamp)

    def add_link(self, context, attributes=None) -> None:
        """Link to another span's SpanContext."""
        if self._state == _OPEN and self.sampled and context is not None and context.is_valid:
            self._rec._add_link(self, context, attributes)

    def update_name(self, name) -> None:
        """Rename the span."""
        if self._state == _OPEN:
            self.name = _shared.redact_name(name if type(name) is str else _shared.span_name(self._rec, name))

    def set_status(self, status, description=None) -> None:
        """Set the status (a Status or a StatusCode); OK is final, UNSET is ignored."""
        if self._state == _OPEN and self.sampled:
            self._rec._set_status(self, status, description)

    def record_exception(self, exception, attributes=None, timestamp=None, escaped=False) -> None:
        """Record ``exception`` as an ``exception`` event (the status is left to the caller)."""
        if self._state == _OPEN and self.sampled:
            self._rec._exception_event(self, exception, attributes, timestamp, escaped)

    def end(self, end_time=None) -> None:
        """End the span (once); ``end_time`` in ns, default now."""
        if self._state == _OPEN:
            self._rec._end(self, 0 if end_time is None else _shared.end_time(self._rec, end_time))

    # ---- read-only views the SDK's ReadableSpan also offers --------------------------------

    @property
    def context(self):
        """Same as get_span_context()."""
        return self.get_span_context()

    @property
    def parent(self):
        """The parent's SpanContext, or None for a root span."""
        return self._rec._parent_context(self) if self.parent_id else None

    @property
    def attributes(self):
        """The span's attributes (read-only)."""
        from types import MappingProxyType

        return MappingProxyType(self.attrs)

    @property
    def is_ended(self) -> bool:
        """True once end() ran."""
        return self._state == _ENDED

    def __repr__(self):
        state = "ended" if self._state == _ENDED else "open" if self._state == _OPEN else "new"
        return f"<lens span {self.name!r} {self.span_id:016x} {state}>"


def _exited_elsewhere(span) -> bool:
    # A Lens span exited on another thread while current here (marked in Span.__exit__, as
    # in the compiled twin: an ended span holding a token is not enough, see there).
    return type(span) is Span and span._foreign and span._state == _ENDED and span._token is not None


def make_record(scope, name, kind, trace_id, span_id, parent_id, parent_remote, trace_state, start_ns,
                end_ns, attrs, events, links, status_code, status_msg, dropped=(0, 0, 0), sdk_span=None):
    """An ended record built from another origin's span (an SDK ReadableSpan, a loss record).

    ``events`` is a list of ``(name, time_ns, attrs)``, ``links`` of ``(trace_id, span_id,
    trace_state, attrs, remote)``; ``attrs`` dicts hold clean values already."""
    span = Span(None, name, attrs, kind=kind, links=links)
    span._state = _ENDED
    span.scope = scope
    span.trace_id, span.span_id, span.parent_id = trace_id, span_id, parent_id
    span.parent_remote, span.trace_state, span.sampled, span.flags = parent_remote, trace_state, True, 1
    span.start_ns, span.end_ns = _shared.int64(start_ns), _shared.int64(end_ns)  # an SDK span's may be floats
    span.events = events
    span.status_code, span.status_msg = status_code, status_msg
    span.dropped_attrs, span.dropped_events, span.dropped_links = dropped
    span.sdk_span = sdk_span
    return span


class Recorder:
    """The process's span store: creates Lens spans, keeps the open ones (bounded), queues
    ended ones (bounded) and counts every outcome. Also a lens_core SpanBackend."""

    name = "lens-native"

    def __init__(self, *, max_open: int = 10_000, buffer_bytes: int = 16 << 20):
        import _thread
        import random
        import threading

        if max_open < 1 or buffer_bytes < RECORD_BYTES:
            raise ValueError(f"max_open={max_open}, buffer_bytes={buffer_bytes}: both must be positive "
                             f"(buffer_bytes at least {RECORD_BYTES})")
        self.max_open = max_open
        self.buffer_bytes = buffer_bytes
        self.queue_limit = buffer_bytes // RECORD_BYTES  # the most records the bytes allow
        self._bytes_in = self._bytes_out = 0  # budgeted bytes queued / taken (app side / export side)
        self._threading = threading
        self._random = random.Random(os.urandom(32))
        self._lock = _thread.allocate_lock()  # app-side counters only; shutdown never takes it
        self._queue = []
        self._bytes_in = self._bytes_out = 0
        self._head = self._tail = None  # the open-span ledger: a doubly linked list, oldest first
        self.open_count = 0
        self.created = self.ended = self.dropped = self.evicted = self.evicted_ended = self.truncated = 0
        self.fields_invalid = 0
        self.closed = False
        self._pid = os.getpid()
        self._sampler_mode = SAMPLE_ALWAYS_ON
        self._ratio_bound = _TRACE_ID_LIMIT
        self._sampler = None
        self._otel = None
        self._device = None  # a lens_core._device.DeviceTimer when device timing is on
        self._nvtx_push = self._nvtx_pop = None  # LENS_NVTX=1: an NVTX range per span (push(name), pop())
        self.set_limits(_shared.Limits())
        _lifecycle.on_fork("lens_core.recorder", after_in_child=Recorder._after_fork, owner=self)

    # ---- configuration (otel_bridge) --------------------------------------------------

    def bind_otel(self, *, contextvar, context_type, span_key, span_context_type, trace_flags_type,
                  trace_state_type, non_recording_span_type, get_current, attach, detach, format_exc, fail_span):
        """Bind OpenTelemetry's context machinery (lens_core imports none of it).

        ``contextvar`` is the ContextVar behind ``opentelemetry.context`` (None when the
        runtime context is not ContextVar-based: ``get_current``/``attach``/``detach`` are
        used instead)."""
        self._otel = _shared.OTel(contextvar, context_type, span_key, span_context_type, trace_flags_type,
                           trace_state_type, non_recording_span_type, get_current, attach, detach, format_exc,
                           fail_span)

    def set_limits(self, limits) -> None:
        """Apply the OpenTelemetry span limits ``limits`` (a lens_core._native._shared.Limits;
        the SDK's 128 defaults unless set; None: no limits)."""
        self._limits = limits
        cap = -1 if limits is None else limits.attrs_cap()
        self._attrs_cap = cap if cap >= 0 else sys.maxsize
        self._value_limited = limits is not None and (limits.span_value_length is not None
                                                      or limits.value_length is not None)

    def set_sampler(self, mode: int, ratio: float = 1.0, sampler=None) -> None:
        """Sample with a built-in rule (SAMPLE_*), or ask ``sampler`` (SAMPLE_CUSTOM)."""
        self._sampler_mode = mode
        self._ratio_bound = round(ratio * (_TRACE_ID_LIMIT + 1))
        self._sampler = sampler

    # ---- SpanBackend -------------------------------------------------------------------

    @property
    def context_types(self) -> tuple:
        """SpanBackend.context_types: a ``context=`` lens_core passes through as is (this
        recorder's spans and, once bound, OpenTelemetry's Context); other values reach
        this recorder only as lens_core's canonical carriers."""
        otel = self._otel
        return (Span, otel.context_type) if otel is not None else (Span,)

    def new_span(self, name, attrs, context=None, record_exception=True):
        """A span for a with-block (started and made current on entry)."""
        return Span(self, name, attrs, context, record_exception=record_exception)

    def live(self, name, attributes, tracer=None, context=None, record=True):
        """SpanBackend.live: the span itself is the with-block's context manager."""
        if tracer is not None:
            from lens_core.backend import LiveSpan

            return LiveSpan(self, name, attributes, tracer, context, record)
        return Span(self, name, attributes, context, record_exception=record)

    def start(self, name, attributes, tracer=None, context=None, links=None):
        """Start a span (not made current)."""
        if tracer is not None:
            return tracer.start_span(name, self._otel_context(context), attributes=attributes, links=links)
        span = Span(self, name, attributes, context, links=_shared.links_of(links))
        self._start(span)
        return span

    def use(self, span):
        """Make ``span`` current; a token for release()."""
        if isinstance(span, Span):
            return self._attach(span)
        otel = self._otel
        return otel.attach(otel.set_span(otel.get_current(), span))

    def release(self, token) -> None:
        """Undo use() / attach_carrier()."""
        self._detach(token)

    def end(self, span, exc=None) -> None:
        """End ``span``, recording ``exc`` with ERROR status first."""
        if not isinstance(span, Span):
            if exc is not None:
                _shared.otel_fail(self._otel, span, exc)
            span.end()
            return
        if exc is not None:
            self._fail(span, exc)
        span.end()

    def set_attributes(self, span, attributes) -> None:
        """Set sanitised attributes on a live span."""
        span.set_attributes(attributes)

    # The rare paths both recorders share, bound as methods (lens_core._native._shared).
    carrier_of = _shared.carrier_of
    attach_carrier = _shared.attach_carrier
    _parent_of = _shared.parent_of
    _otel_context = _shared.otel_context
    _remote_span = _shared.remote_span
    _parent_context = _shared.parent_context
    _span_context = _shared.span_context
    _ask_sampler = _shared.ask_sampler
    _merge_attributes = _shared.merge_attributes
    _add_event = _shared.add_event
    _add_link = _shared.add_link
    _set_status = _shared.set_status
    _exception_event = _shared.exception_event

    def current_carrier(self) -> dict:
        """The current recording span's context as W3C headers, or ``{}``."""
        span = self._current_span()
        if span is None or not span.is_recording():
            return {}
        return self.carrier_of(span)


    # ---- the hot path ------------------------------------------------------------------

    def _start(self, span) -> None:
        if type(span.name) is not str:  # managed_span("g", None), an int or bytes name
            span.name = _shared.span_name(self, span.name)
        if span._context is None:
            self._current_span()  # resets a context a span exited on another thread left here
        parent = self._parent_of(span._context)
        span._context = None
        if parent is None:
            trace_id = 0
            while not trace_id:
                trace_id = self._random.getrandbits(128)
            random_flag = _RANDOM_TRACE_ID  # our trace ids are uniformly random
            sampled = self._sample_root(trace_id, span)
        else:
            trace_id, span.parent_id, parent_flags, span.parent_remote, span.trace_state = parent
            random_flag = parent_flags & _RANDOM_TRACE_ID
            sampled = self._sample_child(trace_id, bool(parent_flags & 1), span)
        span_id = 0
        while not span_id:
            span_id = self._random.getrandbits(64)
        span.trace_id, span.span_id, span.sampled = trace_id, span_id, sampled
        span.flags = random_flag | sampled
        span.start_ns = time.time_ns()
        span._pid = self._pid
        if not sampled or self.closed:
            span.sampled = sampled and not self.closed
            span._state = _OPEN
            return
        thread = self._threading.current_thread()
        span.thread_id, span.thread_name = thread.ident, thread.name
        # Counted before it can be exported: a thread stopped between the steps (a signal
        # running shutdown) leaves a span counted and lost, never exported uncounted. The
        # shutdown path reads these without the lock.
        with self._lock:
            self.created += 1
        self._link(span)
        span._state = _OPEN
        if self._nvtx_push is not None:
            self._nvtx_push(span.name)
        device = self._device
        if device is not None:
            span.dev_mark = device.enter(span.attrs)

    def _end(self, span, end_ns, from_shutdown=False) -> None:
        if span._state != _OPEN:
            return
        span._state = _ENDED
        span.end_ns = end_ns or time.time_ns()
        if span.dev_mark:
            self._device.exit(span.dev_mark)
        if not span.sampled:
            return
        if self._nvtx_pop is not None and span._pid == self._pid:
            self._nvtx_pop()
        if span._pid != self._pid:  # started before a fork: the parent process records it
            return
        if self._limits is not None and (self._value_limited or span.links is not None
                                         or len(span.attrs) > self._attrs_cap):
            _shared.apply_limits(self, span)
        if span._evicted:
            with self._lock:
                self.evicted_ended += 1
        else:
            self._unlink(span)
        if from_shutdown:
            # The shutdown path takes no lock: a signal handler may be running it on a thread
            # that was interrupted while holding one. Truncated spans were open, so the
            # ledger's bound already bounds them.
            span._size = size = _record_size(span)
            self._queue.append(span)
            self._bytes_in += size
        else:
            self._enqueue(span)

    def _enqueue(self, record) -> bool:
        # Bounded in bytes, not records: a record is budgeted at RECORD_BYTES plus its long
        # values (record_size), so 100 KB attribute values fill the buffer 200x sooner.
        size = _record_size(record)
        held = self._bytes_in - self._bytes_out
        if held + size > self.buffer_bytes and self._queue:
            with self._lock:
                self.dropped += 1
            return False
        # Each queued item carries the size it is budgeted at, so take gives back exactly
        # these bytes without reading the record again: a Lens span in its _size field, any
        # other record (an SDK span) in a (record, size) pair, built before the queue is
        # read (the append stays the one step that races with take's swap).
        if type(record) is Span:
            record._size = size
        else:
            record = (record, size)
        self._queue.append(record)
        with self._lock:
            self.ended += 1
            self._bytes_in += size
        if held >= self.buffer_bytes >> 1:
            time.sleep(0)  # more than half full: let the export thread in (never waits for it)
        return True

    def add_record(self, record) -> bool:
        """Queue a record of another origin (make_record); False if it was dropped."""
        with self._lock:
            self.created += 1
        return self._enqueue(record)

    def take(self, limit: int):
        """Up to ``limit`` queued records, oldest first (the export thread's side)."""
        queue = self._queue
        if len(queue) <= limit:
            self._queue = []  # one assignment: appends race only with this swap, which is atomic
            batch = queue
        else:
            batch = queue[:limit]
            del queue[:limit]
        # Only this (the export) thread writes _bytes_out: the sizes the items were queued
        # with (never recomputed: an SDK span's cost 2-4 µs to read), unwrapping the pairs.
        taken = 0
        pairs = False
        for item in batch:
            if type(item) is Span:
                taken += item._size
            else:
                taken += item[1]
                pairs = True
        if pairs:
            batch = [item if type(item) is Span else item[0] for item in batch]
        self._bytes_out += taken
        return batch

    def queued(self) -> int:
        """Records waiting for export."""
        return len(self._queue)

    def queued_bytes(self) -> int:
        """Bytes the queued records are budgeted at (at most ``buffer_bytes``)."""
        return max(0, self._bytes_in - self._bytes_out)

    # ---- the open-span ledger ----------------------------------------------------------

    def _link(self, span) -> None:
        tail = self._tail
        span._prev, span._next = tail, None
        if tail is None:
            self._head = span
        else:
            tail._next = span
        self._tail = span
        self.open_count += 1
        if self.open_count > self.max_open:
            self._evict_oldest()

    def _unlink(self, span) -> None:
        prev, nxt = span._prev, span._next
        if prev is None:
            self._head = nxt
        else:
            prev._next = nxt
        if nxt is None:
            self._tail = prev
        else:
            nxt._prev = prev
        span._prev = span._next = None
        self.open_count -= 1

    def _evict_oldest(self) -> None:
        # Bounded memory for spans that are never ended: the oldest open span leaves the
        # ledger (it is still exported if it ends later; if not, it counts as unended).
        oldest = self._head
        self._unlink(oldest)
        oldest._evicted = True
        # A span entered and never exited holds the token of the context it replaced, which
        # holds the span before it, and so on: forgetting the token keeps that chain to the
        # spans still in the ledger (if it does exit, nothing is reset).
        oldest._token = None
        self.evicted += 1

    def open_spans(self):
        """The spans still open, oldest first."""
        spans, span = [], self._head
        while span is not None:
            spans.append(span)
            span = span._next
        return spans

    def end_open_spans(self, reason: str = "shutdown") -> int:
        """End every open span, newest first, marked truncated with a truncation event."""
        count = 0
        for span in reversed(self.open_spans()):
            if span._state != _OPEN:
                continue
            self._add_event(span, semconv.LENS_SPAN_TRUNCATED, {semconv.LENS_TRUNCATION_REASON: reason}, None)
            span.attrs[semconv.LENS_SPAN_TRUNCATED] = True
            self._end(span, 0, from_shutdown=True)
            count += 1
        self.truncated += count
        return count

    def close(self) -> None:
        """Stop tracking: spans started from now on are not recorded."""
        self.closed = True

    def _after_fork(self) -> None:
        # The child records its own spans: the parent's open and queued ones stay the parent's.
        import _thread

        self._lock = _thread.allocate_lock()
        self._queue = []
        self._bytes_in = self._bytes_out = 0
        self._head = self._tail = None
        self.open_count = 0
        self.created = self.ended = self.dropped = self.evicted = self.evicted_ended = self.truncated = 0
        self.fields_invalid = 0
        self._random = __import__("random").Random(os.urandom(32))
        self._pid = os.getpid()

    # ---- OTel context ------------------------------------------------------------------

    def _attach(self, span):
        otel = self._otel
        return otel.attach(otel.set_span(otel.get_current(), span))

    def _detach(self, token) -> None:
        if token is None:
            return
        try:
            self._otel.detach(token)
        except Exception:  # a token from another context (a generator resumed elsewhere)
            pass

    def _current_span(self):
        otel = self._otel
        span = otel.get_current().get(otel.span_key)
        while _exited_elsewhere(span):
            # exited on another thread: reset the context it set here (its token is this
            # thread's), as its with-block would have
            token, span._token = span._token, None
            try:
                otel.detach(token)
            except Exception:  # not this thread's token after all
                return span
            span = otel.get_current().get(otel.span_key)
        return span


    # ---- sampling ----------------------------------------------------------------------

    def _sample_root(self, trace_id, span) -> bool:
        mode = self._sampler_mode
        if mode == SAMPLE_ALWAYS_ON:
            return True
        if mode == SAMPLE_ALWAYS_OFF:
            return False
        if mode in (SAMPLE_RATIO, SAMPLE_PARENT_RATIO):
            return (trace_id & _TRACE_ID_LIMIT) < self._ratio_bound
        return self._ask_sampler(trace_id, span, None)

    def _sample_child(self, trace_id, parent_sampled, span) -> bool:
        mode = self._sampler_mode
        if mode == SAMPLE_PARENT_RATIO:
            return parent_sampled
        if mode == SAMPLE_CUSTOM:
            return self._ask_sampler(trace_id, span, parent_sampled)
        return self._sample_root(trace_id, span)


    # ---- mutation helpers --------------------------------------------------------------


    def _fail(self, span, exc) -> None:
        """Record ``exc`` on a live span: an exception event and ERROR status."""
        if span._state != _OPEN or not span.sampled:
            return
        self._exception_event(span, exc, None, None, True)
        if span.status_code != STATUS_OK:
            span.status_code = STATUS_ERROR
            span.status_msg = _shared.describe_exception(exc)


_shared.add_span_type(Span)
