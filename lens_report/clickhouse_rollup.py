"""The report's fast path over ClickHouse: the figures from the schema helper's rollup table (``<table>_lens_steps``).

``lens clickhouse-schema`` prints a per-(run, process, rank, step) rollup kept by a materialized
view at insert time (:func:`~lens_report.clickhouse_schema.rollup_sql`). When it covers the run
(its ``sum(Spans)`` is the table's count of the run's spans) and says nothing of the run needs the
spans, :func:`rollup_report` builds the report from its rows alone: the run goodput, the steps,
the ranks, the heatmap, the stragglers and their scores, and (from the few loss records) the lost
telemetry. It puts small working tables of the span report's shapes (``steps``, ``rank_totals``)
in the session and runs the span report's own figure code on them (:mod:`lens_report.rollup`'s
``_rank_steps``, ``_step_rows``, ``_ranks``), so the figures are computed once, one way.

Where the rollup cannot stand for the spans, :func:`rollup_report` returns the reason (text) and
the caller reads the spans. What only the spans give (traces, orphans, errors, the top span
names, the violations) is not computed: :data:`NOT_COMPUTED` names those JSON keys, and the
report's :class:`~lens_report.model.ReportPath` says so.
"""

from __future__ import annotations

from typing import Any

from lens_core import semconv

from .clickhouse import ClickHouseStore, _lens_columns, _processes, _projection
from .clickhouse_schema import ROLLUP_SUFFIX, check_table_name, rollup_version
from .dialect import CLICKHOUSE, ResourceFields, sql_text
from .model import BUCKETS, DEFAULT_STEP_PATTERN, Report, ReportPath, RunInfo

__all__ = ["NOT_COMPUTED", "PROCESS_TOTALS", "rollup_report", "rollup_table"]

NOT_COMPUTED = ("traces", "duplicate_spans", "orphan_spans", "error_spans", "top_spans", "violation_count",
                "violations_by_rule", "violations", "problems")
"""The JSON keys a report through the rollup leaves empty (0, [] or {}): each needs every span."""

_RANK_LABEL = ResourceFields.rank_label(CLICKHOUSE, "LensRank", "CAST(LensProcess AS String)")

_FLAGS = (
    # (SQL over the rollup's rows of one process, each row summed per key first: a count, > 0 where the rollup
    # cannot stand for the spans; why)
    ("sum(BadTimeSpans)", "{n:,} spans without both times or ending before they start"),
    ("sum(UncountedLeaves)", "{n:,} bucketed spans the report flags and does not count (violations)"),
    ("sum(DeviceTimedSpans)", "{n:,} spans with device times (the device clock)"),
    ("sumIf(CountedLeaves, LensStep IS NULL)", "{n:,} counted leaves without rl.iteration (their step is "
                                               "their parents')"),
    ("countIf(LensStep IS NOT NULL AND StepSpans <> 1)", "{n:,} (process, rank, step) rows without exactly one "
                                                         "step span (a step across processes, or no step span)"),
    ("countIf(LensStep IS NOT NULL AND MinTraceId <> MaxTraceId)", "{n:,} (process, rank, step) rows whose spans "
                                                                   "lie in several traces"),
)


def rollup_table(table: str) -> str:
    """The rollup table's name for the span table ``table`` (``[db.]name``)."""
    base = table.rsplit(".", 1)
    return ".".join([*base[:-1], base[-1] + ROLLUP_SUFFIX])


PROCESS_TOTALS = "rollup_processes"
"""The working table of the rollup's sums per (run, process, rank) (:func:`_process_totals`): the coverage, the
flags, the span facts and the rank totals read it; a row a process, whatever the number of steps."""


def _keyed(rollup: str, where: str, columns: str) -> str:
    """ClickHouse SQL: the rollup's rows of ``where`` added up per key (parts not yet merged hold several):
    ``columns``, select items over the rollup's columns (aggregates), besides the key."""
    return (f"(SELECT LensRun, LensProcess, LensRank, LensStep, {columns}"
            f" FROM {rollup} WHERE {where} GROUP BY LensRun, LensProcess, LensRank, LensStep)")


_TRACE = "reinterpretAsUInt128(reverse(unhex({})))"
"""SQL (``.format(column)``): a TraceId's hex as the number the span report holds (cheaper to compare than text)."""


def _process_totals(rollup: str, where: str) -> str:
    """ClickHouse SQL: per (run, process, rank) of the rollup's rows of ``where``, the sums the report reads
    besides the steps, and each flag of :data:`_FLAGS` (``flag0``...), counted over the rows summed per key.
    Two aggregations of the rollup's rows (this and the steps'), not one a figure: four took 0.8 s at 10M
    spans (500,000 rows); a table of every key, read four times, held 0.5 GB more at 2M rows."""
    sums = ", ".join(f"sum({c}) AS {c}" for c in ("Spans", "CountedLeaves", "UncountedLeaves", "BadTimeSpans",
                                                   "DeviceTimedSpans", "StepSpans",
                                                   *(f"{b.capitalize()}Ns" for b in BUCKETS)))
    bounds = (f"min({_TRACE.format('MinTraceId')}) AS MinTraceId, max({_TRACE.format('MaxTraceId')}) AS MaxTraceId,"
              " min(FirstStartNs) AS FirstStartNs, max(LastEndNs) AS LastEndNs")
    flags = ", ".join(f"{sql} AS flag{i}" for i, (sql, _) in enumerate(_FLAGS))
    totals = f"""
        SELECT LensRun, CAST(LensProcess AS String) AS LensProcess, LensRank, sum(Spans) AS Spans,
               {", ".join(f"sum({b.capitalize()}Ns) AS {b.capitalize()}Ns" for b in BUCKETS)},
               min(FirstStartNs) AS FirstStartNs, max(LastEndNs) AS LastEndNs, {flags}
        FROM {_keyed(rollup, where, f"{sums}, {bounds}")} GROUP BY LensRun, LensProcess, LensRank"""
    return f"SELECT *, {_RANK_LABEL} AS RankLabel FROM ({totals})"


def rollup_report(source: Any, table: str, *, run: str | None = None, attempt: int | None = None,
                  step_pattern: str = DEFAULT_STEP_PATTERN) -> Report | str:
    """The report of one run of ``table`` from its rollup table, or why it must be read from the spans (text).

    Raises :class:`~lens_report.rollup.RunChoiceError` when ``run`` is None and the rollup covers
    several runs (as the span report does). ``attempt``: the rollup reads a run launched once;
    a run launched more than once is read from the spans.
    """
    from .rollup import SPAN_FACTS, RunChoiceError, _rank_steps, _ranks, _step_rows, list_attempts

    check_table_name(table)
    if step_pattern != DEFAULT_STEP_PATTERN:
        return f"--step-pattern {step_pattern!r} is not the rollup's {DEFAULT_STEP_PATTERN!r}: reading the spans"
    rollup = rollup_table(table)
    database, _, name = rollup.rpartition(".")
    where_db = f"database = {sql_text(database)}" if database else "database = currentDatabase()"
    found = source.rows(f"SELECT comment FROM system.tables WHERE {where_db} AND name = {sql_text(name)}")
    if not found:
        return f"no rollup table {rollup} (lens clickhouse-schema prints it): reading the spans"
    if not str(found[0][0]).startswith(rollup_version()):
        return (f"the rollup table {rollup} is not '{rollup_version()}' (an older lens made it): reading the spans; "
                f"DROP it and its _mv, then create them again with lens clickhouse-schema --backfill")
    quoted = check_table_name(rollup)
    with ClickHouseStore(source, table, run=run) as store:
        columns = store.table_columns()
        lens = _lens_columns(columns)
        run_cond = "true" if run is None else f"LensRun = {sql_text(run)}"
        loss_name = sql_text(semconv.LENS_LOSS_SPAN_NAME)
        store.create(PROCESS_TOTALS, _process_totals(quoted, run_cond))
        flags = ", ".join(f"sum(flag{i})" for i in range(len(_FLAGS)))
        rows = store.rows(f"""
            SELECT LensRun, sum(Spans), uniqExact(RankLabel), uniqExact(LensProcess), min(FirstStartNs),
                   max(LastEndNs), {flags}
            FROM {PROCESS_TOTALS} GROUP BY LensRun ORDER BY min(FirstStartNs), LensRun""")
        held = {row[0]: row for row in rows}
        # coverage: the rollup holds every span of the run exactly once (a view made after rows were
        # inserted, and no backfill, holds fewer; a backfill run twice, more)
        run_column = "LensRun" if "LensRun" in columns else lens["LensRun"]
        counted = _span_counts(store, f"{check_table_name(table)} WHERE SpanName <> {loss_name} AND "
                               f"{run_cond.replace('LensRun', run_column)}", run_column, list(held))
        uncovered = [(r, held[r][1] if r in held else 0, n) for r, n in sorted(counted.items())
                     if (held[r][1] if r in held else 0) != n]
        if run is None and len(counted) > 1:
            if uncovered:
                r, rolled, n = uncovered[0]
                return (f"the rollup covers {rolled:,} of {n:,} spans of run {r!r}: reading the spans")
            # runs whose spans are gone from the table (a TTL) may linger in the rollup: not listed
            runs = tuple(RunInfo(r, int(ranks), int(processes), int(spans), start, end)
                         for r, spans, ranks, processes, start, end, *_ in rows if r in counted)
            raise RunChoiceError(f"the input holds {len(runs)} runs; choose one with --run ID: "
                                 f"{', '.join(repr(info.run_id) for info in runs)}", runs)
        if not counted:
            return f"no spans of run {run!r} in {table}: reading the spans" if run else f"no spans in {table}"
        run_id = next(iter(counted))
        if uncovered:
            r, rolled, n = uncovered[0]
            return (f"the rollup covers {rolled:,} of {n:,} spans of run {r!r}: reading the spans (rows inserted "
                    "before its view was made: lens clickhouse-schema --backfill fills them)")
        _r, spans, _ranks_n, _processes_n, _start, _end, *flagged = held[run_id]
        for n, (_sql, why) in zip(flagged, _FLAGS):
            if n:
                return f"the rollup holds {why.format(n=int(n))} of run {run_id!r}: reading the spans"

        # loss records (a handful of rows) and each process's resource fields, as the span report reads them
        cond = f"{run_column} = {sql_text(run_id)}"
        this_run = f"LensRun = {sql_text(run_id)}"
        # a process's resource fields from the rows at its first start, which the rollup holds (the loss
        # records', for a process that wrote nothing else)
        firsts = (f"SELECT fromUnixTimestamp64Nano(FirstStartNs), LensProcess FROM {PROCESS_TOTALS} WHERE {this_run}"
                  f" UNION ALL SELECT Timestamp, {lens['LensProcess']} FROM {check_table_name(table)}"
                  f" WHERE {cond} AND SpanName = {loss_name}")
        store.create("span_processes", _processes(table, columns, cond, firsts))
        store.create("loss", _projection(table, columns, False, f"{cond} AND SpanName = {loss_name}", loss=True))
        # the span facts a row a process (no bad times: see _FLAGS), what the attempts and the unfinished
        # processes read (lens_process: whether Lens set it up)
        store.create(SPAN_FACTS, f"""
            SELECT any(k.LensRun) AS run, k.LensProcess AS process, any(k.RankLabel) AS rank_label,
                   CAST(NULL AS Nullable(String)) AS name, min(k.LensRank) AS rank,
                   toInt64(sum(k.Spans)) AS n, min(k.FirstStartNs) AS first_ns, max(k.LastEndNs) AS last_ns,
                   first_ns AS first_timed, last_ns AS last_timed, toInt64(0) AS dev_n, any(p.lens) AS lens_process
            FROM {PROCESS_TOTALS} k LEFT JOIN span_processes p ON p.label = k.LensProcess
            WHERE k.{this_run} GROUP BY k.LensProcess""")
        attempts = list_attempts(store, run_id)
        if len(attempts) > 1:
            return (f"run {run_id!r} was launched {len(attempts)} times: reading the spans (the rollup reads a run "
                    "launched once)")
        if attempt not in (None, 1):
            return f"run {run_id!r} was launched once; there is no attempt {attempt}: reading the spans"

        bucket_sums = ", ".join(f"toInt64(sum({b.capitalize()}Ns)) AS {b}" for b in BUCKETS)
        store.create("rank_totals", f"""
            SELECT RankLabel AS rank_label, min(LensRank) AS rank, toInt64(uniqExact(LensProcess)) AS processes,
                   toInt64(max(LastEndNs) - min(FirstStartNs)) AS wall_ns, {bucket_sums},
                   toInt64(0) AS leaves, toInt64(0) AS timed
            FROM {PROCESS_TOTALS} WHERE {this_run} GROUP BY rank_label""")
        # the step span's ids as the numbers the span report holds, made before the max: the row's one step
        # span's (a row without exactly one is never read: _FLAGS)
        step = ", ".join((*(f"sum({b.capitalize()}Ns) AS {b}" for b in BUCKETS),
                          "max(StepStartNs) AS start_ns", "max(StepEndNs) AS end_ns",
                          f"max({_TRACE.format('StepTraceId')}) AS trace",
                          "max(reinterpretAsUInt64(reverse(unhex(StepSpanId)))) AS span", "max(StepName) AS name"))
        store.create("steps", f"""
            SELECT toInt64(rowNumberInAllBlocks()) AS anchor, LensRank AS rank, {_RANK_LABEL} AS rank_label,
                   LensStep AS iteration, trace, span, name, toInt64(end_ns - start_ns) AS wall_ns,
                   'pattern' AS method, start_ns, {", ".join(f"toInt64({b}) AS {b}" for b in BUCKETS)}
            FROM {_keyed(quoted, f"{this_run} AND LensStep IS NOT NULL", step)}""")
        labels, rank_steps = _rank_steps(store)
        steps = _step_rows(store, labels, rank_steps)
        ranks, run_totals = _ranks(store, labels, rank_steps)
        loss, unfinished = _loss_and_unfinished(store)
        return Report(
            run_id=run_id, files=(f"clickhouse:{table}",), span_count=int(spans), trace_count=0, duplicate_count=0,
            orphan_count=0, error_count=0, step_pattern=DEFAULT_STEP_PATTERN, steps=steps, run=run_totals,
            ranks=ranks, rank_steps=rank_steps, top_spans=(), violations=(), problems=(), loss=loss,
            unfinished=unfinished,
            path=ReportPath("rollup", f"{rollup} covers all {int(spans):,} spans of run {run_id!r}",
                            not_computed=NOT_COMPUTED))


def _span_counts(store: ClickHouseStore, rows: str, run: str, runs: list[str]) -> dict[str, int]:
    """The spans of ``rows`` (``table WHERE ...``) per run (SQL ``run``), those of each of ``runs`` (the rollup's)
    counted in one pass that compares the column with each: 0.06 s at 100M spans, where grouping by the run
    takes 0.36 s. Grouped only when the rows hold spans of another run (whose name the message gives)."""
    each = "".join(f", countIf({run} = {sql_text(r)})" for r in runs)
    total, *counts = (int(n or 0) for n in store.rows(f"SELECT count(){each} FROM {rows}")[0])
    if total == sum(counts):
        return {r: n for r, n in zip(runs, counts) if n}
    return {r: int(n) for r, n in store.rows(f"SELECT {run} AS run, count() FROM {rows} GROUP BY run")}


def _loss_and_unfinished(store: ClickHouseStore) -> tuple[Any, Any]:
    """The run's loss records per process and the processes Lens set up that wrote no final one: the span
    report's ``_loss`` and ``_unfinished``, its per-process span counts from the rollup's span facts."""
    from .rollup import SPAN_FACTS, _loss, _unfinished

    parts = f"(SELECT rank_label, process, n, rank FROM {SPAN_FACTS} WHERE lens_process)"
    return _loss(store, None), _unfinished(store, None, parts)
