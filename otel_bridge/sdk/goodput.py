"""Live goodput: an exporting rank rolls its own spans up into buckets as they end and exports them as metrics.

The rules are ``lens report``'s, applied to one process's spans in end order:

* a span counts in a bucket when it carries ``rl.bucket`` with one of the four buckets and is not
  an umbrella, not a never-bucketed name (checkpoint finalize, startup, collector waits) and not
  of a timer-only or unbucketed efficiency category;
* a step is an unbucketed span with ``rl.iteration`` whose name matches ``STEP_PATTERN``; its
  buckets are the counted spans below it whose nearest step ancestor it is;
* the rank's wall time runs from its first span's start to its last span's end, and its goodput
  is productive seconds over that wall time.

Nothing is retained: children end before their parents, so each ended span hands what it and
its descendants counted to its parent's entry (``pending``, one entry per span that is still
open and has ended descendants; bounded), and a step takes its entry when it ends. The work runs
on the export thread as the pipeline drains ended records: the application's span path pays
nothing for it. At each step end a snapshot of the cumulative figures is published, which the
observable instruments report at the next collection: one series per rank (per bucket), never
one per step.

The ratio (``lens.goodput.ratio``, productive seconds over wall time) is opt-in
(``LensConfig.goodput_ratio`` / ``LENS_GOODPUT_RATIO``), as the seed leaves the rolled-up goodput
to the monitor: derived from spans, it has no productive generation term on an async run (there
generation is a continuously batched pipeline overlapping training, with no span of its own),
and it covers driver idle but not collector-side idle or wasted work (the efficiency/* metrics
do). The bucket seconds it is made of are exported by default.
"""

from __future__ import annotations

import re
import sys
import threading

from lens_core import semconv
from lens_core.efficiency import EFFICIENCY_CATEGORY_BUCKET, TIMER_ONLY
from lens_core.registry import Bucket

__all__ = ["LiveGoodput", "MAX_PENDING", "STEP_PATTERN"]

STEP_PATTERN = r"(^|\.)step$"
"""Regex (searched) naming a step span; the same as ``lens_report.model.DEFAULT_STEP_PATTERN``."""

MAX_PENDING = 65536
"""Open spans with ended descendants tracked at once; past it the oldest entry is dropped (its
seconds stay in the rank totals but in no step: a parent that never ends here, such as a remote one)."""

_BUCKETS = Bucket.ALL
_NAME_CACHE_LIMIT = 4096
_CATALOG = "lens_core.catalogs.rl"


def _never_bucketed():
    """The RL catalog's never-bucketed names once something imported it (importing it here would
    register its groups as a side effect of setting telemetry up)."""
    catalog = sys.modules.get(_CATALOG)
    return catalog.NEVER_BUCKETED if catalog is not None else {}


class LiveGoodput:
    """Per-rank bucket and step figures from ended span records, exported through ``meter``."""

    def __init__(self, meter, *, run_id: str, rank: int, step_pattern: str = STEP_PATTERN,
                 max_pending: int = MAX_PENDING, ratio: bool = False) -> None:
        self.attributes = {semconv.NEMO_RUN_ID: run_id, semconv.NV_DL_RANK: rank}
        self._step = re.compile(step_pattern).search
        self._rollup = None  # lens_core's GoodputRollup matching the recorder, made at the first batch
        self._max_pending = max_pending
        self.totals = [0, 0, 0, 0]  # counted ns per bucket, this rank
        self.first_ns = None  # the rank's wall: first start ...
        self.last_ns = None  # ... to last end
        self.step_wall_ns = 0  # sum of the steps' walls
        self.step_buckets = [0, 0, 0, 0]  # sum of the steps' buckets (ns)
        self.last_step_buckets = [0, 0, 0, 0]
        self.steps = 0
        self.last_step_ns = 0
        self.current_step = None
        self.evicted = 0
        self._lock = threading.Lock()  # observe() runs on the export thread, or the closing one
        self.snapshot = self._take()
        self._instruments = self._create(meter, ratio) if meter is not None else ()

    # ---- rolling up ---------------------------------------------------------------------

    def observe(self, records) -> None:
        """Roll ended span records up (each once, in end order); publish a snapshot at every step end."""
        if not records:
            return
        skip = TIMER_ONLY.union(c for c, b in EFFICIENCY_CATEGORY_BUCKET.items() if b is None)
        with self._lock:
            if self._rollup is None:
                self._rollup = _rollup_for(records[0])(self._step, self._max_pending)
            rollup = self._rollup
            steps = rollup.feed(records, _never_bucketed(), skip)
            self.evicted = rollup.evicted
            self.totals = rollup.totals
            self.first_ns, self.last_ns = rollup.bounds
            for iteration, wall_ns, own in steps:
                self._end_step(own, wall_ns, iteration)
            if steps:
                self.snapshot = self._take()

    @property
    def pending(self) -> int:
        """Open spans holding an entry (ended descendants' seconds) now."""
        return self._rollup.pending if self._rollup is not None else 0

    def _end_step(self, own, wall_ns, iteration) -> None:
        own = own or [0, 0, 0, 0]
        for i in range(4):
            self.step_buckets[i] += own[i]
        self.last_step_buckets = own
        self.steps += 1
        self.step_wall_ns += wall_ns
        self.last_step_ns = wall_ns
        self.current_step = iteration

    def publish(self) -> None:
        """Publish the figures as they are now (at shutdown: what ended after the last step too)."""
        with self._lock:
            self.snapshot = self._take()

    def _take(self):
        wall = (self.last_ns - self.first_ns) if self.first_ns is not None else 0
        return {
            "buckets_ns": dict(zip(_BUCKETS, self.totals)),
            "wall_ns": wall,
            "goodput": self.totals[0] / wall if wall > 0 else None,
            "step_wall_ns": self.step_wall_ns,
            "step_buckets_ns": dict(zip(_BUCKETS, self.step_buckets)),
            "last_step_buckets_ns": dict(zip(_BUCKETS, self.last_step_buckets)),
            "steps": self.steps,
            "last_step_ns": self.last_step_ns,
            "current_step": self.current_step,
        }

    # ---- instruments -----------------------------------------------------------------------

    def _create(self, meter, with_ratio):
        from opentelemetry.metrics import Observation

        attributes = self.attributes

        def bucket_seconds(options):
            if self.snapshot["wall_ns"] == 0 and not self.snapshot["steps"]:
                return []  # nothing observed yet: no series
            buckets = self.snapshot["buckets_ns"]
            return [Observation(buckets[b] / 1e9, {**attributes, semconv.RL_BUCKET: b}) for b in _BUCKETS]

        def step_seconds(options):
            if not self.snapshot["steps"]:
                return []
            return [Observation(self.snapshot["step_wall_ns"] / 1e9, attributes)]

        def ratio(options):
            goodput = self.snapshot["goodput"]
            return [] if goodput is None else [Observation(goodput, attributes)]

        def step_duration(options):
            snap = self.snapshot
            return [Observation(snap["last_step_ns"] / 1e9, attributes)] if snap["steps"] else []

        def step_buckets(options):
            snap = self.snapshot
            if not snap["steps"]:
                return []
            last = snap["last_step_buckets_ns"]
            return [Observation(last[b] / 1e9, {**attributes, semconv.RL_BUCKET: b}) for b in _BUCKETS]

        def current(options):
            step = self.snapshot["current_step"]
            return [] if not isinstance(step, (int, float)) else [Observation(step, attributes)]

        instruments = (
            meter.create_observable_counter(semconv.LENS_GOODPUT_TIME, [bucket_seconds], "s",
                                            "Counted seconds of this rank's bucketed spans so far, by rl.bucket."),
            meter.create_observable_counter(semconv.LENS_GOODPUT_STEP_TIME, [step_seconds], "s",
                                            "Wall seconds of this rank's ended steps so far."),
            meter.create_observable_gauge(semconv.LENS_GOODPUT_STEP_DURATION, [step_duration], "s",
                                          "Wall seconds of this rank's last ended step."),
            meter.create_observable_gauge(semconv.LENS_GOODPUT_STEP_BUCKET_TIME, [step_buckets], "s",
                                          "Seconds of this rank's last ended step, by rl.bucket."),
            meter.create_observable_gauge(semconv.LENS_GOODPUT_STEP_CURRENT, [current], "{step}",
                                          "rl.iteration of this rank's last ended step."),
        )
        if with_ratio:  # opt-in (goodput_ratio): see the module docstring
            instruments += (meter.create_observable_gauge(
                semconv.LENS_GOODPUT_RATIO, [ratio], "1",
                "Productive seconds over this rank's wall time so far; span-derived: on an async run it "
                "has no productive generation term (not 'generation contributed nothing')."),)
        return instruments


def _rollup_for(record):
    """The roll-up class matching the recorder that made ``record``: the compiled one
    (lens_core._native._goodput) reads the compiled recorder's span fields, so it takes
    that recorder's records; anything else takes its pure twin (_goodput_py)."""
    from lens_core._native import _goodput_py

    try:
        from lens_core._native import _goodput, _recorder
    except ImportError:  # not built
        return _goodput_py.GoodputRollup
    return _goodput.GoodputRollup if type(record) is _recorder.Span else _goodput_py.GoodputRollup
