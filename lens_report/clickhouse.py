"""The report over the Collector's ClickHouse table (``otel_traces``): its schema, a loader, and the store that reads it."""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from lens_core import semconv

from ._units import memory_bytes
from .dialect import CLICKHOUSE, DUCKDB, LOSS_COUNTERS, ResourceFields, SpanFields, sql_text
from .discovery import find_trace_files
from .ingest import SPAN_COLUMNS
from .model import BUCKET_ATTR, DEFAULT_MEMORY_LIMIT, ITERATION_ATTR, Problem, Span, span_from_row
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

CLICKHOUSE_HINT = "pip install 'lens-telemetry[clickhouse]'"
"""How to install what the ClickHouse path needs (clickhouse-connect for a server, chdb in process)."""

CONNECT_CHECK_S = 30
"""How long a server's first answer is awaited (the client asks its version and settings), unless the
URL sets ``send_receive_timeout``: a ClickHouse server answers that at once, so a port that takes the
connection and says nothing (a wrong port, a hung server) is said within this, not after
:data:`STATEMENT_TIMEOUT_S`."""

STATEMENT_TIMEOUT_S = 300
"""How long each statement's answer is awaited unless the URL sets ``send_receive_timeout``
(clickhouse-connect's own default; a working server sends progress headers meanwhile)."""

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


class ClickHouseSource(Protocol):
    """Where ClickHouse SQL runs: a server (:class:`ServerSource`) or chdb in process (:class:`ChdbSource`)."""

    errors: tuple[type[BaseException], ...]
    """What a failed query raises."""

    def close(self) -> None:
        """Release the connection or session."""

    def command(self, sql: str) -> None:
        """Run a statement that returns nothing."""

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a small query."""

    def batches(self, sql: str) -> Any:
        """A ``pyarrow.RecordBatchReader`` over the rows of a query (streamed)."""

    def insert_parquet(self, table: str, columns: str, select: str, path: str) -> None:
        """``INSERT INTO table (columns) SELECT select FROM`` the Parquet file at ``path``."""


_ARROW_SETTINGS = "SETTINGS output_format_arrow_string_as_string = 1, output_format_arrow_low_cardinality_as_dictionary = 0"


class ChdbSource:
    """ClickHouse in process (chdb): a session whose data lives in ``path`` (a temporary directory when None)."""

    def __init__(self, path: str | None = None) -> None:
        try:
            from chdb import session
        except ImportError as exc:
            raise ImportError(f"the embedded ClickHouse engine (chdb) is not installed: {CLICKHOUSE_HINT}") from exc
        import chdb

        self.errors: tuple[type[BaseException], ...] = (chdb.ChdbError, RuntimeError)
        """What the engine raises for a failed query."""
        self._tmp = None if path else tempfile.TemporaryDirectory(prefix="lens-chdb-")
        self.path = path or self._tmp.name  # type: ignore[union-attr]
        self.session = session.Session(self.path)

    def command(self, sql: str) -> None:
        self.session.query(sql)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        table = self.session.query(sql + " " + _ARROW_SETTINGS, "ArrowTable")
        # by column: two columns may share a name, which a dict per row would merge
        return list(zip(*(column.to_pylist() for column in table.columns)))

    def batches(self, sql: str) -> Any:
        return self.session.send_query(sql + " " + _ARROW_SETTINGS, "Arrow").record_batch(rows_per_batch=65536)

    def insert_parquet(self, table: str, columns: str, select: str, path: str) -> None:
        self.session.query(f"INSERT INTO {check_table_name(table)} ({columns}) SELECT {select} "
                           f"FROM file({sql_text(os.path.abspath(path))}, Parquet)")

    def close(self) -> None:
        """Close the session (and delete its data when it was temporary)."""
        self.session.close()
        if self._tmp is not None:
            self._tmp.cleanup()


class ServerSource:
    """A ClickHouse server through clickhouse-connect, e.g. ``http://user:pass@host:8123/db``."""

    def __init__(self, url: str) -> None:
        try:
            import clickhouse_connect
        except ImportError as exc:
            raise ImportError(f"reading a ClickHouse server needs clickhouse-connect: {CLICKHOUSE_HINT}") from exc
        import logging

        from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError

        # the client logs each failed request besides raising it: the report says it once
        logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)

        self.errors: tuple[type[BaseException], ...] = (ClickHouseError, RuntimeError)
        """What the client raises for a failed query or a lost connection."""
        self.url = display_url(url)
        """The server's URL without its password, for messages."""
        from urllib.parse import parse_qs, urlsplit

        # the URL's send_receive_timeout, when given, bounds every request, the first included (it wins over
        # the argument below); else the first waits CONNECT_CHECK_S and the statements STATEMENT_TIMEOUT_S
        own = "send_receive_timeout" in parse_qs(urlsplit(url).query)
        options = server_options(url)
        try:
            client: Any = clickhouse_connect.get_client(**options, send_receive_timeout=CONNECT_CHECK_S)
        except OperationalError as exc:
            if options.get("interface") == "https" and "ssl" in str(exc).lower():
                raise ConnectionError(
                    f"no TLS answer from {options['host']}:{options['port']} (the URL says https://; nothing, "
                    "credentials included, was sent in clear): a plain-HTTP port is read with http://") from None
            if own or "read timed out" not in str(exc).lower():
                raise
            raise TimeoutError(f"no answer within {CONNECT_CHECK_S} s: a ClickHouse server answers its HTTP port "
                               "at once (8123 by default); a slower one needs ?send_receive_timeout=SECONDS in the "
                               "URL") from None
        if not own:
            timeout = client.timeout
            client.timeout = type(timeout)(connect=timeout.connect_timeout, read=STATEMENT_TIMEOUT_S)
        self.client = client

    def command(self, sql: str) -> None:
        self.client.command(sql)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.client.query(sql).result_rows]

    def batches(self, sql: str) -> Any:
        import pyarrow as pa

        stream = self.client.query_arrow_stream(sql, use_strings=True)
        # the client yields blocks only inside the stream's context, which also closes the response:
        # the context stays open while the reader is consumed and closes when it ends or is dropped
        stream.__enter__()

        def all_blocks() -> Iterator[Any]:
            from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError

            try:
                for block in stream:
                    yield from (block.to_batches() if hasattr(block, "to_batches") else [block])
            except ClickHouseError:
                raise
            except Exception as exc:  # noqa: BLE001 - the transport's own error (e.g. urllib3's when the server
                # is lost mid-answer), which the client does not wrap while a result streams: as the client's
                raise OperationalError(f"the answer broke off: {type(exc).__name__}: {exc}") from exc
            finally:
                stream.__exit__(None, None, None)

        blocks = all_blocks()
        try:
            first = next(blocks, None)
        except BaseException:
            blocks.close()
            raise
        if first is None:
            return pa.RecordBatchReader.from_batches(pa.schema([]), iter(()))
        return pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], blocks))

    def insert_parquet(self, table: str, columns: str, select: str, path: str) -> None:
        # the server cannot read this machine's files: the rows go through this process
        import pyarrow.parquet as pq

        self.command(f"CREATE TEMPORARY TABLE lens_load ({_PARQUET_STRUCTURE})")
        self.client.insert_arrow("lens_load", pq.read_table(path))
        self.command(f"INSERT INTO {check_table_name(table)} ({columns}) SELECT {select} FROM lens_load")
        self.command("DROP TEMPORARY TABLE lens_load")

    def close(self) -> None:
        """Close the connection."""
        self.client.close()


_SECRET_PARAMS = ("password", "access_token")
"""URL parameters whose values are credentials: never printed."""


def display_url(url: str) -> str:
    """``url`` with its password (``user:password@`` or a ``password=`` parameter) replaced by ``***``, for messages.

    Never raises: a URL too malformed to parse is masked by pattern (everything between ``:`` and
    the last ``@`` of its authority, and every secret parameter's value).
    """
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
        query = parse_qsl(parts.query, keep_blank_values=True)
        if any(key in _SECRET_PARAMS for key, _ in query):
            masked = urlencode([(key, "***" if key in _SECRET_PARAMS else value) for key, value in query], safe="*")
            parts = parts._replace(query=masked)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        masked = re.sub(r"^([^:/?#]+://[^:/?#@]*):[^/?#]*@", r"\1:***@", url)
        return re.sub(r"((?:^|[?&])(?:%s)=)[^&#]*" % "|".join(_SECRET_PARAMS), r"\1***", masked)


_URL_FORM = "http[s]://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE][?SETTING=VALUE&...]"


def server_options(url: str) -> dict[str, Any]:
    """The arguments of ``clickhouse_connect.get_client`` for a server ``url``; ValueError (one line, the
    password masked) for a URL that is not :data:`_URL_FORM`.

    The scheme is the user's word: ``https`` is TLS (and a URL that also says ``secure=false`` is
    refused), ``http`` is plain HTTP whatever the port; ``clickhouse://`` leaves it to the client
    (TLS on ports 443 and 8443). The user and password, from the authority or from ``user=`` and
    ``password=`` parameters, are passed as arguments, never inside the URL the client sees.
    """
    from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

    shown = display_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"a ClickHouse URL is {_URL_FORM}, got {shown} ({exc})") from None
    if parts.scheme not in ("http", "https", "clickhouse") or not host:
        raise ValueError(f"a ClickHouse URL is {_URL_FORM}, got {shown}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    params = dict(query)
    user = unquote(parts.username) if parts.username else params.get("user") or params.get("user_name")
    password = unquote(parts.password) if parts.password is not None else params.get("password", "")
    secure = {"true": True, "1": True, "false": False, "0": False}.get(params.get("secure", "").strip().lower())
    options: dict[str, Any] = {"host": host, "username": user, "password": password}
    if port:
        options["port"] = port
    if parts.scheme != "clickhouse":
        tls = parts.scheme == "https"
        if secure is not None and secure != tls:
            raise ValueError(f"the URL says {parts.scheme}:// and secure={params['secure']}: https:// is TLS and "
                             f"http:// plain HTTP, got {shown}")
        options.update(interface=parts.scheme, secure=tls)
    # the rest (database, settings, client options) goes to the client in a URL without credentials
    rest = [(key, value) for key, value in query if key not in ("user", "user_name", "password", "secure")]
    options["dsn"] = urlunsplit((parts.scheme, f"[{host}]" if ":" in host else host, parts.path, urlencode(rest), ""))
    return options


def failure_text(exc: BaseException) -> str:
    """One line saying why a ClickHouse request failed: the server's own ``Code: N. DB::Exception: ...`` line
    when it sent one, else the error's type and first line (the client's wrapping and URL dropped)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    found = re.search(r"server response: (.*)", text)
    if found:
        return re.sub(r" \(for url [^)]*\)$", "", found.group(1))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def open_source(url: str) -> ChdbSource | ServerSource:
    """``chdb:DIR`` (an embedded database in DIR) or a server URL (``http[s]://user:pass@host:port/db``)."""
    if url.startswith("chdb:"):
        path = url[5:]
        if not path or not os.path.isdir(path):
            raise ValueError(f"chdb:DIR needs an existing directory holding a chdb database, got {url!r}")
        return ChdbSource(path)
    if not re.match(r"(https?|clickhouse)://", url):
        raise ValueError(f"expected a server URL (http://user:password@host:8123) or chdb:DIR, "
                         f"got {display_url(url)!r}")
    server_options(url)  # a malformed URL: ValueError, before the client is loaded
    return ServerSource(url)


# ---- the loader: OTLP-JSON lines -> otel_traces rows, as the exporter writes them -----------------

_VALUE = ('{"stringValue":"VARCHAR","intValue":"VARCHAR","boolValue":"VARCHAR","doubleValue":"VARCHAR",'
          '"arrayValue":"JSON","kvlistValue":"JSON","bytesValue":"VARCHAR"}')
_ATTRS = '[{"key":"VARCHAR","value":' + _VALUE + "}]"
_LOAD_LINE = ('{"resourceSpans":[{"resource":{"attributes":' + _ATTRS + '},"scopeSpans":[{"scope":{"name":"VARCHAR",'
              '"version":"VARCHAR"},"spans":[{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR",'
              '"traceState":"VARCHAR","name":"VARCHAR","kind":"VARCHAR","startTimeUnixNano":"VARCHAR",'
              '"endTimeUnixNano":"VARCHAR","attributes":' + _ATTRS + ',"status":{"code":"VARCHAR","message":"VARCHAR"}}]}]}]}')
_PARQUET_STRUCTURE = ("ts_ns Int64, TraceId String, SpanId String, ParentSpanId String, TraceState String, "
                      "SpanName String, SpanKind String, ServiceName String, "
                      "ResourceAttributes Map(String, String), ScopeName String, ScopeVersion String, "
                      "SpanAttributes Map(String, String), duration_ns Int64, StatusCode String, StatusMessage String")


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
             "LensBucket": "Nullable(String)", "LensProcess": "String"}
    return {column: (f"CAST({column} AS {plain[column]})" if column in columns else f"({expr})")
            for column, (_kind, expr) in _materialized().items()}


def _processes(table: str, columns: set[str], where: str) -> str:
    """ClickHouse SQL: one row per process label of the rows of ``table`` that satisfy ``where``, with the
    resource fields the store's ``spans`` keep (instance, pid, host, service, whether Lens set it up),
    read from one row of the label.

    With the materialized ``LensProcess``, the attribute map is read only where a label's first
    row (by ``Timestamp``) lies: the condition on a cheap column leaves the granules without one
    unread (a label's rows all hold the same resource attributes; any of them serves).
    """
    name = check_table_name(table)
    process = _lens_columns(columns)["LensProcess"]
    first = (f" AND (Timestamp, {process}) IN (SELECT min(Timestamp), {process} FROM {name} WHERE {where} "
             f"GROUP BY {process})" if "LensProcess" in columns else "")
    res = _resource_fields("ra")
    return f"""
SELECT label, {res.instance} AS instance, {res.pid()} AS pid, {res.host} AS host, {res.service} AS service,
       {res.lens_process()} AS lens
FROM (SELECT {process} AS label, any(ResourceAttributes) AS ra FROM {name} WHERE ({where}){first} GROUP BY label)"""


def _projection(table: str, columns: set[str], detail: bool, where: str, *, loss: bool = False) -> str:
    """ClickHouse SQL: one row per span of ``table`` with the columns of the store's ``spans`` table
    (:data:`~lens_report.ingest.SPAN_COLUMNS`, plus ``rowid``), of the rows that satisfy ``where``;
    the loss counters only with ``loss`` (the loss records' table).

    The materialized columns of :func:`schema_sql` replace the map lookups when the table has them.
    A process's resource fields (instance, pid, host, service) come from the working table
    ``span_processes`` (:func:`_processes`, one row per process label).
    """
    name = check_table_name(table)
    use = _lens_columns(columns)
    process = use["LensProcess"]
    rank = use["LensRank"]
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
    return f"""
SELECT toInt64(rowNumberInAllBlocks()) AS rowid, toInt32(0) AS file, rowid + 1 AS line,
       {text} AS problem,
       {_id("TraceId", 32)} AS trace, {_id("SpanId", 16)} AS span,
       nullIf({_id("ParentSpanId", 16)}, 0) AS parent,
       CAST(SpanName AS String) AS name, CAST({_SPAN.kind()} AS String) AS kind,
       nullIf(toUnixTimestamp64Nano(Timestamp), 0) AS start_ns,
       nullIf(toUnixTimestamp64Nano(Timestamp) + reinterpretAsInt64(Duration), 0) AS end_ns,
       {text} AS start_text, {text} AS end_text,
       {_SPAN.error()} AS error, {use["LensBucket"]} AS bucket, {use["LensStep"]} AS iteration,
       {_span_attr(semconv.LENS_GROUP)} AS grp, {CLICKHOUSE.to_bool(_span_attr(semconv.LENS_UMBRELLA))} AS umbrella,
       {_span_attr(semconv.RL_EFFICIENCY_CATEGORY)} AS category,
       {_device_time(semconv.LENS_DEVICE_START_TIME)} AS dev_start, {_device_time(semconv.LENS_DEVICE_END_TIME)} AS dev_end,
       {_span_attr(semconv.THREAD_ID)} AS thread,
       {_span_attr(semconv.THREAD_NAME)} AS thread_name,
       coalesce({CLICKHOUSE.to_bool(_span_attr(semconv.LENS_SPAN_TRUNCATED))}, false) AS truncated,
       {use["LensRun"]} AS run, r.instance AS instance, {rank} AS rank, r.pid AS process_pid,
       r.host AS host, r.service AS service, {process} AS process,
       {ResourceFields.rank_label(CLICKHOUSE, rank, process)} AS rank_label, r.lens AS lens_process,
       {counters if loss else "CAST([], 'Array(Nullable(Int64))')"} AS loss, {attrs} AS attrs, {events} AS events,
       {links} AS links
FROM {name}
LEFT JOIN span_processes AS r ON r.label = {process}
WHERE {where}"""


def _device_time(key: str) -> str:
    """ClickHouse SQL: a device time attribute (a string of digits in ``SpanAttributes``) as nanoseconds, NULL
    when absent or not a time (the file reader's rule)."""
    text = _span_attr(key)
    return f"if({CLICKHOUSE.full_match(text, '[0-9]{1,19}')}, {CLICKHOUSE.to_int(text)}, NULL)"


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
    """

    dialect = CLICKHOUSE
    """ClickHouse's SQL dialect."""

    def __init__(self, source: ClickHouseSource, table: str, *, detail: bool = False,
                 memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None,
                 temp_dir: str | None = None, run: str | None = None, work_tables: str = "memory") -> None:
        check_table_name(table)
        memory_bytes(memory_limit)  # unused here (the server's memory is its own), but never misread silently
        if work_tables not in _WORK_ENGINES:
            raise ValueError(f"work_tables is one of {', '.join(_WORK_ENGINES)}, got {work_tables!r}")
        self.engine = _WORK_ENGINES[work_tables]
        self.source = source
        self.table = table
        self.run = run
        self.detail = detail
        self.files: list[str] = []
        self.problems: list[Problem] = []
        self.duplicate_count = 0
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
        """Drop the working tables (the session would drop them when it ends)."""
        for name in list(self._tables):
            try:
                self.drop(name)
            except self.source.errors:  # a lost connection: the server drops them with the session
                break

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

    def span_count(self) -> int:
        """How many spans the store holds (loss records and rows with bad ids excluded)."""
        return int(self.value("SELECT count() FROM spans"))

    def spans(self, where: str = "true", order: str = "s.file, s.line, s.rowid") -> Iterator[Span]:
        """The stored spans that satisfy ``where`` (alias ``s``) as :class:`~lens_report.model.Span` records, in
        ``order``; attributes, events and links only in a store made with ``detail=True``."""
        for columns, rows in self.stream(span_rows_sql(self.dialect, where, order, self.stored_columns)):
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

    def _replace(self, name: str) -> None:
        """Drop ``name`` before it is made again, when this store made it: a name it never made is not in the
        session (two stores on one session at once would clash anyway), and asking costs a round trip."""
        if name in self._tables:
            self.drop(name)

    def create(self, name: str, select: str) -> None:
        """(Re)create the working table ``name`` from a query: a temporary table of the session."""
        self._replace(name)
        self.source.command(f"CREATE TEMPORARY TABLE {name} ENGINE = {self.engine} AS {select}")
        self._tables[name] = None

    def define(self, name: str, select: str) -> None:
        """A working table, as :meth:`create` makes: ClickHouse writes its in-memory tables without
        compressing them, and its figures (10M spans in ``otel_traces``) were measured with one."""
        self.create(name, select)

    def create_columns(self, name: str, columns: str) -> None:
        """(Re)create the empty working table ``name`` with ``columns`` (``a VARCHAR, b BIGINT``)."""
        typed = ", ".join(f"{column} {self.dialect.column_type(kind)}"
                          for column, kind in (part.split() for part in columns.split(",")))
        self._replace(name)
        self.source.command(f"CREATE TEMPORARY TABLE {name} ({typed}) ENGINE = {self.engine}")
        self._tables[name] = None

    def insert(self, name: str, rows: list[list[Any]] | list[tuple[Any, ...]]) -> None:
        """Append ``rows`` to the table ``name`` (as literals, 1,000 rows a statement)."""
        literal = self.dialect.literal
        for start in range(0, len(rows), 1000):
            values = ", ".join("(" + ", ".join(map(literal, row)) + ")" for row in rows[start:start + 1000])
            self.source.command(f"INSERT INTO {name} VALUES {values}")

    def drop(self, name: str) -> None:
        """Drop the working table ``name`` when it exists."""
        self.source.command(f"DROP TEMPORARY TABLE IF EXISTS {name}")
        self._tables.pop(name, None)

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
        self.create_columns("files", "idx INTEGER, path VARCHAR, first BIGINT")
        self.insert("files", [[0, self.files[0], 1]])
        run = "true" if self.run is None else f"{_lens_columns(columns)['LensRun']} = {CLICKHOUSE.literal(self.run)}"
        for line, problem in self.rows(_id_problem(self.table, run) + " LIMIT 10000"):
            self.problems.append(Problem(self.files[0], int(line), problem))
        # the cheap conditions first: ClickHouse evaluates the rest of an AND only where they hold
        hex_ids = " AND ".join(_is_hex(column, digits) for column, digits in _IDS)
        loss_name = sql_text(semconv.LENS_LOSS_SPAN_NAME)
        self.create("span_processes", _processes(self.table, columns, run))
        self.create("spans", _projection(self.table, columns, self.detail,
                                         f"{run} AND SpanName <> {loss_name} AND {hex_ids}"))
        self.create("loss", _projection(self.table, columns, False, f"{run} AND SpanName = {loss_name} AND {hex_ids}",
                                        loss=True))
        self.drop("span_processes")
        # distinct span ids alone first (cheap): only when some repeat can a (trace, span) pair repeat
        if self.value("SELECT count() - uniqExact(span) FROM spans"):
            self.duplicate_count = int(self.value("SELECT count() - uniqExact(trace, span) FROM spans"))
        if self.duplicate_count:  # the same span stored twice (e.g. exported again): keep the first
            self.create("spans_once", "SELECT * FROM spans ORDER BY line LIMIT 1 BY trace, span")
            self.create("spans", "SELECT * FROM spans_once")
            self.drop("spans_once")
