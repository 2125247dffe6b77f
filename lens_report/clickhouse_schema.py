"""The Collector's ClickHouse table (``otel_traces``): its DDL, the columns Lens materializes, the per-step rollup."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from lens_core import semconv

from .dialect import CLICKHOUSE, ResourceFields, SpanFields, sql_text
from .model import BUCKET_ATTR, DEFAULT_STEP_PATTERN, ITERATION_ATTR

__all__ = [
    "LENS_COLUMNS",
    "ROLLUP_SUFFIX",
    "ROLLUP_VERSION",
    "check_table_name",
    "otel_traces_ddl",
    "rollup_sql",
    "rollup_version",
    "schema_sql",
]

LENS_COLUMNS = {"LensRun": "run", "LensRank": "rank", "LensStep": "step", "LensBucket": "bucket",
                "LensProcess": "process", "LensGroup": "group", "LensUmbrella": "umbrella",
                "LensCategory": "category", "LensDeviceStart": "device start", "LensDeviceEnd": "device end"}
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
    "LensGroup": f"the span group: span attribute {semconv.LENS_GROUP}, else NULL",
    "LensUmbrella": f"span attribute {semconv.LENS_UMBRELLA} as a boolean ('true'/'1', 'false'/'0'), else NULL",
    "LensCategory": f"the efficiency category: span attribute {semconv.RL_EFFICIENCY_CATEGORY}, else NULL",
    "LensDeviceStart": f"the device clock's start (ns): span attribute {semconv.LENS_DEVICE_START_TIME} when it "
                       "is a number, else NULL",
    "LensDeviceEnd": f"the device clock's end (ns): span attribute {semconv.LENS_DEVICE_END_TIME} when it is a "
                     "number, else NULL",
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
        # what every classifying pass reads of each span: without these the report reads the whole attribute
        # map once a pass (0.5 s of each pass at 10M spans)
        "LensGroup": ("LowCardinality(Nullable(String))", lookup("SpanAttributes", semconv.LENS_GROUP)),
        "LensUmbrella": ("Nullable(Bool)", CLICKHOUSE.to_bool(lookup("SpanAttributes", semconv.LENS_UMBRELLA))),
        "LensCategory": ("LowCardinality(Nullable(String))", lookup("SpanAttributes", semconv.RL_EFFICIENCY_CATEGORY)),
        "LensDeviceStart": ("Nullable(Int64)", _device_time(lookup("SpanAttributes", semconv.LENS_DEVICE_START_TIME))),
        "LensDeviceEnd": ("Nullable(Int64)", _device_time(lookup("SpanAttributes", semconv.LENS_DEVICE_END_TIME))),
    }


def _device_time(text: str) -> str:
    """ClickHouse SQL: a device time attribute's ``text`` (a string of digits) as nanoseconds, NULL when absent or
    not a time (the file reader's rule)."""
    return f"if({CLICKHOUSE.full_match(text, '[0-9]{1,19}')}, {CLICKHOUSE.to_int(text)}, NULL)"


ROLLUP_SUFFIX = "_lens_steps"
"""The rollup table's name is the span table's with this suffix (its view's adds ``_mv``)."""

_BUCKETS = ("productive", "overhead", "idle", "wasted")


def _texts(values: Any, indent: int) -> str:
    """ClickHouse SQL: an array of the texts ``values``, wrapped at ~110 characters, its lines after the first
    indented by ``indent`` spaces."""
    lines = [""]
    for text in (sql_text(v) for v in values):
        if lines[-1] and indent + len(lines[-1]) + len(text) > 108:
            lines[-1] += ","
            lines.append("")
        lines[-1] += (", " if lines[-1] else "") + text
    return "[" + f"\n{' ' * (indent + 1)}".join(lines) + "]"


def _top_level(sql: str, separators: tuple[str, ...]) -> list[str]:
    """``sql`` cut at each of ``separators`` found outside quotes, parentheses and brackets: a comma ends the
    part before it, any other separator (``" OR "``) begins the part after it. Only layout is decided by it:
    whitespace put between the parts changes no expression."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(sql):
        char = sql[i]
        cut = None if quoted or depth else next((sep for sep in separators if sql.startswith(sep, i)), None)
        if cut is not None:
            end = i + 1 if cut == "," else i
            parts.append(sql[start:end].strip())
            start, i = end, i + len(cut)
            continue
        if quoted:
            if char == "\\":
                i += 1
            elif char == "'":
                quoted = False
        elif char == "'":
            quoted = True
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        i += 1
    return [*parts, sql[start:].strip()]


def _readable(sql: str, indent: int, width: int = 110) -> str:
    """``sql`` (one expression) laid out for reading: as it is when it fits in ``width`` from ``indent``, else a
    function's arguments a line each, a ``CASE``'s ``WHEN``/``THEN``/``ELSE`` a line each, recursively."""
    if indent + len(sql) <= width:
        return sql
    pad = " " * (indent + 4)
    call = re.fullmatch(r"(\w+)\((.*)\)", sql, re.S)
    if call and len(_top_level(call.group(2), (")",))) == 1:  # no ')' closes the call early: not f(a) + g(b)
        args = _top_level(call.group(2), (",",))
        lines = [pad + _readable(arg.rstrip(","), indent + 4, width) for arg in args]
        return f"{call.group(1)}(\n" + ",\n".join(lines) + ")"
    if sql.startswith("CASE ") and sql.endswith(" END"):
        parts = [part.split(" ", 1) for part in _top_level(sql[5:-4], (" WHEN ", " THEN ", " ELSE "))]
        return "CASE " + f"\n{pad}".join(f"{word} {_readable(rest, indent + 5 + len(word), width)}"
                                          for word, rest in parts) + " END"
    for word in (" OR ", " AND "):
        terms = _top_level(sql, (word,))
        if len(terms) > 1:
            first, *rest = (term.removeprefix(word.strip()).strip() for term in terms)
            return _readable(first, indent, width) + "".join(
                f"\n{' ' * indent}{word.strip()} {_readable(term, indent + len(word) - 1, width)}" for term in rest)
    return sql


def _catalog_sql() -> tuple[tuple[tuple[str, str, str], ...], str]:
    """(the fields the rollup's view computes a row of the span table: (name, ClickHouse SQL, what it holds),
    in order, each free to read those before it; a short hash of what ``Counted`` depends on: the RL catalog's
    names and category rules, the default step pattern and this module's rules).

    ``Counted`` is the report's rule (:func:`lens_report.rollup._classify`), written apart over the maps: a
    counted leaf is well timed, carries ``rl.bucket`` of :data:`_BUCKETS`, is no umbrella (``lens.umbrella``;
    without ``lens.group`` the catalog's umbrella names), and neither its name (the catalog's never-bucketed
    names) nor its category (``rl.efficiency.category``, else the catalog's for its name) is one that must
    carry no bucket or is timer-only. A test holds the two to the same answer rule by rule.
    """
    import hashlib

    from .classify import _catalog_rows

    names, categories = _catalog_rows()
    umbrellas = sorted(name for name, _g, umbrella, _c, _n in names if umbrella)
    never = sorted(name for name, _g, _u, _c, reason in names if reason)
    named_categories = sorted((name, category) for name, _g, _u, category, _n in names if category)
    flagged_categories = sorted(category for category, _rule in categories)
    digest = hashlib.sha256(repr((names, categories, DEFAULT_STEP_PATTERN, _BUCKETS)).encode()).hexdigest()[:10]

    at = 13  # the inner query's indent in rollup_sql
    attr = "SpanAttributes[{}]".format
    umbrella, category = sql_text(semconv.LENS_UMBRELLA), sql_text(semconv.RL_EFFICIENCY_CATEGORY)
    device = attr(sql_text(semconv.LENS_DEVICE_START_TIME))
    fields = (
        ("StartNs", "toUnixTimestamp64Nano(Timestamp)", ""),
        ("EndNs", "StartNs + reinterpretAsInt64(Duration)", ""),
        ("WellTimed", "(StartNs <> 0 AND reinterpretAsInt64(Duration) >= 0)",
         "both times, and an end no earlier than the start (a Duration past 2^63 is an end before it)"),
        ("NameText", "CAST(SpanName AS String)", ""),
        ("UmbrellaFlag", f"multiIf(lower({attr(umbrella)}) IN ('true', '1'), true,\n{' ' * (at + 8)}"
                         f"lower({attr(umbrella)}) IN ('false', '0'), false, NULL)",
         f"{semconv.LENS_UMBRELLA} as a boolean, NULL when absent or not one"),
        ("EfficiencyCategory",
         f"if(mapContains(SpanAttributes, {category}), {attr(category)},\n{' ' * (at + 3)}transform(NameText,\n"
         f"{' ' * (at + 13)}{_texts((n for n, _ in named_categories), at + 13)},\n"
         f"{' ' * (at + 13)}{_texts((c for _, c in named_categories), at + 13)}, ''))",
         f"{semconv.RL_EFFICIENCY_CATEGORY}, else the RL catalog's category of the span's name"),
        ("Counted",
         f"coalesce(WellTimed\n{' ' * (at + 9)}AND has({_texts(_BUCKETS, at + 17)}, LensBucket)\n"
         f"{' ' * (at + 9)}AND NOT coalesce(UmbrellaFlag,\n{' ' * (at + 26)}NOT mapContains(SpanAttributes, "
         f"{sql_text(semconv.LENS_GROUP)})\n{' ' * (at + 26)}AND has({_texts(umbrellas, at + 34)}, NameText))\n"
         f"{' ' * (at + 9)}AND NOT has({_texts(never, at + 21)}, NameText)\n"
         f"{' ' * (at + 9)}AND NOT has({_texts(flagged_categories, at + 21)}, EfficiencyCategory), false)",
         "a leaf the report counts: well timed, a bucket of the four, no umbrella (lens.umbrella, else without "
         "lens.group the RL catalog's umbrella names), no name or category that never carries a bucket"),
        ("DeviceTimed", f"isNotNull({_readable(_device_time(device), at + 10)})",
         f"{semconv.LENS_DEVICE_START_TIME} holds an int64: the span has device times"),
        ("IsStep", f"WellTimed AND LensStep IS NOT NULL AND LensBucket IS NULL\n{' ' * (at + 4)}"
                   f"AND match(SpanName, {sql_text(DEFAULT_STEP_PATTERN)})",
         f"the step span: its name matches {DEFAULT_STEP_PATTERN}, with rl.iteration, no bucket, well timed"),
    )
    return fields, digest


ROLLUP_VERSION = "2"
"""The rollup table's layout version: its COMMENT names it with the hash of what its counted leaves depend on
(:func:`rollup_version`), and the report reads a rollup only when both match (an older table: re-create it)."""


def rollup_version() -> str:
    """What the rollup table's COMMENT starts with: ``lens rollup v2 (rules HASH)``."""
    return f"lens rollup v{ROLLUP_VERSION} (rules {_catalog_sql()[1]})"


def _rollup_columns() -> tuple[tuple[str, str, str, str], ...]:
    """The rollup's columns: (name, type, aggregate over the span table's rows, what it holds). The rows' fields
    (``StartNs``, ``WellTimed``, ``Counted``, ``IsStep``, ...) are computed in the view's inner query."""
    step = "the step span (named as DEFAULT_STEP_PATTERN, with rl.iteration, no bucket, well timed)"
    return (
        ("LensRun", "LowCardinality(String)", "LensRun", "the run"),
        ("LensProcess", "LowCardinality(String)", "LensProcess",
         "the process (a launch of the run, an attempt, is a set of processes: told apart when read)"),
        ("LensRank", "Nullable(Int64)", "LensRank", "the rank (NULL: a process without nv.dl.rank)"),
        ("LensStep", "Nullable(Int64)", "LensStep",
         "the training step (rl.iteration), NULL for the rank's spans outside steps (e.g. the job span)"),
        ("Spans", "UInt64", "count()", "spans of the row (the report's coverage check sums them per run)"),
        ("LeafSpans", "UInt64", "sum(LensBucket IS NOT NULL)", "of which carry rl.bucket"),
        ("CountedLeaves", "UInt64", "sum(Counted)", "of which the report counts (its rules: lens report)"),
        ("UncountedLeaves", "UInt64", "sum(LensBucket IS NOT NULL AND NOT Counted)",
         "bucketed spans the report flags and does not count (a bucketed umbrella, an unknown bucket, a never-"
         "bucketed name or category, bad times): the report reads the spans for their violations"),
        *((f"{b.capitalize()}Ns", "UInt64", f"sum(if(Counted AND LensBucket = '{b}', reinterpretAsInt64(Duration), 0))",
           f"nanoseconds of the counted {b} leaves") for b in _BUCKETS),
        ("BadTimeSpans", "UInt64", "sum(NOT WellTimed)",
         "spans without both times or ending before they start (the report reads the spans)"),
        ("DeviceTimedSpans", "UInt64", "sum(DeviceTimed)",
         "spans with lens.device.start_time_unix_nano (the report then reads the spans: the device clock)"),
        ("StepSpans", "UInt64", "sum(IsStep)",
         f"step spans: {step}. The report reads the rollup where each stepped row has exactly one"),
        ("StepStartNs", "SimpleAggregateFunction(max, Int64)", "max(if(IsStep, StartNs, 0))",
         "the step span's start (ns since the epoch, 0 without one)"),
        ("StepEndNs", "SimpleAggregateFunction(max, Int64)", "max(if(IsStep, EndNs, 0))",
         "the step span's end: the step's wall time is StepEndNs - StepStartNs"),
        ("StepTraceId", "SimpleAggregateFunction(max, String)", "max(if(IsStep, TraceId, ''))",
         "the step span's TraceId"),
        ("StepSpanId", "SimpleAggregateFunction(max, String)", "max(if(IsStep, SpanId, ''))", "its SpanId"),
        ("StepName", "SimpleAggregateFunction(max, String)", "max(if(IsStep, CAST(SpanName AS String), ''))",
         "its name"),
        ("MinTraceId", "SimpleAggregateFunction(min, String)", "min(TraceId)",
         "the least TraceId of the row's spans: a stepped row whose spans lie in several traces is read from the "
         "spans (the report's steps are per trace)"),
        ("MaxTraceId", "SimpleAggregateFunction(max, String)", "max(TraceId)", "the greatest"),
        ("FirstStartNs", "SimpleAggregateFunction(min, Int64)", "min(StartNs)",
         "the row's first start (ns since the epoch): a rank's wall is its rows' last end - first start"),
        ("LastEndNs", "SimpleAggregateFunction(max, Int64)", "max(EndNs)", "the row's last end"),
    )


_ROLLUP_COLUMNS = _rollup_columns()
"""The rollup's columns: (name, type, aggregate over the span table's rows, what it holds)."""


def rollup_sql(table: str = "otel_traces") -> tuple[str, str, str]:
    """The per-(run, process, rank, step) rollup of ``table``'s spans (loss records aside): (its table, the
    materialized view that adds each insert's rows to it, the backfill: the same rows of what the table already
    holds).

    Each column's comment says what it holds; the table's names its version (:func:`rollup_version`). A
    SummingMergeTree: rows of one key (an insert's part of a step) are added up as parts merge (the
    ``SimpleAggregateFunction`` columns by their min or max), so a reader sums them (``sum() ... GROUP BY``).
    Every span of the table is in one row: the coverage check (``lens report``) compares the counts.
    """
    name = check_table_name(table)
    base = table.rsplit(".", 1)
    target = check_table_name(".".join([*base[:-1], base[-1] + ROLLUP_SUFFIX]))
    view = check_table_name(".".join([*base[:-1], base[-1] + ROLLUP_SUFFIX + "_mv"]))
    width = max(len(column) + len(kind) for column, kind, _, _ in _ROLLUP_COLUMNS) + 2
    columns = ",\n".join(f"    {f'{column} {kind}':<{width}} COMMENT {sql_text(note)}"
                         for column, kind, _, note in _ROLLUP_COLUMNS)
    create = (f"CREATE TABLE IF NOT EXISTS {target} (\n{columns}\n) ENGINE = SummingMergeTree "
              "ORDER BY (LensRun, LensStep, LensRank, LensProcess)\nSETTINGS allow_nullable_key = 1\n"
              "COMMENT " + sql_text(f"{rollup_version()}: per (run, process, rank, step) sums of the spans of "
                                    f"{table}"))
    fields, _digest = _catalog_sql()
    # every aggregate reads fields the inner query computes once a row; sum(if(...)) rather than sumIf: a
    # session with aggregate_functions_null_for_empty (the report's) would make an empty sumIf NULL
    picked = ",\n       ".join(expr if expr == column else f"{expr} AS {column}"
                                for column, _, expr, _ in _ROLLUP_COLUMNS)
    computed = ",\n".join("".join(f"             -- {line}\n" for line in textwrap.wrap(note, 96))
                          + f"             {sql} AS {name}" for name, sql, note in fields)
    select = (f"SELECT {picked}\n"
              f"FROM (SELECT LensRun, LensProcess, LensRank, LensStep, LensBucket, TraceId, SpanId, SpanName, Duration,\n"
              f"{computed}\n"
              f"      FROM {name} WHERE SpanName <> {sql_text(semconv.LENS_LOSS_SPAN_NAME)})\n"
              "GROUP BY LensRun, LensProcess, LensRank, LensStep")
    return (create, f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view} TO {target} AS\n{select}",
            f"INSERT INTO {target}\n{select}")


def schema_sql(table: str = "otel_traces", *, rollup: bool = True, backfill: bool = False) -> str:
    """What ``lens clickhouse-schema`` prints: materialized columns for run id, rank, step, bucket, process and the
    attributes the report's rules read (group, umbrella, category, device times),
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
        lines.append(f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {column} {kind} MATERIALIZED\n"
                     f"    {_readable(expr, 4)};")
    if not backfill:
        lines += ["-- rows inserted before: lens clickhouse-schema --backfill prints the statements that fill them"]
    if rollup:
        create, view, fill = rollup_sql(table)
        lines += [
            "-- lens (optional): one row per (run, process, rank, step): counts, nanoseconds of the counted leaves in",
            "-- each goodput bucket, the step span and the bounds, kept at insert time. lens report reads it instead of",
            "-- the spans when it covers the run (and says which it read). It replaces otel_traces_lens_rank_steps and",
            f"-- its _mv of earlier versions; a rollup of an older lens ({ROLLUP_SUFFIX} without '{rollup_version()}'",
            "-- in its comment) is not read: DROP it and its _mv, then create them again and --backfill",
            create + ";",
            "-- lens: the view that adds each insert's stamped spans to the rollup",
            view + ";",
        ]
    if backfill:
        lines += [
            "-- lens --backfill: the rows already in the table. First the columns (a background mutation:",
            "-- SELECT * FROM system.mutations WHERE NOT is_done shows it at work) ...",
            f"ALTER TABLE {name}\n" + ",\n".join(f"    MATERIALIZE COLUMN {column}" for column in _materialized())
            + "\nSETTINGS mutations_sync = 1;",
        ]
        if rollup:
            lines += [
                "-- ... then the rollup, once, right after the view is created: rows inserted between the two are",
                "-- counted twice (a run's sum(Spans) then exceeds its count() of stamped rows in the table)",
                fill + ";",
            ]
    return "\n".join(lines) + "\n"
