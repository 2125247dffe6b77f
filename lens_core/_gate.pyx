# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled gate: the disabled fast path of managed_span / trace_fn (same API as _gate_py).

When the compiled recorder (lens_core._native._recorder) is the installed backend, an enabled
span is built here directly into it (its types come from _native/_recorder.pxd)."""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.dict cimport PyDict_Copy
from cpython.unicode cimport PyUnicode_GET_LENGTH
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from lens_core._native._recorder cimport Recorder, Span

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

cdef extern from "Python.h":
    int PyContextVar_Get(object var, PyObject* default_value, PyObject** value) except -1

__all__ = [
    "is_enabled",
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
cdef enum:
    _CACHE = 64  # slots of a snapshot's address cache (a power of two)


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
cdef object _OFF = object()  # a disabled group's value in _Snapshot.gate


cdef class _Snapshot:
    # ids: spelling -> id (-1 = unknown); bits: little-endian bitset of enabled ids;
    # infos: id -> (name, umbrella, bucket_key, bucket) for the native recorder's stamps;
    # gate: spelling -> its id when on, else _OFF; behind it a direct-mapped cache by the
    # group object's address (a literal at a call site is the same object every call), so a
    # repeated spelling costs a pointer compare: keys are held (a reference each), never reused.
    cdef dict ids
    cdef dict gate
    cdef PyObject* cache_key[_CACHE]
    cdef Py_ssize_t cache_val[_CACHE]

    def __dealloc__(self):
        cdef int i
        for i in range(_CACHE):
            if self.cache_key[i] is not NULL:
                Py_DECREF(<object>self.cache_key[i])
                self.cache_key[i] = NULL
    cdef bytes bits
    cdef bint anyon
    cdef tuple infos


cdef _Snapshot _snap = _Snapshot()
_snap.ids = {}
_snap.gate = {}
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
    s.gate = {name: (gid if gid >= 0 and (bits >> gid) & 1 else _OFF) for name, gid in s.ids.items()}
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


cdef inline bint _bit(_Snapshot s, Py_ssize_t gid):
    return 0 <= gid and (gid >> 3) < PyBytes_GET_SIZE(s.bits) and (PyBytes_AS_STRING(s.bits)[gid >> 3] >> (gid & 7)) & 1


cdef Py_ssize_t _slow_on(_Snapshot s, object group) except -2:
    # A spelling the gate dict has not seen: its id (normalised once), cached as on or _OFF.
    cdef Py_ssize_t gid = _slow_id(s.ids, group)
    cdef bint on = _bit(s, gid)
    if len(s.gate) < _ALIAS_LIMIT:
        s.gate[group] = gid if on else _OFF
    return gid if on else -1


cdef Py_ssize_t _lookup_on(_Snapshot s, object group, size_t slot) except -2:
    # The cache missed: the gate dict (or the slow path), then remember the answer for this object.
    cdef PyObject* found = PyDict_GetItem(s.gate, group)
    cdef Py_ssize_t result
    if found is NULL:
        result = _slow_on(s, group)
    elif found == <PyObject*>_OFF:
        result = -1
    else:
        result = <Py_ssize_t><object>found
    if type(group) is str:
        old = s.cache_key[slot]
        Py_INCREF(group)
        s.cache_key[slot] = <PyObject*>group
        s.cache_val[slot] = result
        if old is not NULL:
            Py_DECREF(<object>old)
    return result


cdef inline Py_ssize_t _on_id(_Snapshot s, object group) except -2:
    # The group's id when it is on, else -1: a spelling seen at this address costs a pointer
    # compare; else one dict lookup (no int conversion, no bitset read).
    cdef size_t slot
    if not s.anyon:
        if not isinstance(group, str):  # reject it even when all is off, like _gate_py
            _slow_id(s.ids, group)  # raises TypeError
        return -1
    slot = (<size_t><PyObject*>group >> 4) & (_CACHE - 1)
    if s.cache_key[slot] == <PyObject*>group:
        return s.cache_val[slot]
    return _lookup_on(s, group, slot)


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




cdef inline bint _rebinds(PyObject* kwnames, Py_ssize_t nargs):
    # A keyword that repeats a positional parameter (group, name, or tracer given both
    # ways) must reach the binder for its TypeError, not vanish on the disabled path.
    # Keyword names are str: most are told apart by their length (4, 5, 6) without a call.
    cdef Py_ssize_t i, n
    cdef PyObject* key
    for i in range(PyTuple_GET_SIZE(<object>kwnames)):
        key = PyTuple_GET_ITEM(<object>kwnames, i)
        n = PyUnicode_GET_LENGTH(<object>key)
        if ((n == 5 and <object>key == "group") or (n == 4 and <object>key == "name")
                or (nargs == 3 and n == 6 and <object>key == "tracer")):
            return True
    return False


cdef inline object _span_fast(bint umbrella, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    # The disabled path first, reading the snapshot and the keyword names where they are
    # (no reference taken): a group that is off returns the null span from here.
    cdef Py_ssize_t gid
    if 2 <= nargs <= 3 and (kwnames is NULL or not _rebinds(kwnames, nargs)):
        gid = _on_id(_snap, <object>args[0])
        if gid < 0:
            return _NULL
        return _span_on(umbrella, gid, args, nargs, kwnames)
    return _span_bound(umbrella, args, nargs, kwnames)


cdef object _span_on(bint umbrella, Py_ssize_t gid, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    # The group is on: the span, built without binding through the Python-level binder.
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else len(<tuple>kwnames)
    cdef tuple names = () if kwnames is NULL else <tuple>kwnames
    if _native is not None and (nargs == 2 or <object>args[2] is None) and "tracer" not in names:
        # The native recorder: the span object is built here, attributes merged in C.
        return _native_span(_native, _snap, gid, <object>args[0], <object>args[1], args + nargs, names, nkw, umbrella)
    if nargs == 3 or "tracer" not in names:
        # Enabled, common shape: hand over to the factory directly, without binding
        # through the Python-level binder (which would check the gate a second time).
        attrs = {names[i]: <object>args[nargs + i] for i in range(nkw)}
        return _span_factory(<object>args[0], <object>args[1], <object>args[2] if nargs == 3 else None,
                             attrs, umbrella)
    return _span_bound(umbrella, args, nargs, kwnames)


cdef object _span_bound(bint umbrella, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    # Any other shape (a positional count out of range, a keyword repeating a positional,
    # tracer given by keyword): through the binder, for its TypeError or its answer.
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else len(<tuple>kwnames)
    cdef tuple names = () if kwnames is NULL else <tuple>kwnames
    positional = tuple([<object>args[i] for i in range(nargs)])
    kwargs = {names[i]: <object>args[nargs + i] for i in range(nkw)}
    return (_UMBRELLA_BINDER if umbrella else _MANAGED_BINDER)(*positional, **kwargs)


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
    return _span_fast(False, args, nargs, kwnames)


cdef object _umbrella_fast(PyObject* self, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    return _span_fast(True, args, nargs, kwnames)


# The floor the disabled path is measured against (bench/test_bench_disabled.py): a C function
# with the same calling convention that returns the prebuilt null span and does nothing else.
cdef object _floor_fast(PyObject* self, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    return _NULL


cdef PyMethodDef _floor_def
_floor_def.ml_name = "reference_null_span"
_floor_def.ml_meth = <void*>_floor_fast
_floor_def.ml_flags = METH_FASTCALL | METH_KEYWORDS
_floor_def.ml_doc = "reference_null_span(*args, **kwargs)\n--\n\nReturns the null span (the benchmarks' floor)."
_reference_null_span = PyCFunction_NewEx(&_floor_def, NULL, "lens_core._gate")


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
        # By reference when the function's module-level name is this wrapper (the usual
        # @trace_fn def work(): pickle (a process pool) would otherwise pickle the wrapped
        # function by reference, find the wrapper at its name and refuse: "it's not the
        # same object as __main__.work"). By value otherwise, and always for cloudpickle
        # (Ray), which ships a __main__ module's functions and classes by value: rebuilt
        # around the function, with the metadata functools.update_wrapper copied.
        name = _global_name(self)
        if name is not None:
            return name
        return (_rebuild_traced, (self._fn, self._group, self._lens_name, self._lens_tracer, self._lens_umbrella,
                                  dict(getattr(self, "__dict__"))))


cdef inline bint _traced_on(TracedFunction tf) except -1:
    # Reads the published snapshot in place (no reference taken on the disabled path).
    cdef Py_ssize_t gid
    if not _snap.anyon:
        return False
    if tf._seen is not _snap:  # first call since the last publish: resolve the id once
        tf._gid = _group_id(_snap, tf._group)
        tf._seen = _snap
    gid = tf._gid  # _bit(_snap, gid) spelled out: a call with the snapshot as argument takes a reference
    return gid >= 0 and (gid >> 3) < PyBytes_GET_SIZE(_snap.bits) and (PyBytes_AS_STRING(_snap.bits)[gid >> 3] >> (gid & 7)) & 1


cdef object _traced_vectorcall(object self, PyObject** args, size_t nargsf, PyObject* kwnames):
    if _traced_on(<TracedFunction>self):
        return _traced_enabled(<TracedFunction>self, args, nargsf, kwnames)
    if (<TracedFunction>self)._fn_vectorcall is not NULL:
        # Straight into the function's vectorcall (what PyObject_Vectorcall would look up).
        return lens_vectorcall((<TracedFunction>self)._fn_vectorcall, <PyObject*>(<TracedFunction>self)._fn, args,
                               nargsf, kwnames)
    return PyObject_Vectorcall((<TracedFunction>self)._fn, args, nargsf, kwnames)


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
    # Checked here, once: a call checks the group's type only while some group is on, and
    # the twin must refuse what this one refuses (trace_fn checks before it gets here).
    if not isinstance(group, str):
        raise TypeError(f"span group must be a str, got {type(group).__name__}: {group!r}")
    return TracedFunction(fn, group, name, tracer, umbrella)


def _global_name(traced):
    """``traced``'s qualified name when its module's attribute of that name is ``traced``
    itself and the pickler is not cloudpickle's; else None (pickle it by value)."""
    import sys

    module, qualname = getattr(traced, "__module__", None), getattr(traced, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    target = sys.modules.get(module)
    try:
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception:
        return None
    if target is not traced:
        return None
    frame = sys._getframe(0)  # the innermost Python frame (compiled functions push none)
    for _ in range(16):  # cloudpickle's Pickler.dump is a Python frame below this one
        if frame is None:
            break
        if "cloudpickle" in frame.f_code.co_filename:
            return None
        frame = frame.f_back
    return qualname


def _rebuild_traced(fn, group, name, tracer, umbrella, state):
    traced = TracedFunction(fn, group, name, tracer, umbrella)
    getattr(traced, "__dict__").update(state)
    return traced


# ---- the native recorder's fast path ----------------------------------------------------

# The very str objects of lens_core.semconv, not equal copies: the export thread's live-goodput
# roll-up looks these keys up in every record, and a dict finds its own key object by pointer
# where an equal copy costs a string compare (35 against 18 ns a record).
from lens_core import semconv as _semconv

cdef object _LENS_GROUP = _semconv.LENS_GROUP
cdef object _LENS_UMBRELLA = _semconv.LENS_UMBRELLA

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
    # Credential shapes in the name are redacted like in any text; a name seen before
    # (the usual literal) costs a set lookup.
    if type(name) is str and _str_check is not None and len(<str>name) >= _shape_min and name not in _clean_texts:
        name = _str_check(name)
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
