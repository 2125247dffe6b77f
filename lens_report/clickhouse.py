"""The report over the Collector's ClickHouse table (``otel_traces``): a loader and the store that reads it."""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from lens_core import semconv

from ._units import memory_bytes
from .clickhouse_schema import (
    _SPAN,
    LENS_COLUMNS,
    ROLLUP_SUFFIX,
    _materialized,
    _resource_fields,
    _span_attr,
    check_table_name,
    otel_traces_ddl,
    rollup_sql,
    schema_sql,
)
from .clickhouse_source import (
    CLICKHOUSE_HINT,
    CONNECT_CHECK_S,
    STATEMENT_TIMEOUT_S,
    ChdbSource,
    ClickHouseSource,
    ServerSource,
    display_url,
    failure_text,
    open_source,
    server_options,
)
from .dialect import CLICKHOUSE, DUCKDB, LOSS_COUNTERS, ResourceFields, SpanFields, sql_text
from .discovery import find_trace_files
from .ingest import SPAN_COLUMNS
from .model import DEFAULT_MEMORY_LIMIT, Problem, Span, span_from_row
from .clickhouse_stamped import (
    BROKEN_TRACES,
    CHECK_PARENTS,
    CHECK_DUPLICATES,
    CHECK_PART_FACTOR,
    CHECK_SPANS,
    PARENT_PART_FACTOR,
    PART_COPY_ENGINE,
    COMPLEX_TRACES,
    STAMPED_STEPS,
    STEP_COLUMNS,
    TRACE_PLAN,
    check_columns_sql,
    part_copy_sql,
    presum_sql,
    stamped_steps_sql,
    duplicates_sorted_sql,
    duplicates_sql,
    trace_checks_sql,
    trace_plan_sql,
)
from .store import span_rows_sql

__all__ = [
    "CLICKHOUSE_HINT",
    "CONNECT_CHECK_S",
    "STATEMENT_TIMEOUT_S",
    "ChdbSource",
    "ClickHouseSource",
    "ClickHouseStore",
    "LENS_COLUMNS",
    "ServerSource",
    "check_table_name",
    "display_url",
    "failure_text",
    "load_otlp_files",
    "open_source",
    "otel_traces_ddl",
    "rollup_sql",
    "ROLLUP_SUFFIX",
    "schema_sql",
    "server_options",
]

# ---- the loader: OTLP-JSON lines -> otel_traces rows, as the exporter writes them -----------------

_VALUE = ('{"stringValue":"VARCHAR","intValue":"VARCHAR","boolValue":"VARCHAR","doubleValue":"VARCHAR",'
          '"arrayValue":"JSON","kvlistValue":"JSON","bytesValue":"VARCHAR"}')
_ATTRS = '[{"key":"VARCHAR","value":' + _VALUE + "}]"
_LOAD_LINE = ('{"resourceSpans":[{"resource":{"attributes":' + _ATTRS + '},"scopeSpans":[{"scope":{"name":"VARCHAR",'
              '"version":"VARCHAR"},"spans":[{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR",'
              '"traceState":"VARCHAR","name":"VARCHAR","kind":"VARCHAR","startTimeUnixNano":"VARCHAR",'
              '"endTimeUnixNano":"VARCHAR","attributes":' + _ATTRS + ',"status":{"code":"VARCHAR","message":"VARCHAR"}}]}]}]}')


def _map_sql(attrs: str) -> str:
    """DuckDB: an OTLP attribute list as a text map, each value as the exporter's ``AsString`` writes it."""
    value = ("coalesce(a.value.stringValue, a.value.intValue, a.value.boolValue, a.value.doubleValue, "
             "CAST(a.value.arrayValue AS VARCHAR), CAST(a.value.kvlistValue AS VARCHAR), a.value.bytesValue, '')")
    entries = f"list_transform(coalesce({attrs}, []), lambda a: {{'key': coalesce(a.key, ''), 'value': {value}}})"
    keys = f"list_transform(coalesce({attrs}, []), lambda a: coalesce(a.key, ''))"
    # the exporter's map keeps one value per key (the last); DuckDB refuses duplicate map keys,
    # so the rare list that repeats a key keeps each key's last entry (quadratic, but only there)
    last_only = (f"list_filter({entries}, lambda e, i: list_position(list_reverse({keys}), e.key) "
                 f"= len({keys}) - i + 1)")
    return (f"map_from_entries(CASE WHEN len(list_distinct({keys})) = len({keys}) THEN {entries} "
            f"ELSE {last_only} END)")


def _to_parquet(files: list[str], out: str) -> int:
    """Write the spans of OTLP-JSON ``files`` as otel_traces rows to the Parquet file ``out``; the row count.

    A span with an id that is not hex or base64 of the right size, or a time that is not an
    integer, is left out: the Collector's receivers refuse it, so the exporter never writes it.
    """
    from .engine import require_duckdb
    from .ingest import _int_id, _time  # the reader's id and time parsing
    from .plan import _MAX_LINE_BYTES

    duckdb = require_duckdb()
    con = duckdb.connect()
    con.execute("SET threads = 2")
    kind = SpanFields(DUCKDB, kind_text="t.kind", status_text="t.status.code")
    service = "list_filter(rs.resource.attributes, lambda a: a.key = 'service.name')[1].value.stringValue"
    con.execute(f"""
        COPY (
        WITH lines AS (SELECT json_transform(json, '{_LOAD_LINE}') AS j
                       FROM read_ndjson_objects(?, ignore_errors=true, maximum_object_size={_MAX_LINE_BYTES})),
        rs AS (SELECT unnest(j.resourceSpans) AS rs FROM lines),
        sc AS (SELECT rs, {_map_sql("rs.resource.attributes")} AS res_map, coalesce({service}, '') AS service,
                      unnest(rs.scopeSpans) AS sc FROM rs),
        x AS (SELECT res_map, service, sc.scope AS scope, unnest(sc.spans) AS t FROM sc),
        y AS (SELECT *, {_int_id("t.traceId", 16)} AS trace, {_int_id("t.spanId", 8)} AS span,
                     CASE WHEN coalesce(t.parentSpanId, '') <> '' THEN {_int_id("t.parentSpanId", 8)} END AS parent,
                     {_time("t.startTimeUnixNano")} AS st, {_time("t.endTimeUnixNano")} AS en FROM x)
        SELECT coalesce(st, 0) AS ts_ns, printf('%032x', trace) AS TraceId, printf('%016x', span) AS SpanId,
               CASE WHEN parent IS NULL THEN '' ELSE printf('%016x', parent) END AS ParentSpanId,
               coalesce(t.traceState, '') AS TraceState, coalesce(t.name, '') AS SpanName,
               'SPAN_KIND_' || {kind.kind()} AS SpanKind, service AS ServiceName, res_map AS ResourceAttributes,
               coalesce(scope.name, '') AS ScopeName, coalesce(scope.version, '') AS ScopeVersion,
               {_map_sql("t.attributes")} AS SpanAttributes,
               -- wraps as the exporter's unsigned subtraction does when a span ends before it starts
               coalesce(en, 0) - coalesce(st, 0) AS duration_ns,
               CASE WHEN t.status.code IN ('2', 'STATUS_CODE_ERROR') THEN 'STATUS_CODE_ERROR'
                    WHEN t.status.code IN ('1', 'STATUS_CODE_OK') THEN 'STATUS_CODE_OK'
                    ELSE 'STATUS_CODE_UNSET' END AS StatusCode,
               coalesce(t.status.message, '') AS StatusMessage
        FROM y
        WHERE t IS NOT NULL AND trace IS NOT NULL AND span IS NOT NULL
              AND NOT (coalesce(t.parentSpanId, '') <> '' AND parent IS NULL)
              AND (st IS NOT NULL OR t.startTimeUnixNano IS NULL)
              AND (en IS NOT NULL OR t.endTimeUnixNano IS NULL)
        ) TO {sql_text(out)} (FORMAT parquet)
    """, [files])
    count = con.execute(f"SELECT count(*) FROM read_parquet({sql_text(out)})").fetchall()[0][0]
    con.close()
    return int(count)


_INSERT_COLUMNS = ("Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName, "
                   "ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage")
_INSERT_SELECT = ("fromUnixTimestamp64Nano(ts_ns), TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, "
                  "ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, "
                  "reinterpretAsUInt64(duration_ns), StatusCode, StatusMessage")


def load_otlp_files(source: ClickHouseSource, table: str, paths: Iterable[str | os.PathLike[str]], *,
                    create: bool = True, parquet: str | None = None) -> int:
    """Load the spans of OTLP-JSON trace files into ``table`` as the Collector's exporter would; the span count.

    With ``create`` the table is first created from :func:`otel_traces_ddl`. The rows pass
    through a Parquet file (``parquet``, else a temporary one), which DuckDB writes and
    ClickHouse reads: for tests, benchmarks, and moving file exports into ClickHouse.
    """
    files, _missing = find_trace_files(paths)
    if create:
        source.command(otel_traces_ddl(table))
    with tempfile.TemporaryDirectory(prefix="lens-load-") as tmp:
        out = parquet or os.path.join(tmp, "spans.parquet")
        count = _to_parquet(files, out) if files else 0
        if count:
            source.insert_parquet(table, _INSERT_COLUMNS, _INSERT_SELECT, out)
    return count


# ---- the store: the report's tables inside ClickHouse ----------------------------------------------

_SETTINGS = (
    "join_use_nulls = 1",  # an unmatched LEFT JOIN row reads NULL (not 0 or ''), as in SQL and DuckDB
    "aggregate_functions_null_for_empty = 1",  # min/sum of no rows is NULL, not 0
    "cast_keep_nullable = 1",
)
"""Session settings under which ClickHouse answers the report's SQL as DuckDB does."""

_INSERT_ROWS = 1000
"""Rows of literals a statement carries into a working table (rank labels, rule tables, ids)."""
_WORK_ENGINES = {"memory": "Memory", "disk": "MergeTree ORDER BY tuple()"}
"""Where the store's working tables live (``--work-tables``): uncompressed in memory, or compressed on disk."""

_HEX = {32: "^[0-9a-fA-F]{32}$", 16: "^[0-9a-fA-F]{16}$"}
_IDS = (("TraceId", 32), ("SpanId", 16), ("ParentSpanId", 16))


def _is_hex(column: str, digits: int) -> str:
    """ClickHouse SQL: the id column is ``digits`` hex digits (a parent may also be '': a root)."""
    test = f"match({column}, {sql_text(_HEX[digits])})"
    return f"({column} = '' OR {test})" if column == "ParentSpanId" else test


def _id(column: str, digits: int) -> str:
    """ClickHouse SQL: a hex id column as an unsigned integer (UInt128 or UInt64; '' reads 0). Only rows that
    pass :func:`_is_hex` reach it."""
    return f"reinterpretAs{'UInt128' if digits == 32 else 'UInt64'}(reverse(unhex({column})))"


def _lens_columns(columns: set[str]) -> dict[str, str]:
    """Column -> SQL for each of :func:`schema_sql`'s columns: the materialized column when the table has it,
    else its expression over the maps."""
    # the working tables hold plain types: LowCardinality would spread into every derived column
    plain = {"LensRun": "String", "LensRank": "Nullable(Int64)", "LensStep": "Nullable(Int64)",
             "LensBucket": "Nullable(String)", "LensProcess": "String", "LensGroup": "Nullable(String)",
             "LensUmbrella": "Nullable(Bool)", "LensCategory": "Nullable(String)",
             "LensDeviceStart": "Nullable(Int64)", "LensDeviceEnd": "Nullable(Int64)"}
    return {column: (f"CAST({column} AS {plain[column]})" if column in columns else f"({expr})")
            for column, (_kind, expr) in _materialized().items()}


def _processes(table: str, columns: set[str], where: str, firsts: str | None = None) -> str:
    """ClickHouse SQL: one row per process label of the rows of ``table`` that satisfy ``where``, with the
    resource fields the store's ``spans`` keep (instance, pid, host, service, whether Lens set it up),
    read from one row of the label.

    With the materialized ``LensProcess``, the attribute map is read only where a label's first
    row (by ``Timestamp``) lies: the condition on a cheap column leaves the granules without one
    unread (a label's rows all hold the same resource attributes; any of them serves). ``firsts``,
    SQL of (``Timestamp``, label) pairs already known (the rollup's first starts), saves finding them:
    a scan of the span table's times (0.7 s at 100M spans), where reading the rows at known times
    takes 0.03 s (the table's order holds ``Timestamp``).
    """
    name = check_table_name(table)
    process = _lens_columns(columns)["LensProcess"]
    if firsts is None:
        firsts = f"SELECT min(Timestamp), {process} FROM {name} WHERE {where} GROUP BY {process}"
    first = f" AND (Timestamp, {process}) IN ({firsts})" if "LensProcess" in columns else ""
    res = _resource_fields("ra")
    return f"""
SELECT label, {res.instance} AS instance, {res.pid()} AS pid, {res.host} AS host, {res.service} AS service,
       {res.lens_process()} AS lens
FROM (SELECT {process} AS label, any(ResourceAttributes) AS ra FROM {name} WHERE ({where}){first} GROUP BY label)"""


def _held_text(expr: str, nullable: bool = True) -> str:
    """ClickHouse SQL: the text ``expr`` as a working table holds it, LowCardinality: a span's name, process,
    rank label, bucket, group and thread repeat in every span (as String ~230 of a row's ~430 bytes in memory)."""
    return f"CAST({expr} AS LowCardinality({'Nullable(String)' if nullable else 'String'}))"


def _projection(table: str, columns: set[str], detail: bool, where: str, *, loss: bool = False,
                resources: bool = True) -> str:
    """ClickHouse SQL: one row per span of ``table`` with the columns of the store's ``spans`` table
    (:data:`~lens_report.ingest.SPAN_COLUMNS`, plus ``rowid``), of the rows that satisfy ``where``;
    the loss counters only with ``loss`` (the loss records' table).

    The materialized columns of :func:`schema_sql` replace the map lookups when the table has them.
    A process's resource fields (instance, pid, host, service) come from the working table
    ``span_processes`` (:func:`_processes`, one row per process label), joined; without ``resources``
    they are left out and ``lens_process`` is a set lookup there, for the aggregations over every span
    (which read none of them): ClickHouse keeps a join a query does not read from, and with it computed
    every column of the projection, read or not (0.6-0.8 s of each classifying pass at 10M spans).
    The texts are LowCardinality (:func:`_held_text`) with ``resources`` (rows a working table holds), String
    without (a relation aggregated as it is read: converting 10M spans' texts cost ~0.7 s a report).
    """
    def held(expr: str, nullable: bool = True) -> str:
        return _held_text(expr, nullable) if resources else expr

    name = check_table_name(table)
    use = _lens_columns(columns)
    process = use["LensProcess"]
    rank = use["LensRank"]
    span_name = _held_text("SpanName", False) if resources else "CAST(SpanName AS String)"  # stored LowCardinality
    counters = ("[" + ", ".join([*(CLICKHOUSE.to_int(_span_attr(key)) for key in LOSS_COUNTERS),
                                 f"toInt64(coalesce({CLICKHOUSE.to_bool(_span_attr(semconv.LENS_TELEMETRY_FINAL))}, "
                                 "false))"]) + "]")
    # texts ClickHouse never has (a timestamp out of range, a problem; attributes, events and links but for
    # --perfetto): NULL in every row, as LowCardinality (1 byte a row, not ~10: ~0.5 GB less at 10M spans)
    text = "CAST(NULL AS LowCardinality(Nullable(String)))"
    if detail:
        attrs = ("concat('[', arrayStringConcat(arrayMap((k, v) -> concat('{\"key\":', toJSONString(k), "
                 "',\"value\":{\"stringValue\":', toJSONString(v), '}}'), mapKeys(SpanAttributes), "
                 "mapValues(SpanAttributes)), ','), ']')")
        events = "toJSONString(arrayMap(n -> map('name', toString(n)), `Events.Name`))"
        links = ("toJSONString(arrayMap((t, s) -> map('traceId', t, 'spanId', s), `Links.TraceId`, "
                 "`Links.SpanId`))")
    else:
        attrs = events = links = text
    if resources:
        resource_fields = (f"{held('r.instance')} AS instance, r.pid AS process_pid, {held('r.host')} AS host, "
                           f"{held('r.service')} AS service, r.lens AS lens_process")
        joined = f"LEFT JOIN span_processes AS r ON r.label = {process}\n"
    else:
        resource_fields = f"({process} IN (SELECT label FROM span_processes WHERE lens)) AS lens_process"
        joined = ""
    return f"""
SELECT toInt64(rowNumberInAllBlocks()) AS rowid, toInt32(0) AS file, rowid + 1 AS line,
       {text} AS problem,
       {_id("TraceId", 32)} AS trace, {_id("SpanId", 16)} AS span,
       nullIf({_id("ParentSpanId", 16)}, 0) AS parent,
       {span_name} AS name, {held(f'CAST({_SPAN.kind()} AS String)')} AS kind,
       nullIf(toUnixTimestamp64Nano(Timestamp), 0) AS start_ns,
       nullIf(toUnixTimestamp64Nano(Timestamp) + reinterpretAsInt64(Duration), 0) AS end_ns,
       {text} AS start_text, {text} AS end_text,
       {_SPAN.error()} AS error, {held(use["LensBucket"])} AS bucket, {use["LensStep"]} AS iteration,
       {held(use["LensGroup"])} AS grp, {use["LensUmbrella"]} AS umbrella, {held(use["LensCategory"])} AS category,
       {use["LensDeviceStart"]} AS dev_start, {use["LensDeviceEnd"]} AS dev_end,
       {held(_span_attr(semconv.THREAD_ID))} AS thread,
       {held(_span_attr(semconv.THREAD_NAME))} AS thread_name,
       coalesce({CLICKHOUSE.to_bool(_span_attr(semconv.LENS_SPAN_TRUNCATED))}, false) AS truncated,
       {held(use["LensRun"], False)} AS run, {rank} AS rank, {held(process, False)} AS process,
       {held(ResourceFields.rank_label(CLICKHOUSE, rank, process))} AS rank_label,
       {resource_fields},
       {counters if loss else "CAST([], 'Array(Nullable(Int64))')"} AS loss, {attrs} AS attrs, {events} AS events,
       {links} AS links
FROM {name}
{joined}WHERE {where}"""


def _id_problem(table: str, where: str) -> str:
    """ClickHouse SQL: (row number, problem) of every row (of those that satisfy ``where``) whose ids are not hex
    of the right length."""
    cases = ", ".join(f"NOT {_is_hex(column, digits)}, concat('{column} ', {column}, ' is not {digits} hex digits')"
                      for column, digits in _IDS)
    return f"""
SELECT line, problem FROM (
    SELECT rowNumberInAllBlocks() + 1 AS line, multiIf({cases}, '') AS problem
    FROM {check_table_name(table)} WHERE {where})
WHERE problem <> '' ORDER BY line"""


def _first_of_each(relation: str) -> str:
    """SQL: the spans of ``relation``, the first (by line) of a span stored twice (e.g. exported again) kept."""
    return f"SELECT * FROM {relation} d ORDER BY line LIMIT 1 BY trace, span"


WALK_SPANS = "walk_spans"
"""The working table, on disk, of the spans the report walks when it walks them in parts: each with its part
(:func:`~lens_report.clickhouse_stamped.part_copy_sql`), copied in one pass and sorted by part, so that each part
reads its own rows (:meth:`ClickHouseStore.load_part`). Dropped with the store's other working tables."""

WALK_SPANS_ENGINE = "MergeTree ORDER BY part SETTINGS parts_to_delay_insert = 100000, parts_to_throw_insert = 100000"
"""The engine of :data:`WALK_SPANS`: the check's copy's (:data:`~.clickhouse_stamped.PART_COPY_ENGINE`) but merged
as it is written. A part of the walk reads all its columns, and unmerged a read opened each column of each block
the copy wrote, so a part's read grew with the run (30M device-timed spans, chdb, 2 cores, 31 parts read twice:
317 blocks, 0.57-1.2 s a part; merged to 17, 0.11-0.24 s, the copy 36 s against 18 s, the peak the same)."""

_DRAWN_ROWID = "toInt64(bitAnd(cityHash64(s.trace, {span}), 0x7FFFFFFFFFFFFFFF))"
"""SQL (``.format(span=...)``): the row id :meth:`ClickHouseStore.create_drawn` gives the span ``span`` of trace
``s.trace``: made of its ids, so the same in every table drawn (a collision among the spans of one page, 2^-63 a
pair, would draw one span below another)."""

DEFAULT_PART_SPANS = 1_000_000
"""How many spans of ``otel_traces`` the report walks at once, at most (``--part-spans``): a run holding more is
walked in parts of whole traces. ClickHouse's working set is ~0.4 KB a span walked (``spans`` ~0.19 KB with its
texts LowCardinality, the walk's ``k`` ~0.16 KB), so a part of 1M spans keeps a report within ~1 GB of server memory
whatever the run's size (chdb in process: ~0.3 GB of its own beside it)."""


class ClickHouseStore:
    """The ClickHouse :class:`~lens_report.store.Store` (its own class, not the DuckDB store's subclass): the
    spans of an ``otel_traces`` table, and every working table of the rollup, are temporary tables of the source's session, so the rollup runs where the
    spans live and only its results leave ClickHouse.

    ClickHouse computes every field of a span (from the materialized columns of
    ``lens clickhouse-schema`` when the table has them, else from the attribute maps). With ``run``
    only that run's spans are read (a filter on ``LensRun``). ``files`` is
    ``("clickhouse:TABLE",)`` and a span's line is its row number in the scan. The rollup's SQL
    is the same as for files (:mod:`lens_report.rollup`), in :attr:`dialect`. ``work_tables``:
    ``"memory"`` (fast; ~400 bytes a span of ClickHouse's memory) or ``"disk"`` (MergeTree,
    compressed: tens of bytes a span, ~2x the CPU; the joins' hash tables stay in memory).

    A run of more than ``part_spans`` spans (``None``: no limit) is walked in parts of whole
    traces (by a hash of the trace id), each part's spans copied, walked and dropped before the
    next: the working set is one part's, and only per-step and per-rank sums outlive it.
    """

    dialect = CLICKHOUSE
    """ClickHouse's SQL dialect."""

    def __init__(self, source: ClickHouseSource, table: str, *, detail: bool = False,
                 memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None,
                 temp_dir: str | None = None, run: str | None = None, work_tables: str = "memory",
                 part_spans: int | None = DEFAULT_PART_SPANS, stamped: bool = True) -> None:
        check_table_name(table)
        memory_bytes(memory_limit)  # unused here (the server's memory is its own), but never misread silently
        if work_tables not in _WORK_ENGINES:
            raise ValueError(f"work_tables is one of {', '.join(_WORK_ENGINES)}, got {work_tables!r}")
        if part_spans is not None and part_spans < 1:
            raise ValueError(f"part_spans is a positive number of spans (or None: no parts), got {part_spans!r}")
        self.engine = _WORK_ENGINES[work_tables]
        self.part_spans = part_spans
        self.stamped = stamped
        self._presumming = False  # whether the traces outside ``complex_traces`` are summed, not walked
        self.walked_spans = 0
        """How many spans the report walked (copied into ``spans``): the rest were summed where they lie."""
        self.parts_walked = 1
        """In how many parts of whole traces the walked spans were walked (0: none walked)."""
        self.timed = False
        """Whether the last :meth:`span_parts` was of a run with device times (walked whole)."""
        self.check_parts = 1
        """In how many parts of whole traces their structure was checked (see :mod:`.clickhouse_stamped`)."""
        self.duplicates_sorted = False
        """Whether the spans stored twice were found by sorting the span ids, spilled to disk (past
        :data:`~.clickhouse_stamped.CHECK_PART_FACTOR` × ``part_spans`` spans), not by a set of them in memory."""
        self._parts = 1  # how many parts the run needs (load_table)
        self._loaded: tuple[int, int] | None = None  # the part ``spans`` holds: (part, parts)
        self._duplicates: dict[tuple[int, int], int] = {}  # (part, parts) -> spans stored twice in it
        self._walk_parts = 1  # into how many parts the last walk was cut (load_part's)
        self._part_duplicates: dict[int, int] = {}  # part -> spans the walk's copy holds twice in it (_copied)
        self._drop_lists = True  # whether the server parses a list of tables to drop (ClickHouse 24.1+)
        self._span_where = "false"
        self._columns: set[str] = set()
        self._total = 0
        self.source = source
        self.table = table
        self.run = run
        self.detail = detail
        self.files: list[str] = []
        self.problems: list[Problem] = []
        self.partial_walk: str | None = None
        """See :attr:`~lens_report.store.Store.partial_walk` (set by the rollup)."""
        self.columns_used: tuple[str, ...] = ()
        self.stored_columns = SPAN_COLUMNS
        """The columns of the ``spans`` table: every one (see :func:`~lens_report.ingest.stored_columns`)."""
        self._tables: dict[str, None] = {}
        source.command("SET " + ", ".join(_SETTINGS))  # one round trip for all

    def __enter__(self) -> ClickHouseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the working tables (the session would drop them when it ends): in one statement, or one
        at a time on a server older than ClickHouse 24.1, which cannot parse a list of tables to drop."""
        if not self._tables:
            return
        try:
            self.drop(*self._tables)
        except self.source.errors:  # a lost connection: the server drops them with the session
            pass

    # ---- the SQL the rollup runs ----------------------------------------------------------------

    def execute(self, sql: str) -> None:
        """Run one statement."""
        self.source.command(sql)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row of a query (for small results)."""
        return self.source.rows(sql)

    def value(self, sql: str) -> Any:
        """The first column of the first row of a query."""
        return self.rows(sql)[0][0]

    @property
    def duplicate_count(self) -> int:  # type: ignore[override]
        """Spans stored twice (same trace and span id) and kept once: of every part walked so far."""
        return sum(n for (_, of), n in self._duplicates.items() if of == self._walk_parts)

    def span_count(self) -> int:
        """How many spans the store holds (loss records and rows with bad ids excluded; a span stored twice
        counts twice until its part is walked)."""
        return self._total if self._parts > 1 else int(self.value("SELECT count() FROM spans"))

    def span_parts(self, timed: bool, where: str) -> int:
        """How many parts of whole traces the run is walked in: one when it fits ``part_spans``.

        With ``stamped`` and no device times only the traces that need the parent walk are walked
        (:mod:`lens_report.clickhouse_stamped`): the others' steps are summed here (``stamped_steps``), the rest
        of their sums by :meth:`presum`; none walked is 0 parts. A run with device times is walked whole, in
        parts of at most ``part_spans`` spans (the rollup reads each part twice: see
        :func:`~lens_report.clock.add_run_islands`)."""
        self._presumming = False
        self._replace(WALK_SPANS)  # a new report walks its own traces (another run, another attempt)
        self.timed = timed
        if self._parts == 1 or timed or not self.stamped:
            self.walked_spans = self._total
            self.parts_walked = self._parts
            return self.parts_walked
        self._loaded = None
        relation = self.whole_relation()
        # at once when the run fits; else the span ids (a set that grows with the spans) sorted, spilling to disk,
        # and the rest of the check in parts of parents (its rows; a Lens run's follow its steps, not its spans)
        self.duplicates_sorted = self._total > self.part_spans * CHECK_PART_FACTOR
        checks = self.check_parts = max(1, -(-self._parents() // (self.part_spans * PARENT_PART_FACTOR))) \
            if self.duplicates_sorted else 1
        checked = check_columns_sql(relation, where)
        if checks > 1:  # each part reads its own rows of one sorted copy, not the whole run (two scans a part)
            self.create(CHECK_SPANS, part_copy_sql(checked, checks), engine=PART_COPY_ENGINE)
        for part in range(checks):  # in parts of whole traces, as they are walked (see load_part)
            of_part = checked if checks == 1 else f"(SELECT * FROM {CHECK_SPANS} WHERE part = {part})"
            parents, checks_sql = trace_checks_sql(of_part)
            self.create(CHECK_PARENTS, parents)
            if part:
                self.execute(f"INSERT INTO {BROKEN_TRACES} {checks_sql}")
            else:
                self.create(BROKEN_TRACES, checks_sql)
        self.drop(CHECK_PARENTS, CHECK_SPANS)
        self.create(CHECK_DUPLICATES, (duplicates_sorted_sql if self.duplicates_sorted else duplicates_sql)(
            relation, where))
        # the steps' sums and the rules of single spans: every trace, as its walk decides on both
        self.create(STAMPED_STEPS, stamped_steps_sql(relation, where))
        self.create(TRACE_PLAN, trace_plan_sql())
        self.drop(BROKEN_TRACES, CHECK_DUPLICATES)
        self.create(COMPLEX_TRACES, f"SELECT trace FROM {TRACE_PLAN} WHERE walk")
        self._presumming = True
        self.walked_spans = int(self.value(f"SELECT sum(spans) FROM {TRACE_PLAN} WHERE walk") or 0)
        self.parts_walked = 0 if not self.walked_spans else max(1, -(-self.walked_spans // self.part_spans))
        return self.parts_walked

    def walk_summary(self) -> str:
        """What the last report walked, in words (for its :class:`~lens_report.model.ReportPath`)."""
        if self.walked_spans >= self._total:
            twice = " twice (the device intervals first)" if self.timed and self.parts_walked > 1 else ""
            return ("every span walked at once" if self.parts_walked <= 1 else
                    f"every span walked{twice}, {self.part_spans:,} at most at once")
        checked = ""
        if self.duplicates_sorted:
            checked = (f"traces checked in {self.check_parts} part{'s' if self.check_parts > 1 else ''}, their span "
                       "ids in one sorted pass; ")
        return (f"{checked}{self._total - self.walked_spans:,} of {self._total:,} spans summed by their stamps where "
                f"they lie, {self.walked_spans:,} walked")

    def presums(self) -> bool:
        """Whether the last :meth:`span_parts` left traces to :meth:`presum` (stamped, no device times)."""
        return self._presumming

    def presum(self, where: str, cond: str, prefix: str) -> tuple[int, int, int, int]:
        """Add the sums of the traces no part held (see :meth:`span_parts`) to ``prefix`` + each kept table, made
        when ``prefix`` is ''; their (spans, traces, error spans, orphans)."""
        if not self._presumming:
            return 0, 0, 0, 0
        relation = self.whole_relation()
        queries = presum_sql(relation, where, cond)
        self.create("simple_cube", queries.pop("simple_cube"))
        summary = self.rows(queries.pop("summary"))[0]
        # a (process, iteration) without a step span has no anchor: its unstamped leaves belong to no step
        # the anchor a negative number (walked spans' row ids are not), once a step
        queries["steps"] = (f"SELECT -1 - toInt64(rowNumberInAllBlocks()) AS anchor, {', '.join(STEP_COLUMNS[1:])} "
                            f"FROM {STAMPED_STEPS} WHERE step_spans = 1 "
                            f"AND trace NOT IN (SELECT trace FROM {COMPLEX_TRACES})")
        for name, sql in queries.items():
            if prefix:
                self.execute(f"INSERT INTO {prefix}{name} {sql}")
            else:
                self.create(name, sql)
        self.drop("simple_cube", STAMPED_STEPS, TRACE_PLAN)
        return tuple(int(value or 0) for value in summary)  # type: ignore[return-value]

    def load_part(self, part: int, parts: int) -> None:
        """Make ``spans`` hold the spans of part ``part`` of ``parts`` (of whole traces, by a hash of the
        trace id; every span for one part), each span once."""
        if self._loaded == (part, parts):
            return
        if parts == 1:
            self.create("spans", _projection(self.table, self._columns, self._walk_detail(), self._walked_where()))
            duplicates = self._count_duplicates("spans")
            if duplicates:
                self.create("spans_once", _first_of_each("spans"))
                self.create("spans", "SELECT * FROM spans_once")
                self.drop("spans_once")
        else:
            self.create("spans", f"SELECT * FROM {self.part_relation(part, parts)} p")
            duplicates = self._part_duplicates[part]
        self._loaded = (part, parts)
        self._walk_parts = parts
        self._duplicates[(part, parts)] = duplicates

    def _walk_detail(self) -> bool:
        """Whether the walked spans carry their attributes, events and links (``detail``): only when the run is
        walked at once, as :meth:`spans` then reads them from ``spans``; a run walked in parts (or summed where it
        lies) is read from the table by :meth:`spans`, and its parts are walked without them."""
        return self.detail and self._parts == 1

    def create_drawn(self, name: str, join: str, where: str) -> None:
        """(Re)create ``name``: the spans of the whole run read from the table (``s``), joined with ``join``, that
        satisfy ``where``, the first of a span stored twice kept, with ``pid``: what a view of a report walked in
        parts draws (see :attr:`~lens_report.store.Store.partial_walk`). A span's row id, and its parent's, is a
        hash of its ids, not its row in a scan: a page draws several views and merges their spans by row id."""
        self.create(name, f"""
            SELECT s.* REPLACE ({_DRAWN_ROWID.format(span="s.span")} AS rowid),
                   CASE WHEN s.parent IS NOT NULL THEN {_DRAWN_ROWID.format(span="s.parent")} END AS pid
            FROM {self.whole_relation()} s {join} WHERE {where}
            ORDER BY s.line LIMIT 1 BY s.trace, s.span
        """)

    def part_relation(self, part: int, parts: int) -> str:
        """SQL: a relation of part ``part`` of ``parts``' spans, each span once, read from the walk's copy where they
        lie (what :meth:`load_part` loads; a pass that reads a few columns reads it as it is)."""
        copied = f"({self._copied(part, parts)})"
        return f"({_first_of_each(copied)})" if self._part_duplicates[part] else copied

    def _copied(self, part: int, parts: int) -> str:
        """SQL: the rows of part ``part`` of ``parts`` in the walk's copy (:data:`WALK_SPANS`, made by a walk's first
        call); the spans the part holds twice are counted by its first call, once a copy (a run with device times
        reads each part twice)."""
        # the walked spans copied once, sorted by part, and each part read from the copy: a part that scanned the
        # table made the walk grow with the square of the run; a span's row id is then the copy's, the
        # report's across parts (the parts' step anchors are kept side by side)
        if WALK_SPANS not in self._tables:
            projection = _projection(self.table, self._columns, self._walk_detail(), self._walked_where())
            self.create(WALK_SPANS, part_copy_sql(f"({projection})", parts), engine=WALK_SPANS_ENGINE)
            self._part_duplicates = {}
        rows = f"SELECT * EXCEPT part FROM {WALK_SPANS} WHERE part = {int(part)}"
        if part not in self._part_duplicates:
            self._part_duplicates[part] = self._count_duplicates(f"({rows})")
        return rows

    def _walked_where(self) -> str:
        """SQL: the condition on the table's rows of the spans the report walks (only the traces the stamped sums
        cannot sum, when they sum the others); the cheap conditions first: ClickHouse tests the rest of an AND only
        where they hold."""
        walked = f"{_id('TraceId', 32)} IN (SELECT trace FROM {COMPLEX_TRACES}) AND " if self._presumming else ""
        return walked + self._span_where

    def _count_duplicates(self, relation: str) -> int:
        """How many of ``relation``'s spans repeat a (trace, span id) pair: the span ids alone first (cheap), and
        only when some repeat the pairs."""
        if not self.value(f"SELECT count() - uniqExact(span) FROM {relation} d"):
            return 0
        return int(self.value(f"SELECT count() - uniqExact(trace, span) FROM {relation} d"))

    def unload_part(self, walked: tuple[str, ...]) -> None:
        """Drop the walked part's ``spans`` and ``walked`` in one statement before the next part is loaded (each
        used to be dropped as the next part made it again, a round trip a table, ~15 a part, and the part's last
        tables were held while the next part's first were made), then give back what chdb freed: a part's
        statements are too short to (see :meth:`~.clickhouse_source.ChdbSource.release`), and a 10M device-timed
        run's peak rose part by part to the 1 GB line (1,017-1,023 MiB; handed back each part, 936-940)."""
        self.drop("spans", *walked)
        self._loaded = None
        self.source.release()

    def unload_parts(self, walked: tuple[str, ...]) -> None:
        """Drop the last part's ``spans``, ``walked`` and the walk's copy (:data:`WALK_SPANS`), and give back what
        chdb freed (:meth:`unload_part`): the figures made next no longer hold a part's working set beside theirs (at
        10M spans with device times, 11 parts: the last part's tables were ~0.4 GB of the peak)."""
        self.unload_part((WALK_SPANS, *walked))

    def whole(self) -> str:
        """SQL: every span of the run, whichever part ``spans`` holds (read from the table when ``spans`` holds
        a part: what reads it are small aggregates by run, process or name, and ClickHouse computes only the
        columns they read; not the resource fields, see :meth:`whole_relation`)."""
        return "spans" if self._parts == 1 else self.whole_relation()

    def _parents(self) -> int:
        """About how many (trace, parent id) pairs the run's spans name (an estimate: ``uniqCombined64``, ~1 %
        off; 2.4 s at 100M spans, chdb), which sizes the structure check's parts."""
        return int(self.value(f"SELECT uniqCombined64(TraceId, ParentSpanId) FROM {check_table_name(self.table)} "
                              f"WHERE {self._span_where} AND ParentSpanId <> ''") or 0)

    def whole_relation(self) -> str:
        """SQL: every span of the run read from the table (a subquery with the ``spans`` columns but the resource
        fields: instance, process_pid, host, service), for aggregations over every span."""
        return f"({_projection(self.table, self._columns, False, self._span_where, resources=False)})"

    def spans(self, where: str = "true", order: str = "s.file, s.line, s.rowid") -> Iterator[Span]:
        """The stored spans that satisfy ``where`` (alias ``s``) as :class:`~lens_report.model.Span` records, in
        ``order``; attributes, events and links only in a store made with ``detail=True``."""
        relation = "spans"
        if self.partial_walk is not None:  # ``spans`` holds a part: every span read from the table, once
            # row ids as the views' (create_drawn), for the few spans they chose
            once = " ORDER BY s.line LIMIT 1 BY s.trace, s.span" if self.duplicate_count else ""
            relation = (f"(SELECT s.* REPLACE ({_DRAWN_ROWID.format(span='s.span')} AS rowid) "
                        f"FROM ({_projection(self.table, self._columns, self.detail, self._span_where)}) s{once})")
        for columns, rows in self.stream(span_rows_sql(self.dialect, where, order, self.stored_columns, relation)):
            for row in rows:
                yield span_from_row(dict(zip(columns, row)))

    def hold_outside(self, nbytes: int) -> None:
        """Nothing: ClickHouse's memory is the server's, not this process's."""

    def join_parts(self, rows: int, row_bytes: int = 0) -> int:
        """One: ClickHouse joins in memory (its limits are the server's, not ``--memory-limit``'s)."""
        return 1

    def stream(self, sql: str) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        """(column names, a chunk of rows) for each block of a query's rows, streamed."""
        for batch in self.source.batches(sql):
            yield list(batch.schema.names), list(zip(*(column.to_pylist() for column in batch.columns)))

    def int_columns(self, sql: str) -> Iterator[list[array]]:
        """Each block of a query's rows as one ``array("q")`` per column (every value an integer, none NULL),
        copied from the Arrow buffers: no Python integer made (500,000 rows of 8 columns: 1.3 s to ~0.1 s)."""
        import pyarrow as pa

        for batch in self.source.batches(sql):
            chunk = []
            for column in batch.columns:
                if column.null_count:
                    raise ValueError(f"a NULL in an integer column of: {sql[:200]}")
                column = column.cast(pa.int64())
                values = array("q")
                values.frombytes(column.buffers()[1][column.offset * 8:(column.offset + len(column)) * 8])
                chunk.append(values)
            yield chunk

    def _replace(self, name: str) -> None:
        """Drop ``name`` before it is made again, when this store made it: a name it never made is not in the
        session (two stores on one session at once would clash anyway), and asking costs a round trip."""
        if name in self._tables:
            self.drop(name)

    def create(self, name: str, select: str, *, engine: str | None = None) -> None:
        """(Re)create the working table ``name`` from a query: a temporary table of the session, under the store's
        engine (``--work-tables``) or ``engine``."""
        self._replace(name)
        self.source.command(f"CREATE TEMPORARY TABLE {name} ENGINE = {engine or self.engine} AS {select}")
        self._tables[name] = None

    def define(self, name: str, select: str) -> None:
        """A working table, as :meth:`create` makes: ClickHouse writes its in-memory tables without
        compressing them, and its figures (10M spans in ``otel_traces``) were measured with one."""
        self.create(name, select)

    def create_columns(self, name: str, columns: str, rows: list[list[Any]] | list[tuple[Any, ...]] = ()) -> None:
        """(Re)create the working table ``name`` with ``columns`` (``a VARCHAR, b BIGINT``), holding ``rows``:
        up to ``_INSERT_ROWS`` of them in the statement that creates it (one round trip), the rest inserted."""
        typed = ", ".join(f"{column} {self.dialect.column_type(kind)}"
                          for column, kind in (part.split() for part in columns.split(",")))
        self._replace(name)
        first = rows[:_INSERT_ROWS]
        # format(Values, ...) reads them as INSERT's VALUES does; values() parses each literal as an
        # expression (1,000 rows: 60 ms, not 2)
        literal = self.dialect.literal
        filled = f" AS SELECT * FROM format(Values, {literal(typed)}, {literal(self._values(first))})" if first else ""
        self.source.command(f"CREATE TEMPORARY TABLE {name} ({typed}) ENGINE = {self.engine}{filled}")
        self._tables[name] = None
        for start in range(_INSERT_ROWS, len(rows), _INSERT_ROWS):
            self.source.command(f"INSERT INTO {name} VALUES {self._values(rows[start:start + _INSERT_ROWS])}")

    def _values(self, rows: list[list[Any]] | list[tuple[Any, ...]]) -> str:
        literal = self.dialect.literal
        return ", ".join("(" + ", ".join(map(literal, row)) + ")" for row in rows)

    def drop(self, name: str, *more: str) -> None:
        """Drop the working table ``name`` (and ``more``) when it exists: one statement, or one a table on a server
        older than ClickHouse 24.1, which cannot parse a list of tables to drop (asked once a store)."""
        names = (name, *more)
        if more and self._drop_lists:
            try:
                self.source.command(f"DROP TEMPORARY TABLE IF EXISTS {', '.join(names)}")
            except self.source.errors as exc:
                if "syntax error" not in str(exc).lower():
                    raise
                self._drop_lists = False
            else:
                for each in names:
                    self._tables.pop(each, None)
                return
        for each in names:
            self.source.command(f"DROP TEMPORARY TABLE IF EXISTS {each}")
            self._tables.pop(each, None)

    # ---- loading --------------------------------------------------------------------------------

    def table_columns(self) -> set[str]:
        """The column names of the table (a table without the exporter's is refused)."""
        database, _, name = self.table.rpartition(".")
        where = (f"database = {sql_text(database)}" if database else "database = currentDatabase()")
        columns = {row[0] for row in self.source.rows(
            f"SELECT name FROM system.columns WHERE {where} AND table = {sql_text(name)}")}
        needed = {"Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "SpanKind", "ResourceAttributes",
                  "SpanAttributes", "Duration", "StatusCode"}
        if not columns:
            raise ValueError(f"no table {self.table} (or it has no columns)")
        if needed - columns:
            raise ValueError(f"table {self.table} lacks the exporter's column(s) {', '.join(sorted(needed - columns))}")
        if self.detail:
            needed |= {"Events.Name", "Links.TraceId", "Links.SpanId"}
            if needed - columns:
                raise ValueError(f"--perfetto reads the exporter's column(s) {', '.join(sorted(needed - columns))}, "
                                 f"which table {self.table} lacks")
        return columns

    def load_table(self) -> None:
        """Make the store's ``spans``, ``loss`` and ``files`` tables from the table's rows. Call once.

        A row whose ids are not hex of the right length is a problem, not a span (the exporter
        writes what the Collector received, which checked them); a span stored twice is kept once.
        """
        columns = self.table_columns()
        self.columns_used = tuple(sorted(c for c in LENS_COLUMNS if c in columns))
        self.files = [f"clickhouse:{self.table}"]
        self.create_columns("files", "idx INTEGER, path VARCHAR, first BIGINT", [[0, self.files[0], 1]])
        run = "true" if self.run is None else f"{_lens_columns(columns)['LensRun']} = {CLICKHOUSE.literal(self.run)}"
        bad_ids = self.rows(_id_problem(self.table, run) + " LIMIT 10000")
        for line, problem in bad_ids:
            self.problems.append(Problem(self.files[0], int(line), problem))
        # the cheap conditions first: ClickHouse evaluates the rest of an AND only where they hold. When every id
        # is hex (the rows found none), no scan tests them again: 3.5 s a scan at 100M spans (chdb, 2 cores)
        hex_ids = " AND ".join(_is_hex(column, digits) for column, digits in _IDS) if bad_ids else "true"
        loss_name = sql_text(semconv.LENS_LOSS_SPAN_NAME)
        # the processes' resource fields stay for the report: every part's spans are joined with them
        self.create("span_processes", _processes(self.table, columns, run))
        self.create("loss", _projection(self.table, columns, False, f"{run} AND SpanName = {loss_name} AND {hex_ids}",
                                        loss=True))
        self._columns = columns
        self._span_where = f"{run} AND SpanName <> {loss_name} AND {hex_ids}"
        self._total = int(self.value(f"SELECT count() FROM {check_table_name(self.table)} WHERE {self._span_where}"))
        if self.part_spans is not None:
            self._parts = max(1, -(-self._total // self.part_spans))
        if self._parts == 1:  # the whole run at once (as the page and --perfetto read it)
            self.load_part(0, 1)
