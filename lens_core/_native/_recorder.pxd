"""Declarations of the compiled recorder's span and recorder types, shared with the gate
(lens_core._gate builds spans on its fast path) and the encoders (lens_core._native._encode)."""

cimport cython
from libc.stdint cimport uint64_t, int64_t


cdef class Recorder


@cython.final
cdef class Span:
    cdef Recorder _rec
    cdef int _state
    cdef object _token
    cdef object _context
    cdef bint _cm
    cdef bint _foreign  # its with-block exited on another thread (token kept for the entering one)
    cdef bint _record_exc
    cdef object _ctx_cache
    cdef int _pid
    cdef uint64_t _trace_hi, _trace_lo, _span_id, _parent_id
    cdef public bint parent_remote
    cdef public object trace_state
    cdef public bint sampled
    cdef public int flags
    cdef public object name
    cdef public int kind
    cdef public int64_t start_ns, end_ns
    cdef public object attrs
    cdef public object events
    cdef public object links
    cdef public int status_code
    cdef public object status_msg
    cdef public int scope
    cdef public int64_t thread_id
    cdef public object thread_name
    cdef public int dropped_attrs, dropped_events, dropped_links
    cdef public object sdk_span
    cdef Span _prev
    cdef Span _next
    cdef bint _evicted
    cdef bint _linked
    cdef Py_ssize_t _size  # the bytes it was budgeted at when queued (_record_size), given back at take
    cdef public object dev_mark  # a device-timed span's events until resolved (lens_core._device)


@cython.final
cdef class Recorder:
    cdef public int max_open
    cdef public Py_ssize_t buffer_bytes
    cdef public Py_ssize_t queue_limit
    cdef list _queue
    cdef Py_ssize_t _bytes_in, _bytes_out  # budgeted bytes queued (app side) / taken (export side)
    cdef Span _head
    cdef Span _tail
    cdef public Py_ssize_t open_count
    cdef public uint64_t created, ended, dropped, evicted, evicted_ended, truncated
    cdef public uint64_t fields_invalid  # bad values dropped or replaced where they entered
    cdef public bint closed
    cdef int _mode
    cdef uint64_t _ratio_bound
    cdef bint _all_ratio
    cdef public object _sampler
    cdef public object _otel
    cdef public object _device  # a lens_core._device.DeviceTimer when device timing is on
    cdef public object _nvtx_push  # LENS_NVTX=1: an NVTX range per span (push(name), pop())
    cdef public object _nvtx_pop
    # the OpenTelemetry span limits (a _shared.Limits, or None) and what _end checks in C
    cdef public object _limits
    cdef Py_ssize_t _attrs_cap
    cdef bint _value_limited
    # OpenTelemetry's context machinery, for the compiled fast path
    cdef object _cv            # the ContextVar behind opentelemetry.context, or None
    cdef object _context_type
    cdef object _span_key
    cdef object _threading
    cdef object _current_thread
    cdef object __weakref__

    cdef object _current_context(self)
    cdef object _repair(self)
    cpdef object _attach(self, Span span)
    cpdef _detach(self, token)
    cpdef int _start(self, Span span) except -1
    cdef bint _sample_root(self, Span span) except -1
    cdef bint _sample_child(self, Span span, bint parent_sampled) except -1
    cpdef int _end(self, Span span, int64_t end_ns, bint from_shutdown=*) except -1
    cdef bint _enqueue_c(self, object record) except -1
    cdef void _link(self, Span span)
    cdef void _unlink(self, Span span)
