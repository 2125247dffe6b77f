"""The spans a waterfall draws: chosen by steps and ranks or by (step, rank) cells, read in one query."""

from __future__ import annotations

from typing import Any

from .store import Store
from .model import Report
from .clock import device_times
from .rollup import is_well_timed

__all__ = ["WaterfallSelection", "cell_spans", "choose_spans", "waterfall_spans"]


class WaterfallSelection:
    """The spans a waterfall draws (dicts: id, pid, name, times, bucket, rank, process, thread, ...)."""

    def __init__(self, spans: list[dict[str, Any]], rank_order: dict[str, int], steps: list[int] | None,
                 ranks: list[str], total: int) -> None:
        self.spans = spans
        self.rank_order = rank_order
        self.steps = steps
        self.ranks = ranks
        self.total = total

    def describe(self) -> str:
        """One sentence: which steps and ranks are drawn, and what was left out."""
        where = "the whole run" if self.steps is None else (
            f"step{'s' if len(self.steps) != 1 else ''} {', '.join(map(str, self.steps))}" if self.steps
            else "no step (none of the steps asked for was found)")
        ranks = ", ".join(self.ranks[:20]) + (f" and {len(self.ranks) - 20} more" if len(self.ranks) > 20 else "")
        text = f"{len(self.spans)} spans of {where} on {ranks or 'no rank'}"
        if self.total > len(self.spans):
            text += f"; {self.total - len(self.spans)} more not drawn (choose with --step and --ranks)"
        return text + "."


_WATERFALL_KEPT = ("k.id AS id, k.start_ns AS start_ns, k.end_ns AS end_ns, k.bucket AS bucket, k.iteration AS iteration, "
                   "k.rank_label AS rank_label, k.error AS error, k.dev_start AS dev_start, k.dev_end AS dev_end")
"""What ``wf_ids`` keeps of each span of ``k`` a waterfall draws (its device times for the device lane)."""


_OVERLAPS = "{k}.start_ns < w.hi AND {k}.end_ns > w.lo"
"""SQL (``.format(k=...)``): whether the span ``k`` overlaps the window ``w`` (``lo``, ``hi``)."""

_DRAWN = "wf_drawn"
"""The working table of the spans a view may draw, read from the whole run
(:meth:`~lens_report.store.Store.create_drawn`) when the walk's tables hold a part of it only."""

_DRAWN_K = (f"(SELECT rowid AS id, start_ns, end_ns, bucket, iteration, rank_label, error, {device_times('d')}, "
            f"coalesce({is_well_timed('d')}, false) AS ok FROM {_DRAWN} d)")
"""SQL: what a view reads of ``k`` (a span's own fields, as ``k`` has them), for the spans of :data:`_DRAWN`."""


def _spans_of(db: Store, join: str, where: str, windows: str | None = None) -> str:
    """SQL: the relation a view reads as ``k``: ``k`` itself when the walk's tables hold the whole run, else the
    spans of the whole run (``s``) joined with ``join`` that satisfy ``where``, put in :data:`_DRAWN`: a report
    walked in parts keeps only the last part's ``k``, and a view needs only each span's own fields and its
    parent's id, not the walk (the memory of the spans drawn, not of the run). ``windows``: the table of the
    view's windows (``lo``, ``hi``), whose bounds are tested first, on the span alone: a condition the engine
    tests as it reads, before the join (every rank's spans of one step joined with its window took 10 s at 10M)."""
    if db.partial_walk is None:
        return "k"
    if windows is not None:
        lo, hi = db.rows(f"SELECT min(lo), max(hi) FROM {windows}")[0]
        where = f"s.start_ns < {int(hi or 0)} AND s.end_ns > {int(lo or 0)} AND {where}"
    cond = f" AND ({db.partial_walk})" if db.partial_walk else ""
    db.create_drawn(_DRAWN, join, where + cond)
    return _DRAWN_K


def choose_spans(store: Store, report: Report, *, steps: frozenset[int] | None, ranks: frozenset[int] | None,
                 small_run: int, default_ranks: int) -> tuple[dict[str, int], list[int] | None, list[str]]:
    """Put the ids of the spans of the chosen steps and ranks in the table ``wf_ids`` (id,
    start_ns, end_ns, bucket, iteration, rank_label, error, dev_start, dev_end: what the waterfall draws of ``k``); defaults as :func:`waterfall_spans` says. Returns (rank label -> position,
    the steps chosen or None for the whole run, the rank labels chosen)."""
    labels = list(report.rank_steps.rank_labels) or [r.rank for r in report.ranks]
    order = {label: i for i, label in enumerate(labels)}
    if steps is None and report.span_count > small_run and report.steps:
        slowest = max(report.steps, key=lambda s: (s.wall_max_ns, -s.iteration))
        steps = frozenset({slowest.iteration})
    chosen_steps = None if steps is None else sorted(s.iteration for s in report.steps if s.iteration in steps)
    if ranks is not None:
        chosen = [label for label in labels if label.startswith("rank ") and int(label[5:]) in ranks]
    else:
        wanted = [s.slowest_rank for s in report.steps if chosen_steps is None or s.iteration in chosen_steps]
        chosen = list(dict.fromkeys(w for w in wanted if w))[: default_ranks // 2]
        chosen += [label for label in labels if label not in chosen][: default_ranks - len(chosen)]
        chosen.sort(key=lambda label: order[label])
    db = store
    db.create_columns("wf_ranks", "rank_label VARCHAR", [[label] for label in chosen])
    chosen_ranks = "k.ok AND k.rank_label IN (SELECT rank_label FROM wf_ranks)"
    # what the waterfall draws of k comes along: no second scan of every span to fetch it
    kept = _WATERFALL_KEPT
    if chosen_steps is None:
        k = _spans_of(db, "", "s.rank_label IN (SELECT rank_label FROM wf_ranks)")
        select = f"SELECT {kept} FROM {k} k WHERE {chosen_ranks}"
    else:
        db.create_columns("wf_steps", "iteration BIGINT", [[it] for it in chosen_steps])
        # a step's window: from its anchor's start to the last end of its candidates (a step span's own times)
        db.create("wf_windows", """
            SELECT s.iteration AS iteration, min(s.start_ns) AS lo, max(s.start_ns + s.wall_ns) AS hi
            FROM steps s JOIN wf_steps w ON w.iteration = s.iteration JOIN wf_ranks r ON r.rank_label = s.rank_label
            GROUP BY s.iteration
        """)
        k = _spans_of(db, "CROSS JOIN wf_windows w",
                      f"{_OVERLAPS.format(k='s')} AND s.rank_label IN (SELECT rank_label FROM wf_ranks)", "wf_windows")
        # the spans that overlap a chosen step's window (few windows: a join, not a lookup per span)
        select = (f"SELECT DISTINCT {kept} FROM {k} k CROSS JOIN wf_windows w "
                  f"WHERE {chosen_ranks} AND {_OVERLAPS.format(k='k')}")
    # the chosen ids first, in a small table: joined to the spans by rowid, the details come
    # from the few rows drawn, not from a scan of every span
    db.create("wf_ids", select)
    return order, chosen_steps, chosen


def waterfall_spans(store: Store, report: Report, *, steps: frozenset[int] | None, ranks: frozenset[int] | None,
                    small_run: int, default_ranks: int, limit: int,
                    name_chars: int | None = None) -> WaterfallSelection:
    """The spans of the chosen steps (by ``rl.iteration`` of their step spans) and ranks (numbers).

    Defaults: the whole run when it has at most ``small_run`` spans, else the slowest step;
    up to ``default_ranks`` ranks, the stragglers of the chosen steps first. Call right after
    :func:`build_report` on the same store. ``name_chars`` reads at most that many characters
    of each name (a page cuts longer ones; the engine, not Python, holds the rest).
    """
    order, chosen_steps, chosen = choose_spans(store, report, steps=steps, ranks=ranks, small_run=small_run,
                                               default_ranks=default_ranks)
    total = store.value("SELECT count(*) FROM wf_ids")
    return WaterfallSelection(_chosen_spans(store, limit, name_chars), order, chosen_steps, chosen, total)


def cell_spans(store: Store, report: Report, cells: list[tuple[int, str]], *, limit: int,
               name_chars: int | None = None) -> WaterfallSelection:
    """The spans of each (iteration, rank label) of ``cells``: the rank's spans that overlap its
    own step window (a straggler at the step it began, a slow step's busiest rank), in one
    query whatever the number of cells. Call right after :func:`build_report` on the same store."""
    db = store
    labels = list(report.rank_steps.rank_labels) or [r.rank for r in report.ranks]
    db.create_columns("wf_cells", "iteration BIGINT, rank_label VARCHAR",
                      [[int(it), label] for it, label in dict.fromkeys(cells)])
    db.create("wf_cell_windows", """
        SELECT s.iteration AS iteration, s.rank_label AS rank_label, min(s.start_ns) AS lo,
               max(s.start_ns + s.wall_ns) AS hi
        FROM steps s JOIN wf_cells w ON w.iteration = s.iteration AND w.rank_label = s.rank_label
        GROUP BY s.iteration, s.rank_label
    """)
    k = _spans_of(db, "JOIN wf_cell_windows w ON w.rank_label = s.rank_label", _OVERLAPS.format(k="s"),
                  "wf_cell_windows")
    db.create("wf_ids", f"""
        SELECT DISTINCT {_WATERFALL_KEPT} FROM {k} k JOIN wf_cell_windows w ON w.rank_label = k.rank_label
        WHERE k.ok AND {_OVERLAPS.format(k='k')}
    """)
    total = db.value("SELECT count(*) FROM wf_ids")
    order = {label: i for i, label in enumerate(labels)}
    steps = sorted({it for it, _ in cells})
    ranks = sorted({label for _, label in cells}, key=lambda label: order.get(label, len(order)))
    return WaterfallSelection(_chosen_spans(db, limit, name_chars), order, steps, ranks, total)


def _chosen_spans(db: Store, limit: int, name_chars: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` spans of ``wf_ids`` by start, with what a waterfall draws of each."""
    d = db.dialect
    name = "s.name" if name_chars is None else d.prefix("s.name", name_chars)
    # a span's details and its parent's id: from the walk (``spans``, ``anc``), else where the view read them
    table, parent, parents = (_DRAWN, "s.pid", "") if db.partial_walk is not None else (
        "spans", "p.pid", "LEFT JOIN (SELECT id, pid FROM anc WHERE id IN (SELECT id FROM chosen)) p ON p.id = c.id")
    spans = []
    for columns, rows in db.stream(f"""
        WITH chosen AS (SELECT * FROM wf_ids ORDER BY start_ns, id LIMIT {int(limit)})
        SELECT c.id AS id, {parent} AS pid, {name} AS name, c.start_ns AS start_ns, c.end_ns AS end_ns,
               c.bucket AS bucket, c.iteration AS iteration, c.rank_label AS rank_label, s.process AS process,
               coalesce(s.thread || coalesce(' ' || s.thread_name, ''), s.thread_name, '') AS thread_label,
               coalesce(s.thread_name, s.thread, '') AS thread_short,
               {d.hex_id('s.trace', 32)} AS trace, {d.hex_id('s.span', 16)} AS span, s.kind AS kind, c.error AS error,
               c.dev_start AS dev_start, c.dev_end AS dev_end
        FROM chosen c JOIN {table} s ON s.rowid = c.id
        {parents}
        ORDER BY c.start_ns, c.id
    """):
        spans += [dict(zip(columns, row)) for row in rows]
    return spans
