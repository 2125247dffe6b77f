"""The clock a leaf is counted on, in SQL over ``k``: lens_core.device_clock's rule for the report (both engines).

A counted leaf with device times counts its device interval (rule 1); a counted ``overhead`` leaf
without them counts its host interval less the part covered by the union of its rank's device
intervals of counted device-timed ``productive`` leaves (rule 2: the host was blocked while the
device worked). A run without device times creates nothing here, and its figures are today's.
"""

from __future__ import annotations

from typing import Any

from .model import DeviceClock

__all__ = ["BLOCKED_TABLE", "RUN_ISLANDS", "STEPS_TABLE", "add_run_islands", "device_clock", "device_times",
           "has_device_times", "leaf_join", "leaf_ns", "make_blocked", "merge_run_islands", "step_counts"]

BLOCKED_TABLE = "device_blocked"
"""(blocked_id, blocked_ns): each counted host-only overhead leaf, by ``k.id``, with the nanoseconds of its
host interval the device spent on device-timed productive work (rule 2; only leaves where that is > 0)."""

STEPS_TABLE = "device_steps"
"""(anchor, leaves, timed): per step anchor, its counted leaves and how many of them have device times."""


def device_times(s: str) -> str:
    """SQL select items ``dev_start``, ``dev_end`` of ``k`` from ``spans`` row ``s``: the device times where
    they are usable (``0 < start <= end``, as lens_core.device_clock.device_interval), else both NULL."""
    usable = f"{s}.dev_start > 0 AND {s}.dev_end >= {s}.dev_start"
    return (f"CASE WHEN {usable} THEN {s}.dev_start END AS dev_start, "
            f"CASE WHEN {usable} THEN {s}.dev_end END AS dev_end")


def has_device_times(db: Any, where: str, facts: str) -> bool:
    """Whether any span of the run (``where``: '' or a WHERE clause on its run and process) carries device times,
    read from ``facts``, the span facts table (:func:`~lens_report.rollup.make_span_facts`)."""
    return bool(db.value(f"SELECT count(*) FROM {facts} {where + ' AND' if where else 'WHERE'} dev_n > 0"))


def leaf_ns(k: str, blocked: bool) -> str:
    """SQL: the nanoseconds a counted leaf ``k`` counts; ``blocked`` when :data:`BLOCKED_TABLE` was made and is
    joined by :func:`leaf_join` (without device times this is ``end_ns - start_ns``, as before)."""
    ns = f"coalesce({k}.dev_end - {k}.dev_start, {k}.end_ns - {k}.start_ns)"
    return f"{ns} - coalesce(b.blocked_ns, 0)" if blocked else ns


def leaf_join(k: str, blocked: bool) -> str:
    """SQL: the join :func:`leaf_ns` needs after ``FROM k`` ('' when nothing was blocked)."""
    return f" LEFT JOIN {BLOCKED_TABLE} b ON b.blocked_id = {k}.id" if blocked else ""


RUN_ISLANDS = "device_run_islands"
"""(rank_label, lo, hi; once merged, ``before``: the rank's island time before ``lo``): the islands of the run's
counted device-timed productive leaves, per rank, when the run is walked in parts (:func:`add_run_islands`): rule 2
reads a rank's device intervals across its traces, which another part may hold."""


def _islands_sql(intervals: str) -> str:
    """SQL: the disjoint islands (``rank_label``, ``lo``, ``hi``, ``before``: the island time of the rank before
    ``lo``) of the device ``intervals`` (a query of ``rank_label``, ``s``, ``e``), merged where they overlap or
    touch. Islands merged again are the same islands, so a part's can be merged with the run's so far."""
    return f"""
        WITH m AS (SELECT rank_label, s, e, max(e) OVER (PARTITION BY rank_label ORDER BY s, e
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM ({intervals}) p),
        g AS (SELECT rank_label, s, e, sum(CASE WHEN reach IS NULL OR s > reach THEN 1 ELSE 0 END)
                     OVER (PARTITION BY rank_label ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island FROM m),
        i AS (SELECT rank_label, min(s) AS lo, max(e) AS hi FROM g GROUP BY rank_label, island)
        SELECT rank_label, lo, hi, coalesce(sum(hi - lo) OVER (PARTITION BY rank_label ORDER BY lo
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM i
    """


_PRODUCTIVE = "bucket = 'productive' AND dev_start IS NOT NULL"


def add_run_islands(db: Any, leaves: str, first: bool) -> None:
    """Add the islands of ``leaves`` (a query of the counted leaves of a part, with ``rank_label``, ``bucket``,
    ``dev_start`` and ``dev_end`` as ``k`` has them: see the rollup's ``_counted_leaves``), of its device-timed
    productive ones, to :data:`RUN_ISLANDS` (made anew when ``first``); :func:`merge_run_islands` merges the parts'
    once all are added. It holds a row an island, not a leaf: a rank's islands follow its steps' device work, not
    its spans."""
    intervals = f"SELECT rank_label, dev_start AS s, dev_end AS e FROM ({leaves}) l WHERE {_PRODUCTIVE}"
    islands = f"SELECT rank_label, lo, hi FROM ({_islands_sql(intervals)}) i"
    if first:
        db.create(RUN_ISLANDS, islands)
    else:
        db.execute(f"INSERT INTO {RUN_ISLANDS} {islands}")


def merge_run_islands(db: Any) -> None:
    """Merge the islands the parts added to :data:`RUN_ISLANDS` where they overlap or touch (a rank's device work
    that ran from one part's traces into another's), each with the island time of its rank before it (``before``):
    one sort of them once every part is added, which each part's walk then reads as they are (it sorted them all
    again, a part: at 10M spans in 11 parts ~1 s of the walk)."""
    parts = f"SELECT rank_label, lo AS s, hi AS e FROM {RUN_ISLANDS}"
    db.create(f"{RUN_ISLANDS}_merged", _islands_sql(parts))
    db.create(RUN_ISLANDS, f"SELECT * FROM {RUN_ISLANDS}_merged")
    db.drop(f"{RUN_ISLANDS}_merged")


def make_blocked(db: Any, run_islands: bool = False) -> int:
    """Create :data:`BLOCKED_TABLE` from ``k`` (rule 2); the nanoseconds its leaves lost to it (0: none).

    Per rank, the device intervals of its counted device-timed productive leaves are merged into
    disjoint islands, each with the island time before it (``before``). The covered part of an
    interval ``[a, b)`` is ``F(b) - F(a)``, where ``F(t)`` is the island time before ``t``: the
    last island starting at or before ``t`` is found by a running ``max`` over the islands and the
    leaf's two ends sorted together (islands first on a tie), so no leaf is joined to every island
    of its rank. Sums over empty frames read 0 (ClickHouse) or NULL (DuckDB); both are handled.
    With ``run_islands`` the islands are the whole run's (:data:`RUN_ISLANDS`, the run walked in
    parts), not those of the leaves ``k`` holds.
    """
    # the leaves the rule and the step counts read, from one pass over ``k`` (a view: each read computes it)
    db.create("device_leaves", """
        SELECT id, rank_label, bucket, start_ns, end_ns, dev_start, dev_end FROM k
        WHERE counted AND (dev_start IS NOT NULL OR bucket = 'overhead')
    """)
    host_only = "bucket = 'overhead' AND dev_start IS NULL"
    if run_islands:  # the ranks' islands whichever parts their leaves lie in, merged once for the run
        db.create("device_islands", f"SELECT rank_label, lo, hi, before FROM {RUN_ISLANDS} "
                                    f"WHERE rank_label IN (SELECT rank_label FROM device_leaves WHERE {host_only})")
    else:
        productive = f"SELECT rank_label, dev_start AS s, dev_end AS e FROM device_leaves WHERE {_PRODUCTIVE}"
        db.create("device_islands", _islands_sql(productive))
    # a leaf's two ends (side -1 at its start, +1 at its end) among the islands (id -1, side 0)
    leaves = (f"SELECT id, rank_label, start_ns, end_ns FROM device_leaves WHERE {host_only} "
              "AND rank_label IN (SELECT rank_label FROM device_islands)")
    db.create(BLOCKED_TABLE, f"""
        WITH o AS ({leaves}),
        ev AS (SELECT rank_label, lo AS t, 0 AS kind, -1 AS id, 0 AS side, lo, hi, before FROM device_islands
               UNION ALL SELECT rank_label, start_ns, 1, id, -1, -1, -1, 0 FROM o
               UNION ALL SELECT rank_label, end_ns, 1, id, 1, -1, -1, 0 FROM o),
        w AS (SELECT kind, id, side, t,
                     max(lo) OVER r AS lo, max(hi) OVER r AS hi, max(before) OVER r AS before FROM ev
              WINDOW r AS (PARTITION BY rank_label ORDER BY t, kind ROWS UNBOUNDED PRECEDING))
        SELECT id AS blocked_id, blocked_ns FROM (
            SELECT id, sum(side * CASE WHEN lo < 0 THEN 0 ELSE before + least(greatest(t - lo, 0), hi - lo) END)
                       AS blocked_ns
            FROM w WHERE kind = 1 GROUP BY id) x
        WHERE blocked_ns > 0
    """)
    db.drop("device_islands")
    return int(db.value(f"SELECT coalesce(sum(blocked_ns), 0) FROM {BLOCKED_TABLE}") or 0)


def step_counts(db: Any) -> None:
    """Create :data:`STEPS_TABLE` from ``anc``, ``anchors`` (made by the rollup's step pass) and the device
    leaves :func:`make_blocked` kept (it drops them)."""
    db.create(STEPS_TABLE, """
        SELECT a.anchor AS anchor, count(*) AS leaves, count(t.id) AS timed
        FROM anc p JOIN anchors a ON a.cand = p.fs
        LEFT JOIN (SELECT id FROM device_leaves WHERE dev_start IS NOT NULL) t ON t.id = p.id
        WHERE p.counted_bucket IS NOT NULL GROUP BY a.anchor
    """)
    db.drop("device_leaves")


def device_clock(db: Any, labels: list[str], given_ns: int) -> DeviceClock:
    """The run's :class:`~lens_report.model.DeviceClock` (after ``rank_totals`` and ``rank_steps`` exist);
    ``given_ns``: what :func:`make_blocked` gave back, summed over the parts walked."""
    leaves, timed = db.rows("SELECT sum(leaves), sum(timed) FROM rank_totals")[0]
    ranks = {labels[int(idx)]: (int(t), int(n)) for idx, t, n in db.rows(
        "SELECT r.idx, t.timed, t.leaves FROM rank_totals t JOIN rank_index r ON r.rank_label = t.rank_label "
        "WHERE t.timed > 0 ORDER BY r.idx")}
    steps = {int(it): (int(t), int(n)) for it, t, n in db.rows(
        "SELECT iteration, sum(timed), sum(leaves) FROM rank_steps GROUP BY iteration HAVING sum(timed) > 0 "
        "ORDER BY iteration")}
    return DeviceClock(int(leaves or 0), int(timed or 0), given_ns, ranks, steps)
