"""Aggregates a report leads with: run goodput and badput, step-time percentiles over ranks, straggler scores."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._units import NS_PER_S

__all__ = [
    "Aggregates",
    "BADPUT_PARTS",
    "Badput",
    "STEP_QUANTILES",
    "StepSpread",
    "StragglerScore",
    "aggregate",
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
    """One step's time over the ranks that ran it: quantiles, the maximum, and which rank took it."""

    iteration: int
    ranks: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    max_rank: str
    goodput: float | None

    def to_json(self) -> dict[str, Any]:
        """The spread in seconds as a JSON-ready dict."""
        return {"iteration": self.iteration, "ranks": self.ranks, "p50_s": self.p50_ns / NS_PER_S,
                "p90_s": self.p90_ns / NS_PER_S, "p99_s": self.p99_ns / NS_PER_S, "max_s": self.max_ns / NS_PER_S,
                "max_rank": self.max_rank, "goodput": self.goodput}


@dataclass(frozen=True)
class StragglerScore:
    """How much a rank lagged, two ways.

    ``relative``: the median over its steps of its step time over that step's median rank
    (2.0: it typically takes twice as long as its peers; finds a rank that is always slow).
    ``individual``: its slowest step over its own median step time, at ``individual_step``
    (3.0: one step took three times its usual; finds a rank that became slow, even when its
    peers' times hide it in the relative score). ``score`` is the larger of the two.
    """

    rank: str
    steps: int
    relative: float
    individual: float
    individual_step: int
    typical_ns: float

    @property
    def score(self) -> float:
        """The larger of the two scores: what ranks the stragglers."""
        return max(self.relative, self.individual)

    @property
    def flagged_by(self) -> str:
        """``relative`` or ``individual``: which score ranks this rank."""
        return "relative" if self.relative >= self.individual else "individual"

    def to_json(self) -> dict[str, Any]:
        """The scores as a JSON-ready dict."""
        return {"rank": self.rank, "steps": self.steps, "relative": self.relative, "individual": self.individual,
                "individual_step": self.individual_step, "typical_step_s": self.typical_ns / NS_PER_S,
                "flagged_by": self.flagged_by}


@dataclass(frozen=True)
class Aggregates:
    """What the report leads with: badput, the per-step spread, and every rank's straggler scores (worst first)."""

    badput: Badput
    steps: tuple[StepSpread, ...]
    stragglers: tuple[StragglerScore, ...]

    def top(self, k: int) -> tuple[StragglerScore, ...]:
        """The ``k`` ranks with the highest score that lagged at all (score above 1)."""
        return tuple(s for s in self.stragglers if s.score > 1.0)[:k]

    def to_json(self, *, top: int | None = None) -> dict[str, Any]:
        """Badput, the step spread and the top stragglers (all ranks when ``top`` is None)."""
        stragglers = self.stragglers if top is None else self.top(top)
        return {"badput": self.badput.to_json(), "step_time": [s.to_json() for s in self.steps],
                "straggler_scores": [s.to_json() for s in stragglers]}


def _cells_by(keys: Sequence[int]) -> dict[int, array]:
    """Each key of ``keys`` -> the indexes where it occurs, in order (machine integers)."""
    cells: dict[int, array] = {}
    for i, key in enumerate(keys):
        if (found := cells.get(key)) is None:
            found = cells[key] = array("l")
        found.append(i)
    return cells


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
    wall_of, rank_of, prod_of, it_of = rs.wall_ns, rs.ranks, rs.productive_ns, rs.iterations
    spreads = []
    step_median: dict[int, float] = {}
    for it in sorted(per_step):
        cells = per_step[it]
        walls = sorted(wall_of[i] for i in cells)
        _, negative_rank = max((wall_of[i], -rank_of[i]) for i in cells)  # the lowest-numbered of equally slow ranks
        total_wall = sum(walls)
        p50, p90, p99 = (quantile(walls, q) for q in STEP_QUANTILES)
        step_median[it] = p50
        spreads.append(StepSpread(it, len(walls), p50, p90, p99, walls[-1], labels[-negative_rank],
                                  sum(prod_of[i] for i in cells) / total_wall if total_wall else None))
    scores = []
    for rank, cells in per_rank.items():
        relative = _median([wall_of[i] / step_median[it_of[i]] for i in cells if step_median[it_of[i]] > 0] or [1.0])
        typical = _median([wall_of[i] for i in cells])
        if typical > 0:
            individual, negative = max((wall_of[i] / typical, -it_of[i]) for i in cells)
            step = -negative  # the first step where it was that slow
        else:
            individual, step = 1.0, it_of[cells[0]]
        scores.append(StragglerScore(labels[rank], len(cells), relative, individual, step, typical))
    order = {label: i for i, label in enumerate(labels)}
    scores.sort(key=lambda s: (-s.score, order[s.rank]))
    return Aggregates(badput, tuple(spreads), tuple(scores))
