"""Live goodput's per-record roll-up in pure Python: the twin of lens_core._native._goodput (same figures)."""

from __future__ import annotations

from lens_core import semconv
from lens_core.device_clock import DeviceBusy

__all__ = ["GoodputRollup"]


# ---- live goodput: the per-record roll-up (compiled twin: _goodput.pyx) -------------------------

_BUCKET_SLOT = {"productive": 0, "overhead": 1, "idle": 2, "wasted": 3}
_K_BUCKET, _K_ITERATION = semconv.RL_BUCKET, semconv.RL_ITERATION
_K_GROUP, _K_UMBRELLA, _K_CATEGORY = semconv.LENS_GROUP, semconv.LENS_UMBRELLA, semconv.RL_EFFICIENCY_CATEGORY
_K_DEVICE_START = semconv.LENS_DEVICE_START_TIME


class GoodputRollup:
    """Per-process roll-up of ended span records into buckets and steps (live goodput).

    ``feed(records, never, skip_category)`` takes records in end order: a counted bucketed span
    adds its duration to ``totals`` and to its parent's pending entry, every span hands its own
    entry up to its parent, and a step (unbucketed, ``rl.iteration``, a name ``step_search``
    finds) takes its entry. Returns ``[(iteration, wall_ns, [ns per bucket] or None)]`` for the
    steps that ended. ``never`` (names) and ``skip_category`` (efficiency categories) are never
    counted. Past ``max_pending`` open entries the oldest are dropped (``evicted``). A leaf with
    device times counts on the device's clock (lens_core.device_clock has the rule)."""

    def __init__(self, step_search, max_pending=65536):
        self._step_search = step_search
        self.max_pending = max_pending
        self.evicted = 0
        self._pending = {}  # span id -> [ns per bucket] of its ended descendants
        self._acc = [0, 0, 0, 0]
        self._first = self._last = None
        self._names = {}  # name -> 1 a step name, 2 never bucketed, 0 neither
        self._never = None
        self._busy = DeviceBusy()

    @property
    def totals(self):
        """Counted nanoseconds per bucket (productive, overhead, idle, wasted)."""
        return list(self._acc)

    @property
    def bounds(self):
        """``(first start, last end)`` of the records fed so far, or ``(None, None)``."""
        return (self._first, self._last)

    @property
    def pending(self):
        """How many open spans hold an entry."""
        return len(self._pending)

    def feed(self, records, never, skip_category):
        """Roll ``records`` up; returns the steps that ended, as ``(iteration, wall_ns, buckets or None)``."""
        steps = []
        pending, acc, names = self._pending, self._acc, self._names
        if never is not self._never:  # the catalog was imported since: classify names again
            self._never = never
            names.clear()
        for r in records:
            start, end = r.start_ns, r.end_ns
            if start <= 0 or end <= 0 or end < start:
                continue  # the report skips bad timings too
            if self._first is None:
                self._first, self._last = start, end
            else:
                if start < self._first:
                    self._first = start
                if end > self._last:
                    self._last = end
            dur = end - start
            attrs = r.attrs
            own = pending.pop(r.span_id, None) if pending else None
            name = r.name
            code = names.get(name)
            if code is None:
                code = 2 if name in never else (1 if self._step_search(name) is not None else 0)
                if len(names) < 4096:
                    names[name] = code
            bucket = attrs.get(_K_BUCKET) if attrs else None
            counted = False
            if bucket is None:
                if code == 1 and attrs:
                    iteration = attrs.get(_K_ITERATION)
                    if iteration is not None:
                        steps.append((iteration, dur, own))
                        continue
            elif code != 2:
                slot = _BUCKET_SLOT.get(bucket) if type(bucket) is str else None
                # a leaf a lens group stamped was checked where it was emitted (an umbrella
                # carries no bucket, an efficiency span is no group's): only others need looking at
                if slot is not None:
                    counted = True
                    if _K_GROUP not in attrs:
                        category = attrs.get(_K_CATEGORY)
                        counted = _K_UMBRELLA not in attrs and (category is None or category not in skip_category)
            if counted and (_K_DEVICE_START in attrs or (slot == 1 and self._busy.intervals)):
                dur = self._busy.counted(attrs, start, end, slot)
            if counted:
                acc[slot] += dur
                if own is None:
                    own = [0, 0, 0, 0]
                own[slot] += dur
            parent = r.parent_id
            if own is not None and parent:
                into = pending.get(parent)
                if into is None:
                    if len(pending) >= self.max_pending:
                        del pending[next(iter(pending))]
                        self.evicted += 1
                    pending[parent] = own
                else:
                    for i in range(4):
                        into[i] += own[i]
        return steps
