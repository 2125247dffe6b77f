"""Self-contained HTML rendering: an SVG waterfall of the spans, one lane per process and thread, plus the tables."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from html import escape

from lens_core import semconv

from .model import BUCKETS, NS_PER_S, Report, Span
from .render_text import TABLE_HEADER, bucket_cells, step_method_summary
from .tree import SpanTree

__all__ = ["render_html"]

_LABEL_W = 280
_PLOT_W = 1400
_ROW_H = 14
_LANE_GAP = 10
_AXIS_H = 22
_CHAR_W = 6.2

_CSS = """
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.run td { font-weight: bold; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; border: 1px solid #888; }
.waterfall { overflow-x: auto; border: 1px solid #ddd; }
svg text { font: 11px system-ui, sans-serif; pointer-events: none; }
svg .lane { font-weight: bold; pointer-events: auto; }
svg .tick { stroke: #e4e4e4; }
svg .sep { stroke: #bbb; }
rect.span { stroke-width: 0.5; }
rect.span:hover { stroke: #000; stroke-width: 1.5; }
.b-productive { fill: #3a9d52; stroke: #2a7a3e; background: #3a9d52; }
.b-overhead { fill: #e8a33d; stroke: #b97d22; background: #e8a33d; }
.b-idle { fill: #6d9ad8; stroke: #4a73ad; background: #6d9ad8; }
.b-wasted { fill: #d64541; stroke: #a52d2a; background: #d64541; }
.b-unknown { fill: #a45cc4; stroke: #6d2f8a; background: #a45cc4; }
.b-umbrella { fill: #f4f4f4; stroke: #888; background: #f4f4f4; }
rect.error { stroke: #b00020; stroke-width: 2; stroke-dasharray: 3 2; }
"""


def render_html(report: Report, spans: Iterable[Span]) -> str:
    """One self-contained HTML page (inline CSS and SVG, nothing fetched) with the waterfall and tables.

    Every span with valid timestamps is one ``<rect class="span ...">`` whose tooltip gives its
    name, duration, bucket and iteration; nested and concurrent spans stack within their lane.
    """
    spans = list(spans)
    timed = [span for span in spans if span.duration_ns is not None]
    body = [
        "<h1>lens report</h1>",
        f"<p>{report.span_count} spans in {report.trace_count} traces from {len(report.files)} files; "
        f"{report.orphan_count} orphaned, {report.duplicate_count} duplicates dropped, "
        f"{report.error_count} with error status. {escape(step_method_summary(report))}.</p>",
        "<h2>Goodput buckets</h2>",
        _bucket_table(report),
        "<h2>Waterfall</h2>",
        _legend(),
    ]
    if len(timed) < len(spans):
        body.append(f"<p>Not drawn, lacking valid timestamps: {len(spans) - len(timed)} spans.</p>")
    body += [f'<div class="waterfall">{_waterfall(timed)}</div>', "<h2>Top spans by total time</h2>"]
    body.append(
        _table(
            ["name", "count", "total s", "mean s"],
            [
                [t.name, str(t.count), f"{t.total_ns / NS_PER_S:.3f}", f"{t.mean_ns / NS_PER_S:.3f}"]
                for t in report.top_spans
            ],
        )
    )
    body.append(f"<h2>Violations ({len(report.violations)})</h2>")
    body.append(
        _table(
            ["rule", "span", "trace id", "span id", "file", "reason"],
            [
                [v.rule, v.span_name, v.trace_id, v.span_id, f"{v.file}:{v.line}" if v.line else v.file, v.reason]
                for v in report.violations
            ],
        )
    )
    body.append(f"<h2>Problems reading input ({len(report.problems)})</h2>")
    body.append(_table(["file", "line", "problem"], [[p.file, str(p.line), p.message] for p in report.problems]))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>lens report</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _table(header: list[str], rows: list[list[str]], *, last_row_class: str = "") -> str:
    head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
    lines = [f"<table><tr>{head}</tr>"]
    for i, row in enumerate(rows):
        css = f' class="{last_row_class}"' if last_row_class and i == len(rows) - 1 else ""
        lines.append(f"<tr{css}>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _bucket_table(report: Report) -> str:
    rows = [[str(step.iteration), *bucket_cells(step.totals)] for step in report.steps]
    rows.append(["run", *bucket_cells(report.run)])
    return _table(TABLE_HEADER, rows, last_row_class="run")


def _legend() -> str:
    names = [*BUCKETS, "unknown", "umbrella"]
    items = "".join(f'<span class="b-{name}">{name}</span>' for name in names)
    return f'<p class="legend">{items} <span class="b-umbrella error">error status</span></p>'


def _bucket_class(span: Span) -> str:
    if span.bucket is None:
        return "umbrella"
    return span.bucket if span.bucket in BUCKETS else "unknown"


def _tooltip(span: Span) -> str:
    bucket = "none (umbrella)" if span.bucket is None else str(span.bucket)
    lines = [
        span.name or "(unnamed)",
        f"duration: {span.duration_ns / NS_PER_S:.6f} s",
        f"bucket: {bucket}",
        f"iteration: {'-' if span.iteration is None else span.iteration}",
        f"process: {span.process}" + (f", thread {span.thread}" if span.thread else ""),
        f"trace {span.trace_id} span {span.span_id}",
        f"kind {span.kind}, {len(span.events)} events, {len(span.links)} links" + (", ERROR" if span.error else ""),
    ]
    return escape("\n".join(lines))


def _lane_label(span: Span) -> tuple[str, str]:
    """(short label shown in the lane, full label for its tooltip)."""
    parts = [str(span.resource.get(semconv.SERVICE_NAME, "")), span.process]
    if semconv.NV_DL_RANK in span.resource:
        parts.insert(1, f"rank {span.resource[semconv.NV_DL_RANK]}")
    full = " · ".join(part for part in parts if part) + (f" / thread {span.thread}" if span.thread else "")
    if not span.thread:
        return full, full
    # lead with what tells lanes of one process apart: the rank and the thread's name
    thread = span.attributes.get(semconv.THREAD_NAME) or span.thread
    return " · ".join(part for part in (parts[1] if len(parts) > 2 else parts[0], str(thread)) if part), full


def _pack_rows(lane: list[Span], tree: SpanTree) -> dict[tuple[str, str], int]:
    """Give each span the first free row at or below its parent's row + 1 (when the parent shares the lane)."""
    row_of: dict[tuple[str, str], int] = {}
    row_end: list[int] = []
    for span in sorted(lane, key=lambda s: (s.start_ns, -s.end_ns)):
        parent = tree.parent(span)
        row = row_of[parent.key] + 1 if parent is not None and parent.key in row_of else 0
        while row < len(row_end) and row_end[row] > span.start_ns:
            row += 1
        if row == len(row_end):
            row_end.append(span.end_ns)
        row_end[row] = span.end_ns
        row_of[span.key] = row
    return row_of


def _tick_step(span_ns: int) -> int:
    raw = span_ns / 10
    magnitude = 10 ** math.floor(math.log10(raw))
    return max(1, int(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)))


def _waterfall(timed: list[Span]) -> str:
    if not timed:
        return "<p>No spans to draw.</p>"
    tree = SpanTree(timed)
    t0 = min(span.start_ns for span in timed)
    span_ns = max(1, max(span.end_ns for span in timed) - t0)

    def x(ns: int) -> float:
        return _LABEL_W + (ns - t0) / span_ns * _PLOT_W

    lanes: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for span in timed:
        lanes[(span.process, span.thread)].append(span)
    lane_start = {key: min(span.start_ns for span in lane) for key, lane in lanes.items()}
    process_start: dict[str, int] = {}
    for (process, _), start in lane_start.items():
        process_start[process] = min(start, process_start.get(process, start))
    order = sorted(lanes, key=lambda k: (process_start[k[0]], k[0], lane_start[k], k[1]))

    parts: list[str] = []
    y = _AXIS_H
    for key in order:
        lane = lanes[key]
        row_of = _pack_rows(lane, tree)
        height = (max(row_of.values()) + 1) * _ROW_H
        label, full_label = _lane_label(lane[0])
        parts.append(f'<line class="sep" x1="0" x2="{_LABEL_W + _PLOT_W}" y1="{y}" y2="{y}"/>')
        parts.append(
            f'<text class="lane" x="4" y="{y + 11}"><title>{escape(full_label)}</title>'
            f"{escape(_fit(label, _LABEL_W - 8))}</text>"
        )
        for span in lane:
            left, top = x(span.start_ns), y + 1 + row_of[span.key] * _ROW_H
            width = max(1.0, x(span.end_ns) - left)
            css = f"span b-{_bucket_class(span)}" + (" error" if span.error else "")
            parts.append(
                f'<rect class="{css}" x="{left:.2f}" y="{top}" width="{width:.2f}" height="{_ROW_H - 2}">'
                f"<title>{_tooltip(span)}</title></rect>"
            )
            if width > 30:
                parts.append(f'<text x="{left + 2:.2f}" y="{top + 10}">{escape(_fit(span.name, width - 4))}</text>')
        y += height + _LANE_GAP

    started = datetime.fromtimestamp(t0 / NS_PER_S, tz=timezone.utc).isoformat(timespec="milliseconds")
    axis = [f'<text x="4" y="12">start {escape(started)}</text>']
    step = _tick_step(span_ns)
    for tick in range(0, span_ns + 1, step):
        tx = x(t0 + tick)
        axis.append(f'<line class="tick" x1="{tx:.2f}" x2="{tx:.2f}" y1="{_AXIS_H - 4}" y2="{y}"/>')
        axis.append(f'<text x="{tx + 2:.2f}" y="12">+{tick / NS_PER_S:g} s</text>')
    width = _LABEL_W + _PLOT_W + 10
    return f'<svg width="{width}" height="{y}" viewBox="0 0 {width} {y}">' + "".join(axis + parts) + "</svg>"


def _fit(text: str, width: float) -> str:
    room = int(width / _CHAR_W)
    return text if len(text) <= room else text[: max(0, room - 1)] + "…"
