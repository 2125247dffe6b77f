"""The Collector's ClickHouse table (``otel_traces``): its DDL, the columns Lens materializes, the per-step rollup."""

from __future__ import annotations

import re
from typing import Any

from lens_core import semconv

from .dialect import CLICKHOUSE, ResourceFields, SpanFields, sql_text
from .model import BUCKET_ATTR, ITERATION_ATTR

__all__ = [
    "LENS_COLUMNS",
    "ROLLUP_SUFFIX",
    "check_table_name",
    "otel_traces_ddl",
    "rollup_sql",
    "schema_sql",
]

LENS_COLUMNS = {"LensRun": "run", "LensRank": "rank", "LensStep": "step", "LensBucket": "bucket",
                "LensProcess": "process"}
"""Materialized columns ``lens clickhouse-schema`` adds to the table, and what each holds."""

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def check_table_name(table: str) -> str:
    """``table`` (``name`` or ``database.name``) quoted for SQL; ValueError naming what is allowed otherwise."""
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"a table is NAME or DATABASE.NAME of letters, digits and '_', got {table!r}")
    return ".".join(f"`{part}`" for part in table.split("."))


def otel_traces_ddl(table: str = "otel_traces") -> str:
    """The table the Collector's ClickHouse exporter (contrib ``clickhouseexporter``) creates for spans.

    The columns and types are the exporter's (``Timestamp`` is the span's start, ``Duration`` its
    length in ns, attribute values as text in ``Map(LowCardinality(String), String)``); the
    sort key and indexes are one release's and have changed across releases: the report reads
    column names only.
    """
    name = check_table_name(table)
    return f"""CREATE TABLE IF NOT EXISTS {name} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (Timestamp DateTime64(9), Name LowCardinality(String),
                   Attributes Map(LowCardinality(String), String)) CODEC(ZSTD(1)),
    Links Nested (TraceId String, SpanId String, TraceState String,
                  Attributes Map(LowCardinality(String), String)) CODEC(ZSTD(1))
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192"""


def _map_lookup(column: str, key: str) -> str:
    """ClickHouse SQL: ``key``'s value in the map ``column``, NULL when absent, as a ClickHouse user writes it
    (``mapContains(M, 'k')`` and ``M['k']``: two searches of the keys, where the report's own reads use one,
    :meth:`~lens_report.dialect.Dialect.map_value`; the schema helper's columns compute it once a row, at insert)."""
    return f"if(mapContains({column}, {sql_text(key)}), {column}[{sql_text(key)}], NULL)"


# the resource and span fields read from the exporter's maps: a missing key is NULL, as in files
def _resource_fields(res: str = "ResourceAttributes", lookup: Any = CLICKHOUSE.map_value) -> ResourceFields:
    return ResourceFields(
        CLICKHOUSE, run=lookup(res, semconv.NEMO_RUN_ID),
        instance=lookup(res, semconv.SERVICE_INSTANCE_ID),
        rank_text=lookup(res, semconv.NV_DL_RANK), pid_text=lookup(res, semconv.PROCESS_PID),
        host=lookup(res, semconv.HOST_NAME), service=lookup(res, semconv.SERVICE_NAME),
        distro=lookup(res, semconv.TELEMETRY_DISTRO_NAME))


def _span_attr(key: str) -> str:
    return CLICKHOUSE.map_value("SpanAttributes", key)


# SpanKind as stored (LowCardinality in the exporter's table): the kind's text functions then run once per
# distinct value, not once per row; the store casts the result to String
_SPAN = SpanFields(CLICKHOUSE, kind_text="SpanKind", status_text="CAST(StatusCode AS String)")

_COLUMN_NOTES = {
    "LensRun": f"the run: resource {semconv.NEMO_RUN_ID}, else what {semconv.SERVICE_INSTANCE_ID} holds before "
               "-rankN, else ''",
    "LensRank": f"the rank: resource {semconv.NV_DL_RANK} when it is an integer, else NULL",
    "LensStep": f"the training step: span attribute {ITERATION_ATTR} when it is an integer, else NULL",
    "LensBucket": f"the goodput bucket of a leaf span: span attribute {BUCKET_ATTR} (productive, overhead, idle, "
                  "wasted), else NULL",
    "LensProcess": f"the process: {semconv.SERVICE_INSTANCE_ID}, else 'pid P@HOST', else the service name",
}
"""What each materialized column holds, printed above its DDL by ``lens clickhouse-schema``."""


def _materialized(lookup: Any = CLICKHOUSE.map_value) -> dict[str, tuple[str, str]]:
    """column -> (type, expression) of the materialized columns, reading the maps with ``lookup``: the
    report's fast form (the default, for a table without the columns) or :func:`_map_lookup` (the DDL)."""
    res = _resource_fields(lookup=lookup)
    return {
        "LensRun": ("LowCardinality(String)", res.run_id()),
        "LensRank": ("Nullable(Int64)", res.rank()),
        "LensStep": ("Nullable(Int64)", _SPAN.iteration(lookup("SpanAttributes", ITERATION_ATTR))),
        "LensBucket": ("LowCardinality(Nullable(String))", lookup("SpanAttributes", BUCKET_ATTR)),
        # the process label (instance id, else pid@host, else service): its other resource fields are
        # read once per process, not once per span
        "LensProcess": ("LowCardinality(String)", res.process()),
    }


ROLLUP_SUFFIX = "_lens_steps"
"""The rollup table's name is the span table's with this suffix (its view's adds ``_mv``)."""

_ROLLUP_COLUMNS = (
    ("LensRun", "LowCardinality(String)", "LensRun", "the run"),
    ("LensProcess", "LowCardinality(String)", "LensProcess",
     "the process (a launch of the run, an attempt, is a set of processes: told apart when read)"),
    ("LensRank", "Int64", "assumeNotNull(LensRank)", "the rank"),
    ("LensStep", "Int64", "assumeNotNull(LensStep)", "the training step"),
    ("Spans", "UInt64", "count()", "spans of the step on the rank (the report's coverage check counts them)"),
    ("LeafSpans", "UInt64", "countIf(LensBucket IS NOT NULL)", "of which leaves with a goodput bucket"),
    *((f"{b.capitalize()}Ns", "UInt64", f"sumIf(Duration, LensBucket = '{b}')", f"nanoseconds of {b} leaves")
      for b in ("productive", "overhead", "idle", "wasted")),
    ("FirstStartNs", "SimpleAggregateFunction(min, Int64)", "min(toUnixTimestamp64Nano(Timestamp))",
     "the step's first start on the rank (ns since the epoch)"),
    ("LastEndNs", "SimpleAggregateFunction(max, Int64)", "max(toUnixTimestamp64Nano(Timestamp) + toInt64(Duration))",
     "its last end: the step's wall time is LastEndNs - FirstStartNs"),
)
"""The rollup's columns: (name, type, aggregate over the span table's rows, what it holds)."""


def rollup_sql(table: str = "otel_traces") -> tuple[str, str, str]:
    """The per-(run, process, rank, step) rollup of ``table``'s stamped spans: (its table, the materialized view
    that adds each insert's rows to it, the backfill: the same rows of what the table already holds).

    Each column's comment says what it holds. A SummingMergeTree: rows of one key (an insert's
    part of a step) are added up as parts merge, so a reader sums them (``sum() ... GROUP BY``).
    """
    name = check_table_name(table)
    base = table.rsplit(".", 1)
    target = check_table_name(".".join([*base[:-1], base[-1] + ROLLUP_SUFFIX]))
    view = check_table_name(".".join([*base[:-1], base[-1] + ROLLUP_SUFFIX + "_mv"]))
    width = max(len(column) + len(kind) for column, kind, _, _ in _ROLLUP_COLUMNS) + 2
    columns = ",\n".join(f"    {f'{column} {kind}':<{width}} COMMENT {sql_text(note)}"
                         for column, kind, _, note in _ROLLUP_COLUMNS)
    create = (f"CREATE TABLE IF NOT EXISTS {target} (\n{columns}\n) ENGINE = SummingMergeTree "
              "ORDER BY (LensRun, LensStep, LensRank, LensProcess)\n"
              "COMMENT " + sql_text(f"lens: per (run, process, rank, step) sums of the spans of {table} stamped "
                                    "with rl.iteration"))
    # named as the target's columns (a view fills them by name); the rows filtered in a subquery, as the
    # aliases LensRank and LensStep would otherwise stand for assumeNotNull(...) in WHERE
    picked = ",\n       ".join(expr if expr == column else f"{expr} AS {column}"
                                for column, _, expr, _ in _ROLLUP_COLUMNS)
    select = (f"SELECT {picked}\n"
              f"FROM (SELECT LensRun, LensProcess, LensRank, LensStep, LensBucket, Timestamp, Duration FROM {name}\n"
              "      WHERE LensRank IS NOT NULL AND LensStep IS NOT NULL)\n"
              "GROUP BY LensRun, LensProcess, LensRank, LensStep")
    return (create, f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view} TO {target} AS\n{select}",
            f"INSERT INTO {target}\n{select}")


def schema_sql(table: str = "otel_traces", *, rollup: bool = True, backfill: bool = False) -> str:
    """What ``lens clickhouse-schema`` prints: materialized columns for run id, rank, step, bucket and process,
    and (``rollup``) a per-(run, process, rank, step) rollup table kept by a materialized view at insert
    time (:func:`rollup_sql`); with ``backfill`` also the statements that fill the columns and the rollup
    for the rows already in the table.

    Each statement has a comment saying what it is for. The report uses the columns when the
    table has them and reads the maps otherwise.
    """
    name = check_table_name(table)
    lines = ["-- lens: columns computed once per row at insert time, so the report scans them instead of",
             "-- looking keys up in the attribute maps of every span (the report reads the maps when they are absent)"]
    for column, (kind, expr) in _materialized(_map_lookup).items():
        lines.append(f"-- {column}: {_COLUMN_NOTES[column]}")
        lines.append(f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {column} {kind} MATERIALIZED {expr};")
    if not backfill:
        lines += ["-- rows inserted before: lens clickhouse-schema --backfill prints the statements that fill them"]
    if rollup:
        create, view, fill = rollup_sql(table)
        lines += [
            "-- lens (optional): one row per (run, process, rank, step): counts, nanoseconds of the leaf spans in",
            "-- each goodput bucket and the step's bounds, kept at insert time (for dashboards; lens report reads",
            "-- the spans today). It replaces otel_traces_lens_rank_steps and its _mv of earlier versions",
            create + ";",
            "-- lens: the view that adds each insert's stamped spans to the rollup",
            view + ";",
        ]
    if backfill:
        lines += [
            "-- lens --backfill: the rows already in the table. First the columns (a background mutation:",
            "-- SELECT * FROM system.mutations WHERE NOT is_done shows it at work) ...",
            f"ALTER TABLE {name} MATERIALIZE COLUMN LensRun, MATERIALIZE COLUMN LensRank, MATERIALIZE COLUMN LensStep, "
            "MATERIALIZE COLUMN LensBucket, MATERIALIZE COLUMN LensProcess SETTINGS mutations_sync = 1;",
        ]
        if rollup:
            lines += [
                "-- ... then the rollup, once, right after the view is created: rows inserted between the two are",
                "-- counted twice (a run's sum(Spans) then exceeds its count() of stamped rows in the table)",
                fill + ";",
            ]
    return "\n".join(lines) + "\n"
