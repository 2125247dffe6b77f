"""Plain-text rendering of a report: step and run bucket tables, ranks and stragglers, loss, problems and violations."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from .aggregates import MIN_SLOWDOWN, SLOWEST_STEPS
from .model import BUCKETS, NS_PER_S, BucketTotals, Report, RunInfo

__all__ = ["BADPUT_LABELS", "EXAMPLES", "NAME_CHARS", "RANK_HEADER", "RANK_STEP_HEADER", "SHORT_RUN_STEPS", "SLOW_STEP_HEADER",
           "SPREAD_HEADER", "STRAGGLER_HEADER", "TABLE_HEADER", "UNFINISHED_LISTED", "badput_line", "bucket_cells",
           "clock_line", "number_ranges", "rank_detail", "render_runs", "render_text", "slow_step_rows", "step_method_summary",
           "step_spread_rows", "step_time_line", "straggler_rows", "table", "terminal_safe"]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control character (C0, DEL, C1, line separators and bidi
    overrides) written as a visible escape such as ``\\x1b``: names, run ids and file names come
    from the input, and printed raw an escape sequence could retitle or clear the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def number_ranges(values: Iterable[int]) -> str:
    """Sorted integers as ranges, e.g. ``0-7, 12, 20-21``."""
    out: list[str] = []
    run: list[int] = []
    for value in sorted(set(values)):
        if run and value == run[-1] + 1:
            run.append(value)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [value]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)

UNFINISHED_LISTED = 20
"""Processes whose telemetry never shut down that the text and HTML list (JSON lists all)."""

TABLE_HEADER = ["iteration", "wall s", *BUCKETS, "unattributed", "goodput"]
"""Column titles of the one-rank bucket table (steps, then the run row)."""

SPREAD_HEADER = ["iteration", "ranks", "p50 s", "p90 s", "p99 s", "max s", "slowest", "goodput", "wait rank-s"]
"""Column titles of the multi-rank step table: step time over ranks (quantiles and max), the slowest rank (most
busy time), goodput, and the rank-seconds the others waited for it."""

STRAGGLER_HEADER = ["rank", "score", "relative", "individual", "since step", "typical busy s",
                    "others waited rank-s"]
"""Column titles of the straggler table: both scores (see :class:`~lens_report.aggregates.StragglerScore`)."""

BADPUT_LABELS = {"overhead": "overhead", "idle": "idle", "wasted": "wasted", "unattributed": "unattributed",
                 "restarts": "lost to restarts"}
"""How each badput part is named in text and HTML."""

_METHODS = {
    "pattern": "step spans matching {pattern!r}",
    "iteration": "unbucketed spans grouped by rl.iteration (no span matched {pattern!r})",
}


def step_method_summary(report: Report) -> str:
    """One line saying how the steps were found, e.g. ``2 steps from step spans matching '...'``."""
    if not report.steps:
        return f"no steps: no unbucketed span carries rl.iteration (step pattern {report.step_pattern!r})"
    counts = Counter(step.method for step in report.steps)
    parts = [
        f"{n} step{'s' if n != 1 else ''} from " + _METHODS[method].format(pattern=report.step_pattern)
        for method, n in sorted(counts.items(), key=lambda item: item[0] != "pattern")
    ]
    return "; ".join(parts)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to width: the first left-aligned, the rest right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    head = line(header)
    return [head, "-" * len(head), *map(line, rows)]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def bucket_cells(totals: BucketTotals) -> list[str]:
    """Wall, bucket and unattributed seconds (3 decimals) and goodput percent, as table cells."""
    seconds = [totals.wall_ns, *(totals.bucket_ns[b] for b in BUCKETS), totals.unattributed_ns]
    return [f"{ns / NS_PER_S:.3f}" for ns in seconds] + [_percent(totals.goodput)]


def _s(ns: float) -> str:
    return f"{ns / NS_PER_S:.3f}"


def _header(report: Report) -> list[str]:
    counts = (f"{report.span_count} spans in {report.trace_count} traces from {len(report.files)} files"
              f" ({report.orphan_count} orphaned, {report.duplicate_count} duplicates dropped,"
              f" {report.error_count} with error status)")
    path = [str(report.path)] if report.path is not None else []
    if not report.multi_rank:
        return [f"lens report: {counts}", *path]
    return [f"lens report: run {report.run_id or '(no run id)'}: {len(report.ranks)} ranks, {counts}", *path]


def badput_line(report: Report) -> str:
    """One line: run goodput, then the share of every badput part (``-`` for restarts when not known)."""
    badput = report.aggregates.badput
    parts = ", ".join(f"{BADPUT_LABELS[part]} {_percent(badput.fraction(part))}"
                      if part != "restarts" or badput.restarts_known else f"{BADPUT_LABELS[part]} -"
                      for part in BADPUT_LABELS)
    return (f"goodput {_percent(badput.goodput)} of {badput.total_ns / NS_PER_S:,.1f} rank-s; "
            f"badput: {parts}")


def clock_line(report: Report) -> str | None:
    """Which clock the figures came from, one line, for a run with device-timed leaves (None without:
    every figure is on the host clock, and the text reads as it did before device timing)."""
    clock = report.device_clock
    if clock is None:
        return None
    line = (f"clock: goodput {_percent(report.run.goodput)} \u2014 {clock.describe()} counted on the device clock "
            "(when their kernels ran); other leaves, steps and wall times on the host clock")
    if clock.given_back_ns:
        line += (f"; {clock.given_back_ns / NS_PER_S:.3f} s of host-only overhead was the host waiting while the "
                 "device ran productive work, not counted as overhead")
    return line


def _step_clock(report: Report, iteration: int) -> str:
    """A step's device-timed leaves, e.g. ``4 of 5`` (``host`` for a step without)."""
    timed, leaves = report.device_clock.steps.get(iteration, (0, 0)) if report.device_clock else (0, 0)
    return f"{timed} of {leaves}" if timed else "host"


def step_spread_rows(report: Report) -> list[list[str]]:
    """Per step: ranks, p50/p90/p99/max step time over ranks, the slowest rank, goodput, wait for it."""
    rows = {step.iteration: step for step in report.steps}
    return [[str(s.iteration), str(s.ranks), _s(s.p50_ns), _s(s.p90_ns), _s(s.p99_ns), _s(s.max_ns),
             (rows[s.iteration].slowest_rank if s.iteration in rows else s.max_rank) or "-", _percent(s.goodput),
             _s(rows[s.iteration].wait_ns if s.iteration in rows else 0)] for s in report.aggregates.steps]


def straggler_rows(report: Report, top: int) -> list[list[str]]:
    """The ``top`` flagged stragglers, worst first, with both scores, where it began and what the others waited."""
    return [[s.rank, f"{s.score:.2f}", f"{s.relative:.2f}", f"{s.individual:.2f}", str(s.since_step),
             _s(s.typical_ns), _s(s.waited_ns)] for s in report.aggregates.top(top)]


def slow_step_rows(report: Report, k: int) -> list[list[str]]:
    """The ``k`` slowest steps (longer than the median step), longest first, with what made each slow."""
    return [[str(s.iteration), _s(s.time_ns), "-" if s.vs_median is None else f"{s.vs_median:.2f}x", s.cause()]
            for s in report.aggregates.slowest_steps[:k]]


def step_time_line(report: Report) -> str:
    """One line: the distribution of step time over the run and its drift (first tenth against last)."""
    t = report.aggregates.step_times
    if t is None:
        return "step time: no steps"
    drift = "-" if t.drift is None else f"{t.drift:.2f}x"
    return (f"step time over {t.steps:,} steps (s): p50 {_s(t.p50_ns)}, p90 {_s(t.p90_ns)}, p99 {_s(t.p99_ns)}, "
            f"max {_s(t.max_ns)}; drift: median of the last tenth {_s(t.last_tenth_ns)} vs the first tenth "
            f"{_s(t.first_tenth_ns)} ({drift})")


def rank_detail(report: Report, ranks: frozenset[str], steps: frozenset[int] | None) -> tuple[list[list[str]],
                                                                                                list[list[str]]]:
    """The drill-down of ``ranks`` (labels): (one row per rank: its buckets and scores, one row
    per (rank, step) of ``steps``, all steps when None: step time, busy time, buckets, both ratios)."""
    scores = {s.rank: s for s in report.aggregates.stragglers}
    per_rank = [[r.rank, str(r.processes), *bucket_cells(r.totals),
                 f"{scores[r.rank].relative:.2f}" if r.rank in scores else "-",
                 f"{scores[r.rank].individual:.2f}" if r.rank in scores else "-"]
                for r in report.ranks if r.rank in ranks]
    rs = report.rank_steps
    step_median = report.aggregates.busy_median_ns
    cells = []
    for it, r, wall, busy, *buckets in zip(rs.iterations, rs.ranks, rs.wall_ns, rs.busy_ns, rs.productive_ns,
                                           rs.overhead_ns, rs.idle_ns, rs.wasted_ns):
        label = rs.rank_labels[r]
        if label not in ranks or (steps is not None and it not in steps):
            continue
        typical = scores[label].typical_ns if label in scores else 0
        cells.append((r, it, [label, str(it), _s(wall), _s(busy), *map(_s, buckets),
                              _percent(buckets[0] / wall if wall else None),
                              f"{busy / step_median[it]:.2f}" if step_median.get(it) else "-",
                              f"{busy / typical:.2f}" if typical else "-"]))
    cells.sort(key=lambda c: (c[0], c[1]))
    return per_rank, [c[2] for c in cells]


RANK_HEADER = ["rank", "processes", "wall s", *BUCKETS, "unattributed", "goodput", "relative", "individual"]
"""Column titles of the rank drill-down (``--ranks``): one row per rank."""

RANK_STEP_HEADER = ["rank", "iteration", "step s", "busy s", *BUCKETS, "goodput", "vs step median",
                    "vs own typical"]
"""Column titles of the rank drill-down's rows per (rank, step)."""

SLOW_STEP_HEADER = ["iteration", "step s", "vs median", "what made it slow"]
"""Column titles of the slowest steps: the step's time (its longest rank), over the run's median step, and why."""

EXAMPLES = 3
"""How many examples of each kind of trouble (loss, unfinished processes, problems, violations) the text lists."""


NAME_CHARS = 80
"""Characters of a span name the text shows (a longer one ends in ``…[cut]``; the JSON keeps it whole)."""


def _cut(text: str, chars: int = NAME_CHARS) -> str:
    return text[:chars] + "…[cut]" if len(text) > chars else text


def _examples(title: str, rows: list[str], total: int, more: str = "all in --json") -> list[str]:
    """``title``, then up to :data:`EXAMPLES` indented rows (each cut to a few lines' worth), then how many more."""
    lines = ["", title, *(f"  {_cut(row, 4 * NAME_CHARS)}" for row in rows[:EXAMPLES])]
    if total > min(len(rows), EXAMPLES):
        lines.append(f"  ... {total - min(len(rows), EXAMPLES):,} more ({more})")
    return lines


def _stragglers(report: Report, top: int) -> list[str]:
    agg = report.aggregates
    flagged = agg.flagged
    lines = [f"stragglers: {len(flagged)} of {len(report.ranks)} ranks flagged, worst first",
             "  busy: step wall less waiting; relative: busy / the step's median rank's, median over steps "
             f"(flagged >= {agg.relative_threshold:.2f})",
             "  individual: own busy after its largest lasting change / before, since that step "
             f"(flagged >= {1 + MIN_SLOWDOWN:.2f}, past the ranks' noise)"]
    rows = straggler_rows(report, top)
    if rows:
        lines += table(STRAGGLER_HEADER, rows)
        if len(flagged) > len(rows):
            lines.append(f"  ... {len(flagged) - len(rows):,} more flagged (--top N, or --json)")
    else:
        lines.append("  none: no rank's busy time stood apart from its peers' or from its own")
    return lines


def _slow_steps(report: Report, k: int) -> list[str]:
    agg = report.aggregates
    rows = slow_step_rows(report, k)
    lines = ["", f"slowest steps: {len(rows)} of {len(agg.steps) or len(report.steps):,} (longest rank's time; "
                 "every step: --steps)"]
    if rows:
        lines += table(SLOW_STEP_HEADER, rows)
    else:
        lines.append("  none: no step took longer than the median step")
    return lines


def _multi_rank(report: Report, top: int, ranks: frozenset[str] | None, steps: frozenset[int] | None,
                every_step: bool) -> list[str]:
    lines = [badput_line(report), "", *_stragglers(report, top), *_slow_steps(report, SLOWEST_STEPS),
             "", step_time_line(report)]
    if every_step:
        lines += ["", "every step: step time over ranks (s); wait: rank-seconds the others waited for the "
                      "busiest rank (- when ranks tie)"]
        lines += table(SPREAD_HEADER, step_spread_rows(report))
    lines += ["", "run: wall is every rank's first-to-last span time, summed (rank-seconds)"]
    lines += table(["", "rank-s", *BUCKETS, "unattributed", "goodput"], [["run", *bucket_cells(report.run)]])
    goodputs = sorted(r.totals.goodput for r in report.ranks if r.totals.goodput is not None)
    if goodputs:
        lines += ["", f"ranks: {len(report.ranks)}; goodput min {_percent(goodputs[0])}, "
                      f"median {_percent(goodputs[len(goodputs) // 2])}, max {_percent(goodputs[-1])}"
                      + ("" if ranks else "; a rank's detail: --ranks LIST; everything: --json")]
    if ranks:
        per_rank, cells = rank_detail(report, ranks, steps)
        lines += ["", f"rank detail: {len(per_rank)} rank(s)"]
        lines += table(RANK_HEADER, per_rank)
        lines += ["", "per step (s); busy: step less waiting; vs step median: busy / the step's median rank's; "
                      "vs own typical: busy / the rank's median busy"]
        lines += table(RANK_STEP_HEADER, cells)
    return lines


SHORT_RUN_STEPS = 20
"""A one-rank run of at most this many steps lists every step; a longer one its slowest (``--steps``: all)."""


def _one_rank(report: Report, every_step: bool, clock: str | None) -> list[str]:
    # with device times, a column says which clock each step's figures came from
    rows = [[str(step.iteration), *bucket_cells(step.totals), *([_step_clock(report, step.iteration)] if clock else [])]
            for step in report.steps]
    if not every_step and len(rows) > SHORT_RUN_STEPS:
        slow = {s.iteration for s in report.aggregates.slowest_steps[:SLOWEST_STEPS]}
        rows = [row for row, step in zip(rows, report.steps) if step.iteration in slow]
        lines = [step_time_line(report), "",
                 f"slowest {len(rows)} of {len(report.steps):,} steps (every step: --steps)"]
    else:
        lines = []
    rows.append(["run", *bucket_cells(report.run), *([report.device_clock.describe().split(": ")[1]] if clock else [])])
    return lines + table([*TABLE_HEADER, "device-timed leaves"] if clock else TABLE_HEADER, rows)


def render_text(report: Report, *, top: int = 10, ranks: frozenset[str] | None = None,
                steps: frozenset[int] | None = None, every_step: bool = False) -> str:
    """The report as tables a person can read in a terminal, at most ~80 lines whatever the run's size.

    A multi-rank run leads with goodput and badput, the flagged stragglers (worst first), the
    slowest steps and what made each slow, the distribution of step time and its drift; then
    the run's buckets, the top spans, and loss, problems and violations counted with a few
    examples. With device times a line says which clock the figures came from. ``every_step``
    adds every step's row, ``ranks`` (labels) the detail of those ranks, per step for ``steps``
    (all when None); JSON keeps everything. Terminal control characters from the input are
    escaped (:func:`terminal_safe`)."""
    clock = clock_line(report)
    lines = [*_header(report), step_method_summary(report), *([clock] if clock else []), ""]
    if report.multi_rank:
        lines += _multi_rank(report, top, ranks, steps, every_step)
    else:
        lines += _one_rank(report, every_step, clock)
    lines += ["", f"top {len(report.top_spans)} spans by total time" + (" (host clock)" if clock else "")]
    lines += table(
        ["name", "count", "total s", "mean s"],
        [[_cut(t.name), str(t.count), _s(t.total_ns), _s(t.mean_ns)] for t in report.top_spans],
    )
    if report.loss:
        lost = sum(row.lost for row in report.loss)
        losing = [row for row in report.loss if row.lost] or list(report.loss)
        lines += _examples(f"telemetry loss: {lost:,} spans lost in {sum(1 for r in report.loss if r.lost)} of "
                           f"{len(report.loss)} processes that wrote a loss record",
                           [str(row) for row in losing], len(losing))
    if report.unfinished:
        lines += _examples(f"telemetry never shut down in {len(report.unfinished):,} processes (killed, os._exit, or "
                           "still running): spans they held are not in the output and were counted nowhere",
                           [str(row) for row in report.unfinished], len(report.unfinished))
    lines += _examples(f"problems: {len(report.problems)}", [str(p) for p in report.problems], len(report.problems))
    total = report.violation_count
    rule_counts = report.rule_counts or Counter(v.rule for v in report.violations)
    by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(rule_counts.items()))
    lines += _examples(f"violations: {total}" + (f" ({by_rule})" if by_rule else ""),
                       [str(v) for v in report.violations], total,
                       "listed in --json" if len(report.violations) >= total else
                       f"{len(report.violations):,} listed in --json")
    return "\n".join(map(terminal_safe, lines)) + "\n"


def render_runs(runs: tuple[RunInfo, ...]) -> str:
    """The runs found in the input, one line each: id, ranks, processes, spans, wall time."""
    rows = [[info.run_id or "(no run id)", str(info.ranks), str(info.processes), str(info.spans),
             "-" if info.start_ns is None or info.end_ns is None else _s(info.end_ns - info.start_ns)]
            for info in runs]
    return "\n".join(map(terminal_safe, table(["run", "ranks", "processes", "spans", "wall s"], rows))) + "\n"
