# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled span recorder: the twin of lens_core._native._recorder_py (same names, same records).

What is compiled: creating a Lens span (ids, clock, parent from OpenTelemetry's context,
sampling), making it current in OpenTelemetry's context, merging and cleaning its
attributes, the open-span ledger, ending and queueing it. Rare paths (custom samplers,
carriers, events, links, exceptions) call lens_core._native._shared, the functions both
twins use, so their logic is written once. The types are declared in _recorder.pxd.
"""

cimport cython
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.dict cimport PyDict_GetItem
from libc.stdint cimport uint64_t, int64_t
from cpython.dict cimport PyDict_Copy, PyDict_SetItem, PyDict_Next, PyDict_Size, PyDict_Update, PyDict_DelItem
from cpython.list cimport PyList_Append, PyList_GET_SIZE
from cpython.unicode cimport PyUnicode_GET_LENGTH

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX

cdef extern from "Python.h":
    int PyContextVar_Get(object var, PyObject* default_value, PyObject** value) except -1
    object PyContextVar_Set(object var, object value)
    int PyContextVar_Reset(object var, object token) except -1
    unsigned long PyThread_get_thread_ident()

cdef extern from *:
    """
    /* A new, empty instance of a dict subclass (OpenTelemetry's Context), without calling
       the subclass's __init__ (it has none) or its guarded __setitem__. */
    static PyObject *lens_new_dict_of(PyObject *tp) {
        static PyObject *empty = NULL;
        if (empty == NULL && (empty = PyTuple_New(0)) == NULL) return NULL;
        return PyDict_Type.tp_new((PyTypeObject *)tp, empty, NULL);
    }
    """
    object lens_new_dict_of(object tp)

cdef extern from "time.h" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_REALTIME

cdef extern from "unistd.h" nogil:
    int getpid()

cdef extern from "sched.h" nogil:
    int sched_yield()

import sys

from lens_core._native import LARGE_VALUE as _LARGE_VALUE, RECORD_BYTES


class _SharedOnFirstUse:
    """Stands for lens_core._native._shared (the rare paths) until one first runs: a quiet
    rank that only imports the gate never loads it, nor the redaction, carrier and attribute
    safety it imports. The first lookup rebinds ``_shared`` to the module itself, so later
    ones cost what they did before."""

    def __getattr__(self, name):
        global _shared
        from lens_core._native import _shared as shared
        shared.add_span_type(Span)
        _shared = shared
        return getattr(shared, name)


_shared = _SharedOnFirstUse()

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

KIND_INTERNAL = 1
SAMPLE_ALWAYS_ON, SAMPLE_ALWAYS_OFF, SAMPLE_RATIO, SAMPLE_PARENT_RATIO, SAMPLE_CUSTOM = range(5)
cdef Py_ssize_t _RECORD_BYTES_C = RECORD_BYTES
cdef Py_ssize_t _LARGE_VALUE_C = _LARGE_VALUE
make_record_py = None  # set below

cdef enum:
    _NEW = 0
    _OPEN = 1
    _ENDED = 2
    _RANDOM_TRACE_ID = 2
    _M_ALWAYS_ON = 0
    _M_ALWAYS_OFF = 1
    _M_RATIO = 2
    _M_PARENT_RATIO = 3
    _M_CUSTOM = 4

cdef object _EMPTY_TUPLE = ()
cdef object _LENS_TRUNCATED = "lens.span.truncated"
cdef object _TRUNCATION_REASON = "lens.truncation.reason"


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


# ---- random ids: xoshiro256** seeded from os.urandom (reseeded after fork) ----------------

cdef uint64_t _rng[4]


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t _next64() noexcept nogil:
    cdef uint64_t result = _rotl(_rng[1] * 5, 7) * 9
    cdef uint64_t t = _rng[1] << 17
    _rng[2] ^= _rng[0]
    _rng[3] ^= _rng[1]
    _rng[1] ^= _rng[2]
    _rng[0] ^= _rng[3]
    _rng[2] ^= t
    _rng[3] = _rotl(_rng[3], 45)
    return result


def _reseed():
    """Seed the id generator from the OS (at import and in every forked child)."""
    import os as _os
    seed = _os.urandom(32)
    for i in range(4):
        _rng[i] = int.from_bytes(seed[8 * i:8 * i + 8], "little") | 1


_reseed()
cdef int _pid = getpid()


def _after_fork_ids():
    global _pid
    _reseed()
    _pid = getpid()


from lens_core import _lifecycle
from lens_core.registry import SpanRegistry as _Registry
from lens_core.semconv import LENS_GROUP as _K_GROUP
_lifecycle.on_fork("lens_core.recorder", after_in_child=_after_fork_ids)


# ---- the span ------------------------------------------------------------------------------

@cython.final
@cython.auto_pickle(False)
@cython.freelist(64)
cdef class Span:
    """A Lens span: the live object while it runs (OpenTelemetry's Span API) and its own
    record once ended. ``with`` on an unstarted span starts it and makes it current."""


    def __init__(self, rec, name, attrs, context=None, kind=KIND_INTERNAL, links=None, record_exception=True):
        self._rec = rec
        self.name = _shared.redact_name(name)
        self.attrs = {} if attrs is None else attrs
        self._context = context
        self.kind = kind
        self.links = links
        self._record_exc = record_exception

    # ---- the with-block -----------------------------------------------------------------

    def __enter__(self):
        if self._state == _NEW:
            self._cm = True
            self._rec._start(self)
            self._token = self._rec._attach(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._cm:
            self.end()
            return False
        self._cm = False
        if self.sampled and <unsigned long>self.thread_id != PyThread_get_thread_ident():
            # Exited on another thread: its context cannot be reset here. The token is
            # kept; the entering thread resets it the next time it looks for its current
            # span (Recorder._repair), so no ended span stays current there.
            self._foreign = True
            _shared.foreign_exit(self)
        else:
            self._rec._detach(self._token)
            self._token = None
        if exc is not None and self._record_exc and not isinstance(exc, GeneratorExit):
            self._rec._fail(self, exc)
        self._rec._end(self, 0)
        return False

    # ---- ids as Python ints ---------------------------------------------------------------

    @property
    def trace_id(self):
        """The 128-bit trace id."""
        return (<object>self._trace_hi << 64) | <object>self._trace_lo

    @trace_id.setter
    def trace_id(self, value):
        self._trace_hi = (value >> 64) & 0xFFFFFFFFFFFFFFFF
        self._trace_lo = value & 0xFFFFFFFFFFFFFFFF

    @property
    def span_id(self):
        """The 64-bit span id."""
        return self._span_id

    @span_id.setter
    def span_id(self, value):
        self._span_id = value

    @property
    def parent_id(self):
        """The parent's span id, 0 for a root."""
        return self._parent_id

    @parent_id.setter
    def parent_id(self, value):
        self._parent_id = value

    # ---- OpenTelemetry's Span API ------------------------------------------------------

    def get_span_context(self):
        """This span's OpenTelemetry SpanContext (built on first use)."""
        if self._ctx_cache is None:
            self._ctx_cache = self._rec._span_context(self)
        return self._ctx_cache

    def is_recording(self):
        """True while the span is open and sampled."""
        return self.sampled and self._state == _OPEN

    def set_attribute(self, key, value):
        """Set one attribute (sanitised and redacted like every Lens attribute)."""
        self.set_attributes({key: value})

    def set_attributes(self, attributes):
        """Set attributes (sanitised and redacted); ignored once the span has ended."""
        if self._state == _OPEN and self.sampled and attributes:
            _shared.merge_attributes(self._rec, self, attributes)

    def add_event(self, name, attributes=None, timestamp=None):
        """Record an event (time now unless ``timestamp`` in ns is given)."""
        if self._state == _OPEN and self.sampled:
            _shared.add_event(self._rec, self, name, attributes, timestamp)

    def add_link(self, context, attributes=None):
        """Link to another span's SpanContext."""
        if self._state == _OPEN and self.sampled and context is not None and context.is_valid:
            _shared.add_link(self._rec, self, context, attributes)

    def update_name(self, name):
        """Rename the span (a name that is not a str is converted, counted)."""
        if self._state == _OPEN:
            self.name = _shared.redact_name(name if type(name) is str else _shared.span_name(self._rec, name))

    def set_status(self, status, description=None):
        """Set the status (a Status or a StatusCode); OK is final, UNSET is ignored."""
        if self._state == _OPEN and self.sampled:
            _shared.set_status(self._rec, self, status, description)

    def record_exception(self, exception, attributes=None, timestamp=None, escaped=False):
        """Record ``exception`` as an ``exception`` event (the status is left to the caller)."""
        if self._state == _OPEN and self.sampled:
            _shared.exception_event(self._rec, self, exception, attributes, timestamp, escaped)

    def end(self, end_time=None):
        """End the span (once); ``end_time`` in ns, default now (also for an invalid one, counted)."""
        if self._state == _OPEN:
            self._rec._end(self, 0 if end_time is None else _shared.end_time(self._rec, end_time))

    @property
    def context(self):
        """Same as get_span_context()."""
        return self.get_span_context()

    @property
    def parent(self):
        """The parent's SpanContext, or None for a root span."""
        return _shared.parent_context(self._rec, self) if self._parent_id else None

    @property
    def attributes(self):
        """The span's attributes (read-only)."""
        from types import MappingProxyType

        return MappingProxyType(self.attrs)

    @property
    def is_ended(self):
        """True once end() ran."""
        return self._state == _ENDED

    def __repr__(self):
        state = "ended" if self._state == _ENDED else "open" if self._state == _OPEN else "new"
        return f"<lens span {self.name!r} {self._span_id:016x} {state}>"


def make_record(scope, name, kind, trace_id, span_id, parent_id, parent_remote, trace_state, start_ns,
                end_ns, attrs, events, links, status_code, status_msg, dropped=(0, 0, 0), sdk_span=None):
    """An ended record built from another origin's span (an SDK ReadableSpan, a loss record).

    ``events`` is a list of ``(name, time_ns, attrs)``, ``links`` of ``(trace_id, span_id,
    trace_state, attrs, remote)``; ``attrs`` dicts hold clean values already."""
    cdef Span span = Span.__new__(Span)
    span.name = name
    span.kind = kind
    span.attrs = attrs
    span.links = links
    span._state = _ENDED
    span.scope = scope
    span._trace_hi = (trace_id >> 64) & 0xFFFFFFFFFFFFFFFF
    span._trace_lo = trace_id & 0xFFFFFFFFFFFFFFFF
    span._span_id = span_id
    span._parent_id = parent_id
    span.parent_remote = parent_remote
    span.trace_state = trace_state
    span.sampled = True
    span.flags = 1
    span.start_ns = start_ns
    span.end_ns = end_ns
    span.events = events
    span.status_code = status_code
    span.status_msg = status_msg
    span.dropped_attrs, span.dropped_events, span.dropped_links = dropped
    span.sdk_span = sdk_span
    return span


# ---- the recorder --------------------------------------------------------------------------

cdef Py_ssize_t _record_size(object record) except -1:
    """_shared.record_size, compiled for this module's spans (the common case: a few short
    attributes, no events, costs one pass over the attribute dict)."""
    cdef Py_ssize_t size = _RECORD_BYTES_C, n
    cdef Span span
    if type(record) is not Span:
        return _shared.record_size(record)
    span = <Span>record
    attrs = span.attrs
    if type(attrs) is dict:
        for value in (<dict>attrs).values():
            if type(value) is str:
                n = PyUnicode_GET_LENGTH(value)
                if n > _LARGE_VALUE_C:
                    size += n
            elif type(value) is not int and type(value) is not float and type(value) is not bool:
                size += _shared.value_extra(value)
    elif attrs is not None:
        size += _shared.attributes_extra(attrs)
    if span.events is not None:
        size += _shared.events_extra(span.events)
    return size


@cython.final
@cython.auto_pickle(False)
cdef class Recorder:
    """The process's span store: creates Lens spans, keeps the open ones (bounded), queues
    ended ones (bounded) and counts every outcome. Also a lens_core SpanBackend."""

    name = "lens-native"

    def __init__(self, *, max_open=10_000, buffer_bytes=16 << 20):
        import threading

        if max_open < 1 or buffer_bytes < RECORD_BYTES:
            raise ValueError(f"max_open={max_open}, buffer_bytes={buffer_bytes}: both must be positive "
                             f"(buffer_bytes at least {RECORD_BYTES})")
        self.max_open = max_open
        self.buffer_bytes = buffer_bytes
        self.queue_limit = buffer_bytes // RECORD_BYTES  # the most records the bytes allow
        self._queue = []
        self._bytes_in = self._bytes_out = 0
        self._threading = threading
        self._current_thread = threading.current_thread
        self._mode = _M_ALWAYS_ON
        self._ratio_bound = 0xFFFFFFFFFFFFFFFF
        self.set_limits(_shared.Limits())
        _lifecycle.on_fork("lens_core.recorder", after_in_child=Recorder._after_fork, owner=self)

    # ---- configuration ----------------------------------------------------------------

    def bind_otel(self, *, contextvar, context_type, span_key, span_context_type, trace_flags_type,
                  trace_state_type, non_recording_span_type, get_current, attach, detach, format_exc, fail_span):
        """Bind OpenTelemetry's context machinery (see the Python twin)."""
        self._otel = _shared.OTel(contextvar, context_type, span_key, span_context_type, trace_flags_type,
                                 trace_state_type, non_recording_span_type, get_current, attach, detach, format_exc,
                                 fail_span)
        self._cv = contextvar
        self._context_type = context_type
        self._span_key = span_key

    def set_limits(self, limits):
        """Apply the OpenTelemetry span limits ``limits`` (a lens_core._native._shared.Limits;
        the SDK's 128 defaults unless set; None: no limits)."""
        self._limits = limits
        cap = -1 if limits is None else limits.attrs_cap()
        self._attrs_cap = cap if cap >= 0 else PY_SSIZE_T_MAX
        self._value_limited = limits is not None and (limits.span_value_length is not None
                                                      or limits.value_length is not None)

    def set_sampler(self, mode, ratio=1.0, sampler=None):
        """Sample with a built-in rule (SAMPLE_*), or ask ``sampler`` (SAMPLE_CUSTOM)."""
        self._mode = mode
        bound = round(ratio * (1 << 64))
        self._ratio_bound = min(bound, 0xFFFFFFFFFFFFFFFF) if ratio < 1.0 else 0xFFFFFFFFFFFFFFFF
        self._all_ratio = ratio >= 1.0
        self._sampler = sampler

    # ---- SpanBackend -------------------------------------------------------------------

    @property
    def context_types(self):
        """SpanBackend.context_types: a ``context=`` lens_core passes through as is (this
        recorder's spans and, once bound, OpenTelemetry's Context); other values reach
        this recorder only as lens_core's canonical carriers."""
        return (Span, self._context_type) if self._context_type is not None else (Span,)

    def new_span(self, name, attrs, context=None, record_exception=True):
        """A span for a with-block (started and made current on entry)."""
        return Span(self, name, attrs, context, KIND_INTERNAL, None, record_exception)

    def live(self, name, attributes, tracer=None, context=None, record=True):
        """SpanBackend.live: the span itself is the with-block's context manager."""
        if tracer is not None:
            from lens_core.backend import LiveSpan

            return LiveSpan(self, name, attributes, tracer, context, record)
        return Span(self, name, attributes, context, KIND_INTERNAL, None, record)

    def start(self, name, attributes, tracer=None, context=None, links=None):
        """Start a span (not made current)."""
        if tracer is not None:
            return tracer.start_span(name, _shared.otel_context(self, context), attributes=attributes,
                                     links=links)
        span = Span(self, name, attributes, context, KIND_INTERNAL, _shared.links_of(links), True)
        self._start(span)
        return span

    def use(self, span):
        """Make ``span`` current; a token for release()."""
        if type(span) is Span:
            return self._attach(span)
        otel = self._otel
        return otel.attach(otel.set_span(otel.get_current(), span))

    def release(self, token):
        """Undo use() / attach_carrier()."""
        self._detach(token)

    def end(self, span, exc=None):
        """End ``span``, recording ``exc`` with ERROR status first."""
        if type(span) is not Span:
            if exc is not None:
                _shared.otel_fail(self._otel, span, exc)
            span.end()
            return
        if exc is not None:
            self._fail(span, exc)
        span.end()

    def set_attributes(self, span, attributes):
        """Set sanitised attributes on a live span."""
        span.set_attributes(attributes)

    def current_carrier(self):
        """The current recording span's context as W3C headers, or ``{}``."""
        span = self._current_span()
        if span is None or not span.is_recording():
            return {}
        return self.carrier_of(span)

    def carrier_of(self, span):
        """``span``'s context as W3C headers."""
        return _shared.carrier_of(self, span)

    def attach_carrier(self, carrier):
        """Make the carrier's remote context current; None when it is unusable."""
        return _shared.attach_carrier(self, carrier)

    # ---- the hot path ------------------------------------------------------------------

    cdef object _current_context(self):
        cdef PyObject* value = NULL
        if self._cv is not None:
            PyContextVar_Get(self._cv, NULL, &value)
            if value is NULL:
                return None
            ctx = <object>value
            Py_DECREF(ctx)  # PyContextVar_Get returns a new reference
            return ctx
        return self._otel.get_current()

    def _current_span(self):
        ctx = self._current_context()
        if ctx is None:
            return None
        found = PyDict_GetItem(ctx, self._span_key)
        if found is not NULL and _exited_elsewhere(<object>found):
            return self._repair()
        return None if found is NULL else <object>found

    cdef object _repair(self):
        # The current span was exited on another thread: reset the context it set (its
        # token is this thread's), as the with-block would have, until the current span
        # is one that is still open here. Returns that span, or None.
        cdef Span stale
        cdef PyObject* found
        while True:
            ctx = self._current_context()
            if ctx is None:
                return None
            found = PyDict_GetItem(ctx, self._span_key)
            if found is NULL:
                return None
            if not _exited_elsewhere(<object>found):
                return <object>found
            stale = <Span>(<object>found)
            token, stale._token = stale._token, None
            try:
                if self._cv is not None:
                    PyContextVar_Reset(self._cv, token)
                else:
                    self._otel.detach(token)
            except Exception:  # not this thread's token after all: leave the context alone
                return <object>found

    cpdef object _attach(self, Span span):
        cdef PyObject* value = NULL
        if self._cv is None:
            otel = self._otel
            return otel.attach(otel.set_span(otel.get_current(), span))
        PyContextVar_Get(self._cv, NULL, &value)
        new = lens_new_dict_of(self._context_type)
        if value is not NULL:
            old = <object>value
            Py_DECREF(old)
            PyDict_Update(new, old)
        PyDict_SetItem(new, self._span_key, span)  # the C call skips Context.__setitem__'s guard
        return PyContextVar_Set(self._cv, new)

    cpdef _detach(self, token):
        if token is None:
            return
        try:
            if self._cv is not None:
                PyContextVar_Reset(self._cv, token)
            else:
                self._otel.detach(token)
        except Exception:  # a token from another context (a generator resumed elsewhere)
            pass

    cpdef int _start(self, Span span) except -1:
        cdef PyObject* found
        cdef Span parent_span
        cdef uint64_t hi = 0, lo = 0
        cdef int parent_flags, random_flag
        cdef bint sampled
        context = span._context
        span._context = None
        if type(span.name) is not str:  # managed_span("g", None), an int or bytes name
            span.name = _shared.span_name(self, span.name)
        parent = None
        if context is None:
            ctx = self._current_context()
            if ctx is not None:
                found = PyDict_GetItem(ctx, self._span_key)
                if found is not NULL:
                    parent = <object>found
                    if _exited_elsewhere(parent):  # rare: one C test on the common path
                        parent = self._repair()
        if parent is None and context is None:
            while hi == 0 and lo == 0:
                hi = _next64()
                lo = _next64()
            span._trace_hi, span._trace_lo = hi, lo
            random_flag = _RANDOM_TRACE_ID
            sampled = self._sample_root(span)
        elif type(parent) is Span:
            parent_span = <Span>parent
            span._trace_hi, span._trace_lo = parent_span._trace_hi, parent_span._trace_lo
            span._parent_id = parent_span._span_id
            span.trace_state = parent_span.trace_state
            random_flag = parent_span.flags & _RANDOM_TRACE_ID
            sampled = self._sample_child(span, parent_span.flags & 1)
        else:  # an OTel span, a carrier or a Context: the twin's slow path finds the parent
            found_parent = _shared.parent_of(self, context) if parent is None else _parent_tuple(parent)
            if found_parent is None:
                while hi == 0 and lo == 0:
                    hi = _next64()
                    lo = _next64()
                span._trace_hi, span._trace_lo = hi, lo
                random_flag = _RANDOM_TRACE_ID
                sampled = self._sample_root(span)
            else:
                trace_id, parent_id, parent_flags, remote, state = found_parent
                span.trace_id = trace_id
                span._parent_id = parent_id
                span.parent_remote = remote
                span.trace_state = state
                random_flag = parent_flags & _RANDOM_TRACE_ID
                sampled = self._sample_child(span, parent_flags & 1)
        span._span_id = 0
        while span._span_id == 0:
            span._span_id = _next64()
        span.flags = random_flag | sampled
        span.start_ns = _now_ns()
        span._pid = _pid
        if not sampled or self.closed:
            span.sampled = False
            span._state = _OPEN
            return 0
        span.sampled = True
        span.thread_id = PyThread_get_thread_ident()
        span.thread_name = self._current_thread().name
        self._link(span)
        span._state = _OPEN
        self.created += 1
        if self._nvtx_push is not None:
            self._nvtx_push(span.name)
        if self._device is not None and type(span.attrs) is dict:
            # a host-only group costs a lookup here, not a call (device timing on)
            found = PyDict_GetItem(span.attrs, _K_GROUP)
            if found is not NULL and <object>found in _Registry._view.device_timed:
                span.dev_mark = self._device.begin()
        return 0

    cdef bint _sample_root(self, Span span) except -1:
        if self._mode == _M_ALWAYS_ON:
            return True
        if self._mode == _M_ALWAYS_OFF:
            return False
        if self._mode == _M_RATIO or self._mode == _M_PARENT_RATIO:
            return self._all_ratio or span._trace_lo < self._ratio_bound
        return _shared.ask_sampler(self, span.trace_id, span, None)

    cdef bint _sample_child(self, Span span, bint parent_sampled) except -1:
        if self._mode == _M_PARENT_RATIO:
            return parent_sampled
        if self._mode == _M_CUSTOM:
            return _shared.ask_sampler(self, span.trace_id, span, parent_sampled)
        return self._sample_root(span)

    cpdef int _end(self, Span span, int64_t end_ns, bint from_shutdown=False) except -1:
        if span._state != _OPEN:
            return 0
        span._state = _ENDED
        span.end_ns = end_ns if end_ns else _now_ns()
        if span.dev_mark is not None and span.dev_mark:
            self._device.exit(span.dev_mark)
        if self._nvtx_pop is not None and span.sampled and span._pid == _pid:
            self._nvtx_pop()
        if not span.sampled or span._pid != _pid:  # unsampled, or started before a fork
            return 0
        if self._limits is not None and (self._value_limited or span.links is not None
                                         or PyDict_Size(span.attrs) > self._attrs_cap):
            _shared.apply_limits(self, span)  # rare: three C tests on the common path
        if span._evicted:
            self.evicted_ended += 1
        else:
            self._unlink(span)
        if from_shutdown:
            # As the twin: a truncated span was open, so the ledger's bound already bounds
            # it; it is queued past the queue's bound, never dropped, and not counted ended.
            # Its bytes are counted in, as take counts them out (they were not, and take
            # then gave back more than had come in).
            span._size = _record_size(span)
            PyList_Append(self._queue, span)
            self._bytes_in += span._size
        else:
            self._enqueue_c(span)
        return 0

    cdef bint _enqueue_c(self, object record) except -1:
        # Bounded in bytes, not records: a record is budgeted at RECORD_BYTES plus its long
        # values (_record_size), so 100 KB attribute values fill the buffer 200x sooner.
        cdef Py_ssize_t size = _record_size(record)
        cdef Py_ssize_t held = self._bytes_in - self._bytes_out
        if held + size > self.buffer_bytes and PyList_GET_SIZE(self._queue):
            self.dropped += 1
            return False
        # As the twin: each queued item carries the size it is budgeted at, so take gives
        # back exactly these bytes without reading the record again: a Lens span in its
        # _size field, any other record (an SDK span) in a (record, size) pair, built before
        # the queue is read (no allocation between reading self._queue and the append).
        if type(record) is Span:
            (<Span>record)._size = size
            PyList_Append(self._queue, record)
        else:
            pair = (record, size)
            PyList_Append(self._queue, pair)
        self.ended += 1
        self._bytes_in += size
        if held >= self.buffer_bytes >> 1:
            # More than half full: let the export thread have the interpreter lock if it
            # is waiting for it (a tight loop otherwise holds it for whole switch
            # intervals). This never waits for the exporter: if it is busy elsewhere
            # (sending, or stuck on a dead collector) the loop goes on at once.
            with nogil:
                sched_yield()
        return True

    def _enqueue(self, record):
        return self._enqueue_c(record)

    def add_record(self, record):
        """Queue a record of another origin (make_record); False if it was dropped."""
        self.created += 1
        return self._enqueue_c(record)

    def take(self, limit):
        """Up to ``limit`` queued records, oldest first (the export thread's side)."""
        cdef Py_ssize_t taken = 0
        cdef bint pairs = False
        queue = self._queue
        if PyList_GET_SIZE(queue) <= limit:
            self._queue = []
            batch = queue
        else:
            batch = queue[:limit]
            del queue[:limit]
        # The sizes the items were queued with (never recomputed: an SDK span's cost 2-4 µs
        # to read), unwrapping the pairs.
        for item in <list>batch:
            if type(item) is Span:
                taken += (<Span>item)._size
            else:
                taken += <Py_ssize_t>(<tuple>item)[1]
                pairs = True
        if pairs:
            batch = [item if type(item) is Span else (<tuple>item)[0] for item in <list>batch]
        self._bytes_out += taken
        return batch

    def queued(self):
        """Records waiting for export."""
        return PyList_GET_SIZE(self._queue)

    def queued_bytes(self):
        """Bytes the queued records are budgeted at (at most ``buffer_bytes``)."""
        return max(0, self._bytes_in - self._bytes_out)

    # ---- the open-span ledger ----------------------------------------------------------

    cdef void _link(self, Span span):
        span._prev = self._tail
        span._next = None
        if self._tail is None:
            self._head = span
        else:
            self._tail._next = span
        self._tail = span
        span._linked = True
        self.open_count += 1
        if self.open_count > self.max_open:
            oldest = self._head
            self._unlink(oldest)
            oldest._evicted = True
            # A span entered and never exited holds the token of the context it replaced,
            # which holds the span before it, and so on: forgetting the token keeps that
            # chain to the spans still in the ledger (if it does exit, nothing is reset).
            oldest._token = None
            self.evicted += 1

    cdef void _unlink(self, Span span):
        if not span._linked:
            return
        if span._prev is None:
            self._head = span._next
        else:
            span._prev._next = span._next
        if span._next is None:
            self._tail = span._prev
        else:
            span._next._prev = span._prev
        span._prev = span._next = None
        span._linked = False
        self.open_count -= 1

    def open_spans(self):
        """The spans still open, oldest first."""
        spans = []
        span = self._head
        while span is not None:
            spans.append(span)
            span = (<Span>span)._next
        return spans

    def end_open_spans(self, reason="shutdown"):
        """End every open span, newest first, marked truncated with a truncation event."""
        cdef Span span
        count = 0
        for span in reversed(self.open_spans()):
            if span._state != _OPEN:
                continue
            _shared.add_event(self, span, _LENS_TRUNCATED, {_TRUNCATION_REASON: reason}, None)
            span.attrs[_LENS_TRUNCATED] = True
            self._end(span, 0, True)
            count += 1
        self.truncated += count
        return count

    def close(self):
        """Stop tracking: spans started from now on are not recorded."""
        self.closed = True

    def _after_fork(self):
        self._queue = []
        self._bytes_in = self._bytes_out = 0
        self._head = self._tail = None
        self.open_count = 0
        self.created = self.ended = self.dropped = self.evicted = self.evicted_ended = self.truncated = 0
        self.fields_invalid = 0

    # ---- helpers the twin's methods call ---------------------------------------------------

    def _fail(self, Span span, exc):
        """Record ``exc`` on a live span: an exception event and ERROR status."""
        if span._state != _OPEN or not span.sampled:
            return

        self._exception_event(span, exc, None, None, True)
        if span.status_code != 1:
            span.status_code = 2
            span.status_msg = _shared.describe_exception(exc)

    def _span_context(self, span):
        return _shared.span_context(self, span)

    def _merge_attributes(self, span, attributes):
        _shared.merge_attributes(self, span, attributes)

    def _add_event(self, span, name, attributes, timestamp):
        _shared.add_event(self, span, name, attributes, timestamp)

    def _remote_span(self, trace_id, span_id, flags, state):
        return _shared.remote_span(self, trace_id, span_id, flags, state)

    def _exception_event(self, span, exc, attributes, timestamp, escaped):
        _shared.exception_event(self, span, exc, attributes, timestamp, escaped)

    @property
    def _random(self):
        return _RandomIds()


@cython.auto_pickle(False)
cdef class _RandomIds:
    """getrandbits() over the compiled generator (for the twin's helpers)."""

    def getrandbits(self, int bits):
        value = 0
        for _ in range((bits + 63) // 64):
            value = (value << 64) | _next64()
        return value & ((1 << bits) - 1)


cdef inline bint _exited_elsewhere(object span):
    # A Lens span whose with-block exited on another thread while current here, its
    # context token still unreset. Marked where it happens (Span.__exit__), not inferred
    # from an ended span holding a token: the gate's trace_fn holds its span's token
    # outside any with-block, and a function that ends its own span early stays its
    # children's parent (as under the pure gate's with-block).
    return (type(span) is Span and (<Span>span)._foreign and (<Span>span)._state == _ENDED
            and (<Span>span)._token is not None)


cdef object _parent_tuple(parent):
    # (trace_id, span_id, flags, remote, trace_state) of a non-Lens OTel span, or None.
    ctx = parent.get_span_context()
    if ctx is None or not ctx.is_valid:
        return None
    state = ctx.trace_state.to_header() if ctx.trace_state else None
    return ctx.trace_id, ctx.span_id, int(ctx.trace_flags), ctx.is_remote, state or None


if "lens_core._native._shared" in sys.modules:  # loaded before this module (else it adds Span itself)
    sys.modules["lens_core._native._shared"].add_span_type(Span)
