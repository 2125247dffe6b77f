"""Self-contained HTML: a rank × step heatmap, bucket totals, stragglers, loss, and a waterfall of selected steps and ranks."""

from __future__ import annotations

import base64
import bisect
import json
import math
import re
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from html import escape
from typing import Any

from .model import BUCKETS, NS_PER_S, Report
from .render_text import (
    BADPUT_LABELS,
    RANK_HEADER,
    RANK_STEP_HEADER,
    SPREAD_HEADER,
    STRAGGLER_HEADER,
    TABLE_HEADER,
    UNFINISHED_LISTED,
    badput_line,
    bucket_cells,
    clock_line,
    rank_detail,
    step_method_summary,
    step_spread_rows,
    straggler_rows,
)

__all__ = ["CELL_BUDGET", "DEVICE_LANE", "MAX_WATERFALL_SPANS", "PAGE_BUDGET", "SMALL_RUN_SPANS", "cell_data",
           "device_lane_spans", "pack_rows", "png", "render_html"]

MAX_WATERFALL_SPANS = 20_000
"""The most spans one waterfall draws; narrow it with ``--step`` and ``--ranks``."""

SMALL_RUN_SPANS = 5_000
"""A run with at most this many spans gets a waterfall of the whole run by default."""

CELL_BUDGET = 3_000_000
"""Bytes the rank × step figures may take in the page (past it, they lose low-order bits, from wasted up)."""

PAGE_BUDGET = 4_600_000
"""Bytes the heatmap, its figures and the spans the script can draw may take together (the page stays under 5 MB)."""

_DEFAULT_RANKS = 16
_LABEL_MAX = 420  # lane labels longer than this end in "…" (the whole label is the tooltip)
_PLOT_W = 1100  # with the labels, the waterfall fits a 1,400 px window without scrolling
_ROW_H = 14
_LANE_GAP = 10
_AXIS_H = 36  # two lines: when the axis starts, then the tick labels
_CHAR_W = 7.0  # a generous width of an 11 px system-ui character: labels must fit, not overflow

_CSS = """
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.run td { font-weight: bold; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; border: 1px solid #888; }
.waterfall { overflow-x: auto; border: 1px solid #ddd; }
.hm { position: relative; width: max-content; }
.hm img, .hm canvas { position: absolute; image-rendering: pixelated; outline: 1px solid #888; cursor: crosshair; }
.hm-axes text { font: 11px system-ui, sans-serif; fill: #333; }
.hm-axes line { stroke: #555; }
.hm-axes .title { font-weight: bold; }
.axis { font-size: 12px; color: #555; }
.views input { margin-left: 12px; }
#hm-goodput:checked ~ .hm .steptime, #hm-steptime:checked ~ .hm .goodput { display: none; }
.tip { position: absolute; z-index: 2; background: #fffff4; border: 1px solid #555; padding: 4px 8px;
       white-space: pre; font: 12px system-ui, sans-serif; pointer-events: none; box-shadow: 2px 2px 6px #0003; }
.tip[hidden] { display: none; }
p.lead { font-size: 15px; }
.badput { display: flex; max-width: 900px; height: 18px; border: 1px solid #888; }
.badput span { display: block; height: 100%; }
tr.pick { cursor: pointer; }
tr.pick:hover { background: #eef; }
.b-unattributed { fill: #cfcfcf; stroke: #999; background: #cfcfcf; }
.b-restarts { fill: #555; stroke: #333; background: #555; }
rect.clipped { stroke: #000; stroke-dasharray: 4 2; }
.clip-mark { fill: #000; pointer-events: none; }
svg .focus { font-weight: bold; fill: #b00020; }
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
_WHITE, _RED, _BLUE = (250, 250, 250), (200, 30, 30), (70, 110, 200)


def _scale(a: tuple[int, int, int], b: tuple[int, int, int]) -> list[bytes]:
    """The colours from ``a`` to ``b`` in ``_LEVELS`` steps."""
    return [bytes(round(x + (y - x) * i / _LEVELS) for x, y in zip(a, b)) for i in range(_LEVELS + 1)]


_SLOWER, _FASTER = _scale(_WHITE, _RED), _scale(_WHITE, _BLUE)


def _level(t: float) -> int:
    return 0 if t != t else min(_LEVELS, max(0, round(t * _LEVELS)))  # NaN -> 0


def _heatmaps(report: Report) -> tuple[bytes, list[int]]:
    """(step-time PNG, iterations) for the rank × step grid: one pixel per cell.

    Step time is coloured by its ratio to the step's median over ranks (white at the median,
    red at twice it or more, blue when faster), so a straggler stands out whatever the scale.
    The goodput view is drawn by the page's script from the figures it carries.
    """
    rs = report.rank_steps
    iterations = sorted(set(rs.iterations))
    column = {it: i for i, it in enumerate(iterations)}
    width, height = max(1, len(iterations)), max(1, len(rs.rank_labels))
    step_time = [bytearray(_MISSING * width) for _ in range(height)]
    medians = {step.iteration: step.wall_median_ns for step in report.steps}
    for it, rank, wall in zip(rs.iterations, rs.ranks, rs.wall_ns):
        x = 3 * column[it]
        median = medians.get(it) or wall or 1
        ratio = wall / median
        step_time[rank][x:x + 3] = _SLOWER[_level(ratio - 1)] if ratio >= 1 else _FASTER[_level((1 - ratio) * 2)]
    return png(width, height, map(bytes, step_time)), iterations


def _data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _nice(count: int, room: int) -> int:
    """A tick interval (1, 2, 5, 10, 20, 50, ...) that puts at most ``room`` ticks on ``count`` items."""
    for magnitude in (10 ** k for k in range(0, 12)):
        for m in (1, 2, 5):
            if count / (m * magnitude) <= room:
                return m * magnitude
    return count


def _short_rank(label: str) -> str:
    return label[5:] if label.startswith("rank ") else label


def _axes(labels: tuple[str, ...], iterations: list[int], cell_w: int, cell_h: int, left: int) -> str:
    """An SVG drawn over the heatmap image: rank ticks on the left, step ticks below, both titled."""
    width, height = cell_w * len(iterations), cell_h * len(labels)
    parts = []
    every = _nice(len(labels), max(1, height // 16))
    for i in range(0, len(labels), every):
        y = _HM_TOP + i * cell_h + cell_h / 2
        parts.append(f'<line x1="{left - 4}" x2="{left}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(_fit(_short_rank(labels[i]), left - 30))}</text>')
    every = _nice(len(iterations), max(1, width // 48))
    # ticks at round step numbers (10, 20, ...), and the first step
    ticks = [i for i, it in enumerate(iterations) if it % every == 0 or i == 0]
    for i in ticks:
        if i == 0 and len(ticks) > 1 and (ticks[1] - ticks[0]) * cell_w < 28:
            continue  # the first step's label would overlap the next
        x = left + i * cell_w + cell_w / 2
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_HM_TOP + height}" y2="{_HM_TOP + height + 4}"/>'
                     f'<text x="{x:.1f}" y="{_HM_TOP + height + 16}" text-anchor="middle">{iterations[i]}</text>')
    parts.append(f'<text x="{left + width / 2:.1f}" y="{_HM_TOP + height + 32}" text-anchor="middle" '
                 f'class="title">step</text>')
    parts.append(f'<text x="12" y="{_HM_TOP + height / 2:.1f}" class="title" text-anchor="middle" '
                 f'transform="rotate(-90 12 {_HM_TOP + height / 2:.1f})">rank</text>')
    return (f'<svg class="hm-axes" width="{left + width + 8}" height="{_HM_TOP + height + 40}">'
            + "".join(parts) + "</svg>")


def cell_data(report: Report) -> dict[str, Any]:
    """The rank × step figures for the page's script, compact: per cell the step time and the
    four buckets, each a uint16 in 1/65535 of the step's slowest rank (a step time of 0: the
    rank did not run the step), as planes of high bytes then low bytes (planes of zeros, an
    unused bucket, cost nothing), zlib-compressed and base64-encoded."""
    rs = report.rank_steps
    iterations = sorted(set(rs.iterations))
    column = {it: i for i, it in enumerate(iterations)}
    width, height = len(iterations), len(rs.rank_labels)
    scale = [0] * width
    for it, wall in zip(rs.iterations, rs.wall_ns):
        scale[column[it]] = max(scale[column[it]], wall)
    size = width * height
    planes = [bytearray(size) for _ in range(2 * (1 + len(BUCKETS)))]
    for it, rank, *values in zip(rs.iterations, rs.ranks, rs.wall_ns, rs.productive_ns, rs.overhead_ns,
                                 rs.idle_ns, rs.wasted_ns):
        c = column[it]
        i = rank * width + c
        for k, value in enumerate(values):
            q = min(65535, round(value / scale[c] * 65535)) if scale[c] else 0
            if k == 0:
                q = max(1, q)  # 0 means "did not run"
            planes[2 * k][i], planes[2 * k + 1][i] = q >> 8, q & 255
    medians = {s.iteration: s.p50_ns for s in report.aggregates.steps}
    packed = zlib.compress(b"".join(planes), 6)
    # noisy figures of a huge grid: drop low bytes (wasted, idle, overhead, productive, then the
    # step time: 1/256 of the step's slowest rank) until the figures fit their share of the page
    coarse = 0
    for plane in (9, 7, 5, 3, 1):
        if len(packed) * 4 / 3 <= CELL_BUDGET:
            break
        planes[plane] = bytearray(size)
        coarse += 1
        packed = zlib.compress(b"".join(planes), 6)
    return {
        "ranks": list(rs.rank_labels), "steps": iterations, "buckets": list(BUCKETS),
        "scale_s": [v / NS_PER_S for v in scale], "median_s": [medians.get(it, 0) / NS_PER_S for it in iterations],
        "cells": base64.b64encode(packed).decode("ascii"), "coarse": coarse,
    }


_HM_TOP = 4
_PAGE_CELL_BYTES = 32  # a cell's figures for the page (10 planes, packed) and its image row (3), each copied once


def _heatmap_section(report: Report) -> list[str]:
    if not len(report.rank_steps):
        return ["<p>No rank × step figures: no step was found.</p>"]
    step_png, iterations = _heatmaps(report)
    labels = report.rank_steps.rank_labels
    ranks = len(labels)
    cell_w = max(1, min(24, 1200 // max(1, len(iterations))))
    cell_h = max(1, min(24, 600 // max(1, ranks)))
    left = 34 + _CHAR_W * min(24, max(len(_short_rank(label)) for label in labels))
    left = int(left)
    size = f'width="{cell_w * len(iterations)}" height="{cell_h * ranks}"'
    place = f'style="left: {left}px; top: {_HM_TOP}px"'
    axes = _axes(labels, iterations, cell_w, cell_h, left)
    return [
        '<div class="views"><input type="radio" name="hm" id="hm-steptime" checked>'
        '<label for="hm-steptime">step time</label>'
        '<input type="radio" name="hm" id="hm-goodput"><label for="hm-goodput">goodput</label>',
        f'<div class="hm" id="heatmap" data-cell-w="{cell_w}" data-cell-h="{cell_h}" data-left="{left}" '
        f'data-top="{_HM_TOP}">{axes}',
        f'<img class="steptime" id="heatmap-steptime" alt="step time per rank and step" {size} {place} '
        f'src="{_data_uri(step_png)}">',
        # drawn by the script from the figures (a second image would double the page at 1,000 ranks)
        f'<canvas class="goodput" id="heatmap-goodput" width="{len(iterations)}" height="{ranks}" '
        f'style="left: {left}px; top: {_HM_TOP}px; width: {cell_w * len(iterations)}px; height: {cell_h * ranks}px">'
        "goodput per rank and step</canvas>",
        '<div id="hm-tip" class="tip" hidden></div>',
        "</div></div>",
        '<p class="axis">step time against the step\'s median over ranks: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(70,110,200), rgb(250,250,250), '
        'rgb(200,30,30))"></span> faster · median · 2× or slower; goodput: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(200,30,30), rgb(40,150,70))"></span>'
        " 0 … 100 %; grey: the rank did not run the step. Hover a cell for its figures; click it for that "
        "step's waterfall of the rank and its neighbours.</p>",
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


def _badput_section(report: Report) -> list[str]:
    """Goodput first: one stacked bar of every rank-second, productive then each part of the badput."""
    badput = report.aggregates.badput
    if not badput.total_ns:
        return ["<p>No time to split: no span with a valid duration.</p>"]
    parts = [("productive", badput.productive_ns)] + [(p, badput.parts_ns[p]) for p in BADPUT_LABELS]
    bar = "".join(f'<span class="b-{name}" style="width: {100 * ns / badput.total_ns:.3f}%" '
                  f'title="{escape(BADPUT_LABELS.get(name, name))}: {_pct(ns / badput.total_ns)}"></span>'
                  for name, ns in parts if ns > 0)
    clock = clock_line(report)
    return [f'<p class="lead">{escape(badput_line(report))}</p>', f'<div class="badput">{bar}</div>',
            *([f'<p class="clock">{escape(clock)}</p>'] if clock else [])]


def _steps_section(report: Report) -> list[str]:
    if not report.multi_rank:
        rows = [[str(step.iteration), *bucket_cells(step.totals)] for step in report.steps]
        rows.append(["run", *bucket_cells(report.run)])
        return [_table(TABLE_HEADER, rows, last_row_class="run")]
    run = _table(["", "rank-s", *BUCKETS, "unattributed", "goodput"], [["run", *bucket_cells(report.run)]],
                 last_row_class="run")
    return ["<p>Wall is each rank's first-to-last span time, summed over ranks (rank-seconds); "
            "goodput is productive rank-seconds over it.</p>", run,
            f"<details><summary>{len(report.steps)} steps: step time over ranks (p50, p90, p99, max), the slowest "
            f"rank and the rank-seconds the others waited for it</summary>"
            f"{_table(SPREAD_HEADER, step_spread_rows(report))}</details>"]


def _stragglers(report: Report, top: int) -> list[str]:
    rows = straggler_rows(report, top)
    if not rows:
        return ["<p>No straggler: every rank took its step's median time.</p>" if report.multi_rank
                else "<p>No straggler: one rank.</p>"]
    worst = {s.rank: s.individual_step if s.flagged_by == "individual" else None for s in report.aggregates.top(top)}
    head = "".join(f"<th>{escape(cell)}</th>" for cell in STRAGGLER_HEADER)
    body = []
    for row in rows:
        label = row[0]
        step = worst[label] if worst[label] is not None else ""
        body.append(f'<tr class="pick" data-rank="{escape(label)}" data-step="{step}">'
                    + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>")
    return ["<p>Relative: the median over its steps of the rank's step time over the step's median rank (a rank "
            "always slow). Individual: its slowest step over its own median step, at that step (a rank that became "
            "slow). Click a row for its waterfall.</p>",
            f"<table><tr>{head}</tr>{''.join(body)}</table>"]


def _rank_section(report: Report, ranks: frozenset[int] | None, steps: frozenset[int] | None) -> list[str]:
    if not ranks or not report.multi_rank:
        return []
    labels = frozenset(label for label in report.rank_steps.rank_labels
                       if label.startswith("rank ") and label[5:].isdigit() and int(label[5:]) in ranks)
    per_rank, cells = rank_detail(report, labels, steps)
    return ["<h2>Rank detail</h2>", _table(RANK_HEADER, per_rank),
            f"<details><summary>{len(cells)} rank × step rows</summary>{_table(RANK_STEP_HEADER, cells)}</details>"]


def render_html(report: Report, store: Any, *, steps: frozenset[int] | None = None,
                ranks: frozenset[int] | None = None, top: int = 10) -> str:
    """One self-contained HTML page (inline CSS, images, SVG and script; nothing fetched).

    It leads with goodput and its badput split and the top stragglers; then the rank × step
    heatmap (step time or goodput; hover a cell for its figures, click it for that step's
    waterfall of the rank and its neighbours); then a waterfall of the spans of the selected
    ``steps`` and ``ranks`` (numbers) in ``store``, which must be the store ``report`` was built
    from, just after :func:`~lens_report.build_report`. By default the waterfall shows the
    whole run when it is small, else the slowest step, for up to 16 ranks (stragglers first);
    with a step chosen its axis is that step, and longer spans are clipped and marked. The
    spans of the chosen steps for every rank (up to :data:`MAX_WATERFALL_SPANS`) travel in the
    page, so a click on their column redraws the waterfall without a new report. Without
    script the page still shows every table, the heatmaps and the first waterfall.
    """
    from .rollup import CELL_BYTES, waterfall_spans

    # the page's figures are held beside the engine too (see TraceStore.hold_outside)
    store.hold_outside(len(report.rank_steps) * (CELL_BYTES + _PAGE_CELL_BYTES))
    selection = waterfall_spans(store, report, steps=steps, ranks=ranks, small_run=SMALL_RUN_SPANS,
                                default_ranks=_DEFAULT_RANKS, limit=MAX_WATERFALL_SPANS)
    heatmap = _heatmap_section(report)
    cells = cell_data(report) if len(report.rank_steps) else {"ranks": [], "steps": [], "buckets": list(BUCKETS),
                                                                "scale_s": [], "median_s": [], "cells": ""}
    # the spans the script may draw fill what the page budget leaves (about 70 bytes each)
    budget = int(min(MAX_WATERFALL_SPANS, max(2_000, (PAGE_BUDGET - len(cells["cells"])
                                                      - sum(map(len, heatmap))) / 80)))
    embedded = selection
    if ranks is None and len(report.rank_steps.rank_labels) > len(selection.ranks):
        # every rank of the chosen steps, as many as the span budget holds, for clicks on the heatmap
        per_cell = report.span_count / max(1, len(report.rank_steps))
        everyone = max(_DEFAULT_RANKS, int(budget / max(1.0, per_cell * len(selection.steps or [1]))))
        embedded = waterfall_spans(store, report, steps=None if selection.steps is None else frozenset(selection.steps),
                                   ranks=None, small_run=SMALL_RUN_SPANS, default_ranks=everyone, limit=budget)
    step_re = re.compile(report.step_pattern)
    windows = _windows(selection.spans, selection.steps, step_re)
    data = {**cells, **_span_data(embedded, report, step_re),
            "initial": {"steps": selection.steps, "ranks": selection.ranks}}
    body = [
        "<h1>lens report</h1>",
        f"<p>Run {escape(report.run_id or '(no run id)')}: {len(report.ranks)} rank(s), {report.span_count} spans "
        f"in {report.trace_count} traces from {len(report.files)} files; {report.orphan_count} orphaned, "
        f"{report.duplicate_count} duplicates dropped, {report.error_count} with error status. "
        f"{escape(step_method_summary(report))}.</p>",
        "<h2>Goodput</h2>", *_badput_section(report),
        "<h2>Stragglers</h2>", *_stragglers(report, top),
        "<h2>Rank × step</h2>", *heatmap,
        '<h2 id="waterfall-title">Waterfall</h2>', f'<p id="waterfall-note">{escape(selection.describe())}</p>',
        _legend(),
        f'<div class="waterfall" id="waterfall-box">{_waterfall(selection.spans, selection.rank_order, windows)}</div>',
        "<h2>Goodput buckets</h2>", *_steps_section(report),
        *_rank_section(report, ranks, steps),
        "<h2>Lost telemetry</h2>", *_loss(report),
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
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body)
        + f'\n<script type="application/json" id="lens-data">{_script_json(data)}</script>'
        + f"\n<script>{_JS}</script>\n</body></html>\n"
    )


def _script_json(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``</script>`` in a span name stays text)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _windows(spans: list[dict[str, Any]], steps: list[int] | None, step_re: re.Pattern[str]
             ) -> tuple[int, int] | None:
    """The time the chosen steps took on the drawn ranks: from the first step span's start to the
    last one's end (spans carrying the step's ``rl.iteration`` when none matches the step
    pattern); ``None`` for the whole run."""
    if not steps or not spans:
        return None
    chosen = set(steps)
    inside = [s for s in spans if s["iteration"] in chosen and s["bucket"] is None and step_re.search(s["name"] or "")]
    inside = inside or [s for s in spans if s["iteration"] in chosen]
    if not inside:
        return None
    return min(s["start_ns"] for s in inside), max(s["end_ns"] for s in inside)


_BUCKET_CODE = {name: i for i, name in enumerate(BUCKETS)}


def _span_data(selection: Any, report: Report, step_re: re.Pattern[str]) -> dict[str, Any]:
    """The spans the page's script can draw: lanes (rank index, labels), names, and per span
    [lane, row, name, start µs, duration µs, bucket (0-3, 4 unknown, -1 none), iteration, error];
    step windows per (rank index, iteration). Times are µs after ``t0_ns``."""
    spans = selection.spans
    if not spans:
        return {"lanes": [], "names": [], "spans": [], "windows": [], "t0_ns": 0, "span_steps": []}
    t0 = min(s["start_ns"] for s in spans)
    order = {label: i for i, label in enumerate(report.rank_steps.rank_labels)}
    lanes: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for span in [*spans, *device_lane_spans(spans)]:
        lanes[_lane_key(span)].append(span)
    names: dict[str, int] = {}
    lane_rows, out = [], []
    for index, key in enumerate(sorted(lanes, key=lambda k: (order.get(k[0], len(order)), k[0], k[1], k[2], k[4]))):
        rank_label, process, thread, thread_name, device = key
        owner = process if rank_label == process else f"{rank_label} · {process}"
        full = owner + (f" / thread {thread}" if thread else "") + device
        lane_rows.append([order.get(rank_label, -1), full,
                          (f"{rank_label} · {thread_name}" if thread else owner if device else full) + device])
        row_of = pack_rows(lanes[key])
        for span in lanes[key]:
            bucket = span["bucket"]
            code = -1 if bucket is None else _BUCKET_CODE.get(bucket, 4)
            out.append([index, row_of[span["id"]], names.setdefault(span["name"] or "", len(names)),
                        (span["start_ns"] - t0) // 1000, (span["end_ns"] - span["start_ns"]) // 1000, code,
                        span["iteration"], 1 if span["error"] else 0])
    windows: dict[tuple[int, int], list[int]] = {}
    fallback: dict[tuple[int, int], list[int]] = {}
    for span in spans:
        if span["iteration"] is None or span["rank_label"] not in order:
            continue
        cell = (order[span["rank_label"]], span["iteration"])
        target = windows if span["bucket"] is None and step_re.search(span["name"] or "") else fallback
        lo, hi = (span["start_ns"] - t0) // 1000, (span["end_ns"] - t0) // 1000
        old = target.get(cell)
        target[cell] = [lo, hi] if old is None else [min(old[0], lo), max(old[1], hi)]
    for cell, window in fallback.items():
        windows.setdefault(cell, window)
    return {"lanes": lane_rows, "names": list(names), "spans": out, "t0_ns": t0,
            "windows": [[rank, it, lo, hi] for (rank, it), (lo, hi) in sorted(windows.items())],
            "span_steps": selection.steps}


DEVICE_LANE = " · device"
"""What a device lane's label adds to its host lane's: the spans of that lane with device times, drawn
when the device ran them (``lens.device.*_time_unix_nano``)."""


def device_lane_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each span with device times, its twin in the device lane under its host lane: the same span
    drawn at its device interval (its tooltip says so)."""
    return [{**span, "start_ns": span["dev_start"], "end_ns": span["dev_end"], "pid": None, "device": DEVICE_LANE,
             "host_ns": span["end_ns"] - span["start_ns"]}
            for span in spans if span.get("dev_start") is not None]


def _lane_key(span: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (span["rank_label"], span["process"], span["thread_label"], span["thread_short"], span.get("device", ""))


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
        f"duration: {(span['end_ns'] - span['start_ns']) / NS_PER_S:.6f} s"
        + (f" on the device (host: {span['host_ns'] / NS_PER_S:.6f} s)" if span.get("device")
           else f" on the host (device: {(span['dev_end'] - span['dev_start']) / NS_PER_S:.6f} s)"
           if span.get("dev_start") is not None else ""),
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


def _label_width(labels: Iterable[str]) -> int:
    """Room for the longest lane label (so none is cut off), within bounds; longer ones end in "…"."""
    return int(min(_LABEL_MAX, max(120, 12 + _CHAR_W * max((len(label) for label in labels), default=0))))


def _waterfall(spans: list[dict[str, Any]], rank_order: dict[str, int],
               window: tuple[int, int] | None = None) -> str:
    """The waterfall as SVG: a lane per (rank, process, thread); the axis is ``window`` (the
    chosen step) when given, where longer spans are clipped and marked, else all the spans."""
    if not spans:
        return "<p>No spans to draw.</p>"
    t0 = min(span["start_ns"] for span in spans) if window is None else window[0]
    t1 = max(span["end_ns"] for span in spans) if window is None else window[1]
    span_ns = max(1, t1 - t0)

    lanes: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for span in [*spans, *device_lane_spans(spans)]:
        if span["end_ns"] < t0 or span["start_ns"] > t1:
            continue
        lanes[_lane_key(span)].append(span)
    # a device lane sits under its host lane: it sorts by the host lane's first start
    first = {key[:4]: min(s["start_ns"] for s in lane) for key, lane in lanes.items() if not key[4]}
    order = sorted(lanes, key=lambda key: (rank_order.get(key[0], len(rank_order)), key[0], key[1],
                                          first.get(key[:4], min(s["start_ns"] for s in lanes[key])), key[2], key[4]))
    shorts = {}
    fulls = {}
    for key in order:
        rank_label, process, thread, thread_name, device = key
        owner = process if rank_label == process else f"{rank_label} · {process}"
        fulls[key] = owner + (f" / thread {thread}" if thread else "") + device
        # lead with what tells lanes of one process apart: the rank and the thread's name
        shorts[key] = (f"{rank_label} · {thread_name}" if thread else owner if device else fulls[key]) + device
    label_w = _label_width(shorts.values())

    def x(ns: int) -> float:
        return label_w + (ns - t0) / span_ns * _PLOT_W

    parts: list[str] = []
    y = _AXIS_H
    for key in order:
        lane = lanes[key]
        row_of = pack_rows(lane)
        height = (max(row_of.values()) + 1) * _ROW_H
        parts.append(f'<line class="sep" x1="0" x2="{label_w + _PLOT_W}" y1="{y}" y2="{y}"/>')
        parts.append(f'<text class="lane" x="4" y="{y + 11}"><title>{escape(fulls[key])}</title>'
                     f"{escape(_fit(shorts[key], label_w - 8))}</text>")
        for span in lane:
            start, end = max(span["start_ns"], t0), min(span["end_ns"], t1)
            left, top = x(start), y + 1 + row_of[span["id"]] * _ROW_H
            width = max(1.0, x(end) - left)
            clipped = span["start_ns"] < t0 or span["end_ns"] > t1
            css = f"span b-{_bucket_class(span)}" + (" error" if span["error"] else "") + (" clipped" if clipped else "")
            note = ""
            if clipped:
                note = "\n" + "; ".join(
                    text for text in (f"clipped: starts {(t0 - span['start_ns']) / NS_PER_S:.3f} s before the step"
                                      if span["start_ns"] < t0 else "",
                                      f"clipped: ends {(span['end_ns'] - t1) / NS_PER_S:.3f} s after the step"
                                      if span["end_ns"] > t1 else "") if text)
            parts.append(f'<rect class="{css}" x="{left:.2f}" y="{top}" width="{width:.2f}" height="{_ROW_H - 2}">'
                         f"<title>{_tooltip(span)}{escape(note)}</title></rect>")
            if span["start_ns"] < t0:
                parts.append(f'<path class="clip-mark" d="M{left + 5:.2f} {top} l-5 {(_ROW_H - 2) / 2} l5 '
                             f'{(_ROW_H - 2) / 2} z"/>')
            if span["end_ns"] > t1:
                parts.append(f'<path class="clip-mark" d="M{left + width - 5:.2f} {top} l5 {(_ROW_H - 2) / 2} l-5 '
                             f'{(_ROW_H - 2) / 2} z"/>')
            if width > 30:
                parts.append(f'<text x="{left + 2:.2f}" y="{top + 10}">{escape(_fit(span["name"], width - 4))}</text>')
        y += height + _LANE_GAP
    what = "step start" if window is not None else "start"
    axis = [f'<text x="4" y="12">{what} {escape(_started(t0))}</text>']
    step = _tick_step(span_ns)
    for tick in range(0, span_ns + 1, step):
        tx = x(t0 + tick)
        axis.append(f'<line class="tick" x1="{tx:.2f}" x2="{tx:.2f}" y1="{_AXIS_H - 4}" y2="{y}"/>')
        if tx + 60 < label_w + _PLOT_W + 10:  # the last label would run off the edge
            axis.append(f'<text x="{tx + 2:.2f}" y="28">+{tick / NS_PER_S:g} s</text>')
    width = label_w + _PLOT_W + 10
    return (f'<svg id="waterfall" width="{width}" height="{y}" viewBox="0 0 {width} {y}">'
            + "".join(axis + parts) + "</svg>")


def _fit(text: str, width: float) -> str:
    room = int(width / _CHAR_W)
    return text if len(text) <= room else text[: max(0, room - 1)] + "…"


# The page's script: tooltips and clicks on the heatmap, and a waterfall drawn from the spans the
# page carries. It reads only the JSON above it and builds elements with textContent (never
# innerHTML), so names from the input stay text.
_JS = r"""
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("lens-data").textContent);
  const probe = document.createElement("div");
  probe.innerHTML = "<svg></svg>";  // the SVG namespace, without a URL in the page
  const SVG = probe.firstChild.namespaceURI;
  const nR = D.ranks.length, nS = D.steps.length, N = nR * nS;
  const ROW_H = 14, GAP = 10, AXIS_H = 36, CHAR_W = 7;
  const CLASSES = D.buckets.concat(["unknown"]);
  const column = new Map(D.steps.map((s, i) => [s, i]));
  const windows = new Map(D.windows.map(([r, it, lo, hi]) => [r + ":" + it, [lo, hi]]));
  const hm = document.getElementById("heatmap"), tip = document.getElementById("hm-tip");
  const box = document.getElementById("waterfall-box"), note = document.getElementById("waterfall-note");
  let cells = null;
  const sec = (s) => s.toFixed(3) + " s", pct = (x) => (100 * x).toFixed(1) + "%";

  async function decode() {
    if (!N) return;
    const bin = Uint8Array.from(atob(D.cells), (c) => c.charCodeAt(0));
    const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("deflate"));
    cells = new Uint8Array(await new Response(stream).arrayBuffer());
    drawGoodput();
    document.body.dataset.cells = "ready";
  }
  function value(k, i, c) { return (cells[2 * k * N + i] * 256 + cells[(2 * k + 1) * N + i]) / 65535 * D.scale_s[c]; }
  function cell(r, c) {
    const i = r * nS + c;
    if (!cells[i] && !cells[N + i]) return null;
    return {wall: value(0, i, c), parts: D.buckets.map((b, k) => value(k + 1, i, c))};
  }
  function drawGoodput() {  // the goodput view, from the figures: red (0 %) to green (100 %) in 20 steps
    const canvas = document.getElementById("heatmap-goodput");
    if (!canvas) return;
    canvas.width = nS; canvas.height = nR;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(nS, nR);
    for (let r = 0; r < nR; r++) for (let c = 0; c < nS; c++) {
      const x = cell(r, c), o = 4 * (r * nS + c);
      let rgb = [235, 235, 235];
      if (x) {
        const t = Math.round((x.wall ? x.parts[0] / x.wall : 0) * 20) / 20;
        rgb = [200 + (40 - 200) * t, 30 + (150 - 30) * t, 30 + (70 - 30) * t].map(Math.round);
      }
      img.data.set([rgb[0], rgb[1], rgb[2], 255], o);
    }
    ctx.putImageData(img, 0, 0);
  }
  function describe(r, c) {
    const head = D.ranks[r] + " · step " + D.steps[c];
    const x = cell(r, c);
    if (!x) return head + "\nthis rank did not run this step";
    const median = D.median_s[c], done = x.parts.reduce((a, b) => a + b, 0);
    return [head,
      "step time " + sec(x.wall) + (median ? " (" + (x.wall / median).toFixed(2) + "× the step's median rank)" : ""),
      "goodput " + (x.wall ? pct(x.parts[0] / x.wall) : "-") + (D.coarse ? " (figures rounded to fit the page)" : ""),
      D.buckets.map((b, k) => b + " " + sec(x.parts[k])).join(", ") +
        ", unattributed " + sec(Math.max(0, x.wall - done)),
      "click: this step's waterfall"].join("\n");
  }
  function locate(ev) {
    const img = Array.from(hm.querySelectorAll("img, canvas")).find((i) => i.offsetWidth > 0);
    if (!img) return null;
    const b = img.getBoundingClientRect();
    const c = Math.floor((ev.clientX - b.left) / b.width * nS), r = Math.floor((ev.clientY - b.top) / b.height * nR);
    return c >= 0 && r >= 0 && c < nS && r < nR ? {r, c} : null;
  }
  if (hm) {
    hm.addEventListener("mousemove", (ev) => {
      const p = locate(ev);
      if (!p || !cells) { tip.hidden = true; return; }
      tip.textContent = describe(p.r, p.c);
      tip.hidden = false;
      const b = hm.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
      tip.style.left = (x + 16 + tip.offsetWidth > b.width ? Math.max(0, x - 16 - tip.offsetWidth) : x + 16) + "px";
      tip.style.top = (y + 16) + "px";
    });
    hm.addEventListener("mouseleave", () => { tip.hidden = true; });
    hm.addEventListener("click", (ev) => { const p = locate(ev); if (p) show(D.steps[p.c], p.r); });
  }
  document.querySelectorAll("tr.pick").forEach((tr) => tr.addEventListener("click", () => {
    const r = D.ranks.indexOf(tr.dataset.rank);
    if (r < 0) return;
    let c = column.get(Number(tr.dataset.step));
    if (c === undefined && cells) {  // its slowest step against the step's median rank
      let worst = -1;
      for (let k = 0; k < nS; k++) {
        const x = cell(r, k);
        if (x && D.median_s[k] && x.wall / D.median_s[k] > worst) { worst = x.wall / D.median_s[k]; c = k; }
      }
    }
    if (c !== undefined) show(D.steps[c], r);
  }));

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fit(text, width) {
    const room = Math.floor(width / CHAR_W);
    return text.length <= room ? text : text.slice(0, Math.max(0, room - 1)) + "…";
  }
  function tickStep(us) {
    const raw = us / 10, m = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map((k) => k * m).find((v) => v >= raw) || raw;
  }
  function plotWidth(labelW) { return Math.max(600, (box.clientWidth || 1400) - labelW - 14); }
  function rankNumber(r) { const m = /^rank (\d+)$/.exec(D.ranks[r]); return m ? Number(m[1]) : null; }

  function show(step, r) {
    const ranks = [];
    for (let k = Math.max(0, r - 2); k <= Math.min(nR - 1, r + 2); k++) ranks.push(k);
    const have = ranks.filter((k) => windows.has(k + ":" + step));
    const names = ranks.map((k) => D.ranks[k]).join(", ");
    const drawn = have.length ? spans(step, have, r) : buckets(step, ranks, r);
    box.replaceChildren(drawn);
    note.textContent = "Step " + step + ", " + (have.length ? have.map((k) => D.ranks[k]).join(", ") : names) +
      " (" + D.ranks[r] + " and its neighbours)" + (have.length ? "; the axis is the step: longer spans are " +
      "clipped (dashed, with a mark at the cut end)." : "");
    document.getElementById("waterfall-title").scrollIntoView();
  }

  function spans(step, ranks, focus) {
    let lo = Infinity, hi = -Infinity;
    for (const k of ranks) { const w = windows.get(k + ":" + step); lo = Math.min(lo, w[0]); hi = Math.max(hi, w[1]); }
    const span = Math.max(1, hi - lo), keep = new Set(ranks);
    const lanes = new Map();
    D.spans.forEach((s) => {
      if (!keep.has(D.lanes[s[0]][0]) || s[3] > hi || s[3] + s[4] < lo) return;
      if (!lanes.has(s[0])) lanes.set(s[0], []);
      lanes.get(s[0]).push(s);
    });
    const order = Array.from(lanes.keys()).sort((a, b) => a - b);
    const labelW = Math.min(420, Math.max(120, 12 + CHAR_W * Math.max(0, ...order.map((l) => D.lanes[l][2].length))));
    const PLOT_W = plotWidth(labelW);
    const x = (us) => labelW + (us - lo) / span * PLOT_W;
    const g = el("g");
    let y = AXIS_H;
    for (const l of order) {
      const list = lanes.get(l), rows = Array.from(new Set(list.map((s) => s[1]))).sort((a, b) => a - b);
      const dense = new Map(rows.map((row, i) => [row, i]));
      g.appendChild(el("line", {class: "sep", x1: 0, x2: labelW + PLOT_W, y1: y, y2: y}));
      const label = el("text", {class: "lane" + (D.lanes[l][0] === focus ? " focus" : ""), x: 4, y: y + 11},
                       fit(D.lanes[l][2], labelW - 8));
      label.appendChild(el("title", {}, D.lanes[l][1]));
      g.appendChild(label);
      for (const s of list) {
        const start = Math.max(s[3], lo), end = Math.min(s[3] + s[4], hi);
        const left = x(start), top = y + 1 + dense.get(s[1]) * ROW_H, width = Math.max(1, x(end) - left);
        const cut = [s[3] < lo ? "starts " + ((lo - s[3]) / 1e6).toFixed(3) + " s before the step" : "",
                     s[3] + s[4] > hi ? "ends " + ((s[3] + s[4] - hi) / 1e6).toFixed(3) + " s after the step" : ""]
          .filter(Boolean);
        const bucket = s[5] < 0 ? "umbrella" : CLASSES[s[5]];
        const rect = el("rect", {class: "span b-" + bucket + (s[7] ? " error" : "") + (cut.length ? " clipped" : ""),
                                 x: left.toFixed(2), y: top, width: width.toFixed(2), height: ROW_H - 2});
        rect.appendChild(el("title", {}, [D.names[s[2]] || "(unnamed)", "duration: " + (s[4] / 1e6).toFixed(6) + " s",
          "bucket: " + (s[5] < 0 ? "none (umbrella)" : CLASSES[s[5]]), "iteration: " + (s[6] === null ? "-" : s[6]),
          D.lanes[l][1]].concat(cut.length ? ["clipped: " + cut.join("; ")] : []).join("\n")));
        g.appendChild(rect);
        const half = (ROW_H - 2) / 2;
        if (s[3] < lo) g.appendChild(el("path", {class: "clip-mark", d: `M${left + 5} ${top} l-5 ${half} l5 ${half} z`}));
        if (s[3] + s[4] > hi) {
          g.appendChild(el("path", {class: "clip-mark", d: `M${left + width - 5} ${top} l5 ${half} l-5 ${half} z`}));
        }
        if (width > 30) g.appendChild(el("text", {x: (left + 2).toFixed(2), y: top + 10}, fit(D.names[s[2]], width - 4)));
      }
      y += rows.length * ROW_H + GAP;
    }
    const width = labelW + PLOT_W + 10, svg = el("svg", {id: "waterfall", width, height: y, viewBox: `0 0 ${width} ${y}`});
    svg.appendChild(el("text", {x: 4, y: 12}, "step " + step + " start"));
    const every = tickStep(span);
    for (let t = 0; t <= span; t += every) {
      const tx = x(lo + t);
      svg.appendChild(el("line", {class: "tick", x1: tx, x2: tx, y1: AXIS_H - 4, y2: y}));
      if (tx + 60 < width && t > 0) svg.appendChild(el("text", {x: tx + 2, y: 28}, "+" + +(t / 1e6).toPrecision(6) + " s"));
    }
    svg.appendChild(g);
    return svg;
  }

  function buckets(step, ranks, focus) {
    const c = column.get(step), wrap = document.createElement("div"), p = document.createElement("p");
    const numbers = ranks.map(rankNumber).filter((n) => n !== null);
    p.textContent = "The spans of step " + step + " for these ranks are not in this page (it carries " +
      (D.span_steps ? "step " + D.span_steps.join(", ") : "the whole run") + " for " + "the ranks it could hold). " +
      "Their bucket split is below; to draw their spans: lens report PATH... --html OUT --step " + step +
      (numbers.length ? " --ranks " + Math.min(...numbers) + "-" + Math.max(...numbers) : "");
    wrap.appendChild(p);
    if (c === undefined || !cells) return wrap;
    const rows = ranks.map((k) => [k, cell(k, c)]), longest = Math.max(1e-9, ...rows.map(([, x]) => x ? x.wall : 0));
    const labelW = 120, PLOT_W = plotWidth(labelW);
    const svg = el("svg", {id: "waterfall", width: labelW + PLOT_W + 10, height: AXIS_H + rows.length * 20});
    rows.forEach(([k, x], i) => {
      const y = AXIS_H + i * 20;
      svg.appendChild(el("text", {class: "lane" + (k === focus ? " focus" : ""), x: 4, y: y + 11}, fit(D.ranks[k], labelW - 8)));
      if (!x) return;
      let left = labelW;
      const parts = x.parts.concat([Math.max(0, x.wall - x.parts.reduce((a, b) => a + b, 0))]);
      parts.forEach((v, b) => {
        const w = v / longest * PLOT_W, name = b < D.buckets.length ? D.buckets[b] : "unattributed";
        if (w <= 0) return;
        const rect = el("rect", {class: "span b-" + name, x: left.toFixed(2), y, width: w.toFixed(2), height: 14});
        rect.appendChild(el("title", {}, D.ranks[k] + " · step " + step + "\n" + name + " " + sec(v)));
        svg.appendChild(rect);
        left += w;
      });
    });
    svg.appendChild(el("text", {x: labelW, y: 12}, "bucket seconds of step " + step + ", longest " + sec(longest)));
    wrap.appendChild(svg);
    return wrap;
  }

  decode().catch((e) => { document.body.dataset.cells = "failed"; console.warn("lens: cannot decode the heatmap figures", e); });
})();
"""
