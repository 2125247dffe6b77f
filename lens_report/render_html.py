"""Self-contained HTML: a rank × step heatmap, bucket totals, stragglers, loss, and a waterfall of selected steps and ranks."""

from __future__ import annotations

import base64
import bisect
import json
import math
import re
import struct
import zlib
from array import array
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from html import escape as _html_escape
from importlib import resources
from typing import Any

from .aggregates import SLOWEST_STEPS
from .model import BUCKETS, NS_PER_S, Report
from .render_text import (
    SLOW_STEP_HEADER,
    slow_step_rows,
    terminal_safe,
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

__all__ = ["CELL_BUDGET", "CUT_MARK", "DEVICE_LANE", "HEATMAP_WIDTH", "MAX_WATERFALL_SPANS", "NAME_CHARS",
           "PAGE_BUDGET", "PAGE_LIMIT", "PAGE_ROWS", "SMALL_RUN_SPANS", "cell_data", "device_lane_spans", "pack_rows",
           "png", "render_html"]

MAX_WATERFALL_SPANS = 20_000
"""The most spans one waterfall draws; narrow it with ``--step`` and ``--ranks``."""

SMALL_RUN_SPANS = 5_000
"""A run with at most this many spans gets a waterfall of the whole run by default."""

CELL_BUDGET = 3_000_000
"""Bytes the rank × step figures may take in the page (past it, they lose low-order bits, from wasted up)."""

PAGE_BUDGET = 4_600_000
"""Bytes the heatmap, its figures and the spans the script can draw may take together (the page stays under 5 MB)."""

PAGE_LIMIT = 5_000_000
"""Bytes the page never exceeds, counted on the text it writes (spans drop out of the script's data until it fits)."""

NAME_CHARS = 120
"""Characters of a span name (or any text from the input) the page shows; a longer one ends in :data:`CUT_MARK`."""

CUT_MARK = "…[cut]"
"""What ends a name the page shows cut (the text and JSON reports keep it whole)."""

PAGE_ROWS = 100
"""Violations and problems the page lists (all are counted; the JSON lists up to --max-violations)."""

HEATMAP_WIDTH = 930
"""Pixels the heatmap (rank labels and grid) takes at most: it fits a 1,024-pixel-wide window."""

_DEFAULT_RANKS = 16
_LABEL_MAX = 420  # lane labels longer than this end in "…" (the whole label is the tooltip)
_PLOT_W = 1100  # with the labels, the waterfall fits a 1,400 px window without scrolling
_ROW_H = 14
_LANE_GAP = 10
_AXIS_H = 36  # two lines: when the axis starts, then the tick labels
_CHAR_W = 7.0  # a generous width of an 11 px system-ui character: labels must fit, not overflow


def _cut(text: Any) -> str:
    """A name or other text from the input cut to :data:`NAME_CHARS`, ending in :data:`CUT_MARK` when it was longer."""
    text = "" if text is None else str(text)
    return text[:NAME_CHARS] + CUT_MARK if len(text) > NAME_CHARS else text


def _page_text(text: Any) -> str:
    """Text from the input as the page's script shows it: cut (:func:`_cut`), and control and bidi
    characters (an RLO, U+202E, would reverse what follows it) written as visible escapes."""
    return terminal_safe(_cut(text))


def _escape(text: Any) -> str:
    """``text`` for HTML: control and bidi characters written as visible escapes (as the text report
    writes them), then ``&``, ``<``, ``>`` and quotes escaped."""
    return _html_escape("\n".join(map(terminal_safe, str(text).split("\n"))))  # a line break is safe in HTML


def _page_file(name: str) -> str:
    """The text of ``lens_report/page/<name>``, a file shipped with the package (wheel and sdist)."""
    return resources.files(__package__).joinpath("page", name).read_bytes().decode("utf-8")


_CSS = _page_file("page.css")
# The page's script: tooltips and clicks on the heatmap, and a waterfall drawn from the spans the
# page carries. It reads only the JSON above it and builds elements with textContent (never
# innerHTML), so names from the input stay text.
_JS = _page_file("page.js")


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


def _heatmaps(report: Report, per_column: int = 1) -> tuple[bytes, list[int]]:
    """(busy-time PNG, the first iteration of each column) for the rank × step grid: a pixel per
    rank and ``per_column`` consecutive steps (the slowest of them: a straggler never averages away).

    Busy time (the step's wall less the rank's waiting) is coloured by its ratio to the step's
    median rank (white at the median, red at twice it or more, blue when faster): in a
    synchronous job every rank's wall time is the same, its busy time is not. The goodput view
    is drawn by the page's script from the figures it carries.
    """
    rs = report.rank_steps
    iterations = sorted(set(rs.iterations))
    column = {it: i // per_column for i, it in enumerate(iterations)}
    width, height = max(1, math.ceil(len(iterations) / per_column)), max(1, len(rs.rank_labels))
    worst = [array("f", [-1.0]) * width for _ in range(height)]
    medians = report.aggregates.busy_median_ns
    for it, rank, busy in zip(rs.iterations, rs.ranks, rs.busy_ns):
        median = medians.get(it) or busy or 1
        c = column[it]
        worst[rank][c] = max(worst[rank][c], busy / median)
    rows = []
    for ratios in worst:
        row = bytearray(_MISSING * width)
        for x, ratio in enumerate(ratios):
            if ratio >= 0:
                row[3 * x:3 * x + 3] = _SLOWER[_level(ratio - 1)] if ratio >= 1 else _FASTER[_level((1 - ratio) * 2)]
        rows.append(bytes(row))
    return png(width, height, rows), iterations[::per_column]


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
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_escape(_fit(_short_rank(labels[i]), left - 30))}</text>')
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
        "ranks": [terminal_safe(label) for label in rs.rank_labels], "steps": iterations, "buckets": list(BUCKETS),
        "scale_s": [v / NS_PER_S for v in scale], "median_s": [medians.get(it, 0) / NS_PER_S for it in iterations],
        "cells": base64.b64encode(packed).decode("ascii"), "coarse": coarse,
    }


_HM_TOP = 4
_PAGE_CELL_BYTES = 32  # a cell's figures for the page (10 planes, packed) and its image row (3), each copied once


def _heatmap_section(report: Report) -> list[str]:
    if not len(report.rank_steps):
        return ["<p>No rank × step figures: no step was found.</p>"]
    labels = report.rank_steps.rank_labels
    ranks = len(labels)
    left = int(34 + _CHAR_W * min(24, max(len(_short_rank(label)) for label in labels)))
    # the grid fits a 1,024-pixel window: more steps than pixels share a column (its slowest shows)
    room = max(100, HEATMAP_WIDTH - left)
    steps = len(set(report.rank_steps.iterations))
    per_column = max(1, math.ceil(steps / room))
    step_png, iterations = _heatmaps(report, per_column)
    cell_w = max(1, min(24, room // max(1, len(iterations))))
    cell_h = max(1, min(24, 600 // max(1, ranks)))
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
        f'<canvas class="goodput" id="heatmap-goodput" width="{steps}" height="{ranks}" '
        f'style="left: {left}px; top: {_HM_TOP}px; width: {cell_w * len(iterations)}px; height: {cell_h * ranks}px">'
        "goodput per rank and step</canvas>",
        '<div id="hm-tip" class="tip" hidden></div>',
        "</div></div>",
        '<p class="axis">' + (f"each column: {per_column} steps, the slowest shown; " if per_column > 1 else "")
        + 'busy time (step less waiting) against the step\'s median rank: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(70,110,200), rgb(250,250,250), '
        'rgb(200,30,30))"></span> faster · median · 2× or slower; goodput: '
        '<span class="scale" style="background: linear-gradient(to right, rgb(200,30,30), rgb(40,150,70))"></span>'
        " 0 … 100 %; grey: the rank did not run the step. Hover a cell for its figures; click it for that "
        "step's waterfall of the rank and its neighbours.</p>",
    ]


def _table(header: list[str], rows: list[list[str]], *, last_row_class: str = "") -> str:
    head = "".join(f"<th>{_escape(cell)}</th>" for cell in header)
    lines = [f"<table><tr>{head}</tr>"]
    for i, row in enumerate(rows):
        css = f' class="{last_row_class}"' if last_row_class and i == len(rows) - 1 else ""
        lines.append(f"<tr{css}>" + "".join(f"<td>{_escape(_cut(cell))}</td>" for cell in row) + "</tr>")
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
                  f'title="{_escape(BADPUT_LABELS.get(name, name))}: {_pct(ns / badput.total_ns)}"></span>'
                  for name, ns in parts if ns > 0)
    clock = clock_line(report)
    return [f'<p class="lead">{_escape(badput_line(report))}</p>', f'<div class="badput">{bar}</div>',
            *([f'<p class="clock">{_escape(clock)}</p>'] if clock else [])]


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
        return ["<p>No straggler: no rank's busy time stood apart from its peers' or from its own.</p>"
                if report.multi_rank else "<p>No straggler: one rank.</p>"]
    worst = {s.rank: s.since_step for s in report.aggregates.top(top)}
    head = "".join(f"<th>{_escape(cell)}</th>" for cell in STRAGGLER_HEADER)
    body = []
    for row in rows:
        label = row[0]
        step = worst[label] if worst[label] is not None else ""
        body.append(f'<tr class="pick" data-rank="{_escape(label)}" data-step="{step}">'
                    + "".join(f"<td>{_escape(cell)}</td>" for cell in row) + "</tr>")
    return ["<p>Busy time: the step's wall time less the rank's waiting. Relative: the median over its steps of "
            "the rank's busy time over the step's median rank (a rank always slow). Individual: after a sustained "
            "change in its own busy time, its median after over before (a rank that became slow), since that step. "
            "Click a row for its waterfall.</p>",
            f"<table><tr>{head}</tr>{''.join(body)}</table>"]


def _rank_section(report: Report, ranks: frozenset[int] | None, steps: frozenset[int] | None) -> list[str]:
    if not ranks or not report.multi_rank:
        return []
    labels = frozenset(label for label in report.rank_steps.rank_labels
                       if label.startswith("rank ") and label[5:].isdigit() and int(label[5:]) in ranks)
    per_rank, cells = rank_detail(report, labels, steps)
    return ["<h2>Rank detail</h2>", _table(RANK_HEADER, per_rank),
            f"<details><summary>{len(cells)} rank × step rows</summary>{_table(RANK_STEP_HEADER, cells)}</details>"]


def _slow_steps(report: Report) -> list[str]:
    """The slowest steps, each row opening that step's waterfall of its busiest rank (or its first, on a tie)."""
    rows = slow_step_rows(report, SLOWEST_STEPS)
    if not rows:
        return ["<p>No step took longer than the median step.</p>"] if report.steps else []
    head = "".join(f"<th>{_escape(cell)}</th>" for cell in SLOW_STEP_HEADER)
    body = []
    for row, step in zip(rows, report.aggregates.slowest_steps):
        rank = step.busiest or _first_rank(report)
        body.append(f'<tr class="pick" data-rank="{_escape(rank)}" data-step="{step.iteration}">'
                    + "".join(f"<td>{_escape(cell)}</td>" for cell in row) + "</tr>")
    return ["<p>A step's time is its longest rank's; what made it slow: its busiest rank when it stood out, and the "
            "bucket that grew most against a typical step. Click a row for its waterfall.</p>",
            f"<table><tr>{head}</tr>{''.join(body)}</table>"]


def _first_rank(report: Report) -> str:
    labels = report.rank_steps.rank_labels
    return labels[0] if labels else (report.ranks[0].rank if report.ranks else "")


def _pointed_cells(report: Report, top: int) -> list[tuple[int, str]]:
    """The (step, rank) cells the page's rows point at: each straggler at the step it began and each
    slowest step at its busiest rank, with two neighbours each side (the waterfall a click draws)."""
    labels = report.rank_steps.rank_labels
    index = {label: i for i, label in enumerate(labels)}
    wanted = [(s.since_step, s.rank) for s in report.aggregates.top(top)]
    wanted += [(s.iteration, s.busiest or _first_rank(report)) for s in report.aggregates.slowest_steps[:SLOWEST_STEPS]]
    cells = []
    for step, label in wanted:
        if label not in index:
            continue
        at = index[label]
        cells += [(step, labels[k]) for k in range(max(0, at - 2), min(len(labels), at + 3))]
    return list(dict.fromkeys(cells))


def _merge(*selections: Any) -> list[dict[str, Any]]:
    """The spans of ``selections`` in order of priority, each once."""
    seen: set[int] = set()
    out = []
    for selection in selections:
        for span in selection.spans:
            if span["id"] not in seen:
                seen.add(span["id"])
                out.append(span)
    return out


def render_html(report: Report, store: Any, *, steps: frozenset[int] | None = None,
                ranks: frozenset[int] | None = None, top: int = 10, rerun: str | None = None) -> str:
    """One self-contained HTML page (inline CSS, images, SVG and script; nothing fetched), at most
    :data:`PAGE_LIMIT` bytes whatever the input.

    It leads with goodput and its badput split, the stragglers and the slowest steps (a click on
    a row draws its waterfall from spans the page carries); then the rank × step heatmap (step
    time or goodput; hover a cell for its figures, click it for that step's waterfall of the
    rank and its neighbours), scaled to fit a 1,024-pixel window; then a waterfall of the spans
    of the selected ``steps`` and ``ranks`` (numbers) in ``store``, which must be the store
    ``report`` was built from, just after :func:`~lens_report.build_report`. By default the
    waterfall shows the whole run when it is small, else the slowest step, for up to 16 ranks
    (stragglers first). The spans of the straggler and slow-step rows come first in the page,
    then the chosen steps for every rank, as many as the budget holds, counted in the bytes
    written; a click on what is not carried says the command that draws it: ``rerun`` (the
    command that made this page, default: ``lens report`` over the files read). Text from the
    input shows control and bidi characters escaped and is cut past :data:`NAME_CHARS`.
    """
    from .rollup import CELL_BYTES
    from .waterfall import cell_spans, waterfall_spans

    # the page's figures are held beside the engine too (see TraceStore.hold_outside)
    store.hold_outside(len(report.rank_steps) * (CELL_BYTES + _PAGE_CELL_BYTES))
    name_chars = NAME_CHARS + 1  # one more: a name that long was cut
    selection = waterfall_spans(store, report, steps=steps, ranks=ranks, small_run=SMALL_RUN_SPANS,
                                default_ranks=_DEFAULT_RANKS, limit=MAX_WATERFALL_SPANS, name_chars=name_chars)
    heatmap = _heatmap_section(report)
    cells = cell_data(report) if len(report.rank_steps) else {"ranks": [], "steps": [], "buckets": list(BUCKETS),
                                                                "scale_s": [], "median_s": [], "cells": ""}
    fixed = len(cells["cells"]) + sum(map(len, heatmap)) + len(_CSS) + len(_JS)
    # about 70 bytes a span in the script's data: how many to ask the engine for (the bytes decide)
    budget = int(min(MAX_WATERFALL_SPANS, max(2_000, (PAGE_BUDGET - fixed) / 80)))
    pointed = cell_spans(store, report, _pointed_cells(report, top), limit=budget, name_chars=name_chars) \
        if report.multi_rank and len(report.rank_steps) else None
    everyone = None
    if ranks is None and len(report.rank_steps.rank_labels) > len(selection.ranks):
        # every rank of the chosen steps, as many as the span budget holds, for clicks on the heatmap
        per_cell = report.span_count / max(1, len(report.rank_steps))
        wide = max(_DEFAULT_RANKS, int(budget / max(1.0, per_cell * len(selection.steps or [1]))))
        everyone = waterfall_spans(store, report, steps=None if selection.steps is None else frozenset(selection.steps),
                                   ranks=None, small_run=SMALL_RUN_SPANS, default_ranks=wide, limit=budget,
                                   name_chars=name_chars)
    step_re = re.compile(report.step_pattern)
    windows = _windows(selection.spans, selection.steps, step_re)
    rerun = rerun or _rerun(report)
    # the first waterfall: within a third of what the budget leaves, else fewer spans, said so
    drawn, note = selection.spans, selection.describe()
    svg = _waterfall(drawn, selection.rank_order, windows)
    while len(svg) > (PAGE_BUDGET - fixed) // 3 and len(drawn) > 1:
        drawn = drawn[: len(drawn) // 2]
        svg = _waterfall(drawn, selection.rank_order, windows)
    if len(drawn) < len(selection.spans):
        note += (f" The page draws the first {len(drawn):,} of them (its size budget); to draw the rest: "
                 f"{rerun} --step N --ranks LIST.")
    base = {**cells, "initial": {"steps": selection.steps, "ranks": selection.ranks}, "rerun": rerun}
    body = [
        "<h1>lens report</h1>",
        f"<p>Run {_escape(report.run_id or '(no run id)')}: {len(report.ranks)} rank(s), {report.span_count} spans "
        f"in {report.trace_count} traces from {len(report.files)} files; {report.orphan_count} orphaned, "
        f"{report.duplicate_count} duplicates dropped, {report.error_count} with error status. "
        f"{_escape(step_method_summary(report))}.</p>",
        "<h2>Goodput</h2>", *_badput_section(report),
        "<h2>Stragglers</h2>", *_stragglers(report, top),
        *(["<h2>Slowest steps</h2>", *_slow_steps(report)] if report.multi_rank else []),
        "<h2>Rank × step</h2>", *heatmap,
        '<h2 id="waterfall-title">Waterfall</h2>', f'<p id="waterfall-note">{_escape(note)}</p>',
        _legend(),
        f'<div class="waterfall" id="waterfall-box">{svg}</div>',
        "<h2>Goodput buckets</h2>", *_steps_section(report),
        *_rank_section(report, ranks, steps),
        "<h2>Lost telemetry</h2>", *_loss(report),
        "<h2>Top spans by total time</h2>",
        _table(["name", "count", "total s", "mean s"],
               [[t.name, str(t.count), _s(t.total_ns), _s(t.mean_ns)] for t in report.top_spans]),
        f"<h2>Violations ({report.violation_count})</h2>",
        _table(["rule", "span", "rank", "trace id", "span id", "file", "reason"],
               [[v.rule, v.span_name, v.rank, v.trace_id, v.span_id, f"{v.file}:{v.line}" if v.line else v.file,
                 v.reason] for v in report.violations[:PAGE_ROWS]]),
    ]
    if report.violation_count > min(len(report.violations), PAGE_ROWS):
        body.append(f"<p>{report.violation_count - min(len(report.violations), PAGE_ROWS)} more not listed "
                    "(the JSON lists up to --max-violations).</p>")
    body.append(f"<h2>Problems reading input ({len(report.problems)})</h2>")
    body.append(_table(["file", "line", "problem"],
                       [[p.file, str(p.line), p.message] for p in report.problems[:PAGE_ROWS]]))
    if len(report.problems) > PAGE_ROWS:
        body.append(f"<p>{len(report.problems) - PAGE_ROWS} more in the JSON.</p>")
    head = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>lens report</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body))
    tail = f"\n<script>{_JS}</script>\n</body></html>\n"
    # the script's spans: the rows' first, then the first waterfall's, then every rank's of its steps,
    # as many as the page's bytes allow (counted on what is written: long names made 88 MB of 5)
    spans = _merge(*(x for x in (pointed, selection, everyone) if x is not None))
    room = PAGE_LIMIT - len(head.encode()) - len(tail.encode())
    while True:
        data = {**base, **_span_data(spans, report, step_re, selection.steps)}
        script = f'\n<script type="application/json" id="lens-data">{_script_json(data)}</script>'
        size = len(script.encode())
        if size <= room or not spans:
            return head + script + tail
        spans = spans[: int(len(spans) * room / size * 0.95)]


def _rerun(report: Report) -> str:
    """The command that makes this page again, with the files it read (their folder when many)."""
    import os
    import shlex

    files = list(report.files)
    if len(files) > 4:
        try:
            files = [os.path.commonpath(files)]
        except ValueError:
            files = files[:4]
    run = f" --run {shlex.quote(report.run_id)}" if report.run_id else ""
    attempt = f" --attempt {report.attempt}" if report.attempt else ""
    return "lens report " + " ".join(shlex.quote(f) for f in files) + run + attempt + " --html report.html"


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


def _span_data(spans: list[dict[str, Any]], report: Report, step_re: re.Pattern[str],
               span_steps: list[int] | None) -> dict[str, Any]:
    """The spans the page's script can draw: lanes (rank index, labels), names, and per span
    [lane, row, name, start µs, duration µs, bucket (0-3, 4 unknown, -1 none), iteration, error];
    step windows per (rank index, iteration). Times are µs after ``t0_ns``; texts as the page shows them."""
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
        lane_rows.append([order.get(rank_label, -1), _page_text(full),
                          _page_text((f"{rank_label} · {thread_name}" if thread else owner if device else full) + device)])
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
    return {"lanes": lane_rows, "names": [_page_text(name) for name in names], "spans": out, "t0_ns": t0,
            "windows": [[rank, it, lo, hi] for (rank, it), (lo, hi) in sorted(windows.items())],
            "span_steps": span_steps}


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
        _cut(span["name"]) or "(unnamed)",
        f"duration: {(span['end_ns'] - span['start_ns']) / NS_PER_S:.6f} s"
        + (f" on the device (host: {span['host_ns'] / NS_PER_S:.6f} s)" if span.get("device")
           else f" on the host (device: {(span['dev_end'] - span['dev_start']) / NS_PER_S:.6f} s)"
           if span.get("dev_start") is not None else ""),
        f"bucket: {bucket}",
        f"iteration: {'-' if span['iteration'] is None else span['iteration']}",
        _cut(f"{span['rank_label']} · {span['process']}" + (f", thread {span['thread_label']}"
                                                               if span["thread_label"] else "")),
        f"trace {span['trace']} span {span['span']}",
        f"kind {span['kind']}" + (", ERROR" if span["error"] else ""),
    ]
    return _escape("\n".join(lines))


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
        fulls[key] = _cut(owner + (f" / thread {thread}" if thread else "")) + device
        # lead with what tells lanes of one process apart: the rank and the thread's name
        shorts[key] = (_cut(f"{rank_label} · {thread_name}") if thread else _cut(owner) if device
                       else fulls[key]) + device
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
        parts.append(f'<text class="lane" x="4" y="{y + 11}"><title>{_escape(fulls[key])}</title>'
                     f"{_escape(_fit(shorts[key], label_w - 8))}</text>")
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
                         f"<title>{_tooltip(span)}{_escape(note)}</title></rect>")
            if span["start_ns"] < t0:
                parts.append(f'<path class="clip-mark" d="M{left + 5:.2f} {top} l-5 {(_ROW_H - 2) / 2} l5 '
                             f'{(_ROW_H - 2) / 2} z"/>')
            if span["end_ns"] > t1:
                parts.append(f'<path class="clip-mark" d="M{left + width - 5:.2f} {top} l5 {(_ROW_H - 2) / 2} l-5 '
                             f'{(_ROW_H - 2) / 2} z"/>')
            if width > 30:
                parts.append(f'<text x="{left + 2:.2f}" y="{top + 10}">{_escape(_fit(_cut(span["name"]), width - 4))}</text>')
        y += height + _LANE_GAP
    what = "step start" if window is not None else "start"
    axis = [f'<text x="4" y="12">{what} {_escape(_started(t0))}</text>']
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


