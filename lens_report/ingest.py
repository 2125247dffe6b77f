"""The report's reading: the SQL that turns OTLP-JSON lines into span rows, the compiled reader's glue, and line diagnostics."""

from __future__ import annotations

import gzip
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from lens_core import semconv

from .dialect import DUCKDB, LOSS_COUNTERS, ResourceFields, SpanFields
from .engine import ENGINE_HINT
from .model import BUCKET_ATTR, ITERATION_ATTR, Problem
from .plan import _LINE_CAP_MAX, _MAX_LINE_BYTES, _SKIP_BUDGET

__all__ = [
    "RESOURCE_COLUMNS",
    "SCAN_FIELD_COLUMNS",
    "SCAN_RESOURCE_FIELDS",
    "SCAN_SPAN_FIELDS",
    "SPAN_COLUMNS",
    "row_columns",
    "stored_columns",
]

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
    def flag(key: str) -> str:
        # a boolean attribute as the ClickHouse store reads it (Dialect.to_bool): the Collector's exporter writes
        # every value as text, so otel_traces holds true and 'true' (and 1, '1') alike, and files read them so
        text = f"lower(coalesce({attr(key, 'stringValue')}, CAST({attr(key, 'intValue')} AS VARCHAR)))"
        return (f"coalesce(TRY_CAST({attr(key, 'boolValue')} AS BOOLEAN), CASE WHEN {text} IN ('true', '1') THEN true"
                f" WHEN {text} IN ('false', '0') THEN false END)")

    # the counters, then 1 when the record is the one written at shutdown
    final = f"coalesce({flag(semconv.LENS_TELEMETRY_FINAL)}, false)::BIGINT"
    loss = "[" + ", ".join([*(f"TRY_CAST({attr(key, 'intValue')} AS BIGINT)" for key in LOSS_COUNTERS), final]) + "]"
    iteration = attr(ITERATION_ATTR, "intValue")
    sql = {
        "file": "file", "line": "o", "problem": problem,
        "trace": "trace_id", "span": "span_id", "parent": "nullif(parent_id, 0)", "name": f"coalesce({name}, '')",
        "kind": span.kind(), "start_ns": "nullif(st, 0)", "end_ns": "nullif(en, 0)",
        "start_text": start_text, "end_text": end_text, "error": span.error(),
        "bucket": attr(BUCKET_ATTR, "stringValue"), "iteration": span.iteration(iteration),
        "grp": attr(semconv.LENS_GROUP, "stringValue"),
        "umbrella": flag(semconv.LENS_UMBRELLA),
        "category": attr(semconv.RL_EFFICIENCY_CATEGORY, "stringValue"),
        "dev_start": _device_time(attr, semconv.LENS_DEVICE_START_TIME),
        "dev_end": _device_time(attr, semconv.LENS_DEVICE_END_TIME),
        "thread": f"coalesce({attr(semconv.THREAD_ID, 'intValue')}, {attr(semconv.THREAD_ID, 'stringValue')})",
        "thread_name": attr(semconv.THREAD_NAME, "stringValue"),
        "truncated": f"coalesce({flag(semconv.LENS_SPAN_TRUNCATED)}, false)",
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


SPAN_COLUMNS = tuple(_COLUMN_TYPES)
"""Every column a ``spans`` table can have (both engines), in order; a store's own are its
``stored_columns`` (a file store without detail has no ``attrs``, ``events`` or ``links``)."""


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
