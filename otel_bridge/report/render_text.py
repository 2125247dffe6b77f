"""Plain-text rendering of a report: step and run bucket table, top spans, problems and violations."""

from __future__ import annotations

from collections import Counter

from .model import BUCKETS, NS_PER_S, BucketTotals, Report

__all__ = ["TABLE_HEADER", "bucket_cells", "render_text", "step_method_summary"]

TABLE_HEADER = ["iteration", "wall s", *BUCKETS, "unattributed", "goodput"]
"""Column titles of the bucket table (steps, then the run row)."""

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


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to width: the first left-aligned, the rest right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    head = line(header)
    return [head, "-" * len(head), *map(line, rows)]


def bucket_cells(totals: BucketTotals) -> list[str]:
    """Wall, bucket and unattributed seconds (3 decimals) and goodput percent, as table cells."""
    goodput = "-" if totals.goodput is None else f"{100 * totals.goodput:.1f}%"
    seconds = [totals.wall_ns, *(totals.bucket_ns[b] for b in BUCKETS), totals.unattributed_ns]
    return [f"{ns / NS_PER_S:.3f}" for ns in seconds] + [goodput]


def render_text(report: Report) -> str:
    """The report as a table a person can read in a terminal."""
    lines = [
        f"lens report: {report.span_count} spans in {report.trace_count} traces from {len(report.files)} files"
        f" ({report.orphan_count} orphaned, {report.duplicate_count} duplicates dropped,"
        f" {report.error_count} with error status)",
        step_method_summary(report),
        "",
    ]
    rows = [[str(step.iteration), *bucket_cells(step.totals)] for step in report.steps]
    rows.append(["run", *bucket_cells(report.run)])
    lines += _table(TABLE_HEADER, rows)
    lines += ["", f"top {len(report.top_spans)} spans by total time"]
    lines += _table(
        ["name", "count", "total s", "mean s"],
        [
            [top.name, str(top.count), f"{top.total_ns / NS_PER_S:.3f}", f"{top.mean_ns / NS_PER_S:.3f}"]
            for top in report.top_spans
        ],
    )
    lines += ["", f"problems: {len(report.problems)}"]
    lines += [f"  {problem}" for problem in report.problems]
    rule_counts = Counter(v.rule for v in report.violations)
    by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(rule_counts.items()))
    lines += ["", f"violations: {len(report.violations)}" + (f" ({by_rule})" if by_rule else "")]
    lines += [f"  {violation}" for violation in report.violations]
    return "\n".join(lines) + "\n"
