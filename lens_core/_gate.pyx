# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled gate: the disabled fast path of managed_span / trace_fn (same API as _gate_py)."""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_DECREF

cdef extern from "Python.h":
    # Declared here because Cython's bundled declarations lack the vectorcall parts.
    ctypedef PyObject* (*vectorcallfunc)(PyObject*, PyObject* const*, size_t, PyObject*)
    ctypedef struct PyMethodDef:
        const char* ml_name
        void* ml_meth
        int ml_flags
        const char* ml_doc
    ctypedef struct _TypeHead "PyTypeObject":
        Py_ssize_t tp_vectorcall_offset
        unsigned long tp_flags
    object PyCFunction_NewEx(PyMethodDef* ml, PyObject* self, object module)
    object PyMethod_New(object func, object self)
    object PyObject_Vectorcall(object callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
    vectorcallfunc PyVectorcall_Function(object callable)
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf)
    void PyType_Modified(object tp)
    int METH_FASTCALL
    int METH_KEYWORDS
    unsigned long Py_TPFLAGS_HAVE_VECTORCALL

cdef extern from *:
    """
    /* Call a vectorcall entry point directly; the result is a new reference or NULL. */
    static PyObject *lens_vectorcall(vectorcallfunc f, PyObject *callable, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames) {
        return f(callable, args, nargsf, kwnames);
    }
    """
    object lens_vectorcall(vectorcallfunc f, PyObject* callable, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames)

__all__ = [
    "GoodputRollup",
    "KIND_INTERNAL",
    "RECORD_BYTES",
    "Recorder",
    "SAMPLE_ALWAYS_OFF",
    "SAMPLE_ALWAYS_ON",
    "SAMPLE_CUSTOM",
    "SAMPLE_PARENT_RATIO",
    "SAMPLE_RATIO",
    "Span",
    "encode_traces_json",
    "encode_traces_pb",
    "is_enabled",
    "make_record",
    "managed_span",
    "null_span",
    "publish",
    "set_attribute_hooks",
    "set_factories",
    "set_native",
    "umbrella_span",
    "wrap_function",
]

# Raw group spellings we cache per snapshot; beyond this, lookups normalise each call.
cdef Py_ssize_t _ALIAS_LIMIT = 1024


class _NullSpan:
    """The one shared do-nothing context manager a disabled group hands out."""

    __slots__ = ()
    # C callables that are not descriptors, so `with` binds no method object: NoneType()
    # returns None for __enter__; "".format(*exc_info) returns "" (falsy: exceptions
    # propagate) for __exit__. Measured ~15% cheaper than def methods.
    __enter__ = type(None)
    __exit__ = "".format

    def __repr__(self):
        return "<lens null span>"


null_span = _NullSpan()
cdef object _NULL = null_span


cdef class _Snapshot:
    # ids: spelling -> id (-1 = unknown); bits: little-endian bitset of enabled ids;
    # infos: id -> (name, umbrella, bucket_key, bucket) for the native recorder's stamps.
    cdef dict ids
    cdef bytes bits
    cdef bint anyon
    cdef tuple infos


cdef _Snapshot _snap = _Snapshot()
_snap.ids = {}
_snap.bits = b""
_snap.anyon = False
_snap.infos = ()

cdef object _span_factory = None
cdef object _call_factory = None


def set_factories(span_factory, call_factory):
    """Install the enabled-path builders: span_factory(group, name, tracer, attrs, umbrella)
    returns a context manager; call_factory(traced, args, kwargs) runs a traced call."""
    global _span_factory, _call_factory
    _span_factory = span_factory
    _call_factory = call_factory


def publish(ids, bits, infos=None):
    """Swap in a new snapshot: ``ids`` (normalised name -> id), ``bits`` (int bitset),
    ``infos`` (id -> (name, umbrella, bucket_key, bucket)) for the native recorder."""
    global _snap
    cdef _Snapshot s = _Snapshot()
    bits = int(bits)
    s.ids = dict(ids)
    s.bits = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
    s.anyon = bits != 0
    table = [None] * (max(ids.values(), default=-1) + 1)
    for gid, info in (infos or {}).items():
        table[gid] = tuple(info)
    s.infos = tuple(table)
    _snap = s  # one reference assignment: readers see the old or the new, never a mix


cdef Py_ssize_t _slow_id(dict ids, object group) except -2:
    # A spelling not seen yet: normalise it once and remember the answer.
    if not isinstance(group, str):
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
    gid = ids.get(group.strip().lower(), -1)
    if len(ids) < _ALIAS_LIMIT:
        ids[group] = gid
    return gid


cdef inline Py_ssize_t _group_id(_Snapshot s, object group) except -2:
    cdef PyObject* found = PyDict_GetItem(s.ids, group)
    if found is NULL:
        return _slow_id(s.ids, group)
    return <Py_ssize_t><object>found


cdef inline Py_ssize_t _on_id(_Snapshot s, object group) except -2:
    # The group's id when it is on, else -1.
    cdef Py_ssize_t gid
    if not s.anyon:
        if not isinstance(group, str):  # reject it even when all is off, like _gate_py
            _slow_id(s.ids, group)  # raises TypeError
        return -1
    gid = _group_id(s, group)
    if gid < 0 or (gid >> 3) >= PyBytes_GET_SIZE(s.bits):
        return -1
    if (PyBytes_AS_STRING(s.bits)[gid >> 3] >> (gid & 7)) & 1:
        return gid
    return -1


cdef inline int _on(object group) except -1:
    return _on_id(_snap, group) >= 0


def is_enabled(group):
    """True when ``group`` is on (registered, enabled and a backend installed)."""
    return _on(group) == 1


# ---- managed_span / umbrella_span -------------------------------------------------------
# Plain `def f(group, name, tracer=None, **attrs)` builds a kwargs dict on every call.
# These are METH_FASTCALL|METH_KEYWORDS builtins instead: keyword names arrive as a tuple
# and values on the stack, so a disabled call allocates nothing. Anything but the common
# shape (group and name positional) is bound by the Python-level _Binders below, which
# raises the usual TypeErrors.

class _Binders:
    # The slow path binds arguments with plain Python functions named like the public
    # ones, so a bad call's TypeError names managed_span() / umbrella_span().

    @staticmethod
    def managed_span(group, name, tracer=None, **attrs):
        if _on(group):
            return _span_factory(group, name, tracer, attrs, False)
        return _NULL

    @staticmethod
    def umbrella_span(group, name, tracer=None, **attrs):
        if _on(group):
            return _span_factory(group, name, tracer, attrs, True)
        return _NULL


# Cached hashes of the parameter names: most keyword names are rejected by one int compare.
cdef Py_hash_t _H_GROUP = hash("group")
cdef Py_hash_t _H_NAME = hash("name")
cdef Py_hash_t _H_TRACER = hash("tracer")


cdef bint _rebinds(tuple names, Py_ssize_t nargs) except -1:
    # A keyword that repeats a positional parameter (group, name, or tracer given both
    # ways) must reach the binder for its TypeError, not vanish on the disabled path.
    cdef Py_hash_t h
    for key in names:
        h = hash(key)  # keyword names are str: their hash is cached
        if ((h == _H_GROUP and key == "group") or (h == _H_NAME and key == "name")
                or (nargs == 3 and h == _H_TRACER and key == "tracer")):
            return True
    return False


cdef object _span_fast(object binder, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else len(<tuple>kwnames)
    cdef tuple names = () if kwnames is NULL else <tuple>kwnames
    cdef _Snapshot snap = _snap
    cdef Py_ssize_t gid
    if 2 <= nargs <= 3 and (nkw == 0 or not _rebinds(names, nargs)):
        gid = _on_id(snap, <object>args[0])
        if gid < 0:
            return _NULL
        if _native is not None and (nargs == 2 or <object>args[2] is None) and "tracer" not in names:
            # The native recorder: the span object is built here, attributes merged in C.
            return _native_span(_native, snap, gid, <object>args[0], <object>args[1], args + nargs, names, nkw,
                                binder is _UMBRELLA_BINDER)
        if nargs == 3 or "tracer" not in names:
            # Enabled, common shape: hand over to the factory directly, without binding
            # through the Python-level binder (which would check the gate a second time).
            attrs = {names[i]: <object>args[nargs + i] for i in range(nkw)}
            return _span_factory(<object>args[0], <object>args[1], <object>args[2] if nargs == 3 else None,
                                 attrs, binder is _UMBRELLA_BINDER)
    positional = tuple([<object>args[i] for i in range(nargs)])
    kwargs = {names[i]: <object>args[nargs + i] for i in range(nkw)}
    return binder(*positional, **kwargs)


cdef PyMethodDef _managed_def
_managed_def.ml_name = "managed_span"
_managed_def.ml_meth = <void*>_managed_fast
_managed_def.ml_flags = METH_FASTCALL | METH_KEYWORDS
_managed_def.ml_doc = (
    "managed_span(group, name, tracer=None, **attrs)\n--\n\n"
    "Context manager for a span of ``group``; yields the span, or None when off."
)
cdef PyMethodDef _umbrella_def
_umbrella_def.ml_name = "umbrella_span"
_umbrella_def.ml_meth = <void*>_umbrella_fast
_umbrella_def.ml_flags = METH_FASTCALL | METH_KEYWORDS
_umbrella_def.ml_doc = (
    "umbrella_span(group, name, tracer=None, **attrs)\n--\n\n"
    "Like managed_span, for an umbrella (never bucketed) span."
)
cdef object _MANAGED_BINDER = _Binders.managed_span
cdef object _UMBRELLA_BINDER = _Binders.umbrella_span


cdef object _managed_fast(PyObject* self, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    return _span_fast(_MANAGED_BINDER, args, nargs, kwnames)


cdef object _umbrella_fast(PyObject* self, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    return _span_fast(_UMBRELLA_BINDER, args, nargs, kwnames)


# No bound self and the public module as __module__: pickle saves them by reference as
# lens_core.managed_span / lens_core.umbrella_span (Ray ships classes that use them by value).
managed_span = PyCFunction_NewEx(&_managed_def, NULL, "lens_core")
umbrella_span = PyCFunction_NewEx(&_umbrella_def, NULL, "lens_core")


# ---- trace_fn wrapper for plain functions ----------------------------------------------

cdef class TracedFunction:
    """A plain function wrapped by trace_fn: checks the gate on each call.

    Calls go through vectorcall (set up below): a disabled call forwards the caller's
    argument array untouched, so it builds no tuple or dict.
    """

    cdef vectorcallfunc _vectorcall
    cdef vectorcallfunc _fn_vectorcall  # the wrapped callable's own entry point, or NULL
    cdef object _fn
    cdef object _group
    cdef _Snapshot _seen  # the snapshot _gid was resolved against
    cdef Py_ssize_t _gid
    cdef dict __dict__

    def __cinit__(self, *args, **kwargs):
        self._vectorcall = <vectorcallfunc>_traced_vectorcall

    def __init__(self, fn, group, name, tracer, umbrella):
        self._fn = fn
        self._fn_vectorcall = PyVectorcall_Function(fn)
        self._group = group
        self.__wrapped__ = fn
        self._lens_group = group
        self._lens_name = name
        self._lens_tracer = tracer
        self._lens_umbrella = umbrella

    def __call__(self, *args, **kwargs):
        # tp_call, used by PyObject_Call (e.g. functools.partial); vectorcall is the fast path.
        if _on(self._group):
            return _call_factory(self, args, kwargs)
        return self._fn(*args, **kwargs)

    def __get__(self, obj, objtype):
        # Behave like a function: bind as a method when looked up on an instance.
        if obj is None:
            return self
        return PyMethod_New(self, obj)

    def __repr__(self):
        return f"<lens traced {self._group!r} {self._fn!r}>"

    def __reduce__(self):
        # By value (cloudpickle ships a __main__ class's methods so): rebuilt around the
        # function, with the metadata functools.update_wrapper copied.
        return (_rebuild_traced, (self._fn, self._group, self._lens_name, self._lens_tracer, self._lens_umbrella,
                                  dict(getattr(self, "__dict__"))))


cdef object _traced_vectorcall(object self, PyObject** args, size_t nargsf, PyObject* kwnames):
    cdef TracedFunction tf = <TracedFunction>self
    cdef _Snapshot s = _snap
    cdef Py_ssize_t gid
    if s.anyon:
        if tf._seen is not s:  # first call since the last publish: resolve the id once
            tf._gid = _group_id(s, tf._group)
            tf._seen = s
        gid = tf._gid
        if gid >= 0 and (gid >> 3) < PyBytes_GET_SIZE(s.bits) and (PyBytes_AS_STRING(s.bits)[gid >> 3] >> (gid & 7)) & 1:
            return _traced_enabled(tf, args, nargsf, kwnames)
    if tf._fn_vectorcall is not NULL:
        # Straight into the function's vectorcall (what PyObject_Vectorcall would look up).
        return lens_vectorcall(tf._fn_vectorcall, <PyObject*>tf._fn, args, nargsf, kwnames)
    return PyObject_Vectorcall(tf._fn, args, nargsf, kwnames)


cdef object _traced_enabled(TracedFunction tf, PyObject** args, size_t nargsf, PyObject* kwnames):
    cdef Py_ssize_t nargs = PyVectorcall_NARGS(nargsf)
    cdef tuple names = () if kwnames is NULL else <tuple>kwnames
    cdef Span span
    cdef Recorder rec = _native
    cdef _Snapshot snap = _snap
    if rec is not None and tf._lens_tracer is None:
        span = _native_span(rec, snap, tf._gid, tf._group, tf._lens_name, NULL, (), 0, tf._lens_umbrella)
        rec._start(span)
        span._token = rec._attach(span)
        try:
            if tf._fn_vectorcall is not NULL:
                result = lens_vectorcall(tf._fn_vectorcall, <PyObject*>tf._fn, args, nargsf, kwnames)
            else:
                result = PyObject_Vectorcall(tf._fn, args, nargsf, kwnames)
        except BaseException as exc:
            rec._detach(span._token)
            span._token = None
            if not isinstance(exc, GeneratorExit):
                rec._fail(span, exc)
            rec._end(span, 0)
            raise
        rec._detach(span._token)
        span._token = None
        rec._end(span, 0)
        return result
    positional = tuple([<object>args[i] for i in range(nargs)])
    kwargs = {names[i]: <object>args[nargs + i] for i in range(len(names))}
    return _call_factory(tf, positional, kwargs)


cdef _enable_vectorcall():
    cdef TracedFunction probe = TracedFunction.__new__(TracedFunction)
    cdef _TypeHead* tp = <_TypeHead*><PyObject*>TracedFunction
    tp.tp_vectorcall_offset = <Py_ssize_t>(<char*>&probe._vectorcall - <char*><PyObject*>probe)
    tp.tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL
    PyType_Modified(<object>TracedFunction)


_enable_vectorcall()


def wrap_function(fn, group, name, tracer, umbrella):
    """Wrap a plain function (not a coroutine or generator) so each call checks the gate."""
    return TracedFunction(fn, group, name, tracer, umbrella)


def _rebuild_traced(fn, group, name, tracer, umbrella, state):
    traced = TracedFunction(fn, group, name, tracer, umbrella)
    getattr(traced, "__dict__").update(state)
    return traced


# ---- the native recorder's fast path ----------------------------------------------------

include "_recorder.pxi"
include "_encode.pxi"

cdef Recorder _native = None
# Set by lens_core.spans: the scopes' ContextVars, the redaction cache (key -> redact?),
# and the Python functions for what the fast path does not handle.
cdef object _attrs_var = None
cdef object _bucket_var = None
cdef dict _redact_cache = {}
cdef object _sanitize_one = None
cdef object _slow_attributes = None
cdef object _str_check = None
cdef set _clean_texts = set()
cdef Py_ssize_t _shape_min = 0


def set_native(recorder):
    """Make the compiled fast path record into ``recorder`` (a compiled Recorder), or
    stop doing so (None): enabled spans then go through the span factory."""
    global _native
    _native = recorder if type(recorder) is Recorder else None


def set_attribute_hooks(attrs_var, bucket_var, redact_cache, sanitize_one, slow_attributes, str_check=None,
                        clean_texts=None, shape_min=0):
    """What the native fast path needs from lens_core.spans and lens_core.scopes; texts
    shorter than ``shape_min`` or in ``clean_texts`` skip ``str_check`` (its own first test)."""
    global _attrs_var, _bucket_var, _redact_cache, _sanitize_one, _slow_attributes, _str_check
    global _clean_texts, _shape_min
    _attrs_var, _bucket_var, _redact_cache = attrs_var, bucket_var, redact_cache
    _sanitize_one, _slow_attributes, _str_check = sanitize_one, slow_attributes, str_check
    _clean_texts = clean_texts if clean_texts is not None else set()
    _shape_min = shape_min


cdef object _var_get(object var):
    cdef PyObject* value = NULL
    if var is None:
        return None
    PyContextVar_Get(var, NULL, &value)
    if value is NULL:
        return None
    result = <object>value
    Py_DECREF(result)
    return result


cdef Span _native_span(Recorder rec, _Snapshot snap, Py_ssize_t gid, object group, object name,
                       PyObject** kwvals, tuple kwnames, Py_ssize_t nkw, bint umbrella_req):
    cdef Span span = Span.__new__(Span)
    cdef PyObject* found
    span._rec = rec
    span.name = name
    span.kind = 1
    span._record_exc = True
    info = snap.infos[gid] if 0 <= gid < len(snap.infos) else None
    span.attrs = _gated_attributes(info, group, name, kwvals, kwnames, nkw, umbrella_req)
    return span


cdef dict _gated_attributes(object info, object group, object name, PyObject** kwvals, tuple kwnames,
                            Py_ssize_t nkw, bint umbrella_req):
    # spans._span_attributes in C for the common case; anything that warns goes there.
    cdef dict merged
    cdef tuple gi
    cdef PyObject* hit
    if info is None:
        return _slow_attributes(group, name, {kwnames[i]: <object>kwvals[i] for i in range(nkw)}, umbrella_req)
    gi = <tuple>info
    umbrella = gi[1]
    # a bucket passed by the caller (dropped on umbrellas, validated on leaves) takes the
    # Python path: it warns, and an override is rare enough not to need C
    if gi[2] in kwnames or (umbrella_req and not umbrella):
        return _slow_attributes(group, name, {kwnames[i]: <object>kwvals[i] for i in range(nkw)}, umbrella_req)
    scope = _var_get(_attrs_var)
    merged = PyDict_Copy(scope) if scope is not None else {}
    merged[_LENS_GROUP] = gi[0]
    if umbrella:
        merged[_LENS_UMBRELLA] = True
    else:
        override = _var_get(_bucket_var)
        merged[gi[2]] = override if override else gi[3]
    for i in range(nkw):
        key = kwnames[i]
        value = <object>kwvals[i]
        kind = type(value)
        if kind is int or kind is float or kind is bool:
            merged[key] = value
            continue
        if kind is str:
            hit = PyDict_GetItem(_redact_cache, key)
            if hit is not NULL and (<object>hit) is False and (
                    _str_check is None or len(<str>value) < _shape_min or value in _clean_texts
                    or _str_check(value) is value):
                merged[key] = value
                continue
        _sanitize_one(merged, key, value, None)
    return merged


# ---- live goodput: the per-record roll-up (pure twin in _gate_py.py) -----------------------------
# Runs on the export thread for every drained record, holding the GIL the application's spans
# need. The spans still open with ended descendants are few (the step, the job, an umbrella):
# they live in C arrays, scanned linearly, so the common record costs typed field reads and one
# or two dict lookups on its attributes, and allocates nothing.

from sys import intern as sys_intern

cdef enum:
    _SLOTS = 32

cdef dict _BUCKET_SLOT = {"productive": 0, "overhead": 1, "idle": 2, "wasted": 3}
cdef str _B_PRODUCTIVE = sys_intern("productive")
cdef str _B_OVERHEAD = sys_intern("overhead")
cdef str _B_IDLE = sys_intern("idle")
cdef str _B_WASTED = sys_intern("wasted")
from lens_core import semconv as _semconv

cdef str _K_BUCKET = _semconv.RL_BUCKET
cdef str _K_ITERATION = _semconv.RL_ITERATION
cdef str _K_UMBRELLA = _semconv.LENS_UMBRELLA
cdef str _K_CATEGORY = _semconv.RL_EFFICIENCY_CATEGORY
cdef str _K_GROUP = _semconv.LENS_GROUP


@cython.auto_pickle(False)  # per-process state of an export thread: nothing to pickle
cdef class GoodputRollup:
    """Per-process roll-up of ended span records into buckets and steps (live goodput).

    ``feed(records, never, skip_category)`` takes records in end order: a counted bucketed span
    adds its duration to ``totals`` and to its parent's pending entry, every span hands its own
    entry up to its parent, and a step (unbucketed, ``rl.iteration``, a name ``step_search``
    finds) takes its entry. Returns ``[(iteration, wall_ns, [ns per bucket] or None)]`` for the
    steps that ended. ``never`` (names) and ``skip_category`` (efficiency categories) are never
    counted. Past ``max_pending`` open entries the oldest are dropped (``evicted``)."""

    cdef uint64_t _ids[_SLOTS]
    cdef int64_t _sums[_SLOTS][4]
    cdef int _n
    cdef dict _overflow
    cdef int64_t _acc[4]
    cdef int64_t _first, _last
    cdef bint _have
    cdef dict _names
    cdef object _never
    cdef object _step_search
    cdef public Py_ssize_t max_pending
    cdef public Py_ssize_t evicted

    def __init__(self, step_search, max_pending=65536):
        self._step_search = step_search
        self.max_pending = max_pending
        self._overflow = {}
        self._names = {}
        self._never = None

    @property
    def totals(self):
        """Counted nanoseconds per bucket (productive, overhead, idle, wasted)."""
        return [self._acc[0], self._acc[1], self._acc[2], self._acc[3]]

    @property
    def bounds(self):
        """``(first start, last end)`` of the records fed so far, or ``(None, None)``."""
        return (self._first, self._last) if self._have else (None, None)

    @property
    def pending(self):
        """How many open spans hold an entry."""
        return self._n + len(self._overflow)

    cdef bint _take(self, uint64_t span_id, int64_t* out) except -1:
        cdef int i, j
        for i in range(self._n):
            if self._ids[i] == span_id:
                for j in range(4):
                    out[j] = self._sums[i][j]
                self._n -= 1
                if i != self._n:
                    self._ids[i] = self._ids[self._n]
                    for j in range(4):
                        self._sums[i][j] = self._sums[self._n][j]
                return True
        if self._overflow:
            key = span_id
            hit = self._overflow.pop(key, None)
            if hit is not None:
                for j in range(4):
                    out[j] = (<list>hit)[j]
                return True
        return False

    cdef int _add(self, uint64_t parent_id, int64_t* sums) except -1:
        cdef int i, j
        for i in range(self._n):
            if self._ids[i] == parent_id:
                for j in range(4):
                    self._sums[i][j] += sums[j]
                return 0
        key = parent_id
        if self._overflow:
            hit = self._overflow.get(key)
            if hit is not None:
                for j in range(4):
                    (<list>hit)[j] = (<list>hit)[j] + sums[j]
                return 0
        if self._n < _SLOTS and self._n < self.max_pending:
            self._ids[self._n] = parent_id
            for j in range(4):
                self._sums[self._n][j] = sums[j]
            self._n += 1
            return 0
        if self._n + len(self._overflow) >= self.max_pending:  # drop the oldest overflow entry
            if self._overflow:
                del self._overflow[next(iter(self._overflow))]
            else:  # every entry is in the C slots: drop slot 0
                self._n -= 1
                self._ids[0] = self._ids[self._n]
                for j in range(4):
                    self._sums[0][j] = self._sums[self._n][j]
            self.evicted += 1
            if self._n < _SLOTS and self._n < self.max_pending:
                self._ids[self._n] = parent_id
                for j in range(4):
                    self._sums[self._n][j] = sums[j]
                self._n += 1
                return 0
        self._overflow[key] = [sums[0], sums[1], sums[2], sums[3]]
        return 0

    def feed(self, records, never, skip_category):
        """Roll ``records`` up; returns the steps that ended, as ``(iteration, wall_ns, buckets or None)``."""
        cdef list steps = []
        cdef int64_t start, end, dur
        cdef int64_t own[4]
        cdef bint has_own, counted
        cdef Py_ssize_t slot = 0
        cdef int j
        cdef Span r
        cdef PyObject* hit
        cdef dict attrs
        cdef dict names = self._names
        cdef int code, last_code = 0
        cdef PyObject* last_name = NULL  # borrowed: the batch holds the records, they hold the names
        cdef list batch = records if type(records) is list else list(records)
        if never is not self._never:  # the catalog was imported since: classify names again
            self._never = never
            names.clear()
        for obj in batch:
            if type(obj) is not Span:
                raise TypeError(f"GoodputRollup takes the compiled recorder's records, not {type(obj).__name__}")
            r = <Span>obj
            start, end = r.start_ns, r.end_ns
            if start <= 0 or end <= 0 or end < start:
                continue  # the report skips bad timings too
            if not self._have:
                self._first, self._last, self._have = start, end, True
            else:
                if start < self._first:
                    self._first = start
                if end > self._last:
                    self._last = end
            dur = end - start
            attrs = <dict?>r.attrs if r.attrs is not None else None
            has_own = False
            if self._n or self._overflow:
                has_own = self._take(r._span_id, own)
            counted = False
            # the name's class, once per name: 1 a step name, 2 never bucketed, 0 neither (a run of
            # spans from one call site shares the name object: compare the pointer first)
            name = r.name
            if <PyObject*>name != last_name:
                hit = PyDict_GetItem(names, name)
                if hit is NULL:
                    last_code = 2 if name in never else (1 if self._step_search(name) is not None else 0)
                    if PyDict_Size(names) < 4096:
                        names[name] = last_code
                else:
                    last_code = <int><object>hit
                last_name = <PyObject*>name
            code = last_code
            hit = PyDict_GetItem(attrs, _K_BUCKET) if attrs is not None else NULL
            if hit is NULL:
                if code == 1 and attrs is not None:
                    hit = PyDict_GetItem(attrs, _K_ITERATION)
                    if hit is not NULL and <object>hit is not None:
                        steps.append((<object>hit, dur, [own[0], own[1], own[2], own[3]] if has_own else None))
                        continue
            elif code != 2:
                # the bucket is nearly always the registry's own (interned) string: compare pointers first
                if hit == <PyObject*>_B_PRODUCTIVE:
                    slot = 0
                elif hit == <PyObject*>_B_OVERHEAD:
                    slot = 1
                elif hit == <PyObject*>_B_IDLE:
                    slot = 2
                elif hit == <PyObject*>_B_WASTED:
                    slot = 3
                else:
                    bucket = <object>hit
                    hit = PyDict_GetItem(_BUCKET_SLOT, bucket) if type(bucket) is str else NULL
                    slot = <Py_ssize_t><object>hit if hit is not NULL else -1
                if slot >= 0:
                    counted = True
                    # a leaf a lens group stamped was checked where it was emitted (an umbrella
                    # carries no bucket, an efficiency span is no group's): only others need looking at
                    if PyDict_GetItem(attrs, _K_GROUP) is NULL:
                        if PyDict_GetItem(attrs, _K_UMBRELLA) is not NULL:
                            counted = False
                        else:
                            hit = PyDict_GetItem(attrs, _K_CATEGORY)
                            counted = hit is NULL or <object>hit not in skip_category
            if counted:
                self._acc[slot] += dur
                if not has_own:
                    own[0] = own[1] = own[2] = own[3] = 0
                    has_own = True
                own[slot] += dur
            if has_own and r._parent_id:
                self._add(r._parent_id, own)
        return steps
