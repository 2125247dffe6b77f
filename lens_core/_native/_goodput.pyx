# cython: language_level=3, boundscheck=False, wraparound=False
"""Live goodput's per-record roll-up, compiled: the twin of lens_core._native._goodput_py.

It reads the compiled recorder's Span fields directly (declared in _recorder.pxd), so it
takes only that recorder's records; otel_bridge.sdk.goodput picks the twin that matches.
"""

cimport cython
from libc.stdint cimport uint64_t, int64_t
from cpython.object cimport PyObject
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem, PyDict_Size, PyDict_Next, PyDict_Copy
from lens_core._native._recorder cimport Span

__all__ = ["GoodputRollup"]

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
cdef str _K_DEVICE_START = _semconv.LENS_DEVICE_START_TIME
from lens_core.device_clock import DeviceBusy


@cython.auto_pickle(False)  # per-process state of an export thread: nothing to pickle
cdef class GoodputRollup:
    """Per-process roll-up of ended span records into buckets and steps (live goodput).

    ``feed(records, never, skip_category)`` takes records in end order: a counted bucketed span
    adds its duration to ``totals`` and to its parent's pending entry, every span hands its own
    entry up to its parent, and a step (unbucketed, ``rl.iteration``, a name ``step_search``
    finds) takes its entry. Returns ``[(iteration, wall_ns, [ns per bucket] or None)]`` for the
    steps that ended. ``never`` (names) and ``skip_category`` (efficiency categories) are never
    counted. Past ``max_pending`` open entries the oldest are dropped (``evicted``). A leaf with
    device times counts on the device's clock (lens_core.device_clock has the rule)."""

    cdef uint64_t _ids[_SLOTS]
    cdef int64_t _sums[_SLOTS][4]
    cdef int _n
    cdef dict _overflow
    cdef int64_t _acc[4]
    cdef int64_t _first, _last
    cdef bint _have
    cdef dict _names
    cdef object _never
    cdef object _busy  # lens_core.device_clock.DeviceBusy: the rule's one implementation
    cdef object _step_search
    cdef public Py_ssize_t max_pending
    cdef public Py_ssize_t evicted

    def __init__(self, step_search, max_pending=65536):
        self._step_search = step_search
        self.max_pending = max_pending
        self._overflow = {}
        self._names = {}
        self._never = None
        self._busy = DeviceBusy()

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
            if counted and (PyDict_GetItem(attrs, _K_DEVICE_START) is not NULL
                            or (slot == 1 and len(self._busy.intervals))):
                dur = self._busy.counted(attrs, start, end, slot)
            if counted:
                self._acc[slot] += dur
                if not has_own:
                    own[0] = own[1] = own[2] = own[3] = 0
                    has_own = True
                own[slot] += dur
            if has_own and r._parent_id:
                self._add(r._parent_id, own)
        return steps
