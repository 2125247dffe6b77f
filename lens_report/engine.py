"""The report's store: trace files read into an embedded DuckDB database, one row per span, memory bounded."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gzip
import os
import shutil
import tempfile
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_core import semconv
from lens_core._console import forget_on_interrupt, remove_on_interrupt

from ._units import memory_bytes
from .dialect import DUCKDB, LENS_DISTRO, LOSS_COUNTERS, ResourceFields, SpanFields  # noqa: F401 (LENS_DISTRO: engine's name before)
from .model import BUCKET_ATTR, DEFAULT_MEMORY_LIMIT, ITERATION_ATTR, Problem, Span

__all__ = [
    "ENGINE_HINT",
    "EXPORTER_MAX_LINE",
    "MissingEngine",
    "RESOURCE_COLUMNS",
    "ReadResult",
    "SPAN_COLUMNS",
    "STEP_ROW_BYTES",
    "TRACE_FILE_SUFFIXES",
    "TraceStore",
    "find_trace_files",
    "insert_rows",
    "max_line_bytes",
    "memory_bytes",
    "memory_plan",
    "MemoryPlan",
    "read_spans",
    "require_duckdb",
    "row_columns",
    "span_rows_sql",
    "stored_columns",
]

ENGINE_HINT = "pip install 'lens-telemetry[report]'"
"""How to install what ``lens report`` needs (DuckDB, and zstandard for damaged ``.zst`` files)."""

_PLAIN_SUFFIXES = (".jsonl", ".json")  # uncompressed: the compiled reader's
TRACE_FILE_SUFFIXES = tuple(base + compression for compression in ("", ".gz", ".zst") for base in _PLAIN_SUFFIXES)
"""File names a directory argument is searched for (recursively)."""

_OTHER_SIGNALS = ("metrics-", "logs-")
_MAX_LINE_BYTES = 16 * 1024 * 1024  # one ExportTraceServiceRequest per line; a batch of 512 spans is ~250 KB
EXPORTER_MAX_LINE = 16 * 1024 * 1024
"""The longest line lens's file exporter writes (it splits batches to stay within it): every line
it can write must be readable, whatever ``--memory-limit`` says."""
_LINE_CAP_MAX = 64 * 1024 * 1024  # past this a line is hostile, not a batch: skip it
_SKIP_BUDGET = 1024 * 1024 * 1024  # decompressed bytes read through one over-long line before the file is abandoned


def max_line_bytes(memory_limit: str, threads: int) -> int:
    """The longest line the report reads under ``memory_limit``: DuckDB holds up to twice it per
    reading thread, so an eighth of the limit per thread, never below what the file exporter
    writes (plus 1 MB) nor above 64 MB. Longer lines are skipped, each with a problem."""
    limit = memory_bytes(memory_limit)
    return int(min(_LINE_CAP_MAX, max(EXPORTER_MAX_LINE + 2**20, limit / (8 * max(1, threads)))))


_PROCESS_BYTES = 56 * 10**6
"""What the budget keeps back from the engine while it reads: the interpreter and the DuckDB library
(~70 MB RSS before reading, part of it shared pages), and what DuckDB allocates outside its limit."""
_READER_BYTES = 256 * 10**6
"""The budget one reading statement needs: its JSON buffers (~115 MB for rank files of a few MB), the
rows it is writing and its share of the process; a second reader starts at 512 MB."""
_ROLLUP_SHARE = 0.4
"""The share of the reading limit the rollup's engine gets: its joins hold memory outside the limit too
(a 10M-span report's process sits ~130 MB above the engine's limit while rolling up: at 0.5 it peaked
at 240-247 MiB, past the default budget's 244 MiB once, at 0.4 at 221 MiB)."""
_SMALL_FILE_BYTES = 2 * 10**6
"""Files up to this size are read by two statements at once even at the default memory limit."""
_PIECES_AT_ONCE = 8
"""Pieces of one file read by one statement (a statement costs ~50 ms besides its spans): 64 MB of
the store's directory at a time."""
_PIECE_BYTES = 8 * 10**6
"""A trace file holding more than this (decompressed) is read in line-aligned pieces of about this
size: DuckDB's JSON reader holds memory that grows with the file it reads, not with its lines (one
165 MB file of 590 lines needed a 400 MB limit and peaked at 381 MiB; in pieces, ~200 MiB)."""
PARENT_ROW_BYTES = 100
"""The rollup memory one span of the parent join's interior (the spans that are parents, which
its hash table holds) is given: 800,000 a part at the default budget. The synthetic training
trace's interior is a tenth of its spans; a chain's is all of them. At 26 bytes (3M a part,
sized when the join held every span, which is narrower than an interior row), a 10M-span run's
1M-span interior joined in one part and now and then ran out of the default plan's 80 MB: one
report in three ran it again with 152 MB and peaked at 280-297 MiB, with a note."""
STEP_ROW_BYTES = 500
"""The rollup memory one step anchor of the ``steps`` join is given (its hash tables hold the anchor's
name and rank label; 160,000 anchors a part at the default budget). 500,000 anchors (10M spans)
needed 60-80 MB in one statement, and now and then ran out of the default plan's then 100 MB beside the
working tables in the engine's pool; within 50 MB they fit in two parts or more, not in one."""
_THREAD_BYTES = 24 * 10**6
"""What a statement holds per thread of the engine beside its data (its operators' buffers and
partitions), for the statements that run within a limit lowered by ``hold_outside``: the page's
waterfall details of 10M spans (20,000 rows joined with the spans, their resources and ``anc``)
ran out of 40 MB on two threads and ran within it on one; 48 MB was enough for two."""
_DATABASE = "lens_spans"
_ROW_GROUP_SIZE = 30_720
_EVICT_TO = "1MB"
"""The engine's limit for the moment after each statement that reads alone: it evicts the pages
that statement left cached (written to the database file already), and is then set back."""


@dataclass(frozen=True)
class MemoryPlan:
    """How a report keeps its whole process near ``--memory-limit``: the engine's limit while
    reading and while rolling up (bytes), and how many reading statements run at once."""

    read_bytes: int
    rollup_bytes: int
    readers: int


def memory_plan(memory_limit: str, threads: int) -> MemoryPlan:
    """The :class:`MemoryPlan` for a report whose peak RSS should stay near ``memory_limit``.

    At the default 256 MB: one reading statement within 200 MB, the rollup within 80 MB
    (spilling to disk past it). Each further 256 MB adds a reading statement, up to ``threads``.
    """
    total = memory_bytes(memory_limit)
    read = max(total - _PROCESS_BYTES, total // 2)
    return MemoryPlan(read, int(read * _ROLLUP_SHARE), max(1, min(threads, total // _READER_BYTES)))


_BATCH_BYTES = 256 * 1024 * 1024  # files per ingest statement (one thread each); a statement costs ~30 ms besides its spans
_INT64_MAX = 2**63 - 1

# What the reader keeps of each OTLP attribute value: scalars as text (ints arrive as strings
# or numbers, and DuckDB renders either as text), anything nested as JSON text.
_VALUE_T = '{"stringValue":"VARCHAR","intValue":"VARCHAR","boolValue":"VARCHAR"}'  # what the report reads
_DETAIL_VALUE_T = _VALUE_T[:-1] + ',"doubleValue":"VARCHAR","arrayValue":"JSON","kvlistValue":"JSON","bytesValue":"VARCHAR"}'


def _line_type(detail: bool) -> str:
    """The JSON structure a line is transformed into: one pass over the text, no span re-serialised."""
    value = _DETAIL_VALUE_T if detail else _VALUE_T
    attrs = '[{"key":"VARCHAR","value":' + value + "}]"
    extra = ',"events":"JSON","links":"JSON"' if detail else ""
    span = ('{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR","name":"VARCHAR","kind":"VARCHAR",'
            '"startTimeUnixNano":"VARCHAR","endTimeUnixNano":"VARCHAR","attributes":' + attrs + ","
            '"status":{"code":"VARCHAR"}' + extra + "}")
    return '{"resourceSpans":[{"resource":{"attributes":' + attrs + '},"scopeSpans":[{"spans":[' + span + "]}]}]}"


# the resource and span fields the file reader's CTEs name, in the dialect both engines share
_RESOURCE = ResourceFields(DUCKDB, run="run", instance="instance", rank_text="rank_text", pid_text="pid_text",
                           host="host", service="service", distro="distro")
_SPAN = SpanFields(DUCKDB, kind_text="t.kind", status_text="t.status.code")


class MissingEngine(ImportError):
    """DuckDB (the report's engine) is not installed; the message says how to install it."""


def require_duckdb() -> Any:
    """The ``duckdb`` module, or :class:`MissingEngine` naming the extra to install."""
    try:
        import duckdb
    except ImportError as exc:
        raise MissingEngine(f"lens report needs DuckDB, which is not installed: {ENGINE_HINT}") from exc
    return duckdb


def find_trace_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[Problem]]:
    """Expand the given paths: files are kept as given, directories searched recursively for trace files.

    In a directory, the file exporter's ``metrics-*`` and ``logs-*`` files are skipped. Returns
    the files in order (each once) and a problem for every path that is missing or a directory
    holding no trace file.
    """
    files: list[str] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        if path.is_dir():
            # the file exporter's metrics and logs files sit beside its traces: not trace files
            found = sorted(str(p) for p in path.rglob("*") if p.is_file() and p.name.endswith(TRACE_FILE_SUFFIXES)
                           and not p.name.startswith(_OTHER_SIGNALS))
            if not found:
                problems.append(Problem(str(path), 0, f"no {', '.join(TRACE_FILE_SUFFIXES)} files found"))
            files.extend(found)
        elif path.is_file():
            files.append(str(path))
        else:
            problems.append(Problem(str(path), 0, "no such file or directory"))
    return list(dict.fromkeys(files)), problems


def insert_rows(con: Any, table: str, rows: list[list[Any]] | list[tuple[Any, ...]]) -> None:
    """Append ``rows`` (each as wide as ``table``) to ``table`` in one statement.

    Each column travels as one list parameter and is unnested in SQL: ``executemany`` runs an
    INSERT per row (~4 ms each: 7.6 s of a 2,000-file report went to the file list alone).
    """
    if not rows:
        return
    columns = [list(column) for column in zip(*rows)]
    con.execute(f"INSERT INTO {table} SELECT {', '.join('unnest(?)' for _ in columns)}", columns)


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _attr(key: str, field: str) -> str:
    """SQL: the ``field`` of the first span attribute named ``key`` (NULL when absent)."""
    return f"t.attributes[list_position(keys, {_sql_text(key)})].value.{field}"


def _rattr(key: str, field: str = "stringValue") -> str:
    """SQL: the ``field`` of the first resource attribute named ``key``."""
    return f"list_filter(rs.resource.attributes, lambda a: a.key = {_sql_text(key)})[1].value.{field}"


def _int_id(column: str, size: int) -> str:
    """SQL: an id as an integer (UHUGEINT / UBIGINT), from hex (OTLP/JSON) or base64 (protobuf's JSON); else NULL."""
    kind = "UHUGEINT" if size == 16 else "UBIGINT"
    b64 = -(-size // 3) * 4  # padded base64 length
    unpadded = (size * 4 + 2) // 3
    norm = f"replace(replace({column}, '-', '+'), '_', '/')"
    return (
        f"coalesce(CASE WHEN length({column}) = {2 * size} THEN TRY_CAST('0x' || {column} AS {kind}) END, "
        f"CASE WHEN length({column}) <= {b64} AND regexp_full_match({norm}, '[A-Za-z0-9+/]{{{unpadded}}}=*') "
        f"THEN TRY_CAST('0x' || hex(from_base64(rpad({norm}, {b64}, '='))) AS {kind}) END)"
    )


def _time(column: str) -> str:
    """SQL: Unix nanoseconds when the text is a non-negative integer that fits int64 (else NULL)."""
    return f"CASE WHEN regexp_full_match({column}, '[0-9]{{1,19}}') THEN TRY_CAST({column} AS BIGINT) END"


_LOSS_COUNTERS = LOSS_COUNTERS

_COLUMNS = """
    file INTEGER, line BIGINT, problem VARCHAR,
    trace UHUGEINT, span UBIGINT, parent UBIGINT, name VARCHAR, kind VARCHAR,
    start_ns BIGINT, end_ns BIGINT, start_text VARCHAR, end_text VARCHAR, error BOOLEAN,
    bucket VARCHAR, iteration BIGINT, grp VARCHAR, umbrella BOOLEAN, category VARCHAR,
    dev_start BIGINT, dev_end BIGINT,
    thread VARCHAR, thread_name VARCHAR, truncated BOOLEAN,
    run VARCHAR, instance VARCHAR, rank BIGINT, process_pid BIGINT, host VARCHAR, service VARCHAR,
    process VARCHAR, rank_label VARCHAR, lens_process BOOLEAN,
    loss BIGINT[], attrs VARCHAR, events VARCHAR, links VARCHAR
"""
_COLUMN_TYPES = dict(part.split(None, 1) for part in " ".join(_COLUMNS.split()).split(", "))
_STORE_TYPES = {**_COLUMN_TYPES, "res": "BIGINT"}  # and the resource id of span_rows and resources

_DETAIL_COLUMNS = ("attrs", "events", "links")


def stored_columns(detail: bool) -> tuple[str, ...]:
    """The columns of the file store's ``spans`` table: :data:`SPAN_COLUMNS`, but the attributes,
    events and links only with ``detail``. Without it every row would leave them NULL, and a column
    costs DuckDB's insert its validity, statistics and compression all the same (~40 ms of CPU per
    column per 1M rows; see the README's reading figures)."""
    return tuple(c for c in _COLUMN_TYPES if detail or c not in _DETAIL_COLUMNS)


RESOURCE_COLUMNS = ("run", "instance", "rank", "process_pid", "host", "service", "process", "rank_label",
                    "lens_process")
"""The columns of ``spans`` that are its resource's (its process's): the file store keeps them once
per resource, in the table ``resources``, and each row of ``span_rows`` names its resource
(``res``); the view ``spans`` joins the two. Nine columns written with every span cost the 3M
reading ~1.4 s of its ~6.5 s of CPU (DuckDB's insert pays validity, statistics and compression
per column and row); the view's join with a table of a row per process and reading batch (1,000
at 10M spans) costs the rollup nothing measurable."""


def row_columns(detail: bool) -> tuple[str, ...]:
    """The columns of the file store's ``span_rows`` table: :func:`stored_columns` but those of
    :data:`RESOURCE_COLUMNS`, then ``res`` (the row's resource in ``resources``)."""
    return (*(c for c in stored_columns(detail) if c not in RESOURCE_COLUMNS), "res")


def _unnest_or_null(items: str) -> str:
    """SQL: ``unnest`` of the list ``items``, one NULL row when it is empty or NULL (so the line can be reported).

    A CASE, not ``coalesce(nullif(items, []), [NULL])``: coalesce copies every list it passes
    through, spans and their attributes with it (0.7-0.9 s of CPU per 1M spans)."""
    return f"unnest(CASE WHEN len({items}) > 0 THEN {items} ELSE [NULL] END)"


_NO_SPANS = "no spans"  # the problem of a line that holds no span: invalid JSON, not OTLP, or empty


# the resource fields both readers keep: (column, attribute key, field of its value)
_RESOURCE_ATTRS = (
    ("run", semconv.NEMO_RUN_ID, "stringValue"),
    ("instance", semconv.SERVICE_INSTANCE_ID, "stringValue"),
    ("rank_text", semconv.NV_DL_RANK, "intValue"),
    ("pid_text", semconv.PROCESS_PID, "intValue"),
    ("host", semconv.HOST_NAME, "stringValue"),
    ("service", semconv.SERVICE_NAME, "stringValue"),
    ("distro", semconv.TELEMETRY_DISTRO_NAME, "stringValue"),
)


def _resource_sql(source: str) -> str:
    """SQL: the CTEs ``rsl`` and ``rsk`` adding a resource's process, run id, rank and rank label
    to ``source`` (a relation with the columns of ``_RESOURCE_ATTRS``)."""
    return f"""rsl AS NOT MATERIALIZED (
    SELECT *, {_RESOURCE.process()} AS process, {_RESOURCE.run_id()} AS run_id, {_RESOURCE.rank()} AS rank
    FROM {source}
), rsk AS NOT MATERIALIZED (
    SELECT *, {ResourceFields.rank_label(DUCKDB, "rank", "process")} AS rank_label FROM rsl
)"""


def _device_time(attr: Callable[[str, str], str], key: str) -> str:
    """SQL: a device time attribute (``lens.device.*_time_unix_nano``) as nanoseconds, an int or a
    string of digits as lens_core.device_clock reads it (NULL when absent or not a time)."""
    return _time(f"coalesce({attr(key, 'intValue')}, {attr(key, 'stringValue')})")


def _span_select(attr: Callable[[str, str], str], span: SpanFields, *, problem: str, name: str,
                 start_text: str, end_text: str, detail_cols: tuple[str, str, str],
                 columns: tuple[str, ...] | None = None) -> str:
    """SQL: the select list both readers insert rows with (``expr AS column, ...``), one definition
    of every column.

    It reads from a relation with ``file``, ``o``, ``trace_id``, ``span_id``, ``parent_id``,
    ``st``, ``en`` and the resource columns of :func:`_resource_sql`; ``attr(key, field)`` is the
    SQL of one field of a span attribute's value (NULL when absent), ``name`` the span's name
    text, ``start_text``/``end_text`` what is kept of a time that is not an int64, ``detail_cols``
    the attributes, events and links. ``columns``: the columns it selects, in their order (every
    column of :data:`SPAN_COLUMNS` by default).
    """
    # the counters, then 1 when the record is the one written at shutdown
    final = f"coalesce(TRY_CAST({attr(semconv.LENS_TELEMETRY_FINAL, 'boolValue')} AS BOOLEAN), false)::BIGINT"
    loss = "[" + ", ".join([*(f"TRY_CAST({attr(key, 'intValue')} AS BIGINT)" for key in _LOSS_COUNTERS), final]) + "]"
    iteration = attr(ITERATION_ATTR, "intValue")
    sql = {
        "file": "file", "line": "o", "problem": problem,
        "trace": "trace_id", "span": "span_id", "parent": "nullif(parent_id, 0)", "name": f"coalesce({name}, '')",
        "kind": span.kind(), "start_ns": "nullif(st, 0)", "end_ns": "nullif(en, 0)",
        "start_text": start_text, "end_text": end_text, "error": span.error(),
        "bucket": attr(BUCKET_ATTR, "stringValue"), "iteration": span.iteration(iteration),
        "grp": attr(semconv.LENS_GROUP, "stringValue"),
        "umbrella": f"TRY_CAST({attr(semconv.LENS_UMBRELLA, 'boolValue')} AS BOOLEAN)",
        "category": attr(semconv.RL_EFFICIENCY_CATEGORY, "stringValue"),
        "dev_start": _device_time(attr, semconv.LENS_DEVICE_START_TIME),
        "dev_end": _device_time(attr, semconv.LENS_DEVICE_END_TIME),
        "thread": f"coalesce({attr(semconv.THREAD_ID, 'intValue')}, {attr(semconv.THREAD_ID, 'stringValue')})",
        "thread_name": attr(semconv.THREAD_NAME, "stringValue"),
        "truncated": f"coalesce(TRY_CAST({attr(semconv.LENS_SPAN_TRUNCATED, 'boolValue')} AS BOOLEAN), false)",
        "run": "run_id", "instance": "instance", "rank": "rank", "process_pid": _RESOURCE.pid(),
        "host": "host", "service": "service", "process": "process", "rank_label": "rank_label",
        "lens_process": _RESOURCE.lens_process(),
        "loss": f"CASE WHEN {name} = {_sql_text(semconv.LENS_LOSS_SPAN_NAME)} THEN {loss} END",
        "attrs": detail_cols[0], "events": detail_cols[1], "links": detail_cols[2],
    }
    assert tuple(sql) == tuple(_COLUMN_TYPES), "one expression per column of the store, in its order"
    return ",\n    ".join(f"{sql[c]} AS {c}" for c in (columns or tuple(_COLUMN_TYPES)))


def _ingest_sql(files_sql: str, detail: bool, as_index: int | None, max_line: int = _MAX_LINE_BYTES,
                line_offset: int = 0) -> str:
    """One INSERT reading a list of files: a row per span, a row per unreadable span (``problem``
    set), and a row per line with no span (problem ``_NO_SPANS``).

    ``line`` is the statement's ordinality (lines counted across its files) plus ``line_offset``
    (the lines before a piece of a file); :meth:`TraceStore._finish` turns it into a line number per file. Nothing filters whole
    lines: filtering a chunk of 2,048 lines of ~250 KB each copies it (500 MB per thread).
    A file's index comes from a join with ``files`` (a CASE over the file names compared every
    row with every name: quadratic in the files), or is ``as_index`` for a salvaged copy.
    """
    file_sql = (f"{int(as_index)}" if as_index is not None
                else "(SELECT f.idx FROM files f WHERE f.path = lines.filename)")
    detail_cols = (("to_json(t.attributes)::VARCHAR", "t.events::VARCHAR", "t.links::VARCHAR") if detail
                   else ("NULL", "NULL", "NULL"))
    resource = ", ".join(f"{_rattr(key, field)} AS {column}" for column, key, field in _RESOURCE_ATTRS)
    problem = f"""CASE
        WHEN t IS NULL THEN '{_NO_SPANS}'
        WHEN t.traceId IS NULL AND t.spanId IS NULL THEN 'missing traceId and spanId'
        WHEN t.traceId IS NULL THEN 'missing traceId'
        WHEN t.spanId IS NULL THEN 'missing spanId'
        WHEN trace_id IS NULL THEN 'traceId ' || t.traceId || ' is neither 32 hex digits nor base64 of 16 bytes'
        WHEN span_id IS NULL THEN 'spanId ' || t.spanId || ' is neither 16 hex digits nor base64 of 8 bytes'
        WHEN coalesce(t.parentSpanId, '') <> '' AND parent_id IS NULL
            THEN 'parentSpanId ' || t.parentSpanId || ' is neither 16 hex digits nor base64 of 8 bytes'
        WHEN st IS NULL AND NOT regexp_full_match(t.startTimeUnixNano, '[0-9]+')
            THEN 'startTimeUnixNano must be a non-negative integer or a string of one, got ' || t.startTimeUnixNano
        WHEN en IS NULL AND NOT regexp_full_match(t.endTimeUnixNano, '[0-9]+')
            THEN 'endTimeUnixNano must be a non-negative integer or a string of one, got ' || t.endTimeUnixNano
    END"""
    select = _span_select(_attr, _SPAN, problem=problem, name="t.name",
                          start_text="CASE WHEN st IS NULL THEN t.startTimeUnixNano END",
                          end_text="CASE WHEN en IS NULL THEN t.endTimeUnixNano END", detail_cols=detail_cols,
                          columns=stored_columns(detail))
    return f"""
INSERT INTO sql_spans
WITH lines AS NOT MATERIALIZED (
    SELECT filename, ordinality + {int(line_offset)} AS o, json_transform(json, '{_line_type(detail)}') AS j
    FROM read_ndjson_objects({files_sql}, ignore_errors=true, filename=true,
                             maximum_object_size={int(max_line)}) WITH ORDINALITY
), rs AS NOT MATERIALIZED (
    -- a line without a span keeps one NULL row, so the line can be reported
    SELECT {file_sql} AS file, o, {_unnest_or_null('j.resourceSpans')} AS rs FROM lines
), rsr AS NOT MATERIALIZED (
    -- resource fields as scalars before the spans are unnested: a list copied to every span
    -- row would hold the whole resource once per span
    SELECT file, o, rs.scopeSpans AS scopes, {resource}
    FROM rs
), {_resource_sql("rsr")}, sc AS NOT MATERIALIZED (
    SELECT * EXCLUDE (scopes), {_unnest_or_null('scopes')} AS sc FROM rsk
), x AS NOT MATERIALIZED (
    SELECT * EXCLUDE (sc), {_unnest_or_null('sc.spans')} AS t FROM sc
), y AS NOT MATERIALIZED (
    SELECT *, list_transform(t.attributes, lambda a: a.key) AS keys,
           {_int_id("t.traceId", 16)} AS trace_id, {_int_id("t.spanId", 8)} AS span_id,
           CASE WHEN coalesce(t.parentSpanId, '') <> '' THEN {_int_id("t.parentSpanId", 8)} END AS parent_id,
           {_time("t.startTimeUnixNano")} AS st, {_time("t.endTimeUnixNano")} AS en
    FROM x
)
SELECT {select}
FROM y
"""


# ---- the compiled reader's statement (lens_report._scan hands over Arrow columns; this SQL makes the store's) ----

_FIELD_NUMBERS = {"stringValue": 0, "intValue": 1, "boolValue": 2}


class _Fields:
    """``attr`` for :func:`_span_select` over the compiled reader's columns: each (key, field) asked
    for becomes a column ``aN``, and :attr:`pairs` is what the reader is told to read."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, int]] = []

    def __call__(self, key: str, field: str) -> str:
        pair = (key, _FIELD_NUMBERS[field])
        if pair not in self.pairs:
            self.pairs.append(pair)
        return self.column(self.pairs.index(pair))

    @staticmethod
    def column(index: int) -> str:
        """The name of the column of the ``index``-th pair."""
        return f"a{index}"


_SCAN_FIELDS = _Fields()


def _scan_select(columns: tuple[str, ...]) -> str:
    """SQL: the select list of ``columns`` (see :func:`_span_select`) over the compiled reader's columns."""
    return _span_select(_SCAN_FIELDS, SpanFields(DUCKDB, kind_text="kind_text", status_text="status_text"),
                        problem="NULL", name="name", start_text="NULL", end_text="NULL",
                        detail_cols=("NULL", "NULL", "NULL"), columns=columns)


_SCAN_SELECT = _scan_select(row_columns(False)[:-1])
SCAN_SPAN_FIELDS = tuple(_SCAN_FIELDS.pairs)
"""The (span attribute key, field number) pairs the compiled reader reads, in the order of its columns a0, a1, ..."""
SCAN_RESOURCE_FIELDS = tuple((key, _FIELD_NUMBERS[field]) for _, key, field in _RESOURCE_ATTRS)
"""The (resource attribute key, field number) pairs the compiled reader reads."""
SCAN_FIELD_COLUMNS = (tuple(map(_Fields.column, range(len(SCAN_SPAN_FIELDS)))),
                      tuple(column for column, _, _ in _RESOURCE_ATTRS))
"""The names of the compiled reader's span and resource field columns (its sink's arguments)."""
_SCAN_SPANS_VIEW = "lens_scanned_spans"
_SCAN_RESOURCES_VIEW = "lens_scanned_resources"
"""The names the compiled reader's columns are registered under, on the reading statement's cursor."""


def _scan_ingest_sql() -> tuple[str, str, str]:
    """The three statements that store what the compiled reader handed over (registered as
    ``_SCAN_SPANS_VIEW`` and ``_SCAN_RESOURCES_VIEW``: the columns of ``lens_report._scan.SPAN_COLUMNS``
    and ``lens_report._scan.RESOURCE_COLUMNS``, then ``a0``... and the columns of ``_RESOURCE_ATTRS``): the batch's
    resources with their id, in the cursor's temporary table ``_BATCH_RESOURCES``; each distinct
    one into ``resources``; the spans into ``span_rows``.

    A resource is one line's (the scanner numbers them per file, ``res``); the lines of one
    process repeat it, so the batch's resources with the same columns share one id, the first
    of their ``(file, res)`` numbers (``file * 2**32 + res``: unique in the store, so two
    batches, or two readers, never give two resources one id)."""
    columns = ", ".join(RESOURCE_COLUMNS)
    batch = f"""
CREATE OR REPLACE TEMP TABLE {_BATCH_RESOURCES} AS
WITH r AS NOT MATERIALIZED (
    SELECT * FROM {_SCAN_RESOURCES_VIEW}
), {_resource_sql("r")}, c AS (
    SELECT file, res, {_scan_select(RESOURCE_COLUMNS)}
    FROM rsk
)
SELECT file, res, min((file::BIGINT << 32) | res) OVER (PARTITION BY {columns}) AS id, {columns} FROM c
"""
    resources = f"INSERT INTO resources SELECT DISTINCT id, {columns} FROM {_BATCH_RESOURCES}"
    spans = f"""
INSERT INTO span_rows
WITH y AS NOT MATERIALIZED (
    -- a scalar subquery, not a join: DuckDB knows no row count for the Arrow stream, and a join
    -- built its hash table of every span (all columns) to probe it with the batch's few resources
    -- (the insert took 4.1 s of CPU at 3M spans, not 2.3 s)
    SELECT s.* EXCLUDE (th, tl), (s.th::UHUGEINT << 64) | s.tl::UHUGEINT AS trace_id,
           (SELECT b.id FROM {_BATCH_RESOURCES} b WHERE b.file = s.file AND b.res = s.res) AS resource_id
    FROM {_SCAN_SPANS_VIEW} s
)
SELECT {_SCAN_SELECT},
    resource_id AS res
FROM y
"""
    return batch, resources, spans


_BATCH_RESOURCES = "lens_batch_resources"
_SCAN_INGEST_SQL = _scan_ingest_sql()


def _remove_database(directory: str) -> None:
    forget_on_interrupt(directory)
    shutil.rmtree(directory, ignore_errors=True)


class TraceStore:
    """Spans of OTLP-JSON trace files in an embedded DuckDB database (a temporary file), one row each.

    Reading streams the files through DuckDB's JSON reader in batches, so the process's memory
    stays near ``memory_limit`` however many spans there are (see :func:`memory_plan`; DuckDB
    spills to the database file and its temporary directory). Every
    span keeps its file and line (the n-th non-blank line; the file exporter writes none).
    With ``detail`` each span also keeps its attributes, events and links as JSON text (for
    the Perfetto export and :meth:`spans`). Input that cannot be read becomes a
    :class:`Problem`; loading never raises for bad content. Use as a context manager, or
    call :meth:`close` to delete the database.
    """

    def __init__(self, *, detail: bool = False, memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None,
                 progress: Callable[[int, int], None] | None = None, temp_dir: str | None = None) -> None:
        duckdb = require_duckdb()
        self.detail = detail
        self.progress = progress
        self.files: list[str] = []
        self.problems: list[Problem] = []
        self.duplicate_count = 0
        self._index: dict[str, int] = {}
        self._cursors: set[Any] = set()  # the statements reading files now (to interrupt them)
        # a bad memory limit is refused before anything is created
        self._threads = threads or min(4, os.cpu_count() or 1)
        self.plan = memory_plan(memory_limit, self._threads)
        self.max_line = max_line_bytes(memory_limit, self._threads)
        self._dir = tempfile.mkdtemp(prefix="lens-report-", dir=temp_dir)
        remove_on_interrupt(self._dir)  # under the lens command, Ctrl-C removes it too (lens demo's report)
        # a store nobody closed still leaves no database behind (at collection or at exit)
        self._cleanup = weakref.finalize(self, _remove_database, self._dir)
        self.con = duckdb.connect()
        # small row groups, flushed one at a time: a reading statement holds ~11 MB of rows, not 5 x 44 MB
        self.con.execute(f"ATTACH {_sql_text(os.path.join(self._dir, 'spans.duckdb'))} AS {_DATABASE} "
                         f"(ROW_GROUP_SIZE {_ROW_GROUP_SIZE})")
        self.con.execute(f"USE {_DATABASE}")
        self.con.execute("SET write_buffer_row_group_count = 1")
        self.con.execute(f"SET memory_limit = '{self.plan.read_bytes}B'")
        self.read_limit = self.plan.read_bytes
        """The engine's memory limit while reading, in bytes: the plan's, or more when a batch of
        files needed more (see :meth:`read_limit_raised`)."""
        self._readers = self.plan.readers
        self._limit_lock = threading.Lock()
        self._stop_reading = threading.Event()
        self._done = 0  # files read (for progress)
        self.compiled_files: set[str] = set()
        """The files the compiled reader read (``lens_report._scan``); the SQL reader read the others."""
        self.rollup_limit = self._limit_now = self._base = self.plan.rollup_bytes
        """The most memory a rollup statement was given, in bytes (the plan's unless one ran out)."""
        self.rollup_held = 0
        """What the report held outside the engine (figures read back) when that statement ran, in bytes."""
        self.con.execute(f"SET temp_directory = {_sql_text(os.path.join(self._dir, 'spill'))}")
        self.con.execute("SET preserve_insertion_order = false")
        # the database lives for one report, so squeezing it is pure cost: FSST's analysis and
        # compression of the 13 text columns took ~2.5 s of the 3M reading's ~13.5 s of CPU, and
        # bit-packing the integers ~0.5 s of its ~5.5 s of inserts (the file: 100 MB, not 50; the
        # rollup no slower); dictionary compression, which the repeated names and resource texts
        # need, and run-length encoding (ranks, files) stay
        self.con.execute("SET disabled_compression_methods = 'fsst,bitpacking'")
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute("CREATE TABLE files (idx INTEGER, path VARCHAR, first BIGINT)")
        self.stored_columns = stored_columns(detail)
        """The columns of the ``spans`` table (see :func:`stored_columns`)."""
        # the spans: a row each in span_rows, their resources once each in resources, and the view
        # spans that joins them (see RESOURCE_COLUMNS); the SQL reader writes whole rows to
        # sql_spans, which reading's end splits into the two (see _split_sql_rows)
        def typed(columns: Iterable[str]) -> str:
            return ", ".join(f"{c} {_STORE_TYPES[c]}" for c in columns)
        self.con.execute(f"CREATE TABLE sql_spans ({typed(self.stored_columns)})")
        self.con.execute(f"CREATE TABLE resources ({typed(('res', *RESOURCE_COLUMNS))})")
        self.con.execute(f"CREATE TABLE span_rows ({typed(row_columns(detail))})")
        view = ", ".join(f"{'r' if c in RESOURCE_COLUMNS else 's'}.{c} AS {c}" for c in self.stored_columns)
        self.con.execute(f"CREATE VIEW spans AS SELECT s.rowid AS rowid, {view} "
                         "FROM span_rows s LEFT JOIN resources r ON r.res = s.res")  # (never a span lost)

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database and delete its files."""
        try:
            self.con.close()
        finally:
            self._cleanup()

    # ---- loading ---------------------------------------------------------------------------

    def load(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Read every span of the given files and directories (see :func:`find_trace_files`)."""
        files, problems = find_trace_files(paths)
        self.problems.extend(problems)
        self.load_files(files)

    def load_files(self, files: list[str]) -> None:
        """Read every span of ``files`` (paths of trace files) into the store, then index it. Call once.

        A statement that numbers lines (``WITH ORDINALITY``) runs on one thread in DuckDB, so
        batches of files are read by as many statements at once as the memory plan allows
        (``readers``: one at the default 256 MB, whose JSON buffers alone take ~115 MB), each on
        its own cursor: two at once read 1.8x faster on 2 cores than one.
        """
        for file in files:
            if file not in self._index:
                self._index[file] = len(self.files)
                self.files.append(file)
        insert_rows(self.con, "files", [(i, f, None) for i, f in enumerate(self.files)])
        readers = self._readers = self._readers_for(self.files)
        self.con.execute(f"SET threads = {readers}")
        compiled = not self.detail and compiled_reader() is not None  # (--perfetto keeps what only SQL reads)
        plain = [f for f in self.files if f.endswith(_PLAIN_SUFFIXES)] if compiled else []
        rest = [f for f in self.files if not f.endswith(_PLAIN_SUFFIXES)] if compiled else list(self.files)
        if plain:  # the compiled reader first; a file it leaves (see lens_report._scan) is read by SQL
            # as many at once as the SQL reader: two on 1M spans took 17 % less wall but 22 % more CPU
            groups = list(_batches(plain, readers, _SCAN_BYTES))
            left: list[list[str]] = [[] for _ in groups]
            self._in_pool([(self._scan, (group, left[i]), group) for i, group in enumerate(groups)], readers)
            rest += [f for found in left for f in found]
            self._done -= sum(map(len, left))  # counted again when the SQL reader has read them
            self.compiled_files = set(plain).difference(rest)
        large = {f for f in rest if _plain_size(f) > _PIECE_BYTES}
        batches = [[f] for f in rest if f in large]  # first: they take longest
        batches += _batches([f for f in rest if f not in large], readers)
        problems: list[list[Problem]] = [[] for _ in batches]
        self._in_pool([(self._ingest_pieces if batch[0] in large else self._ingest, (batch, problems[i]), batch)
                       for i, batch in enumerate(batches)], readers)
        for found in problems:  # sorted into file order in _finish, whichever batch finished first
            self.problems.extend(found)
        # from here on the rollup's: every thread, and the memory the reading statements' buffers
        # held left to what the engine's joins and aggregates hold outside its limit
        self.con.execute(f"SET threads = {int(self._threads)}")
        self.con.execute(f"SET memory_limit = '{self.plan.rollup_bytes}B'")
        self._finish()

    def _in_pool(self, jobs: list[tuple[Callable[..., None], tuple[Any, ...], list[str]]], readers: int) -> None:
        """Run the reading ``jobs`` (function, arguments, the files it reads) on ``readers`` threads,
        reporting progress as each ends; on Ctrl-C (or an error) stop every statement under way too."""
        with concurrent.futures.ThreadPoolExecutor(readers, thread_name_prefix="lens-report-read") as pool:
            pending = {pool.submit(job, *args): files for job, args, files in jobs}
            try:
                for future in concurrent.futures.as_completed(pending):
                    future.result()  # an SQL error is a bug: raise it here
                    self._done += len(pending[future])
                    if self.progress is not None:
                        self.progress(self._done, len(self.files))
            except BaseException:  # e.g. Ctrl-C: stop the statements under way too, not only those queued
                self._stop_reading.set()  # a file read in pieces stops between two
                for future in pending:
                    future.cancel()
                for cursor in list(self._cursors):
                    cursor.interrupt()
                raise

    def _scan(self, files: list[str], left: list[str]) -> None:
        """Read ``files`` with the compiled reader, ``_SCAN_SPANS`` spans or more a statement; a file
        it cannot read as the SQL reader would goes to ``left`` (what it wrote taken back) for that reader."""
        scan = compiled_reader()
        sink = scan.ArrowSink(*SCAN_FIELD_COLUMNS, _SCAN_HELD)
        try:
            with self._cursor() as cursor:
                for file in files:
                    if self._stop_reading.is_set():
                        return
                    try:
                        reader = scan.SpanScanner(file, self._index[file], self.max_line, SCAN_SPAN_FIELDS,
                                                  SCAN_RESOURCE_FIELDS)
                    except OSError:  # the SQL reader says what is wrong with it
                        left.append(file)
                        continue
                    try:
                        mark, inserted = sink.mark(), False
                        status = scan.MORE
                        while status == scan.MORE and not self._stop_reading.is_set():
                            status = reader.read(sink, _SCAN_SPANS)
                            if status == scan.FALLBACK or (status == scan.DONE and reader.spans == 0):
                                # not read as the SQL reader would (or no span: that reader reports it)
                                sink.rewind(mark)
                                if inserted:
                                    cursor.execute(f"DELETE FROM span_rows WHERE file = {self._index[file]}")
                                left.append(file)
                            elif status == scan.MORE or sink.spans >= _SCAN_SPANS:  # (MORE: the sink is full)
                                self._insert_scanned(cursor, sink)
                                mark, inserted = sink.mark(), status == scan.MORE
                    finally:
                        reader.close()
                if sink.spans and not self._stop_reading.is_set():
                    self._insert_scanned(cursor, sink)
        finally:
            sink.close()

    def _insert_scanned(self, cursor: Any, sink: Any) -> None:
        """Insert what the compiled reader read into ``sink``, which is then empty: DuckDB scans
        its columns where they are (the Arrow C stream interface)."""
        spans, resources = sink.take()
        cursor.register(_SCAN_SPANS_VIEW, spans)
        cursor.register(_SCAN_RESOURCES_VIEW, resources)
        try:
            for sql in _SCAN_INGEST_SQL:
                cursor.execute(sql)
        finally:
            cursor.unregister(_SCAN_SPANS_VIEW)
            cursor.unregister(_SCAN_RESOURCES_VIEW)
            try:  # (its blocks are held until it is dropped)
                cursor.execute(f"DROP TABLE IF EXISTS {_BATCH_RESOURCES}")
            except require_duckdb().Error:  # the cursor was interrupted: reading stops here anyway
                pass
            self._evict_written()

    def _readers_for(self, files: list[str]) -> int:
        """How many statements read at once: the plan's, or two when every file is small. DuckDB's
        JSON reader holds ~60 MB plus ~11 MB per MB of the file it reads (~115 MB for 5 MB files),
        so two readers of files up to 2 MB fit where one reader of larger files does. Reading
        statements run on one thread each (``WITH ORDINALITY``), and reading uses no more."""
        if self.plan.readers >= 2 or self._threads < 2:
            return self.plan.readers
        largest = max(map(_plain_size, files), default=0)  # a compressed file counts as what it expands to
        return 2 if largest <= _SMALL_FILE_BYTES else self.plan.readers

    @property
    def read_limit_raised(self) -> bool:
        """Whether reading needed more memory than the plan gave (the files were read with :attr:`read_limit`)."""
        return self.read_limit > self.plan.read_bytes

    def _ingest(self, batch: list[str], problems: list[Problem]) -> None:
        with self._cursor() as cursor:
            self._ingest_batch(cursor, batch, problems)

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        cursor = self.con.cursor()
        cursor.execute(f"USE {_DATABASE}")  # a cursor starts in the in-memory catalog
        self._cursors.add(cursor)
        try:
            yield cursor
        finally:
            self._cursors.discard(cursor)
            cursor.close()

    def _ingest_pieces(self, batch: list[str], problems: list[Problem]) -> None:
        """Read one large file in line-aligned pieces (see ``_PIECE_BYTES``): they are written to the
        store's directory, read ``_PIECES_AT_ONCE`` a statement as that file with their lines
        numbered on from the pieces before them, and removed. A file that cannot be read to its end
        keeps what was read."""
        (file,) = batch
        group: list[tuple[str, int]] = []  # (piece, lines before it)
        offset = 0
        error: BaseException | None = None
        with self._cursor() as cursor:
            try:
                with _open_text(file) as source:
                    stem = os.path.join(self._dir, f"piece-{self._index[file]}-")
                    for piece, lines in _pieces(source, stem, _PIECE_BYTES, self._stop_reading):
                        group.append((piece, offset))
                        offset += lines
                        if len(group) == _PIECES_AT_ONCE:
                            self._ingest_group(cursor, group, file, problems)
            except (OSError, EOFError, zlib.error, ValueError) as exc:
                error = exc
            if group:  # what was read before the end, or before the damage (it removes them)
                self._ingest_group(cursor, group, file, problems)
        if error is not None:
            problems.append(Problem(file, 0, f"cannot read file: {error}" if offset == 0
                                    else f"cannot read the rest of the file: {error}"))

    def _ingest_group(self, cursor: Any, group: list[tuple[str, int]], file: str, problems: list[Problem]) -> None:
        """Read pieces of ``file`` in one statement (ordinality runs on across them), then remove
        them; if DuckDB cannot read them together, piece by piece."""
        try:
            self._ingest_files(cursor, [piece for piece, _ in group], as_file=file, line_offset=group[0][1])
        except _input_errors() as exc:
            if isinstance(exc, require_duckdb().OutOfMemoryException) and self._raise_read_limit():
                self._ingest_group(cursor, group, file, problems)
                return
            for piece, offset in group:
                self._ingest_batch(cursor, [piece], problems, as_file=file, line_offset=offset)
        finally:
            for piece, _ in group:
                if os.path.exists(piece):
                    os.unlink(piece)
            group.clear()

    def _ingest_batch(self, cursor: Any, batch: list[str], problems: list[Problem], *, as_file: str | None = None,
                      line_offset: int = 0) -> None:
        """Read ``batch`` in one statement; ``as_file``: the batch is one piece or copy standing in for
        that file, whose lines before it number ``line_offset``."""
        try:
            self._ingest_files(cursor, batch, as_file=as_file, line_offset=line_offset)
        except _input_errors() as exc:
            # DuckDB's JSON reader holds ~115 MB for files of a few MB (larger ones come in pieces):
            # the same batch again with more memory (a failed statement inserts nothing), then file by file
            if isinstance(exc, require_duckdb().OutOfMemoryException) and self._raise_read_limit():
                self._ingest_batch(cursor, batch, problems, as_file=as_file, line_offset=line_offset)
                return
            if len(batch) > 1:  # find the file DuckDB cannot read
                for file in batch:
                    self._ingest_batch(cursor, [file], problems)
                return
            self._salvage(cursor, batch[0], problems, as_file=as_file, line_offset=line_offset)

    def _raise_read_limit(self) -> bool:
        """Double the engine's memory limit for reading, up to 4x the plan's; False once there."""
        with self._limit_lock:
            limit = min(self.read_limit * 2, 4 * self.plan.read_bytes)
            if limit <= self.read_limit:
                return False
            self.read_limit = limit
            self.con.execute(f"SET memory_limit = '{limit}B'")
            return True

    def _run(self, sql: str) -> Any:
        """``self.con.execute(sql)`` for the rollup. A statement that runs out of memory (an operator
        that cannot spill: 10M spans under the default budget) runs again with twice the engine's
        limit, up to 8x the plan's (a failed statement leaves nothing behind)."""
        if self._limit_now != self._base:  # the statement after a raised one: the base limit again
            # (here, not once the raised one returns: another statement would replace its unread result)
            self._limit_now = self._base
            self.con.execute(f"SET memory_limit = '{self._limit_now}B'")
        while True:
            try:
                return self.con.execute(sql)
            except require_duckdb().OutOfMemoryException:
                if self._limit_now >= 8 * self.plan.rollup_bytes:
                    raise
                self._limit_now = min(self._limit_now * 2, 8 * self.plan.rollup_bytes)
                held = self.plan.rollup_bytes - self._base  # what the report holds (see hold_outside)
                if self._limit_now + held > self.rollup_limit + self.rollup_held:
                    self.rollup_limit, self.rollup_held = self._limit_now, held
                self.con.execute(f"SET memory_limit = '{self._limit_now}B'")

    @property
    def rollup_limit_raised(self) -> bool:
        """Whether a rollup statement needed more memory than the plan gave: :attr:`rollup_limit`
        (the most any got) and :attr:`rollup_held` (what the report held beside it) sum past it.
        A statement that runs out of a limit lowered by :meth:`hold_outside` and fits within the
        plan's counts too: the figures held beside it take the process past the budget all the same."""
        return self.rollup_limit + self.rollup_held > self.plan.rollup_bytes

    def _ingest_files(self, cursor: Any, batch: list[str], *, as_file: str | None = None, line_offset: int = 0) -> None:
        files_sql = "[" + ", ".join(_sql_text(f) for f in batch) + "]"
        # a piece or a salvaged copy stands in for its original
        try:
            cursor.execute(_ingest_sql(files_sql, self.detail, None if as_file is None else self._index[as_file],
                                       self.max_line, line_offset))
        finally:
            self._evict_written()

    def _evict_written(self) -> None:
        """With one reading statement at a time, empty the engine's pool after each: the rows it
        wrote are in the database file, but stay cached until the pool reaches its limit, and a
        pool at its limit purges and faults freed memory over and over (6.1M page faults, ~30 % of
        the CPU, at 10M spans; see ``_EVICT_TO``). Never with two statements at once: one may be
        running."""
        if self._readers == 1:
            self._empty_pool()

    def _empty_pool(self) -> None:
        """Evict what the engine's pool can write out: its limit at ``_EVICT_TO`` for a moment, then
        the reading limit again."""
        with self._limit_lock:
            try:
                self.con.execute(f"SET memory_limit = '{_EVICT_TO}'")
                self.con.execute(f"SET memory_limit = '{self.read_limit}B'")
            except require_duckdb().Error:  # the connection was interrupted: reading stops here anyway
                pass

    def _salvage(self, cursor: Any, source_file: str, problems: list[Problem], *, as_file: str | None = None,
                 line_offset: int = 0) -> None:
        """A file DuckDB cannot read (a damaged compressed stream, a line past :attr:`max_line`):
        read the good part in Python. A line too long to read is replaced by an export without
        spans, so line numbers still match and the line is reported (see :func:`_line_problems`);
        no line is ever held whole, so a decompression bomb costs time, bounded, not memory.
        ``as_file`` and ``line_offset``: ``source_file`` is a piece of that file."""
        file = as_file or source_file
        copy = os.path.join(self._dir, f"salvage-{self._index[file]}.jsonl")
        error = None
        try:
            with _open_text(source_file) as source, open(copy, "wb") as out:
                try:
                    for line, size in _capped_lines(source, self.max_line):
                        out.write(line if line is not None else _PLACEHOLDER)
                        if size < 0:  # abandoned: the rest is not read
                            break
                except (OSError, EOFError, zlib.error, ValueError) as exc:
                    error = exc
        except (OSError, ValueError) as exc:
            problems.append(Problem(file, 0, f"cannot read file: {exc}"))
            return
        if error is not None:
            problems.append(Problem(file, 0, f"cannot read the rest of the file: {error}"))
        try:
            self._ingest_files(cursor, [copy], as_file=file, line_offset=line_offset)
        except _input_errors() as exc:
            hint = ("; a line of this file needs more memory than --memory-limit gives"
                    if isinstance(exc, require_duckdb().OutOfMemoryException) else "")
            problems.append(Problem(file, 0, f"cannot read file: {str(exc).splitlines()[0]}{hint}"))
        finally:
            os.unlink(copy)

    def _finish(self) -> None:
        """Number lines per file, turn bad rows into problems, drop duplicates, link parents and
        set the loss records apart. A span's ``rowid`` is its id from here on."""
        # its statements run as the rollup's do (see _run)
        self._split_sql_rows()
        # a statement's ordinality counts the lines of all its files: the first line of each
        # file (every line leaves a row) makes it a line number
        self._run("UPDATE files SET first = m.first FROM "
                    "(SELECT file, min(line) AS first FROM span_rows GROUP BY file) m WHERE m.file = files.idx")
        no_spans: dict[int, list[int]] = {}
        self._span_problems: list[Problem] = []
        bad = self._run("SELECT s.file, s.line - f.first + 1 AS line, s.problem FROM span_rows s JOIN files f "
                          "ON f.idx = s.file WHERE s.problem IS NOT NULL ORDER BY s.file, line, s.problem").fetchall()
        for file, line, problem in bad:
            if problem == _NO_SPANS:
                no_spans.setdefault(file, []).append(line)
            else:
                self._span_problems.append(Problem(self.files[file], line, problem))
        found: list[Problem] = []
        for file, lines in no_spans.items():
            found.extend(_line_problems(self.files[file], lines, self.max_line))
        rank = {path: i for i, path in enumerate(self.files)}
        # in file and line order: what reading found (missing paths first), then every bad line
        self.problems = sorted(self.problems + found + self._span_problems, key=lambda p: (rank.get(p.file, -1), p.line))
        if bad:  # (a DELETE scans every row even when it removes none)
            self._run("DELETE FROM span_rows WHERE problem IS NOT NULL")
        # span ids alone first: distinct on one 64-bit key costs ~60 % of distinct on (trace, span),
        # and a span written twice repeats its span id, so no repeated id means no duplicate
        self.duplicate_count = 0
        if self._run("SELECT count(*) - count(DISTINCT span) FROM span_rows").fetchall()[0][0]:
            self.duplicate_count = self._run(
                "SELECT count(*) - count(DISTINCT (trace, span)) FROM span_rows").fetchall()[0][0]
        if self.duplicate_count:  # the same span written twice (e.g. exported again): keep the first
            self._run("""
                DELETE FROM span_rows WHERE rowid IN (
                    SELECT rowid FROM span_rows
                    QUALIFY row_number() OVER (PARTITION BY trace, span ORDER BY file, line) > 1)
            """)
        loss = _sql_text(semconv.LENS_LOSS_SPAN_NAME)
        self._run(f"CREATE TABLE loss AS SELECT * FROM spans WHERE name = {loss}")
        self._run(f"DELETE FROM span_rows WHERE name = {loss}")

    def _split_sql_rows(self) -> None:
        """Move what the SQL reader wrote (whole rows, in ``sql_spans``) into ``resources`` and
        ``span_rows``: each distinct resource once, with a negative id (the compiled reader's are
        not), and each row naming it, in the order it was read."""
        if not self._run("SELECT count(*) FROM sql_spans").fetchall()[0][0]:
            return
        columns = ", ".join(RESOURCE_COLUMNS)
        self._run(f"CREATE TEMP TABLE sql_resources AS SELECT -row_number() OVER () AS res, {columns} "
                  f"FROM (SELECT DISTINCT {columns} FROM sql_spans)")
        self._run("INSERT INTO resources SELECT * FROM sql_resources")
        same = " AND ".join(f"r.{c} IS NOT DISTINCT FROM w.{c}" for c in RESOURCE_COLUMNS)
        rows = ", ".join(f"w.{c}" for c in row_columns(self.detail)[:-1])
        self._run(f"INSERT INTO span_rows SELECT {rows}, r.res FROM sql_spans w JOIN sql_resources r ON {same} "
                  "ORDER BY w.rowid")
        self._run("DROP TABLE sql_resources")
        self._run("DELETE FROM sql_spans")

    # ---- the SQL the rollup runs (the same calls on ClickHouseStore) --------------------------

    dialect = DUCKDB
    """The SQL dialect of the engine holding the spans."""

    def execute(self, sql: str) -> None:
        """Run one statement."""
        self._run(sql)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row of a query (for small results)."""
        return self._run(sql).fetchall()

    def value(self, sql: str) -> Any:
        """The first column of the first row of a query."""
        return self.rows(sql)[0][0]

    def stream(self, sql: str) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        """(column names, a chunk of rows) for each chunk of a query's rows, streamed.

        On the store's own connection (a cursor would not see its working tables): run no other
        statement before the stream is read to its end."""
        result = self._run(sql)
        columns = [d[0] for d in result.description]
        while rows := result.fetchmany(10_000):
            yield columns, rows

    def create(self, name: str, select: str) -> None:
        """(Re)create the working table ``name`` from a query.

        Working tables live in the database file, as ``spans`` does, not in DuckDB's temporary
        storage: a large one is written compressed as it is made, and a block the engine evicts
        to stay within its limit is dropped, not written out and read back. Temporary tables are
        kept uncompressed, so a run-long one (``anc``, and ``k`` when it was a table: 3M rows) spilled: ~1.5 GB written to
        and read from the spill directory at 3M spans, ~1 s of the rollup's ~5 s of CPU (and
        ~10 s of a 10M report's ~48 s)."""
        self._run(f"CREATE OR REPLACE TABLE {name} AS {select}")

    def define(self, name: str, select: str) -> None:
        """(Re)define ``name`` as a query run where it is read (a view): for a relation as long as
        the run that costs less to compute again than to store (see ``rollup._classify``)."""
        self._run(f"CREATE OR REPLACE VIEW {name} AS {select}")

    def create_columns(self, name: str, columns: str) -> None:
        """(Re)create the empty working table ``name`` with ``columns`` (``a VARCHAR, b BIGINT``; see
        :meth:`~lens_report.dialect.Dialect.column_type`), in the database file as :meth:`create`'s."""
        self.con.execute(f"CREATE OR REPLACE TABLE {name} ({columns})")

    def insert(self, name: str, rows: list[list[Any]] | list[tuple[Any, ...]]) -> None:
        """Append ``rows`` to the table ``name``."""
        insert_rows(self.con, name, rows)

    def drop(self, name: str) -> None:
        """Drop the working table ``name`` when it exists."""
        self.con.execute(f"DROP TABLE IF EXISTS {name}")

    def hold_outside(self, nbytes: int) -> None:
        """The report now holds ``nbytes`` in Python (figures it read back): the rollup's engine
        gives that up from its limit, never below half the plan's, so the process stays within
        its budget (1,000 ranks x 500 steps of figures are ~36 MB). Within a lowered limit the
        engine runs on fewer threads (see :data:`_THREAD_BYTES`)."""
        self._base = self._limit_now = max(self.plan.rollup_bytes // 2, self.plan.rollup_bytes - int(nbytes))
        self.con.execute(f"SET memory_limit = '{self._base}B'")
        self.con.execute(f"SET threads = {max(1, min(self._threads, self._base // _THREAD_BYTES))}")

    def join_parts(self, rows: int, row_bytes: int) -> int:
        """Into how many parts (by id) a join of tables of ``rows`` rows is split so that one part's
        hash tables fit the rollup's memory, each row taking ``row_bytes`` (:data:`PARENT_ROW_BYTES`,
        :data:`STEP_ROW_BYTES`)."""
        return max(1, -(-int(rows) // max(1, self.plan.rollup_bytes // int(row_bytes))))

    # ---- reading back ----------------------------------------------------------------------

    def span_count(self) -> int:
        """How many spans the store holds (loss records and bad input excluded)."""
        return self.value("SELECT count(*) FROM spans")

    def spans(self, where: str = "true", order: str = "s.file, s.line, s.rowid") -> Iterator[Any]:
        """The stored spans as :class:`~lens_report.model.Span` records, in file and line order.

        ``where`` is an SQL condition on the ``spans`` table (alias ``s``), ``order`` an ORDER BY
        list. Attributes, events and links are complete only in a store made with ``detail=True``.
        """
        from .model import span_from_row

        for columns, rows in self.stream(span_rows_sql(self.dialect, where, order, self.stored_columns)):
            for row in rows:
                yield span_from_row(dict(zip(columns, row)))


SPAN_COLUMNS = tuple(_COLUMN_TYPES)
"""Every column a ``spans`` table can have (both engines), in order; a store's own are its
``stored_columns`` (a file store without detail has no ``attrs``, ``events`` or ``links``)."""


def span_rows_sql(dialect: Any, where: str, order: str, columns: tuple[str, ...] = SPAN_COLUMNS) -> str:
    """SQL: the rows :func:`~lens_report.model.span_from_row` takes, of the spans that satisfy
    ``where``; ``columns``: those the store's ``spans`` table has (every one by default)."""
    d = dialect
    kept = ", ".join(f"s.{c}" for c in columns if c not in ("trace", "span", "parent", "line"))
    return (f"SELECT {kept}, {d.hex_id('s.trace', 32)} AS trace, {d.hex_id('s.span', 16)} AS span, "
            f"CASE WHEN s.parent IS NOT NULL THEN {d.hex_id('s.parent', 16)} END AS parent, "
            f"s.line - f.first + 1 AS line, f.path AS path "
            f"FROM spans s JOIN files f ON f.idx = s.file WHERE {where} ORDER BY {order}")


_SCAN_SPANS = 200_000
"""Spans per statement of the compiled reader, at most (see ``_SCAN_HELD``)."""
_SCAN_HELD = 32 * 1024 * 1024
"""The bytes of columns the compiled reader holds for one statement, at most (~150,000 spans of a
training trace). They are outside the engine's limit: at 3M spans the reading peaked at 178-181 MiB
with them (180-186 with the CSV text this replaced), the rollup after it at 182-184."""
_SCAN_BYTES = 64 * 1024 * 1024
"""Bytes of files per job of the compiled reader (a job's files are counted done together)."""


def compiled_reader() -> Any | None:
    """The compiled reader (``lens_report._scan``), or None: not built, or ``LENS_PURE_PYTHON=1``
    (then the SQL reader reads every file: the same rows, more CPU)."""
    if os.environ.get("LENS_PURE_PYTHON", "").strip() in ("1", "true", "yes", "on"):
        return None
    try:
        from . import _scan
    except ImportError:
        return None
    return _scan


def _input_errors() -> tuple[type[BaseException], ...]:
    """DuckDB's errors about the data it reads (not about the SQL, which are bugs and propagate)."""
    duckdb = require_duckdb()
    # out of memory too: a line long enough to need more than --memory-limit is the input's doing
    return (duckdb.IOException, duckdb.InvalidInputException, duckdb.ConversionException,
            duckdb.OutOfRangeException, duckdb.OutOfMemoryException)


def _batches(files: list[str], parts: int = 1, most: int | None = None) -> Iterator[list[str]]:
    """``files`` in consecutive batches of at most ``most`` bytes (``_BATCH_BYTES``), and at least ``parts`` of them
    when there are as many files (one statement runs on one thread: 10,000 small files in one
    batch left the second core idle)."""
    sizes = []
    for file in files:
        try:
            sizes.append(os.path.getsize(file))
        except OSError:
            sizes.append(0)
    limit = min(_BATCH_BYTES if most is None else most, max(1, -(-sum(sizes) // max(1, parts))))
    batch: list[str] = []
    size = 0
    for file, file_size in zip(files, sizes):
        if batch and size + file_size > limit:
            yield batch
            batch, size = [], 0
        batch.append(file)
        size += file_size
    if batch:
        yield batch


def _plain_size(file: str) -> int:
    """About how many bytes ``file`` holds decompressed: its size, a ``.gz`` file's own record of it
    (the last member's, modulo 4 GiB: never below the compressed size), ten times a ``.zst`` file's."""
    try:
        size = os.path.getsize(file)
        if file.endswith(".gz") and size >= 18:
            with open(file, "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(fh.read(4), "little"))
    except OSError:
        return 0
    return size * 10 if file.endswith(".zst") else size


def _pieces(source: Any, stem: str, size: int, stop: threading.Event | None = None,
            chunk: int = 1 << 20) -> Iterator[tuple[str, int]]:
    """Write ``source`` (a binary stream) a piece at a time to ``{stem}{n}.jsonl``: about ``size``
    bytes, then on to the end of the line. Yields each piece's path and number of non-blank lines
    (DuckDB skips blank ones, and a span's ``line`` counts the others) once it is written; the
    caller removes it. A line is copied in chunks of ``chunk`` bytes, never held whole. A stream
    that breaks (a damaged or cut compressed file) ends the last piece where it broke, and its
    error is raised once that piece has been read."""
    read = getattr(source, "read1", source.read)  # what is there: a read of a cut stream returns its data, not an error
    carry = b""
    content = False  # whether the line being copied so far holds more than whitespace
    error: BaseException | None = None
    number = 0
    while error is None and not (stop is not None and stop.is_set()):
        written = lines = 0
        path = f"{stem}{number}.jsonl"
        number += 1
        with open(path, "wb") as out:
            while True:
                try:
                    data = carry or read(chunk)
                except (OSError, EOFError, zlib.error) as exc:
                    error, data = exc, b""
                carry = b""
                if not data:
                    break
                if written >= size:  # past the size: on to the end of the line
                    cut = data.find(b"\n")
                    if cut >= 0:
                        data, carry = data[:cut + 1], data[cut + 1:]
                out.write(data)
                written += len(data)
                *ended, rest = data.split(b"\n")
                for line in ended:
                    lines += content or bool(line.strip())
                    content = False
                content = content or bool(rest.strip())
                if written >= size and not rest:
                    break
        if written:
            lines += content  # a piece ends at a line's end, or the file ends here (a last line without a newline)
            content = False
            yield path, lines
        else:
            os.unlink(path)
            if error is None:
                return
    if error is not None:
        raise error


def _open_text(file: str) -> Any:
    """A binary line iterator over ``file``, decompressing ``.gz`` and ``.zst``."""
    if file.endswith(".gz"):
        return gzip.open(file, "rb")
    if file.endswith(".zst"):
        try:
            import zstandard
        except ImportError as exc:
            raise ValueError(f"reading a damaged .zst file needs zstandard: {ENGINE_HINT}") from exc
        import io

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(file, "rb"), closefd=True))
    return open(file, "rb")


_PLACEHOLDER = b'{"resourceSpans":[]}\n'  # stands in for a line too long to read: no span, one problem


def _capped_lines(source: Any, cap: int) -> Iterator[tuple[bytes | None, int]]:
    """(line, size) for every line of ``source``; ``None`` for a line longer than ``cap`` bytes,
    read through in pieces and dropped. A size of -1 ends it: one line ran past the skip
    budget (a decompression bomb) and the rest of the file is not read."""
    while True:
        line = source.readline(cap + 1)
        if not line:
            return
        if len(line) <= cap or (len(line) == cap + 1 and line.endswith(b"\n")):
            yield line, len(line)
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            if size > max(_SKIP_BUDGET, 16 * cap):
                yield None, -1
                return
            line = source.readline(1 << 20)
            if not line:
                break
            size += len(line)
        yield None, size


def _too_long(cap: int, size: int) -> str:
    mb = cap / 2**20
    if size < 0:
        return (f"a line longer than {max(_SKIP_BUDGET, 16 * cap) / 2**30:.0f} GiB (the report reads lines up to "
                f"{mb:.0f} MiB): skipped, and the rest of the file is not read")
    return (f"a line of {size / 2**20:,.1f} MiB, past the {mb:.0f} MiB the report reads (more memory with "
            "--memory-limit reads longer lines): skipped")


def _line_problems(path: str, wanted: list[int], cap: int = _LINE_CAP_MAX) -> list[Problem]:
    """Why each of the n-th non-blank lines of ``path`` in ``wanted`` held no span: invalid JSON,
    not an OTLP trace export, too long to read, or (no problem) an export with no spans. Reads
    the file again, never holding a line longer than ``cap``; only files with such lines come
    here. Problems carry the physical line number."""
    import json

    todo = set(wanted)
    problems: list[Problem] = []
    number = physical = 0
    try:
        with _open_text(path) as lines:
            for text, size in _capped_lines(lines, cap):
                physical += 1
                if text is not None and not text.strip():
                    continue
                number += 1
                if number not in todo:
                    if size < 0:
                        break
                    continue
                todo.discard(number)
                message = _too_long(cap, size) if text is None else _why_no_spans(json, text)
                if message:
                    problems.append(Problem(path, physical, message))
                if not todo or size < 0:
                    break
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        problems.append(Problem(path, physical + 1, f"cannot read file: {exc}"))
    return problems


def _why_no_spans(json: Any, text: bytes) -> str:
    try:
        request = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON: {exc}"
    if not isinstance(request, dict):
        return f"expected a JSON object, got {type(request).__name__}"
    spans = request.get("resourceSpans")
    if not isinstance(spans, list):
        other = next((key for key in ("resourceMetrics", "resourceLogs") if key in request), None)
        if other:
            return f"a {other[8:].lower()} export, not traces"
        return "no resourceSpans list (not an OTLP trace export?)"
    for i, entry in enumerate(spans):
        if not isinstance(entry, dict):
            return f"resourceSpans[{i}] is not an object"
        scopes = entry.get("scopeSpans", [])
        if not isinstance(scopes, list):
            return f"resourceSpans[{i}]: scopeSpans is not a list"
        for j, scope in enumerate(scopes):
            if not isinstance(scope, dict) or not isinstance(scope.get("spans", []), list):
                return f"resourceSpans[{i}].scopeSpans[{j}]: spans is not a list"
    held = sum(len(scope.get("spans", [])) for entry in spans for scope in entry.get("scopeSpans", []))
    if held:  # Python reads what DuckDB's JSON reader refused: its spans must not vanish unsaid
        try:
            json.dumps(request, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return (f"{held} span{'s' * (held != 1)} not read: a string holds a lone surrogate (U+D800-U+DFFF "
                    "without its pair, escaped or encoded), which the engine's JSON reader refuses")
        return f"{held} span{'s' * (held != 1)} not read: the engine's JSON reader refused the line"
    return ""  # a valid export that carries no span


@dataclass(frozen=True)
class ReadResult:
    """Spans read from trace files as records (deduplicated by trace and span id), and what could not be read."""

    spans: tuple[Span, ...]
    problems: tuple[Problem, ...]
    files: tuple[str, ...]
    duplicate_count: int


def read_spans(paths: Iterable[str | os.PathLike[str]]) -> ReadResult:
    """Every span of the given files and directories as :class:`Span` records, with all attributes.

    For tests and small inputs: the spans are read through a :class:`TraceStore` and then
    held in memory. Reports over large inputs use the store directly.
    """
    with TraceStore(detail=True) as store:
        store.load(paths)
        return ReadResult(tuple(store.spans()), tuple(store.problems), tuple(store.files), store.duplicate_count)
