"""Aggregates a report leads with: run goodput and badput, step-time percentiles over ranks, straggler scores."""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._units import NS_PER_S

__all__ = [
    "Aggregates",
    "BADPUT_PARTS",
    "Badput",
    "CHANGE_NOISE",
    "MIN_SLOWDOWN",
    "MIN_SUSTAINED",
    "NOISE_SIGMAS",
    "SLOWEST_STEPS",
    "STEP_QUANTILES",
    "SlowStep",
    "StepSpread",
    "StepTimes",
    "StragglerScore",
    "aggregate",
    "change_point",
    "quantile",
]

STEP_QUANTILES = (0.5, 0.9, 0.99)
"""The quantiles of step time over ranks each step reports (besides the maximum)."""

BADPUT_PARTS = ("overhead", "idle", "wasted", "unattributed", "restarts")
"""Where the non-productive time went, in display order; ``restarts`` is the time lost between attempts."""


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` by linear interpolation between the closest ranks
    (NumPy's default, DuckDB's ``quantile_cont``): exact, so every engine gives the same answer."""
    if not values:
        raise ValueError("quantile of no values")
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def _median(values: Sequence[float]) -> float:
    return quantile(sorted(values), 0.5)


@dataclass(frozen=True)
class Badput:
    """The run's rank-seconds split into productive time and where the rest went.

    ``total_ns`` is every rank's wall (first to last span) summed, plus the rank-seconds lost
    between attempts of the run (``restarts_ns``, when known); each part over it is a fraction,
    and productive plus the parts is 1.
    """

    total_ns: int
    productive_ns: int
    parts_ns: dict[str, int]
    restarts_known: bool

    @property
    def goodput(self) -> float | None:
        """Productive rank-seconds over all rank-seconds, or ``None`` for no time at all."""
        return self.productive_ns / self.total_ns if self.total_ns > 0 else None

    def fraction(self, part: str) -> float | None:
        """The share of ``part`` (one of :data:`BADPUT_PARTS`) in all rank-seconds."""
        return self.parts_ns[part] / self.total_ns if self.total_ns > 0 else None

    def to_json(self) -> dict[str, Any]:
        """Goodput, then seconds and fraction per part; ``restarts`` is null when not known."""
        return {
            "total_rank_s": self.total_ns / NS_PER_S,
            "productive_rank_s": self.productive_ns / NS_PER_S,
            "goodput": self.goodput,
            "parts": {part: {"rank_s": self.parts_ns[part] / NS_PER_S, "fraction": self.fraction(part)}
                      if part != "restarts" or self.restarts_known else None for part in BADPUT_PARTS},
        }


@dataclass(frozen=True)
class StepSpread:
    """One step's time over the ranks that ran it: quantiles, the maximum, and the busiest rank."""

    iteration: int
    ranks: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    max_rank: str
    """The one rank with the most busy time ('' when several share it, or the step has one rank)."""
    goodput: float | None

    def to_json(self) -> dict[str, Any]:
        """The spread in seconds as a JSON-ready dict."""
        return {"iteration": self.iteration, "ranks": self.ranks, "p50_s": self.p50_ns / NS_PER_S,
                "p90_s": self.p90_ns / NS_PER_S, "p99_s": self.p99_ns / NS_PER_S, "max_s": self.max_ns / NS_PER_S,
                "max_rank": self.max_rank, "goodput": self.goodput}


MIN_SLOWDOWN = 0.05
"""A rank is flagged only when it is at least this much slower (5 %): its relative or individual
score reaches 1.05. A rank within ±3 % of its peers is never a straggler, however many there are."""

NOISE_SIGMAS = 6.0
"""And only when its score stands this many robust standard deviations (1.4826 × the median
absolute deviation over ranks) above the median rank's: the ranks that are not stragglers show
what noise alone gives (jitter, few steps), so a noisy or short run raises the bar by itself."""

MIN_SUSTAINED = 3
"""Steps a change must hold on both sides of where it began: one slow step is not a change."""

CHANGE_NOISE = 4.0
"""A change in a rank's own busy time stands out when its size in noise units (the change of its
mean over √(1/steps before + 1/steps after)) is this many times the median rank's. Without
stragglers, the largest of 4,000 ranks' is 2.2-3.4 times the median (±3 % jitter, 8-100 steps);
a 10 % slowdown from the middle of the run is 4.6-16 times."""

SLOWEST_STEPS = 5
"""How many slowest steps the text report lists by default."""


@dataclass(frozen=True)
class StragglerScore:
    """How much a rank lagged, from its busy time (step wall less its waiting), two ways.

    ``relative``: the median over its steps of its busy time over the median rank's busy time at
    the same step (1.30: it typically works 30 % longer than its peers; finds a rank always slow).
    ``individual``: the size of the largest sustained change in its own busy time (taken over
    the step's median, so a change every rank shares moves no one): its median after the change
    over its median before (1.30: it became 30 % slower; ``change_step`` says where, when it
    slowed by :data:`MIN_SLOWDOWN` or more). nvidia-resiliency-ext scores a rank's median time
    against the fastest rank's (relative) and against its own best (individual), as
    performance from 0 to 1; here both are slowdowns (1.0 normal, higher worse), against the
    median rank, which one fast or slow rank does not move. ``flagged_by`` names the scores
    that passed their threshold (see :data:`MIN_SLOWDOWN`, :data:`NOISE_SIGMAS`,
    :data:`CHANGE_NOISE`); ``waited_ns``
    is the rank-seconds the other ranks waited for it, in the steps where it alone was busiest.
    """

    rank: str
    steps: int
    relative: float
    individual: float
    change_step: int | None
    first_step: int
    typical_ns: float
    flagged_by: str = ""
    waited_ns: int = 0

    @property
    def score(self) -> float:
        """The larger of the two scores: what orders the stragglers."""
        return max(self.relative, self.individual)

    @property
    def flagged(self) -> bool:
        """Whether this rank is a straggler (either score passed its threshold)."""
        return bool(self.flagged_by)

    @property
    def since_step(self) -> int:
        """The step its slowness began: where a sustained change began, else its first step."""
        return self.change_step if self.change_step is not None else self.first_step

    def to_json(self) -> dict[str, Any]:
        """The scores as a JSON-ready dict."""
        return {"rank": self.rank, "steps": self.steps, "relative": self.relative, "individual": self.individual,
                "change_step": self.change_step, "since_step": self.since_step,
                "typical_busy_s": self.typical_ns / NS_PER_S, "flagged": self.flagged,
                "flagged_by": self.flagged_by or None, "others_waited_rank_s": self.waited_ns / NS_PER_S}


@dataclass(frozen=True)
class SlowStep:
    """One of the run's slowest steps and what made it slow.

    ``time_ns`` is the step's time (its longest rank: in a synchronous job every rank's); ``busiest``
    the one rank with the most busy time ('' on a tie) and ``busiest_ratio`` its busy time over
    the step's median rank; ``excess_ns`` per bucket (and ``unattributed``) the time a rank
    spent in it, on average, beyond a typical step's (the run's median step).
    """

    iteration: int
    time_ns: int
    vs_median: float | None
    busiest: str
    busiest_ratio: float | None
    excess_ns: dict[str, float]

    def cause(self) -> str:
        """What made the step slow, in words: the busiest rank when it stood out, and the bucket that grew most."""
        parts = []
        if self.busiest and self.busiest_ratio is not None and self.busiest_ratio >= 1 + MIN_SLOWDOWN:
            parts.append(f"{self.busiest} busy {self.busiest_ratio:.2f}x the median rank")
        grew = max(self.excess_ns.items(), key=lambda kv: (kv[1], kv[0] == "idle"), default=None)
        if grew is not None and grew[1] > 0:
            parts.append(f"{grew[0]} +{grew[1] / NS_PER_S:.3f} s a rank")
        return "; ".join(parts) or "-"

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON-ready dict."""
        return {"iteration": self.iteration, "time_s": self.time_ns / NS_PER_S, "vs_median": self.vs_median,
                "busiest_rank": self.busiest or None, "busiest_ratio": self.busiest_ratio,
                "excess_s": {k: v / NS_PER_S for k, v in self.excess_ns.items()}, "cause": self.cause()}


@dataclass(frozen=True)
class StepTimes:
    """The distribution of step time over the run's steps (a step's time: its longest rank), and its drift:
    the median step of the first tenth of the steps against the last tenth's."""

    steps: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    first_tenth_ns: float
    last_tenth_ns: float

    @property
    def drift(self) -> float | None:
        """The last tenth's median step time over the first tenth's (1.10: 10 % slower by the end)."""
        return self.last_tenth_ns / self.first_tenth_ns if self.first_tenth_ns > 0 else None

    def to_json(self) -> dict[str, Any]:
        """The distribution in seconds as a JSON-ready dict."""
        return {"steps": self.steps, "p50_s": self.p50_ns / NS_PER_S, "p90_s": self.p90_ns / NS_PER_S,
                "p99_s": self.p99_ns / NS_PER_S, "max_s": self.max_ns / NS_PER_S,
                "first_tenth_median_s": self.first_tenth_ns / NS_PER_S,
                "last_tenth_median_s": self.last_tenth_ns / NS_PER_S, "drift": self.drift}


@dataclass(frozen=True)
class Aggregates:
    """What the report leads with: badput, the per-step spread, every rank's straggler scores (flagged
    ranks first, worst first), the slowest steps and the distribution of step time."""

    badput: Badput
    steps: tuple[StepSpread, ...]
    stragglers: tuple[StragglerScore, ...]
    slowest_steps: tuple[SlowStep, ...] = ()
    step_times: StepTimes | None = None
    busy_median_ns: dict[int, float] = field(default_factory=dict)
    """Each step's median busy time over its ranks (what the relative score and the page's heatmap compare with)."""
    relative_threshold: float = 1 + MIN_SLOWDOWN
    """The relative score a rank must reach to be flagged (see :data:`NOISE_SIGMAS`)."""
    change_threshold: float = 0.0
    """The size in noise units a change must pass to be flagged (see :data:`CHANGE_NOISE`)."""

    @property
    def flagged(self) -> tuple[StragglerScore, ...]:
        """The ranks flagged as stragglers, worst first."""
        return tuple(s for s in self.stragglers if s.flagged)

    def top(self, k: int) -> tuple[StragglerScore, ...]:
        """The ``k`` worst flagged stragglers (fewer when fewer were flagged; none on a run of equal ranks)."""
        return self.flagged[:k]

    def to_json(self, *, top: int | None = None) -> dict[str, Any]:
        """Badput, the step spread, the straggler scores (the ``top`` flagged when given, every rank's
        when None), the slowest steps and the step-time distribution."""
        stragglers = self.stragglers if top is None else self.top(top)
        return {"badput": self.badput.to_json(), "step_time": [s.to_json() for s in self.steps],
                "straggler_scores": [s.to_json() for s in stragglers],
                "straggler_threshold": {"relative": self.relative_threshold, "individual": 1 + MIN_SLOWDOWN,
                                        "change_noise_units": self.change_threshold},
                "slowest_steps": [s.to_json() for s in self.slowest_steps],
                "step_times": None if self.step_times is None else self.step_times.to_json()}


def _cells_by(keys: Sequence[int]) -> dict[int, array | range]:
    """Each key of ``keys`` -> the indexes where it occurs, in order: a ``range`` when ``keys`` is sorted (the
    (rank, step) cells come in step order, so a step's cells lie together) or repeats one row of distinct keys
    (every rank ran every step: a rank's cells are a stride apart), else machine integers."""
    n = len(keys)
    width = keys.index(keys[0], 1) if n and keys.count(keys[0]) > 1 else n
    if n and n % width == 0 and keys == keys[:width] * (n // width) and len(set(keys[:width])) == width:
        return {key: range(i, n, width) for i, key in enumerate(keys[:width])}
    if all(a <= b for a, b in zip(keys, keys[1:])):
        runs: dict[int, array | range] = {}
        start = 0
        while start < len(keys):
            end = bisect.bisect_right(keys, keys[start], start)
            runs[keys[start]] = range(start, end)
            start = end
        return runs
    cells: dict[int, array | range] = {}
    for i, key in enumerate(keys):
        if (found := cells.get(key)) is None:
            found = cells[key] = array("l")
        found.append(i)  # type: ignore[union-attr]
    return cells


def _take(column: Sequence[int], cells: array | range) -> Sequence[int]:
    """The values of ``column`` at ``cells`` (a slice, at C speed, when they lie together or a stride apart)."""
    if isinstance(cells, range):
        return column[cells.start:cells.stop:cells.step]
    return list(map(column.__getitem__, cells))


def change_point(values: Sequence[float], min_side: int = MIN_SUSTAINED) -> int | None:
    """Where the one sustained shift in level that best explains ``values`` began (an index, at
    least ``min_side`` from either end), or None when there is no such split or no shift.

    The split is where the cumulated deviations from the mean stray furthest from zero (CUSUM).
    It only locates a change: whether the change matters is judged against the other ranks'."""
    n = len(values)
    if n < 2 * min_side:
        return None
    mean = math.fsum(values) / n
    # the running sum of deviations after each value (the same additions a loop makes, at C speed);
    # a split leaves min_side values on either side, and the first of equal strays wins
    running = itertools.accumulate(map(operator.sub, values, itertools.repeat(mean)))
    strays = list(map(abs, itertools.islice(running, min_side - 1, n - min_side)))
    best = max(strays)
    return strays.index(best) + min_side if best > 0 else None


def _spread_of(values: Sequence[float]) -> float:
    """A robust standard deviation of ``values``: 1.4826 × their median absolute deviation."""
    centre = _median(values)
    return 1.4826 * _median([abs(v - centre) for v in values])


def aggregate(report: Any) -> Aggregates:
    """The aggregates of ``report`` (a lens_report.model.Report: not imported here, model imports
    this module), from its run totals and its per-(rank, step) figures."""
    run = report.run
    restarts = getattr(report, "restart_lost_ns", None)
    parts = {
        "overhead": run.bucket_ns["overhead"],
        "idle": run.bucket_ns["idle"],
        "wasted": run.bucket_ns["wasted"],
        "unattributed": run.unattributed_ns,
        "restarts": int(restarts or 0),
    }
    productive = run.bucket_ns["productive"]
    # bucket seconds past the wall (a rank-overflow violation) would make the parts sum past 1:
    # the total is whichever is larger, so fractions stay fractions
    total = max(run.wall_ns, productive + parts["overhead"] + parts["idle"] + parts["wasted"]) + parts["restarts"]
    badput = Badput(total, productive, parts, restarts is not None)

    rs = report.rank_steps
    labels = rs.rank_labels
    # per step and per rank, the indexes of its cells as machine integers: a tuple per (rank, step)
    # held ~140 MB at 1,000 ranks x 500 steps, the peak of a 10M-span report
    per_step, per_rank = _cells_by(rs.iterations), _cells_by(rs.ranks)
    wall_of, rank_of, prod_of, it_of, busy_of = rs.wall_ns, rs.ranks, rs.productive_ns, rs.iterations, rs.busy_ns
    bucket_columns = {"productive": rs.productive_ns, "overhead": rs.overhead_ns, "idle": rs.idle_ns,
                      "wasted": rs.wasted_ns}
    spreads = []
    busy_median: dict[int, float] = {}
    step_time: dict[int, int] = {}
    busiest: dict[int, tuple[str, float | None]] = {}
    per_rank_buckets: dict[int, dict[str, float]] = {}
    for it in sorted(per_step):
        cells = per_step[it]
        walls = sorted(_take(wall_of, cells))
        step_busy = _take(busy_of, cells)
        busys = sorted(step_busy)
        total_wall = sum(walls)
        p50, p90, p99 = (quantile(walls, q) for q in STEP_QUANTILES)
        median_busy = busy_median[it] = quantile(busys, 0.5)
        step_time[it] = walls[-1]
        # the busiest rank, when one alone is busiest: a tie ranks nothing
        alone = step_busy.count(busys[-1]) == 1 and len(cells) > 1
        label = labels[rank_of[cells[step_busy.index(busys[-1])]]] if alone else ""
        busiest[it] = (label, busys[-1] / median_busy if label and median_busy > 0 else None)
        per_rank_buckets[it] = {name: sum(_take(column, cells)) / len(cells) for name, column in bucket_columns.items()}
        per_rank_buckets[it]["unattributed"] = max(0.0, total_wall / len(cells) - sum(per_rank_buckets[it].values()))
        spreads.append(StepSpread(it, len(walls), p50, p90, p99, walls[-1], label,
                                  sum(_take(prod_of, cells)) / total_wall if total_wall else None))

    waited = {r.rank: r.straggler_cost_ns for r in getattr(report, "ranks", ())}
    # each cell's busy time over its step's median (a cell of a step with no busy time has none)
    cell_median = list(map(busy_median.__getitem__, it_of))
    every_step_timed = all(m > 0 for m in busy_median.values())
    ratio_of = array("d", map(operator.truediv, busy_of, cell_median)) if every_step_timed else None
    raw = []
    for rank, cells in per_rank.items():
        if ratio_of is not None:
            timed: Sequence[int] = cells
            ratios = array("d", _take(ratio_of, cells))
        else:
            timed = [i for i in cells if cell_median[i] > 0]
            ratios = array("d", (busy_of[i] / cell_median[i] for i in timed))
        relative = _median(ratios) if ratios else 1.0
        shift, noise_units, change = 1.0, 0.0, None
        where = change_point(ratios)
        if where is not None and (before := _median(ratios[:where])) > 0:
            # its size by medians (a spike or two does not move them: sustained), its weight by means
            shift = _median(ratios[where:]) / before
            after_mean, before_mean = (math.fsum(part) / len(part) for part in (ratios[where:], ratios[:where]))
            noise_units = (after_mean / before_mean - 1) / math.sqrt(1 / where + 1 / (len(ratios) - where))
            change = it_of[timed[where]]
        raw.append((rank, len(cells), relative, shift, noise_units, change, it_of[cells[0]],
                    _median(_take(busy_of, cells))))
    # each bar: 5 % at least, and 6 robust sigmas above the median rank, from what noise gives the others
    peers = len(raw) > 1

    def bar(values: list[float]) -> float:
        return max(1 + MIN_SLOWDOWN, _median(values) + NOISE_SIGMAS * _spread_of(values)) if peers else 1 + MIN_SLOWDOWN

    relative_bar = bar([r[2] for r in raw])
    change_bar = CHANGE_NOISE * _median([abs(r[4]) for r in raw]) if raw else 0.0
    scores = []
    for rank, steps, relative, shift, noise_units, change, first, typical in raw:
        changed = shift >= 1 + MIN_SLOWDOWN and noise_units > change_bar
        by = [name for name, hit in (("relative", peers and relative >= relative_bar),
                                     ("individual", peers and changed)) if hit]
        # where it began: its change, when the change stood out, or when it is flagged and slowed by 5 %
        if not (changed or (by and shift >= 1 + MIN_SLOWDOWN)):
            change = None
        scores.append(StragglerScore(labels[rank], steps, relative, shift, change, first, typical, "+".join(by),
                                     waited.get(labels[rank], 0)))
    order = {label: i for i, label in enumerate(labels)}
    scores.sort(key=lambda s: (not s.flagged, -s.score, -s.waited_ns, order[s.rank]))

    slowest: tuple[SlowStep, ...] = ()
    times: StepTimes | None = None
    if step_time:
        ordered = [step_time[it] for it in sorted(step_time)]
        by_time = sorted(ordered)
        tenth = max(1, len(ordered) // 10)
        median_time = quantile(by_time, 0.5)
        times = StepTimes(len(ordered), median_time, quantile(by_time, 0.9), quantile(by_time, 0.99), by_time[-1],
                          _median(ordered[:tenth]), _median(ordered[-tenth:]))
        typical_buckets = {name: _median([b[name] for b in per_rank_buckets.values()])
                           for name in (*bucket_columns, "unattributed")}
        # the slowest steps: longer than the median step (equal steps list none), longest first
        candidates = sorted((it for it in step_time if step_time[it] > median_time),
                            key=lambda it: (-step_time[it], it))
        slowest = tuple(
            SlowStep(it, step_time[it], step_time[it] / median_time if median_time > 0 else None, *busiest[it],
                     {name: per_rank_buckets[it][name] - typical_buckets[name] for name in typical_buckets})
            for it in candidates[:SLOWEST_STEPS])
    return Aggregates(badput, tuple(spreads), tuple(scores), slowest, times, busy_median, relative_bar, change_bar)
