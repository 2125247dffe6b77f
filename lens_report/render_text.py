"""Plain-text rendering of a report: step and run bucket tables, ranks and stragglers, loss, problems and violations."""

from __future__ import annotations

from collections import Counter

from .model import BUCKETS, NS_PER_S, BucketTotals, Report, RunInfo

__all__ = ["TABLE_HEADER", "UNFINISHED_LISTED", "bucket_cells", "render_runs", "render_text", "step_method_summary",
           "table"]

UNFINISHED_LISTED = 20
"""Processes whose telemetry never shut down that the text and HTML list (JSON lists all)."""

TABLE_HEADER = ["iteration", "wall s", *BUCKETS, "unattributed", "goodput"]
"""Column titles of the one-rank bucket table (steps, then the run row)."""

SPREAD_HEADER = ["iteration", "ranks", "min s", "median s", "max s", *BUCKETS, "goodput", "slowest", "wait rank-s"]
"""Column titles of the multi-rank step table: the spread of step times over ranks, summed buckets (rank-s)."""

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
    if not report.multi_rank:
        return [f"lens report: {counts}"]
    return [f"lens report: run {report.run_id or '(no run id)'}: {len(report.ranks)} ranks, {counts}"]


def _multi_rank(report: Report, top: int) -> list[str]:
    rows = [[str(step.iteration), str(step.ranks), _s(step.wall_min_ns), _s(step.wall_median_ns),
             _s(step.wall_max_ns), *(_s(step.totals.bucket_ns[b]) for b in BUCKETS), _percent(step.totals.goodput),
             step.slowest_rank, _s(step.wait_ns)] for step in report.steps]
    lines = ["steps: step time over ranks (s); buckets and wait summed over ranks (rank-seconds)"]
    lines += table(SPREAD_HEADER, rows)
    lines += ["", "run: wall is every rank's first-to-last span time, summed (rank-seconds)"]
    lines += table(["", "rank-s", *BUCKETS, "unattributed", "goodput"], [["run", *bucket_cells(report.run)]])
    goodputs = sorted(r.totals.goodput for r in report.ranks if r.totals.goodput is not None)
    if goodputs:
        lines += ["", f"ranks: {len(report.ranks)}; goodput min {_percent(goodputs[0])}, "
                      f"median {_percent(goodputs[len(goodputs) // 2])}, max {_percent(goodputs[-1])}"]
    stragglers = report.stragglers[:top]
    lines += ["", f"stragglers: {len(report.stragglers)} ranks were the slowest of a step; "
                  f"top {len(stragglers)} by rank-seconds the others waited"]
    lines += table(["rank", "slowest of steps", "others waited rank-s", "their idle it explains s", "goodput"],
                   [[r.rank, str(r.slowest_steps), _s(r.straggler_cost_ns), _s(r.idle_explained_ns),
                     _percent(r.totals.goodput)] for r in stragglers])
    return lines


def render_text(report: Report, *, top: int = 10) -> str:
    """The report as tables a person can read in a terminal (a 1-rank run reads as it always did)."""
    lines = [*_header(report), step_method_summary(report), ""]
    if report.multi_rank:
        lines += _multi_rank(report, top)
    else:
        rows = [[str(step.iteration), *bucket_cells(step.totals)] for step in report.steps]
        rows.append(["run", *bucket_cells(report.run)])
        lines += table(TABLE_HEADER, rows)
    lines += ["", f"top {len(report.top_spans)} spans by total time"]
    lines += table(
        ["name", "count", "total s", "mean s"],
        [[t.name, str(t.count), _s(t.total_ns), _s(t.mean_ns)] for t in report.top_spans],
    )
    if report.loss:
        lost = sum(row.lost for row in report.loss)
        lines += ["", f"telemetry loss: {lost:,} spans lost in {sum(1 for r in report.loss if r.lost)} of "
                      f"{len(report.loss)} processes that wrote a loss record"]
        lines += [f"  {row}" for row in report.loss]
    if report.unfinished:
        lines += ["", f"telemetry never shut down in {len(report.unfinished):,} processes (killed, os._exit, or still "
                      "running): spans they held are not in the output and were counted nowhere"]
        lines += [f"  {row}" for row in report.unfinished[:UNFINISHED_LISTED]]
        if len(report.unfinished) > UNFINISHED_LISTED:
            lines.append(f"  ... {len(report.unfinished) - UNFINISHED_LISTED:,} more (all in --json)")
    lines += ["", f"problems: {len(report.problems)}"]
    lines += [f"  {problem}" for problem in report.problems]
    total = report.violation_count
    rule_counts = report.rule_counts or Counter(v.rule for v in report.violations)
    by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(rule_counts.items()))
    lines += ["", f"violations: {total}" + (f" ({by_rule})" if by_rule else "")]
    lines += [f"  {violation}" for violation in report.violations]
    if total > len(report.violations):
        lines.append(f"  ... {total - len(report.violations)} more not listed")
    return "\n".join(lines) + "\n"


def render_runs(runs: tuple[RunInfo, ...]) -> str:
    """The runs found in the input, one line each: id, ranks, processes, spans, wall time."""
    rows = [[info.run_id or "(no run id)", str(info.ranks), str(info.processes), str(info.spans),
             "-" if info.start_ns is None or info.end_ns is None else _s(info.end_ns - info.start_ns)]
            for info in runs]
    return "\n".join(table(["run", "ranks", "processes", "spans", "wall s"], rows)) + "\n"
