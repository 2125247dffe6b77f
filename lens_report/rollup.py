"""Goodput rollup in SQL over the store: per (run, rank, step) first, then steps, ranks, stragglers and the invariants."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .classify import K_COLUMNS, load_catalog
from .rules import load_rule_tables
from .clock import (BLOCKED_TABLE, RUN_ISLANDS, STEPS_TABLE, add_run_islands, device_clock, device_times,
                    has_device_times, leaf_join, leaf_ns, make_blocked, merge_run_islands, step_counts)
from .plan import PARENT_ROW_BYTES, STEP_ROW_BYTES
from .invariants import _BUCKET_LIST, TOLERANCE_NS, _merge_violations, _span_violations
from .store import Store
from .model import (
    BUCKETS,
    AttemptInfo,
    DEFAULT_STEP_PATTERN,
    BucketTotals,
    LossRow,
    RankRow,
    RankSteps,
    Report,
    RunInfo,
    StepRow,
    TopSpan,
    UnfinishedProcess,
    Violation,
)

__all__ = [
    "AttemptChoiceError",
    "BUSY_NS",
    "CELL_BYTES",
    "DEFAULT_MAX_VIOLATIONS",
    "DEFAULT_TOP_N",
    "RunChoiceError",
    "SPAN_FACTS",
    "TOLERANCE_NS",
    "build_report",
    "list_attempts",
    "list_runs",
    "make_span_facts",
]

DEFAULT_TOP_N = 10
"""How many span names the report lists by total time unless told otherwise."""

DEFAULT_MAX_VIOLATIONS = 1000
"""How many violations a report lists (all are counted, by rule)."""

_BUCKET_NUMBER = "CASE {bucket} " + " ".join(f"WHEN '{b}' THEN {i}" for i, b in enumerate(BUCKETS)) + " END"
"""SQL (``.format(bucket=...)``): a bucket's position in :data:`BUCKETS` (NULL for any other text)."""


class RunChoiceError(ValueError):
    """The input holds several runs (or not the one asked for); ``runs`` lists those it holds."""

    def __init__(self, message: str, runs: tuple[RunInfo, ...]) -> None:
        super().__init__(message)
        self.runs = runs


class AttemptChoiceError(RunChoiceError):
    """The run id was launched more than once (or the attempt asked for is not among its launches);
    ``attempts`` lists them, each with its goodput and the time lost before it."""

    def __init__(self, message: str, runs: tuple[RunInfo, ...], attempts: tuple[AttemptInfo, ...]) -> None:
        super().__init__(message, runs)
        self.attempts = attempts


SPAN_FACTS = "span_facts"
"""The working table of the spans' counts and bounds per (run, process, rank label, span name): what choosing the
run and its attempt, finding the step names and asking for device times read (see :func:`make_span_facts`)."""


def make_span_facts(store: Store) -> None:
    """Make :data:`SPAN_FACTS` from every span of the store, in one pass: per (run, process, rank label, name) the
    lowest rank, the spans (``n``), the first start and last end (``first_ns``, ``last_ns``), the same over
    well-timed spans (``first_timed``, ``last_timed``) and the spans with device times (``dev_n``).

    :func:`list_runs`, :func:`list_attempts`, the step names and :func:`~lens_report.clock.has_device_times`
    read it: four scans of every span were one (at 10M spans in ClickHouse, ~4 s of the report)."""
    timed = "start_ns IS NOT NULL AND end_ns >= start_ns"
    store.create(SPAN_FACTS, f"""
        SELECT run, process, rank_label, name, min(rank) AS rank, count(*) AS n, min(start_ns) AS first_ns,
               max(end_ns) AS last_ns, min(start_ns) FILTER (WHERE {timed}) AS first_timed,
               max(end_ns) FILTER (WHERE {timed}) AS last_timed, count(*) FILTER (WHERE dev_start IS NOT NULL) AS dev_n
        FROM {store.whole()} spans GROUP BY run, process, rank_label, name""")


def list_runs(store: Store) -> tuple[RunInfo, ...]:
    """The runs in the store (by ``nemo.run.id``, else the ``service.instance.id`` prefix), oldest first, from
    :data:`SPAN_FACTS` (:func:`make_span_facts`)."""
    rows = store.rows(f"""
        SELECT run, count(DISTINCT rank_label), count(DISTINCT process), sum(n), min(first_ns), max(last_ns)
        FROM {SPAN_FACTS} GROUP BY run ORDER BY min(first_ns) NULLS LAST, run
    """)
    return tuple(RunInfo(run, ranks, processes, int(spans), start, end)
                 for run, ranks, processes, spans, start, end in rows)


def _choose_run(store: Store, run: str | None) -> tuple[str, bool]:
    """(the run to report, whether other runs must be filtered out)."""
    runs = list_runs(store)
    ids = [info.run_id for info in runs]
    if run is not None:
        if run not in ids:
            raise RunChoiceError(f"no run {run!r} in the input; runs: {', '.join(map(repr, ids)) or 'none'}", runs)
        return run, len(ids) > 1
    if len(ids) > 1:
        raise RunChoiceError(f"the input holds {len(ids)} runs; choose one with --run ID: "
                             f"{', '.join(map(repr, ids))}", runs)
    return (ids[0] if ids else ""), False


def _attempt_rows(db: Store, run_where: str) -> list[tuple[Any, ...]]:
    """(process, rank, first start, last end, spans) of every process of the run, by first start."""
    # loss records give membership, not times: they are written when the process shuts down
    return db.rows(f"""
        SELECT process, min(rank), min(first_timed), max(last_timed), coalesce(sum(n), 0)
        FROM (SELECT process, rank, first_timed, last_timed, run, n FROM {SPAN_FACTS}
              UNION ALL SELECT process, rank, NULL, NULL, run, NULL FROM loss)  -- a process with loss records only
        {run_where} GROUP BY process ORDER BY 3 NULLS LAST, process
    """)


def list_attempts(store: Store, run_id: str | None = None) -> tuple[AttemptInfo, ...]:
    """The launches of one run (see :class:`~lens_report.model.AttemptInfo`), oldest first; goodput not computed,
    from :data:`SPAN_FACTS` (:func:`make_span_facts`) and the loss records.

    Also leaves the table ``process_attempts`` (process, attempt) in the store.
    """
    where = f"WHERE run = {store.dialect.literal(run_id)}" if run_id is not None else ""
    groups: list[dict[str, Any]] = []
    for process, rank, start, end, spans in _attempt_rows(store, where):
        current = groups[-1] if groups else None
        # a new launch: this process starts after the current attempt has ended, on a rank it had
        if (current is None or (start is not None and current["end"] is not None and start > current["end"]
                                and rank is not None and rank in current["ranks"])):
            current = {"processes": [], "ranks": set(), "labels": set(), "spans": 0, "start": start, "end": end}
            groups.append(current)
        current["processes"].append(process)
        current["spans"] += spans
        if rank is not None:
            current["ranks"].add(rank)
        current["labels"].add(rank if rank is not None else process)
        if end is not None:
            current["end"] = end if current["end"] is None else max(current["end"], end)
        if start is not None and current["start"] is None:
            current["start"] = start
    store.create_columns("process_attempts", "process VARCHAR, attempt INTEGER",
                         [(p, i) for i, g in enumerate(groups, start=1) for p in g["processes"]])
    attempts = []
    for i, group in enumerate(groups, start=1):
        gap = None
        if i > 1 and group["start"] is not None and groups[i - 2]["end"] is not None:
            gap = group["start"] - groups[i - 2]["end"]
        attempts.append(AttemptInfo(i, len(group["processes"]), len(group["labels"]), group["spans"],
                                    group["start"], group["end"], gap_ns=gap))
    return tuple(attempts)


def build_report(
    store: Store,
    *,
    run: str | None = None,
    step_pattern: str | re.Pattern[str] = DEFAULT_STEP_PATTERN,
    top_n: int = DEFAULT_TOP_N,
    max_violations: int = DEFAULT_MAX_VIOLATIONS,
    attempt: int | None = None,
) -> Report:
    """Roll the spans of one run up per (rank, step), per step, per rank and for the run, and check the invariants.

    A step is an unbucketed span carrying ``rl.iteration`` whose name matches ``step_pattern``
    (searched). In a trace with no such span, unbucketed spans sharing an ``rl.iteration``
    form the step instead (except those below a bucketed span, such as a deferred finalize).
    A step's buckets sum the bucketed spans below it, in any process. Raises
    :class:`RunChoiceError` when ``run`` is ``None`` and the store holds several runs, or
    when ``run`` is not among them.

    A run id launched more than once (a restart, a re-run with a fixed ``LENS_RUN_ID``) is
    never reported as one run: without ``attempt`` it raises :class:`AttemptChoiceError`
    naming each launch with its goodput and the time lost between them; with ``attempt``
    (1 = the first launch) the report is of that launch and lists them all in ``attempts``.
    """
    pattern = re.compile(step_pattern)
    make_span_facts(store)
    run_id, filtered = _choose_run(store, run)
    attempts = list_attempts(store, run_id if filtered else None)
    if len(attempts) <= 1:
        if attempt not in (None, 1):
            raise AttemptChoiceError(f"run {run_id!r} was launched once; there is no attempt {attempt}",
                                     list_runs(store), attempts)
        cond = f"run = {store.dialect.literal(run_id)}" if filtered else ""
        return _build(store, run_id, cond, pattern, top_n, max_violations)
    if attempt is not None and not 1 <= attempt <= len(attempts):
        raise AttemptChoiceError(f"run {run_id!r} has attempts 1-{len(attempts)}, not {attempt}",
                                 list_runs(store), attempts)
    # every other attempt first: the chosen one is built last, so its tables stay for the views
    order = [i for i in range(1, len(attempts) + 1) if i != attempt] + ([attempt] if attempt is not None else [])
    reports: dict[int, Report] = {}
    for i in order:
        cond = ((f"run = {store.dialect.literal(run_id)} AND " if filtered else "")
                + f"process IN (SELECT process FROM process_attempts WHERE attempt = {int(i)})")
        reports[i] = _build(store, run_id, cond, pattern, top_n, max_violations)
    infos = []
    for info in attempts:
        before = reports.get(info.attempt - 1)
        repeated = 0 if before is None else len({s.iteration for s in reports[info.attempt].steps}
                                                & {s.iteration for s in before.steps})
        infos.append(replace(info, goodput=reports[info.attempt].run.goodput, repeated_steps=repeated))
    if attempt is None:
        raise AttemptChoiceError(
            f"run {run_id!r} was launched {len(infos)} times (a restart or a reused run id), and launches are "
            f"never reported as one run: {'; '.join(a.describe() for a in infos)}. Choose one with --attempt N",
            list_runs(store), tuple(infos))
    return replace(reports[attempt], attempt=attempt, attempts=tuple(infos))


def _build(store: Store, run_id: str, cond: str, pattern: re.Pattern[str], top_n: int,
           max_violations: int) -> Report:
    """The report of the spans that satisfy ``cond`` (an SQL condition on ``spans``; '' for all).

    The spans are walked in the parts of whole traces the store asks for (one for files): each
    part's steps, rank sums, violations and counts are kept, and the figures are made from them
    once every part is done. A step, its spans' parents and every rule but the rank overflow
    lie within one trace, so the answer does not depend on the parts."""
    db = store
    load_catalog(db)
    load_rule_tables(db)
    where = f"WHERE {cond}" if cond else ""
    step_names = [name for (name,) in db.rows(f"SELECT DISTINCT name FROM {SPAN_FACTS} {where}")
                  if pattern.search(name)]
    db.create_columns("step_names", "name VARCHAR", [[n] for n in step_names])
    timed = has_device_times(db, where, SPAN_FACTS)  # else nothing below reads a device time: today's figures
    parts = db.span_parts(timed, where)
    kept = KEPT + ((STEPS_TABLE,) if timed else ())
    found: list[Violation] = []
    counts: Counter[str] = Counter()
    summary = [0, 0, 0, 0]
    given_ns = 0
    keeping = parts > 1 or db.presums()  # the figures are read from what every part (or the store) adds
    run_islands = timed and parts > 1
    walked = PART_TABLES + kept  # what a part's walk leaves: dropped in one statement before the next part's
    if run_islands:  # rule 2 reads a rank's device intervals across its traces: every part's, before any is walked
        for part in range(parts):  # each read where it lies, classified as k classifies it: only a few columns
            add_run_islands(db, _counted_leaves(db.part_relation(part, parts), where), first=part == 0)
        merge_run_islands(db)
    for part in range(parts):
        if part:
            db.unload_part(walked)
        db.load_part(part, parts)
        given_ns += _walk_part(db, where, timed, run_islands)
        part_found, part_counts, part_summary = _span_violations(db, max_violations)
        found += part_found
        counts.update(part_counts)
        summary = [total + value for total, value in zip(summary, part_summary)]
        _part_sums(db, where, cond)
        if keeping:  # what the figures read, kept from every part
            for name in kept:
                if part == 0:
                    db.create(f"all_{name}", f"SELECT * FROM {name}")
                else:
                    db.execute(f"INSERT INTO all_{name} SELECT * FROM {name}")
    if run_islands:
        db.drop(RUN_ISLANDS)
    if parts > 1:
        db.unload_parts(walked)
    if keeping:
        # the spans no part held (the ClickHouse store's stamped traces) are summed where they lie
        presummed = db.presum(where, cond, "all_" if parts else "")
        summary = [total + int(value) for total, value in zip(summary, presummed)]
        if parts:
            for name in kept:
                db.create(name, f"SELECT * FROM all_{name}")
            db.drop(*(f"all_{name}" for name in kept))
    # a view draws from the walk's tables, which a walk in parts (or the stamped sums) left for a part of the run
    db.partial_walk = cond if keeping else None
    _rank_totals(db)
    violations, counts = _merge_violations(db, found, counts, max_violations)
    rank_labels, rank_steps = _rank_steps(db, timed)
    steps = _step_rows(db, rank_labels, rank_steps)
    ranks, run_totals = _ranks(db, rank_labels, rank_steps)
    return Report(
        run_id=run_id,
        files=tuple(store.files),
        span_count=summary[0],
        trace_count=summary[1],
        duplicate_count=store.duplicate_count,
        orphan_count=summary[3],
        error_count=summary[2],
        step_pattern=pattern.pattern,
        steps=steps,
        run=run_totals,
        ranks=ranks,
        rank_steps=rank_steps,
        top_spans=_top_spans(db, top_n),
        violations=violations,
        problems=tuple(store.problems),
        loss=_loss(db, cond or None),
        rule_counts=dict(counts),
        unfinished=_unfinished(db, cond or None),
        device_clock=device_clock(db, rank_labels, given_ns) if timed else None,
    )


PART_TABLES = ("k", "anc", "cands", "anchors", "step_walls", "step_buckets", "named_traces", BLOCKED_TABLE)
"""The working tables a part's walk leaves besides :data:`KEPT`'s (each part makes them anew): dropped with them
before the next part is loaded, and once every part is walked (the figures read only what the parts kept)."""

KEPT = ("steps", "rank_parts", "name_parts", "process_parts", "rank_process_parts")
"""The tables each part of the spans adds to (see :func:`_walk_part` and :func:`_part_sums`): the figures are
made from them once every part is done."""


def _part_sums(db: Store, where: str, cond: str) -> None:
    """``name_parts`` (per span name, its well-timed spans and their time), ``rank_process_parts`` (each rank's
    processes) and ``process_parts`` (per process Lens set up, its spans) of the spans ``spans`` holds: what
    the parts of a run add up to."""
    timed = "start_ns IS NOT NULL AND end_ns >= start_ns"
    db.create("name_parts", f"""
        SELECT name, count(*) AS n, sum(end_ns - start_ns) AS total FROM spans
        {where + " AND " + timed if where else "WHERE " + timed} GROUP BY name
    """)
    db.create("rank_process_parts", f"SELECT DISTINCT rank_label, process FROM spans {where}")
    db.create("process_parts", f"""
        SELECT {db.dialect.any_value('rank_label')} AS rank_label, process, count(*) AS n, min(rank) AS rank FROM spans
        WHERE lens_process {"AND " + cond if cond else ""} GROUP BY process
    """)


def _walk_part(db: Store, where: str, timed: bool, run_islands: bool = False) -> int:
    """The spans ``spans`` holds (a part of whole traces) classified, walked up their parents and
    summed per step anchor (``steps``) and per rank (``rank_parts``); the nanoseconds of host time
    its leaves lost to the device (rule 2 of :mod:`lens_report.clock`: against the run's islands
    with ``run_islands``, the part's otherwise)."""
    _classify(db, where)
    given_ns = make_blocked(db, run_islands) if timed else 0
    blocked = given_ns > 0
    _jump(db, blocked)
    _steps(db, where)
    if timed:
        step_counts(db)
    _rank_parts(db, timed, blocked)
    return given_ns


def is_well_timed(s: str) -> str:
    """SQL: whether the span ``s`` (an alias of ``spans``) has both times, the end not before the start
    (NULL when a time is missing: wrap it in ``coalesce(..., false)`` where a NULL would not read false)."""
    return f"({s}.start_ns IS NOT NULL AND {s}.end_ns >= {s}.start_ns)"


def is_step_span(s: str) -> str:
    """SQL: whether the span ``s`` (an alias of ``spans``) is a step span: its name matches the step
    pattern (``step_names``), and it carries ``rl.iteration`` and no bucket (NULL when its name is NULL)."""
    return f"({s}.name IN (SELECT name FROM step_names) AND {s}.iteration IS NOT NULL AND {s}.bucket IS NULL)"


def _candidate(s: str) -> str:
    """SQL: whether the span ``s`` (an alias of ``spans``) is a step candidate: well timed, and a step
    span in a trace that has one (``named_traces``), else an unbucketed span with ``rl.iteration``
    (the fallback, grouped by iteration). One definition for ``k`` and for ``cands``."""
    return (f"coalesce({is_well_timed(s)} AND "
            f"CASE WHEN {s}.trace IN (SELECT trace FROM named_traces) THEN {is_step_span(s)} "
            f"ELSE {s}.iteration IS NOT NULL AND {s}.bucket IS NULL END, false)")


def classified_columns(s: str = "s", c: str = "c", r: str = "r") -> str:
    """SQL select items of what the rollup's rules decide of the span ``s`` (an alias of ``spans``), with its
    ``catalog`` row ``c`` and ``category_rules`` row ``r`` joined (see :func:`_classify`): ``ok``, ``bucketed``,
    ``umbrella``, ``never_reason``, ``timer_only``, ``stamped_grp``, ``category``, ``catalogued``. One
    definition for ``k`` and for the ClickHouse store's stamped sums."""
    return f"""coalesce({is_well_timed(s)}, false) AS ok,
               {s}.bucket IS NOT NULL AS bucketed,
               -- lens stamps lens.umbrella on umbrellas only: with lens.group, absence means a leaf
               CASE WHEN {s}.grp IS NOT NULL THEN coalesce({s}.umbrella, false)
                    ELSE coalesce({s}.umbrella, {c}.umbrella) END AS umbrella,
               coalesce({c}.never_reason, CASE {r}.rule
                   WHEN 'collector' THEN 'a collector-loop wait runs on the collector''s clock, concurrent with the driver''s'
                   WHEN 'unbucketed' THEN 'its category (' || coalesce({s}.category, {c}.category)
                                          || ') overlaps other bucketed work' END) AS never_reason,
               coalesce({r}.rule = 'timer-only', false) AS timer_only,
               {s}.grp AS stamped_grp, coalesce({s}.category, {c}.category) AS category,
               {c}.name IS NOT NULL AS catalogued"""


COUNTED = (f"coalesce(ok AND bucketed AND bucket IN {_BUCKET_LIST} AND NOT coalesce(umbrella, false) "
           "AND never_reason IS NULL AND NOT timer_only, false)")
"""SQL over :func:`classified_columns`: whether the span counts in the sums (a leaf whose bucket is one of
:data:`BUCKETS`, well timed, by no rule left out)."""


def _classified(relation: str, where: str, columns: str) -> str:
    """SQL: ``columns`` of each span of ``relation`` (``s``, the ``spans`` columns) that satisfies ``where``,
    beside what :func:`classified_columns` decides of it (its catalog row ``c`` and category rule ``r`` joined)."""
    return f"""
        SELECT {columns}, {classified_columns()}
        FROM {relation} s
        LEFT JOIN catalog c ON c.name = s.name
        LEFT JOIN category_rules r ON r.category = coalesce(s.category, c.category)
        {where}"""


def _counted_leaves(relation: str, where: str) -> str:
    """SQL: ``rank_label``, ``bucket``, ``dev_start``, ``dev_end`` of the spans of ``relation`` that count in the
    sums, as ``k`` decides (:data:`COUNTED`), without the rest of ``k`` (no parent, no step candidate)."""
    columns = f's.rank_label AS rank_label, s.bucket AS bucket, {device_times("s")}'
    return f"SELECT rank_label, bucket, dev_start, dev_end FROM ({_classified(relation, where, columns)}) c " \
           f"WHERE {COUNTED}"


def _classify(db: Store, where: str) -> None:
    """``k``: one row per span of the run with what the checks need: its umbrella status, rules,
    whether it counts in sums and whether it is a step candidate. Names and texts are read from
    ``spans`` through ``kd`` (:data:`~lens_report.classify.KD`) for the few rows a report lists.

    ``k`` is defined (:meth:`~lens_report.store.Store.define`), not stored: in the file
    store a view, computed from ``spans`` and the small tables where a query reads it. Computing
    all of its columns for 3M spans took ~0.3 s of CPU and writing them to a table ~1.6 s, and
    the half-dozen queries that read it read only the columns they use."""
    # traces that have a named step span: their steps are those spans; elsewhere unbucketed spans
    # with rl.iteration are the step candidates (the fallback, grouped by iteration)
    db.create("named_traces", f"""
        SELECT DISTINCT trace FROM spans s {where + " AND" if where else "WHERE"}
            {is_step_span("s")} AND {is_well_timed("s")}
    """)
    # a span that must not carry a bucket does not count in any sum (it is flagged instead)
    # what the by-name rules test (the stamped group, the category, whether the catalog knows the
    # name) is kept here, so no heavy query joins ``spans`` again (a join of every span by rowid
    # held ~80 MB past the engine's memory limit per 1M spans); the candidates' own columns are
    # read from ``spans`` when ``cands`` is made (see _steps)
    columns = f"""
        s.rowid AS id, s.trace AS trace, s.span AS span, s.parent AS parent, s.bucket AS bucket,
        s.iteration AS iteration, s.start_ns AS start_ns, s.end_ns AS end_ns, s.error AS error,
        s.rank AS rank, s.rank_label AS rank_label, s.file AS file, s.line AS line,
        {device_times("s")}, {_candidate("s")} AS cand"""
    db.define("k", f"""
        SELECT {", ".join(K_COLUMNS)}, stamped_grp, category, catalogued FROM (
        SELECT *, {COUNTED} AS counted
        FROM ({_classified("spans", where, columns)}) classified) flagged
    """)


def _jump(db: Store, blocked: bool = False) -> None:
    """``anc``: a row for every span with a parent in the run, with that parent's id (``pid``),
    the span's nearest step-candidate ancestor (``fs``) and nearest counted bucketed ancestor
    (``fb``), and whether its parent chain ends in a cycle (``cyclic``). It also carries the
    span's own time (on the clock its work ran on: :mod:`lens_report.clock`; ``blocked`` when its
    table was made) and bucket number when it counts in sums (``counted_ns``, ``counted_bucket``:
    NULL otherwise), so the step sums read ``anc`` alone instead of joining it with ``k``.

    A span's answers are its parent's own flags, else its parent's answers, so only the spans
    that are parents (the interior of the tree: a tenth of a training trace's spans) look up
    their chains, among themselves; every span then takes its answers from its parent in one
    join, which makes ``anc`` (before, that join made a table of every span's parent links,
    and a second join of it with the interior's answers made ``anc``: two run-long tables
    written and read back where one is enough).

    Pointer jumping: each round doubles how far up every span has looked, so a chain of
    depth d takes log2(d) rounds of one join each, whatever the number of spans. Spans still
    looking after more rounds than any chain could need are in (or below) a parent cycle.
    """
    # the spans that are some span's parent (the interior) first: the joins below hold them
    # alone in memory and stream every child past them (joined with every span, both sides of
    # a 3M-span join spilled to disk); the interior's keys are made distinct first, so that
    # step's hash table holds the interior too, not a row per child
    db.create("parent_keys", "SELECT DISTINCT trace, parent AS span FROM k WHERE parent IS NOT NULL")
    # in parts of parent ids when the interior would not fit the rollup's memory (a child and its
    # parent meet in the same part: the child's parent id is the parent's span id); the interior
    # itself too: ``k`` is computed where it is read, and its joins' tables beside the keys' ran
    # out of 80 MB in one 10M report of three (1M keys)
    parts = db.join_parts(db.value("SELECT count(*) FROM parent_keys"), PARENT_ROW_BYTES)
    _create_in_parts(db, "interior", [f"""
        SELECT k.trace AS trace, k.span AS span, k.parent AS parent, k.id AS id, k.cand AS cand, k.counted AS counted
        FROM {_part_of(db, "k", "span", parts, i)} k JOIN {_part_of(db, "parent_keys", "span", parts, i)} q
            ON q.trace = k.trace AND q.span = k.span
    """ for i in range(parts)])
    db.drop("parent_keys")

    def parent_join(children: str, parents: str, select: str, i: int) -> str:
        """Part ``i`` of ``children`` (rows with ``trace`` and ``parent``) joined with their parents
        in ``parents`` (an interior table), as ``c`` and ``p``."""
        return f"""
            SELECT {select} FROM {_part_of(db, children, "parent", parts, i)} c
            JOIN {_part_of(db, parents, "span", parts, i)} p ON p.trace = c.trace AND p.span = c.parent"""

    # the look starts at each interior span's parent (a parent's parent is a parent, so every
    # span a look reaches is in the interior), and that parent's id where it is the answer
    _create_in_parts(db, "jump", [parent_join(
        "interior", "interior", "c.id AS id, p.id AS jump, CASE WHEN p.cand THEN p.id END AS fs, "
        "CASE WHEN p.counted THEN p.id END AS fb", i) for i in range(parts)])
    # invariant after round r: fs/fb is the nearest such ancestor within distance 2^r, and jump
    # the ancestor at distance 2^r (NULL once the chain has ended: the look is complete)
    total = looking = db.value("SELECT count(*) FROM jump")
    db.create_columns("found", "id BIGINT, fs BIGINT, fb BIGINT")
    rounds = 0
    limit = max(1, math.ceil(math.log2(total + 1))) + 1
    # a round's table holds every look the round took, ended or not: the next round reads the unended ones (a
    # look that just ended is also in ``found``, with the same answers, so a join that meets it in either agrees);
    # two tables in turn, so that a round sends four statements, not six (each a round trip to a server)
    last = "jump"
    while rounds <= limit and looking:
        rounds += 1
        this = f"jump{rounds % 2}"
        # t: the span 2^r up; its own look covers the next 2^r ancestors (final when it is done)
        db.create(this, f"""
            SELECT a.id AS id, t.jump AS jump, coalesce(a.fs, t.fs, f.fs) AS fs, coalesce(a.fb, t.fb, f.fb) AS fb
            FROM (SELECT * FROM {last} WHERE jump IS NOT NULL) a LEFT JOIN {last} t ON t.id = a.jump
                LEFT JOIN found f ON f.id = a.jump
        """)
        db.execute(f"INSERT INTO found SELECT id, fs, fb FROM {this} WHERE jump IS NULL")
        db.drop(last)  # one copy at a time: these tables are as long as the interior
        last = this
        looking = db.value(f"SELECT count(*) FROM {last} WHERE jump IS NOT NULL")
    db.create("looked", "SELECT id, fs, fb, false AS cyclic FROM found "
                        f"UNION ALL SELECT id, fs, fb, true FROM {last} WHERE jump IS NOT NULL")
    db.drop("found", last)
    # each interior span with its own answers beside its flags, so the one join below gives every
    # span its parent's: the parent if that is the answer, else the parent's answer
    db.create("interior_looked", """
        SELECT i.trace AS trace, i.span AS span, i.id AS id, CASE WHEN i.cand THEN i.id ELSE l.fs END AS fs,
               CASE WHEN i.counted THEN i.id ELSE l.fb END AS fb, coalesce(l.cyclic, false) AS cyclic
        FROM interior i LEFT JOIN looked l ON l.id = i.id
    """)
    db.drop("looked", "interior")
    # every span with a parent: its answers from that parent (none for a root's child); the
    # child's time and bucket number are made before the join, so its side stays narrow
    counted = (f"(SELECT k.id AS id, k.trace AS trace, k.parent AS parent, "
               f"CASE WHEN k.counted THEN {leaf_ns('k', blocked)} END AS counted_ns, "
               f"CASE WHEN k.counted THEN {_BUCKET_NUMBER.format(bucket='k.bucket')} END AS counted_bucket "
               f"FROM k{leaf_join('k', blocked)} WHERE k.parent IS NOT NULL)")
    _create_in_parts(db, "anc", [parent_join(
        counted, "interior_looked", "c.id AS id, p.id AS pid, p.fs AS fs, p.fb AS fb, p.cyclic AS cyclic, "
        "c.counted_ns AS counted_ns, c.counted_bucket AS counted_bucket", i) for i in range(parts)])
    db.drop("interior_looked")


def _steps(db: Store, where: str) -> None:
    """``steps``: one row per step anchor (a step span, or the first span of an iteration group)
    with its rank, iteration, wall time and the buckets of the bucketed spans below it."""
    # fallback groups: candidates of a trace without step spans, not below a bucketed span
    # (a deferred checkpoint finalize may outlive its step; its time is its ancestor's)
    # the candidates once, so the step queries below scan them and not every span; read from
    # ``spans`` (compressed, in the database file) rather than from ``k``: the ten columns of a
    # spilled 3M-span ``k`` read back took ~0.65 s of CPU, ``spans`` ~0.4 s
    db.create("cands", f"""
        SELECT c.id AS id, c.trace AS trace, c.iteration AS iteration, c.start_ns AS start_ns, c.end_ns AS end_ns,
               c.named_step AS named_step, anc.fb AS fb, c.rank AS rank, c.rank_label AS rank_label, c.name AS name,
               c.span AS span
        FROM (SELECT s.rowid AS id, s.trace AS trace, s.iteration AS iteration, s.start_ns AS start_ns,
                     s.end_ns AS end_ns, coalesce({is_step_span("s")}, false) AS named_step, s.rank AS rank,
                     s.rank_label AS rank_label, s.name AS name, s.span AS span
              FROM spans s {where + " AND" if where else "WHERE"} {_candidate("s")}) c
        LEFT JOIN anc ON anc.id = c.id
    """)
    db.create("anchors", """
        SELECT id AS cand, id AS anchor FROM cands WHERE named_step
        UNION ALL
        SELECT id AS cand, first_value(id) OVER (PARTITION BY trace, iteration ORDER BY start_ns, end_ns DESC, id)
        FROM cands WHERE NOT named_step AND fb IS NULL
    """)
    db.create("step_walls", """
        SELECT a.anchor AS anchor, max(m.end_ns) - min(m.start_ns) AS wall_ns
        FROM anchors a JOIN cands m ON m.id = a.cand GROUP BY a.anchor
    """)
    parts = _step_parts(db)
    _step_buckets(db, parts)
    _step_table(db, parts)


def _step_parts(db: Store) -> int:
    """Into how many parts of anchor ids the joins of step anchors run (see
    :data:`~lens_report.plan.STEP_ROW_BYTES`): the step sums and the steps join hold as many."""
    return db.join_parts(db.value("SELECT count(*) FROM step_walls"), STEP_ROW_BYTES)


def _step_buckets(db: Store, parts: int) -> None:
    """``step_buckets``: each step anchor with the bucket sums of the counted spans below it (from
    ``anc``, ``anchors`` and ``step_walls``), in ``parts`` of anchor ids (:func:`_step_parts`)."""
    # every counted span to its step's anchor: one pass over anc (which carries each counted span's
    # time and bucket) and a join with the anchors, a table as long as the steps; this replaced a
    # join of anc with k, two tables as long as the run, that had to run in parts of span ids
    sums = ", ".join(f"coalesce(sum(p.counted_ns) FILTER (WHERE p.counted_bucket = {i}), 0) AS {x}"
                     for i, x in enumerate(BUCKETS))
    # in parts of anchor ids when the anchors would not fit the rollup's memory, as the steps join
    # below: its hash table and the sums grouped by anchor (500,000 at 10M spans) in one statement
    # ran out of the default plan's 80 MB in two 10M reports of five (each part reads all of anc)
    _create_in_parts(db, "step_buckets", [f"""
        SELECT a.anchor AS anchor, {sums}
        FROM anc p JOIN {_part_of(db, "anchors", "anchor", parts, i)} a ON a.cand = p.fs
        WHERE p.counted_bucket IS NOT NULL GROUP BY a.anchor
    """ for i in range(parts)])


def _step_table(db: Store, parts: int) -> None:
    """``steps`` from ``step_walls``, ``cands`` and ``step_buckets``: each anchor with its wall time
    and bucket sums, in ``parts`` of anchor ids when they would not fit the rollup's memory (500,000
    anchors, 10M spans, needed 60-80 MB in one statement and now and then ran out of the default
    plan's 100 MB; see :data:`~lens_report.plan.STEP_ROW_BYTES`)."""
    part_sql = [f"""
        SELECT s.id AS anchor, s.rank AS rank, s.rank_label AS rank_label, s.iteration AS iteration, s.trace AS trace,
               s.span AS span, s.name AS name, w.wall_ns AS wall_ns,
               CASE WHEN s.named_step THEN 'pattern' ELSE 'iteration' END AS method, s.start_ns AS start_ns,
               {", ".join(f"coalesce(b.{x}, 0) AS {x}" for x in BUCKETS)}
        FROM {_part_of(db, "step_walls", "anchor", parts, i)} w
        JOIN {_part_of(db, "cands", "id", parts, i)} s ON s.id = w.anchor
        LEFT JOIN {_part_of(db, "step_buckets", "anchor", parts, i)} b ON b.anchor = w.anchor
    """ for i in range(parts)]  # every input is cut, so every hash table shrinks
    _create_in_parts(db, "steps", part_sql)


def _part_of(db: Store, table: str, key: str, parts: int, i: int) -> str:
    """SQL: the rows of ``table`` whose ``key`` falls in part ``i`` of ``parts`` (the table itself for one part)."""
    return table if parts == 1 else f"(SELECT * FROM {table} WHERE {db.dialect.in_part(key, parts, i)})"


def _create_in_parts(db: Store, name: str, part_sql: list[str]) -> None:
    """(Re)create the working table ``name`` from the first query of ``part_sql``, then append the others."""
    db.create(name, part_sql[0])
    for sql in part_sql[1:]:
        db.execute(f"INSERT INTO {name} {sql}")


def _rank_parts(db: Store, timed: bool = False, blocked: bool = False) -> None:
    """``rank_parts``: per rank, of the spans ``k`` holds, the first start and last end of its well-timed spans
    and its counted buckets (on the clock their work ran on), with device times (``timed``) its counted leaves
    and device-timed ones: sums and bounds, so the parts of a run add up in :func:`_rank_totals`."""
    counts = ("count(*) FILTER (WHERE k.counted) AS leaves, "
              "count(*) FILTER (WHERE k.counted AND k.dev_start IS NOT NULL) AS timed") if timed else "0 AS leaves, 0 AS timed"
    db.create("rank_parts", f"""
        SELECT k.rank_label AS rank_label, min(k.rank) AS rank, min(k.start_ns) FILTER (WHERE k.ok) AS first_ns,
               max(k.end_ns) FILTER (WHERE k.ok) AS last_ns,
               {", ".join(f"coalesce(sum({leaf_ns('k', blocked)}) FILTER (WHERE k.counted AND k.bucket = '{x}'), 0) AS {x}"
                          for x in BUCKETS)}, {counts}
        FROM k{leaf_join('k', blocked)} GROUP BY k.rank_label
    """)


def _rank_totals(db: Store) -> None:
    """``rank_totals`` from every part's ``rank_parts``: per rank its processes, wall (first start to last end)
    and counted buckets, and its counted leaves and device-timed ones."""
    db.create("rank_totals", f"""
        WITH processes AS (SELECT rank_label, count(DISTINCT process) AS n FROM rank_process_parts GROUP BY rank_label)
        SELECT k.rank_label AS rank_label, min(k.rank) AS rank, {db.dialect.any_value('p.n')} AS processes,
               coalesce(max(k.last_ns) - min(k.first_ns), 0) AS wall_ns,
               {", ".join(f"sum(k.{x}) AS {x}" for x in BUCKETS)}, sum(k.leaves) AS leaves, sum(k.timed) AS timed
        FROM rank_parts k JOIN processes p ON p.rank_label = k.rank_label GROUP BY k.rank_label
    """)
    db.drop("rank_parts")


def _rank_order(db: Store) -> list[str]:
    """Rank labels in numeric order (``rank 2`` before ``rank 10``), then processes without a rank."""
    return [label for (label,) in db.rows("SELECT rank_label FROM rank_totals ORDER BY rank NULLS LAST, rank_label")]


def _rank_steps(db: Store, timed: bool = False) -> tuple[list[str], RankSteps]:
    """``rank_steps``: per (iteration, rank index) the wall and buckets (on the clock their work ran on:
    busy time on that clock is productive + overhead + wasted), its counted ``leaves`` and how many are
    device-timed (``timed``; both 0 in a run without device times); and the same figures in Python."""
    labels = _rank_order(db)
    db.create_columns("rank_index", "rank_label VARCHAR, idx INTEGER", [[label, i] for i, label in enumerate(labels)])
    db.create("rank_steps", f"""
        SELECT s.iteration AS iteration, r.idx AS rank, sum(s.wall_ns) AS wall_ns,
               {", ".join(f"sum(s.{x}) AS {x}" for x in BUCKETS)}, sum({BUSY_NS.format(s="s")}) AS busy_ns,
               {"coalesce(sum(d.leaves), 0) AS leaves, coalesce(sum(d.timed), 0) AS timed" if timed
                else "0 AS leaves, 0 AS timed"}
        FROM steps s JOIN rank_index r ON r.rank_label = s.rank_label
        {"LEFT JOIN device_steps d ON d.anchor = s.anchor" if timed else ""}
        GROUP BY s.iteration, r.idx
    """)
    result = RankSteps(tuple(labels))
    columns = (result.iterations, result.ranks, result.wall_ns, result.productive_ns, result.overhead_ns,
               result.idle_ns, result.wasted_ns, result.busy_ns)
    select = f"SELECT iteration, rank, wall_ns, {', '.join(BUCKETS)}, busy_ns FROM rank_steps"
    if db.dialect.clickhouse:  # its server sorts, then streams the result in blocks: one statement
        queries = [f"{select} ORDER BY iteration, rank"]
    else:
        # in slices of whole steps: DuckDB holds a sorted result in this process until it is read
        # (1,000 ranks x 500 steps held ~60 MB, the peak of a 10M-span report); a step always has an iteration
        counts = db.rows("SELECT iteration, count(*) FROM rank_steps GROUP BY iteration ORDER BY iteration")
        # the engine gives up what the figures will take before they are read, not after: lowered
        # once they were in Python, its limit no longer bounded the peak (245 MiB at 10M spans)
        db.hold_outside(sum(n for _, n in counts) * CELL_BYTES)
        queries = [f"{select} WHERE iteration BETWEEN {int(low)} AND {int(high)} ORDER BY iteration, rank"
                   for low, high in _slices(counts, _SLICE_ROWS)]
    for query in queries:
        for chunk in db.int_columns(query):
            for column, values in zip(columns, chunk):
                column.extend(values)
    return labels, result


_SLICE_ROWS = 50_000
CELL_BYTES = 10 * 8
"""What a (rank, step) of a report takes in Python: its 8 figures, and its index twice in the aggregates."""

BUSY_NS = "greatest(0, {s}.wall_ns - {s}.idle)"
"""SQL (``.format(s=alias)``): a step's busy time on one rank, the one definition the straggler scores use.

Busy is the step's wall time less the time the rank waited: its ``idle`` bucket (barriers,
collective waits, a starved buffer), so a rank that only waited for a slower one is never busy
for it. Host clock today. Device-clock hook: where step spans carry
``lens.device.start_time_unix_nano``/``lens.device.end_time_unix_nano`` (recorded by the device
side), the store will read them as columns and this expression takes the device times in place
of ``wall_ns``/``idle``; nothing downstream changes, every score reads ``rank_steps.busy_ns``."""


def _slices(counts: list[tuple[Any, ...]], size: int) -> Iterator[tuple[int, int]]:
    """(first, last) keys of consecutive runs of ``counts`` ((key, rows) in key order) of about ``size`` rows each."""
    first = total = None
    for key, n in counts:
        if first is None:
            first, total = key, 0
        total += n
        if total >= size:
            yield first, key
            first = None
    if first is not None:
        yield first, counts[-1][0]


def _step_rows(db: Store, labels: list[str], rank_steps: RankSteps) -> tuple[StepRow, ...]:
    """Per iteration: sums over ranks, the spread of step times, the slowest rank and the wait for it."""
    d = db.dialect
    # the slowest rank of a step: the one rank with the most busy time; when two or more share
    # the most, no rank is the slowest (a tie ranks nothing), though the others still waited
    db.create("step_spread", f"""
        WITH top AS (SELECT iteration, max(busy_ns) AS top_busy, min(rank) AS first_rank FROM rank_steps
                     GROUP BY iteration),
        slow AS (SELECT b.iteration AS iteration, t.top_busy AS top_busy, t.first_rank AS first_rank,
                        CASE WHEN count(*) = 1 THEN min(b.rank) END AS slowest
                 FROM rank_steps b JOIN top t ON t.iteration = b.iteration AND b.busy_ns = t.top_busy
                 GROUP BY b.iteration, t.top_busy, t.first_rank)
        SELECT b.iteration AS iteration, count(*) AS ranks, sum(b.wall_ns) AS wall_ns,
               {", ".join(f"sum(b.{x}) AS {x}" for x in BUCKETS)},
               min(b.wall_ns) AS wall_min, {d.median('b.wall_ns')} AS wall_median, max(b.wall_ns) AS wall_max,
               {d.any_value('s.slowest')} AS slowest, {d.any_value('s.first_rank')} AS first_rank,
               sum(greatest(0, s.top_busy - b.busy_ns)) AS wait_ns
        FROM rank_steps b JOIN slow s ON s.iteration = b.iteration GROUP BY b.iteration
    """)
    # each step's span on its slowest rank (else its first): the first of the rank's step rows, ordered over those
    # ranks' rows alone (at 5M (rank, step) cells a window over every step row took 1.1 GB of chdb, this 0.6 GB)
    rows = db.rows(f"""
        WITH pick AS (SELECT p.iteration AS iteration, r.rank_label AS rank_label FROM step_spread p
                      JOIN rank_index r ON r.idx = coalesce(p.slowest, p.first_rank))
        SELECT p.iteration, p.ranks, p.wall_ns, {", ".join(f"p.{x}" for x in BUCKETS)}, p.wall_min, p.wall_median,
               p.wall_max, p.slowest, p.wait_ns, {d.hex_id('a.trace', 32)}, {d.hex_id('a.span', 16)}, a.name, a.method
        FROM step_spread p
        JOIN rank_index r ON r.idx = coalesce(p.slowest, p.first_rank)
        JOIN (SELECT s.iteration AS iteration, s.rank_label AS rank_label, s.trace AS trace, s.span AS span,
                     s.name AS name, s.method AS method,
                     row_number() OVER (PARTITION BY s.iteration, s.rank_label ORDER BY s.start_ns, s.anchor) AS n
              FROM steps s JOIN pick k ON k.iteration = s.iteration AND k.rank_label = s.rank_label) a
          ON a.iteration = p.iteration AND a.rank_label = r.rank_label AND a.n = 1
        ORDER BY p.iteration
    """)
    steps = []
    for (iteration, ranks, wall, prod, over, idle, waste, wmin, wmed, wmax, slowest, wait, trace, span, name,
         method) in rows:
        totals = BucketTotals(int(wall), dict(zip(BUCKETS, (int(prod), int(over), int(idle), int(waste)))))
        steps.append(StepRow(iteration, trace, span, name, method, totals, int(ranks), int(wmin), float(wmed),
                             int(wmax), "" if slowest is None else labels[slowest], int(wait)))
    return tuple(steps)


def _ranks(db: Store, labels: list[str], rank_steps: RankSteps) -> tuple[tuple[RankRow, ...], BucketTotals]:
    """Per rank: wall (first start to last end of its spans), buckets of its own spans, straggler cost."""
    rows = db.rows(f"""
        SELECT r.idx, t.processes, t.wall_ns, {", ".join(f"t.{x}" for x in BUCKETS)}
        FROM rank_totals t JOIN rank_index r ON r.rank_label = t.rank_label ORDER BY r.idx
    """)
    cost = db.rows("""
        SELECT p.slowest, count(DISTINCT p.iteration), sum(greatest(0, s.busy_ns - b.busy_ns)),
               sum(least(b.idle, greatest(0, s.busy_ns - b.busy_ns)))
        FROM step_spread p JOIN rank_steps s ON s.iteration = p.iteration AND s.rank = p.slowest
        JOIN rank_steps b ON b.iteration = p.iteration AND b.rank <> p.slowest
        WHERE p.slowest IS NOT NULL
        GROUP BY p.slowest
    """)
    costs = {slowest: (n, int(c), int(idle)) for slowest, n, c, idle in cost}
    step_counts = Counter(rank_steps.ranks)
    ranks = []
    run_wall = 0
    run_buckets = dict.fromkeys(BUCKETS, 0)
    for idx, processes, wall, *buckets in rows:
        wall = int(wall or 0)
        bucket_ns = dict(zip(BUCKETS, map(int, buckets)))
        run_wall += wall
        for name in BUCKETS:
            run_buckets[name] += bucket_ns[name]
        n, c, idle = costs.get(idx, (0, 0, 0))
        ranks.append(RankRow(labels[idx], int(processes), BucketTotals(wall, bucket_ns), step_counts[idx],
                             n, c, idle))
    return tuple(ranks), BucketTotals(run_wall, run_buckets)


def _top_spans(db: Store, top_n: int) -> tuple[TopSpan, ...]:
    """The ``top_n`` span names by total time (from every part's ``name_parts``)."""
    rows = db.rows(f"""
        SELECT name, sum(n), sum(total) AS total FROM name_parts
        GROUP BY name ORDER BY total DESC, name LIMIT {int(top_n)}
    """)
    return tuple(TopSpan(name, count, int(total)) for name, count, total in rows)


def _unfinished(db: Store, cond: str | None, parts: str = "process_parts") -> tuple[UnfinishedProcess, ...]:
    """Processes Lens set up, with spans or loss records in the run, but no final loss record. ``parts``: the
    per-process span counts (``rank_label``, ``process``, ``rank``, ``n`` of each process Lens set up): a table
    or a subquery in parentheses."""
    where = f"AND {cond}" if cond is not None else ""
    rows = db.rows(f"""
        WITH seen AS (
            SELECT rank_label, process, rank, n AS span FROM {parts}
            UNION ALL
            SELECT rank_label, process, rank, 0 AS span FROM loss WHERE lens_process {where}
        )
        SELECT {db.dialect.any_value('rank_label')}, process, sum(span), min(rank) FROM seen
        WHERE process NOT IN (SELECT process FROM loss WHERE loss[6] = 1 {where})
        GROUP BY process ORDER BY min(rank) NULLS LAST, process
    """)
    return tuple(UnfinishedProcess(rank, process, int(spans)) for rank, process, spans, _ in rows)


def _loss(db: Store, cond: str | None) -> tuple[LossRow, ...]:
    """Per process, its newest loss record (the counters are cumulative: the largest wins)."""
    where = f"WHERE {cond}" if cond is not None else ""
    rows = db.rows(f"""
        SELECT {db.dialect.any_value('rank_label')}, process,
               {", ".join(f"coalesce(max(loss[{i}]), 0)" for i in range(1, 6))}, min(rank)
        FROM loss {where} GROUP BY process ORDER BY min(rank) NULLS LAST, process
    """)
    return tuple(LossRow(rank, process, created, dropped, failed, unended, truncated)
                 for rank, process, created, dropped, failed, unended, truncated, _ in rows)
