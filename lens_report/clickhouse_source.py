"""Where ClickHouse SQL runs: a server through clickhouse-connect or chdb in process, and their URLs."""

from __future__ import annotations

import itertools
import os
import re
import tempfile
import time
from collections.abc import Iterator
from typing import Any, Protocol

from .clickhouse_schema import check_table_name
from .dialect import sql_text

__all__ = [
    "CLICKHOUSE_HINT",
    "CONNECT_CHECK_S",
    "STATEMENT_TIMEOUT_S",
    "ChdbSource",
    "ClickHouseSource",
    "ServerSource",
    "display_url",
    "failure_text",
    "open_source",
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

_PARQUET_STRUCTURE = ("ts_ns Int64, TraceId String, SpanId String, ParentSpanId String, TraceState String, "
                      "SpanName String, SpanKind String, ServiceName String, "
                      "ResourceAttributes Map(String, String), ScopeName String, ScopeVersion String, "
                      "SpanAttributes Map(String, String), duration_ns Int64, StatusCode String, StatusMessage String")
"""The columns of the Parquet file a loader writes and a source inserts from."""


class ClickHouseSource(Protocol):
    """Where ClickHouse SQL runs: a server (:class:`ServerSource`) or chdb in process (:class:`ChdbSource`)."""

    errors: tuple[type[BaseException], ...]
    """What a failed query raises."""

    def close(self) -> None:
        """Release the connection or session."""

    def command(self, sql: str) -> None:
        """Run a statement that returns nothing."""

    def release(self) -> None:
        """Give back the memory the statements so far freed, where it is this process's (chdb); else nothing."""

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a small query."""

    def batches(self, sql: str) -> Any:
        """A ``pyarrow.RecordBatchReader`` over the rows of a query (streamed)."""

    def insert_parquet(self, table: str, columns: str, select: str, path: str) -> None:
        """``INSERT INTO table (columns) SELECT select FROM`` the Parquet file at ``path``."""


_PURGE_AFTER_S = 0.5
"""A command (the statements that make the working tables) that ran this long (seconds) is followed by a purge of the
memory it freed (:meth:`ChdbSource.release`): the passes over every span, not the small statements, whose pages the
next statement reuses (purging after each made the rollup report, 23 statements of at most 0.3 s, 4 % slower: the
pages given back are faulted in again)."""

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
        self._purge = True

    def command(self, sql: str) -> None:
        started = time.perf_counter()
        self.session.query(sql)
        if time.perf_counter() - started >= _PURGE_AFTER_S:
            self.release()

    def release(self) -> None:
        """Hand the memory a long statement freed back to the system (``SYSTEM JEMALLOC PURGE``, under 30 ms): chdb
        runs in this process, and its allocator otherwise keeps each statement's freed pages, so the process's
        peak grew pass by pass (10M spans, stamped sums: 919-956 MiB peak RSS, 682-689 MiB purged). A build
        without jemalloc refuses the command: then never again."""
        if self._purge:
            try:
                self.session.query("SYSTEM JEMALLOC PURGE")
            except self.errors:
                self._purge = False

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        import pyarrow as pa

        # Arrow's file format read here, not chdb's "ArrowTable", which imports pandas (~0.25 s a report)
        result = self.session.query(sql + " " + _ARROW_SETTINGS, "Arrow")
        if len(result) == 0:
            return []
        table = pa.ipc.open_file(result.get_memview().view()).read_all()
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

    def release(self) -> None:
        """Nothing: a server's memory is its own."""

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
