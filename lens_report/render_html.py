"""Self-contained HTML: a rank × step heatmap, bucket totals, stragglers, loss, and a waterfall of selected steps and ranks."""

from __future__ import annotations

import base64
import bisect
import math
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from html import escape
from typing import Any

from .model import BUCKETS, NS_PER_S, Report
from .render_text import SPREAD_HEADER, TABLE_HEADER, UNFINISHED_LISTED, bucket_cells, step_method_summary

__all__ = ["MAX_WATERFALL_SPANS", "SMALL_RUN_SPANS", "pack_rows", "png", "render_html"]

MAX_WATERFALL_SPANS = 20_000
"""The most spans one waterfall draws; narrow it with ``--step`` and ``--ranks``."""

SMALL_RUN_SPANS = 5_000
"""A run with at most this many spans gets a waterfall of the whole run by default."""

_DEFAULT_RANKS = 16
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
.heatmap { display: flex; gap: 8px; align-items: flex-start; }
.heatmap img { image-rendering: pixelated; border: 1px solid #888; }
.heatmap .axis { font-size: 11px; color: #555; }
.views input { margin-left: 12px; }
#hm-goodput:checked ~ .hm .steptime, #hm-steptime:checked ~ .hm .goodput { display: none; }
.scale { display: inline-block; width: 160px; height: 10px; vertical-align: middle; border: 1px solid #888; }
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


def png(width: int, height: int, rows: Iterable[bytes]) -> bytes:
    """A PNG (8-bit RGB) from ``height`` rows of ``3 * width`` bytes each (stdlib zlib only)."""
    raw = b"".join(b"\x00" + row for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


_LEVELS = 20  # colour steps per scale: a few distinct colours keep a noisy 1,000 × 500 grid's PNG small
_MISSING = bytes((235, 235, 235))
_WHITE, _RED, _GREEN, _BLUE = (250, 250, 250), (200, 30, 30), (40, 150, 70), (70, 110, 200)


def _scale(a: tuple[int, int, int], b: tuple[int, int, int]) -> list[bytes]:
    """The colours from ``a`` to ``b`` in ``_LEVELS`` steps."""
    return [bytes(round(x + (y - x) * i / _LEVELS) for x, y in zip(a, b)) for i in range(_LEVELS + 1)]


_SLOWER, _FASTER, _GOODPUT = _scale(_WHITE, _RED), _scale(_WHITE, _BLUE), _scale(_RED, _GREEN)


def _level(t: float) -> int:
    return 0 if t != t else min(_LEVELS, max(0, round(t * _LEVELS)))  # NaN -> 0


def _heatmaps(report: Report) -> tuple[bytes, bytes, list[int]]:
    """(step-time PNG, goodput PNG, iterations) for the rank × step grid: one pixel per cell.

    Step time is coloured by its ratio to the step's median over ranks (white at the median,
    red at twice it or more, blue when faster), so a straggler stands out whatever the scale.
    """
    rs = report.rank_steps
    iterations = sorted(set(rs.iterations))
    column = {it: i for i, it in enumerate(iterations)}
    width, height = max(1, len(iterations)), max(1, len(rs.rank_labels))
    step_time = [bytearray(_MISSING * width) for _ in range(height)]
    goodput = [bytearray(_MISSING * width) for _ in range(height)]
    medians = {step.iteration: step.wall_median_ns for step in report.steps}
    for it, rank, wall, prod in zip(rs.iterations, rs.ranks, rs.wall_ns, rs.productive_ns):
        x = 3 * column[it]
        median = medians.get(it) or wall or 1
        ratio = wall / median
        step_time[rank][x:x + 3] = _SLOWER[_level(ratio - 1)] if ratio >= 1 else _FASTER[_level((1 - ratio) * 2)]
        goodput[rank][x:x + 3] = _GOODPUT[_level(prod / wall if wall else 0.0)]
    return png(width, height, map(bytes, step_time)), png(width, height, map(bytes, goodput)), iterations


def _data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _heatmap_section(report: Report) -> list[str]:
    if not len(report.rank_steps):
        return ["<p>No rank × step figures: no step was found.</p>"]
    step_png, goodput_png, iterations = _heatmaps(report)
    ranks = len(report.rank_steps.rank_labels)
    cell_w = max(1, min(24, 1200 // max(1, len(iterations))))
    cell_h = max(1, min(24, 600 // max(1, ranks)))
    size = f'width="{cell_w * len(iterations)}" height="{cell_h * ranks}"'
    labels = report.rank_steps.rank_labels
    axis = (f'<div class="axis">ranks top to bottom: {escape(labels[0])} … {escape(labels[-1])}<br>'
            f"steps left to right: {iterations[0]} … {iterations[-1]}</div>")
    return [
        '<div class="views"><input type="radio" name="hm" id="hm-steptime" checked>'
        '<label for="hm-steptime">step time</label>'
        '<input type="radio" name="hm" id="hm-goodput"><label for="hm-goodput">goodput</label>',
        '<div class="hm">',
        f'<div class="heatmap steptime"><img id="heatmap-steptime" alt="step time per rank and step" {size} '
        f'src="{_data_uri(step_png)}">{axis}</div>',
        f'<div class="heatmap goodput"><img id="heatmap-goodput" alt="goodput per rank and step" {size} '
        f'src="{_data_uri(goodput_png)}">{axis}</div>',
        "</div></div>",
        '<p class="axis">step time against the step\'s median over ranks: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(70,110,200), rgb(250,250,250), '
        'rgb(200,30,30))"></span> faster · median · 2× or slower; goodput: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(200,30,30), rgb(40,150,70))"></span>'
        " 0 … 100 %; grey: the rank did not run the step.</p>",
    ]


def _table(header: list[str], rows: list[list[str]], *, last_row_class: str = "") -> str:
    head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
    lines = [f"<table><tr>{head}</tr>"]
    for i, row in enumerate(rows):
        css = f' class="{last_row_class}"' if last_row_class and i == len(rows) - 1 else ""
        lines.append(f"<tr{css}>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _s(ns: float) -> str:
    return f"{ns / NS_PER_S:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _bucket_section(report: Report) -> list[str]:
    if not report.multi_rank:
        rows = [[str(step.iteration), *bucket_cells(step.totals)] for step in report.steps]
        rows.append(["run", *bucket_cells(report.run)])
        return [_table(TABLE_HEADER, rows, last_row_class="run")]
    run = _table(["", "rank-s", *BUCKETS, "unattributed", "goodput"], [["run", *bucket_cells(report.run)]],
                 last_row_class="run")
    steps = _table(SPREAD_HEADER, [
        [str(s.iteration), str(s.ranks), _s(s.wall_min_ns), _s(s.wall_median_ns), _s(s.wall_max_ns),
         *(_s(s.totals.bucket_ns[b]) for b in BUCKETS), _pct(s.totals.goodput), s.slowest_rank, _s(s.wait_ns)]
        for s in report.steps])
    return ["<p>Wall is each rank's first-to-last span time, summed over ranks (rank-seconds); "
            "goodput is productive rank-seconds over it.</p>", run,
            f"<details><summary>{len(report.steps)} steps: step time over ranks, buckets and wait summed "
            f"over ranks</summary>{steps}</details>"]


def _stragglers(report: Report, top: int) -> list[str]:
    stragglers = report.stragglers[:top]
    if not stragglers:
        return ["<p>No straggler: no step was run by more than one rank.</p>"]
    return [f"<p>{len(report.stragglers)} ranks were the slowest of some step; the top {len(stragglers)} by the "
            "rank-seconds the other ranks waited for them:</p>",
            _table(["rank", "slowest of steps", "others waited rank-s", "their idle it explains s", "goodput"],
                   [[r.rank, str(r.slowest_steps), _s(r.straggler_cost_ns), _s(r.idle_explained_ns),
                     _pct(r.totals.goodput)] for r in stragglers])]


def _loss(report: Report) -> list[str]:
    parts = ["<p>No process reported lost telemetry.</p>"] if not report.loss else [
        _table(["rank", "process", "lost", "dropped", "failed", "unended", "truncated", "created"],
               [[r.rank, r.process, f"{r.lost:,}", f"{r.dropped:,}", f"{r.failed:,}", f"{r.unended:,}",
                 f"{r.truncated:,}", f"{r.created:,}"] for r in report.loss])]
    if report.unfinished:
        shown = report.unfinished[:UNFINISHED_LISTED]
        more = len(report.unfinished) - len(shown)
        parts.append(f"<p>Telemetry never shut down in {len(report.unfinished):,} processes (killed, os._exit, "
                     "or still running): spans they held are not in the output and were counted nowhere"
                     + (f"; the first {len(shown)} are listed, all are in <code>--json</code>" if more else "")
                     + ".</p>")
        parts.append(_table(["rank", "process", "spans read"], [[u.rank, u.process, f"{u.spans:,}"] for u in shown]))
    return parts


def render_html(report: Report, store: Any, *, steps: frozenset[int] | None = None,
                ranks: frozenset[int] | None = None, top: int = 10) -> str:
    """One self-contained HTML page (inline CSS, images and SVG; no script, nothing fetched).

    It opens with the rank × step heatmap (step time or goodput), the bucket totals and the
    stragglers; then lost telemetry; then a waterfall of the spans of the selected ``steps``
    and ``ranks`` (numbers) in ``store``, which must be the store ``report`` was built from,
    just after :func:`~lens_report.build_report`. By default the waterfall shows the
    whole run when it is small, else the slowest step, for up to 16 ranks (stragglers first).
    """
    from .rollup import waterfall_spans

    selection = waterfall_spans(store, report, steps=steps, ranks=ranks, small_run=SMALL_RUN_SPANS,
                                default_ranks=_DEFAULT_RANKS, limit=MAX_WATERFALL_SPANS)
    body = [
        "<h1>lens report</h1>",
        f"<p>Run {escape(report.run_id or '(no run id)')}: {len(report.ranks)} rank(s), {report.span_count} spans "
        f"in {report.trace_count} traces from {len(report.files)} files; {report.orphan_count} orphaned, "
        f"{report.duplicate_count} duplicates dropped, {report.error_count} with error status. "
        f"{escape(step_method_summary(report))}.</p>",
        "<h2>Rank × step</h2>", *_heatmap_section(report),
        "<h2>Goodput buckets</h2>", *_bucket_section(report),
        "<h2>Stragglers</h2>", *_stragglers(report, top),
        "<h2>Lost telemetry</h2>", *_loss(report),
        "<h2>Waterfall</h2>", f"<p>{escape(selection.describe())}</p>", _legend(),
        f'<div class="waterfall">{_waterfall(selection.spans, selection.rank_order)}</div>',
        "<h2>Top spans by total time</h2>",
        _table(["name", "count", "total s", "mean s"],
               [[t.name, str(t.count), _s(t.total_ns), _s(t.mean_ns)] for t in report.top_spans]),
        f"<h2>Violations ({report.violation_count})</h2>",
        _table(["rule", "span", "rank", "trace id", "span id", "file", "reason"],
               [[v.rule, v.span_name, v.rank, v.trace_id, v.span_id, f"{v.file}:{v.line}" if v.line else v.file,
                 v.reason] for v in report.violations]),
    ]
    if report.violation_count > len(report.violations):
        body.append(f"<p>{report.violation_count - len(report.violations)} more not listed.</p>")
    body.append(f"<h2>Problems reading input ({len(report.problems)})</h2>")
    body.append(_table(["file", "line", "problem"], [[p.file, str(p.line), p.message] for p in report.problems]))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>lens report</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _legend() -> str:
    names = [*BUCKETS, "unknown", "umbrella"]
    items = "".join(f'<span class="b-{name}">{name}</span>' for name in names)
    return f'<p class="legend">{items} <span class="b-umbrella error">error status</span></p>'


def _bucket_class(span: dict[str, Any]) -> str:
    if span["bucket"] is None:
        return "umbrella"
    return span["bucket"] if span["bucket"] in BUCKETS else "unknown"


def _tooltip(span: dict[str, Any]) -> str:
    bucket = "none (umbrella)" if span["bucket"] is None else str(span["bucket"])
    lines = [
        span["name"] or "(unnamed)",
        f"duration: {(span['end_ns'] - span['start_ns']) / NS_PER_S:.6f} s",
        f"bucket: {bucket}",
        f"iteration: {'-' if span['iteration'] is None else span['iteration']}",
        f"{span['rank_label']} · {span['process']}" + (f", thread {span['thread_label']}" if span["thread_label"] else ""),
        f"trace {span['trace']} span {span['span']}",
        f"kind {span['kind']}" + (", ERROR" if span["error"] else ""),
    ]
    return escape("\n".join(lines))


def pack_rows(spans: list[dict[str, Any]]) -> dict[int, int]:
    """Rows for one lane: each span takes the lowest free row at or below its parent's row + 1
    (when the parent shares the lane). Sorted by start with a sorted list of free rows, so
    20,000 overlapping spans take milliseconds, not a scan of every row per span."""
    row_of: dict[int, int] = {}
    busy: list[tuple[int, int]] = []  # heap of (end, row) of rows in use
    free: list[int] = []  # sorted rows no span occupies any more
    rows = 0
    import heapq

    for span in sorted(spans, key=lambda s: (s["start_ns"], -s["end_ns"], s["id"])):
        while busy and busy[0][0] <= span["start_ns"]:
            bisect.insort(free, heapq.heappop(busy)[1])
        floor = row_of[span["pid"]] + 1 if span["pid"] in row_of else 0
        at = bisect.bisect_left(free, floor)
        if at < len(free):
            row = free.pop(at)
        else:
            row = max(rows, floor)
            free.extend(r for r in range(rows, row))  # rows skipped to sit below the parent
            rows = row + 1
        row_of[span["id"]] = row
        heapq.heappush(busy, (span["end_ns"], row))
    return row_of


def _tick_step(span_ns: int) -> int:
    raw = span_ns / 10
    magnitude = 10 ** math.floor(math.log10(raw))
    return max(1, int(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)))


def _started(t0: int) -> str:
    try:
        return datetime.fromtimestamp(t0 / NS_PER_S, tz=timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{t0} ns"


def _waterfall(spans: list[dict[str, Any]], rank_order: dict[str, int]) -> str:
    if not spans:
        return "<p>No spans to draw.</p>"
    t0 = min(span["start_ns"] for span in spans)
    span_ns = max(1, max(span["end_ns"] for span in spans) - t0)

    def x(ns: int) -> float:
        return _LABEL_W + (ns - t0) / span_ns * _PLOT_W

    lanes: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        lanes[(span["rank_label"], span["process"], span["thread_label"], span["thread_short"])].append(span)
    order = sorted(lanes, key=lambda key: (rank_order.get(key[0], len(rank_order)), key[0], key[1],
                                          min(s["start_ns"] for s in lanes[key]), key[2]))
    parts: list[str] = []
    y = _AXIS_H
    for key in order:
        lane = lanes[key]
        row_of = pack_rows(lane)
        height = (max(row_of.values()) + 1) * _ROW_H
        rank_label, process, thread, thread_name = key
        owner = process if rank_label == process else f"{rank_label} · {process}"
        full = owner + (f" / thread {thread}" if thread else "")
        # lead with what tells lanes of one process apart: the rank and the thread's name
        short = f"{rank_label} · {thread_name}" if thread else full
        parts.append(f'<line class="sep" x1="0" x2="{_LABEL_W + _PLOT_W}" y1="{y}" y2="{y}"/>')
        parts.append(f'<text class="lane" x="4" y="{y + 11}"><title>{escape(full)}</title>'
                     f"{escape(_fit(short, _LABEL_W - 8))}</text>")
        for span in lane:
            left, top = x(span["start_ns"]), y + 1 + row_of[span["id"]] * _ROW_H
            width = max(1.0, x(span["end_ns"]) - left)
            css = f"span b-{_bucket_class(span)}" + (" error" if span["error"] else "")
            parts.append(f'<rect class="{css}" x="{left:.2f}" y="{top}" width="{width:.2f}" height="{_ROW_H - 2}">'
                         f"<title>{_tooltip(span)}</title></rect>")
            if width > 30:
                parts.append(f'<text x="{left + 2:.2f}" y="{top + 10}">{escape(_fit(span["name"], width - 4))}</text>')
        y += height + _LANE_GAP
    axis = [f'<text x="4" y="12">start {escape(_started(t0))}</text>']
    step = _tick_step(span_ns)
    for tick in range(0, span_ns + 1, step):
        tx = x(t0 + tick)
        axis.append(f'<line class="tick" x1="{tx:.2f}" x2="{tx:.2f}" y1="{_AXIS_H - 4}" y2="{y}"/>')
        axis.append(f'<text x="{tx + 2:.2f}" y="12">+{tick / NS_PER_S:g} s</text>')
    width = _LABEL_W + _PLOT_W + 10
    return (f'<svg id="waterfall" width="{width}" height="{y}" viewBox="0 0 {width} {y}">'
            + "".join(axis + parts) + "</svg>")


def _fit(text: str, width: float) -> str:
    room = int(width / _CHAR_W)
    return text if len(text) <= room else text[: max(0, room - 1)] + "…"
