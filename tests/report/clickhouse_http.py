"""A ClickHouse HTTP interface in front of one real chdb session, for testing ``lens report --clickhouse http://...``.

What is real and what is ours:

* Real: the client (clickhouse-connect, the library ``lens report`` uses for servers, unchanged
  and unpatched); the SQL engine (chdb, which is ClickHouse 26.9 in process: every statement,
  every error text and code, every output format byte and every inserted row is the engine's);
  HTTP itself (a TCP socket on 127.0.0.1, HTTP/1.1 keep-alive and chunked bodies, as urllib3
  speaks them).
* Ours (this module): the HTTP front, written from ClickHouse's HTTP interface documentation
  and its HTTPHandler's behaviour: the query is the ``query`` URL parameter, a line break and the
  body (or the body alone); ``database``, ``default_format``, ``query_id``, ``session_id``,
  ``session_check``, ``param_*`` (query parameters) and settings come from URL parameters, the
  settings applied for that one statement (``SET`` before it, the old values restored after);
  ``INSERT ... FORMAT F`` with binary data writes the data to a temporary file and runs
  ``INSERT ... SELECT * FROM file(path, F)``; request bodies are decompressed per
  ``Content-Encoding`` (zstd, lz4, gzip, deflate) and responses compressed (zstd first, as
  ClickHouse prefers) when the client asks and ``enable_http_compression`` is on; users
  (HTTP basic auth, ``X-ClickHouse-User``/``-Key`` or ``user``/``password`` parameters; a wrong
  password is code 516, HTTP 403) and their ``readonly`` level (1 or 2) are checked here by the
  documented statement classes (readonly=1: reads and USE; 2: also SET and CREATE TEMPORARY TABLE;
  any access to a temporary table but its creation is granted, as ClickHouse's access check does),
  since one shared engine session cannot hold per-user settings (reads run in the engine under
  ``SETTINGS readonly = N``, so it refuses what it would refuse and system.settings says which
  settings the user may change);
  exceptions are sent as ClickHouse sends them (``Code: N. DB::Exception: ...`` body, the
  ``X-ClickHouse-Exception-Code`` header, the HTTP status of ClickHouse's
  exceptionCodeToHTTPStatus); the headers the client reads: ``X-ClickHouse-Summary``,
  ``-Query-Id``, ``-Format``, ``-Timezone``, ``-Server-Display-Name``.

What this does not prove (a real server can differ here): every HTTP session shares the one
engine session, so temporary tables, ``USE`` and ``SET`` are visible across sessions (a real
server keeps them per ``session_id``, and drops a session's temporary tables when it expires);
results are computed in full before the first byte is sent, as with ``wait_end_of_query=1``
(a real server streaming a result may send HTTP 200 and then an exception inside the body);
``client_protocol_version`` is ignored (the engine's Native output has no block info, so
clickhouse-connect's probe falls back to protocol 0); no multi-statement check, no quotas, no
``max_execution_time``, no cluster.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import socket
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["ClickHouseHTTP", "http_status"]

_RESERVED = {"query", "user", "password", "quota_key", "query_id", "stacktrace", "buffer_size", "wait_end_of_query",
             "session_id", "session_timeout", "session_check", "client_protocol_version", "close_session", "compress",
             "decompress", "database", "default_format"}
"""URL parameters ClickHouse's HTTP handler reads itself; every other one (but ``param_*``) is a setting."""

_STATUS = {194: 401, 192: 403, 193: 403, 516: 403, 497: 403, 291: 403, 36: 400, 62: 400, 27: 400, 53: 400, 6: 400,
           41: 400, 72: 400, 117: 400, 60: 404, 46: 404, 47: 404, 50: 404, 56: 404, 81: 404, 115: 404, 73: 404,
           48: 501, 209: 503, 76: 503, 159: 408, 202: 503, 164: 500}
"""Exception code -> HTTP status, as ClickHouse's exceptionCodeToHTTPStatus maps the codes these tests can meet
(REQUIRED_PASSWORD 401; UNKNOWN_USER, WRONG_PASSWORD, AUTHENTICATION_FAILED, ACCESS_DENIED 403; BAD_ARGUMENTS,
SYNTAX_ERROR, CANNOT_PARSE_* 400; UNKNOWN_TABLE, UNKNOWN_FUNCTION, UNKNOWN_IDENTIFIER, UNKNOWN_DATABASE,
UNKNOWN_SETTING, UNKNOWN_FORMAT 404; NOT_IMPLEMENTED 501; TIMEOUT_EXCEEDED 408); the rest is 500."""

_READ = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "USE", "CHECK"}
"""Statements readonly=1 allows (read data, or change only the session's context), per ClickHouse's docs."""

_RESULT = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "CHECK"}
"""Statements that produce a result (ClickHouse then sends ``X-ClickHouse-Format``)."""

_FORMAT_AT_END = re.compile(r"\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*;?\s*$", re.IGNORECASE)
# INSERT INTO [db.]table [(columns)] FORMAT name, then the data (only a name and a column list may precede
# FORMAT, so a VALUES row that holds the word is not taken for one)
_INSERT_DATA = re.compile(rb"\A\s*INSERT\s+INTO\s+(?:TABLE\s+)?([\w.`]+(?:\s*\([^()'\"]*\)\s*|\s+))FORMAT\s+"
                          rb"([A-Za-z][A-Za-z0-9_]*)[ \t]*(\r?\n)?", re.IGNORECASE)
_CODE = re.compile(r"Code: (\d+)\. DB::Exception: ")
_CONTENT_TYPES = {"Native": "application/octet-stream", "ArrowStream": "application/octet-stream",
                  "Arrow": "application/octet-stream", "JSON": "application/json; charset=UTF-8",
                  "Parquet": "application/octet-stream"}


def http_status(code: int) -> int:
    """The HTTP status a ClickHouse server answers an exception with ``code`` by."""
    return _STATUS.get(code, 500)


class _ClickHouseError(Exception):
    """An exception as the server sends it: its code and its ``Code: N. DB::Exception: ...`` text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def _first_keyword(sql: str) -> str:
    text = re.sub(r"(--[^\n]*\n|/\*.*?\*/|\s)+", " ", sql, flags=re.DOTALL).lstrip(" (")
    return (text.split(None, 1) or [""])[0].upper()


class ClickHouseHTTP:
    """The HTTP front on 127.0.0.1 (a free port) over one chdb session; start with :meth:`start`, stop with :meth:`stop`.

    ``users`` maps a user name to ``(password, readonly)``. ``queries`` records each request's
    ``(user, session_id, statement)``, for tests that check what the client sent.
    """

    display_name = "lens-test-clickhouse"

    def __init__(self, users: dict[str, tuple[str, int]] | None = None, path: str | None = None) -> None:
        from chdb import session

        self.users = users if users is not None else {"default": ("", 0)}
        self._tmp = tempfile.TemporaryDirectory(prefix="lens-ch-http-")
        self.session = session.Session(path or os.path.join(self._tmp.name, "db"))
        self.version, self.timezone = self.session.query("SELECT version(), timezone()", "TSV").bytes().decode() \
            .strip().split("\t")
        # the engine's own default decides when a request does not set it (chdb's is 1; a server's is 0)
        self.http_compression = self.session.query(
            "SELECT value FROM system.settings WHERE name = 'enable_http_compression'", "TSV").bytes().strip() != b"0"
        self.lock = threading.Lock()
        self.closed = False
        self.busy: set[str] = set()
        self.busy_lock = threading.Lock()
        self.sessions: set[str] = set()
        self.queries: list[tuple[str, str, str]] = []
        self.encodings: list[tuple[str, str, str]] = []
        """(session_id, statement, Content-Encoding) of each answer with a body ('' when sent as is)."""
        self.die_when: Callable[[str], bool] | None = None
        """A test sets this: the first statement it returns True for gets half its answer, then the server is gone."""
        self.stall_when: Callable[[str], bool] | None = None
        """A test sets this: a statement it returns True for waits (until :meth:`stop`) before it runs."""
        self.stalled = threading.Event()
        """Set when a statement stalls."""
        self.dead = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def url(self, user: str = "default", password: str = "", database: str = "") -> str:
        """``http://user:password@127.0.0.1:PORT[/database]``, as ``lens report --clickhouse`` takes it."""
        return f"http://{user}:{password}@127.0.0.1:{self.port}" + (f"/{database}" if database else "")

    def start(self) -> ClickHouseHTTP:
        """Serve in a thread; returns self."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="clickhouse-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the port and the engine session."""
        if not self.dead.is_set():
            self.dead.set()
            self.httpd.shutdown()
            self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(10)
        with self.lock:
            self.closed = True
            self.session.close()
        self._tmp.cleanup()

    def die(self) -> None:
        """Go away as a crashed server does: the listening port closes (new connections are refused)."""
        if not self.dead.is_set():
            self.dead.set()
            threading.Thread(target=lambda: (self.httpd.shutdown(), self.httpd.server_close()), daemon=True).start()

    def run(self, sql: str) -> bytes:
        """Run ``sql`` in the engine session directly (not through HTTP), as a server's operator would."""
        with self.lock:
            if self.closed:
                raise RuntimeError("the front is stopped")
            return self.session.query(sql, "TSV").bytes()

    # ---- one statement ---------------------------------------------------------------------------

    def error_text(self, code: int, message: str) -> str:
        """An exception's text as the server sends it: ``Code: N. DB::Exception: message (version V)``."""
        return f"Code: {code}. DB::Exception: {message} (version {self.version})"

    def _engine_error(self, exc: BaseException) -> _ClickHouseError:
        text = str(exc).strip()
        found = _CODE.match(text)
        if not found:
            return _ClickHouseError(1001, self.error_text(1001, f"std::exception. {text}. (STD_EXCEPTION)"))
        code = int(found.group(1))
        body = text[found.end():]
        while body.startswith(found.group(0)):  # the embedded engine sometimes repeats the prefix
            body = body[found.end():]
        body = re.sub(r" \(version [0-9.]+\)(?=\. \()", "", body)
        return _ClickHouseError(code, self.error_text(code, body.rstrip(".") if body.endswith(").") else body))

    def execute(self, *, user: str, params: dict[str, str], data: bytes, method: str) -> tuple[bytes, dict[str, str]]:
        """Run the request's statement in the engine: (the answer's bytes, the response headers); raises _ClickHouseError."""
        readonly = self.users[user][1]
        if method == "GET" and readonly == 0:
            readonly = 2  # ClickHouse runs GET requests read-only
        query = params.get("query", "").encode()
        text = query + b"\n" + data if query else data
        insert = _INSERT_DATA.match(text)
        sql = (text[:insert.end()].decode() if insert else text.decode(errors="replace")).strip()
        keyword = _first_keyword(sql)
        statement = sql  # as the client sent it (for server.queries)
        refused = readonly and keyword not in _READ and not (
            readonly == 2 and (keyword == "SET" or re.match(r"\s*CREATE\s+TEMPORARY\s+TABLE", sql, re.I)))
        settings = {k: v for k, v in params.items() if k not in _RESERVED and not k.startswith("param_")}
        bind = {k[len("param_"):]: v for k, v in params.items() if k.startswith("param_")}
        fmt = params.get("default_format") or "TabSeparated"
        if not insert:
            found = _FORMAT_AT_END.search(sql)
            if found:
                fmt, sql = found.group(1), sql[:found.start()].rstrip()
        if readonly and keyword in ("SELECT", "WITH") and not re.search(r"\bSETTINGS\s+\w+\s*=", sql, re.IGNORECASE):
            # the engine itself then runs the read as the user's level allows (and system.settings
            # says which settings this user may change, which the client reads before sending any)
            sql += f" SETTINGS readonly = {readonly}"
        session_id = params.get("session_id", "")
        if self.stall_when is not None and self.stall_when(statement):
            self.stalled.set()
            self.dead.wait(120)  # a slow statement: the client waits on its answer
        with self.lock:
            if self.closed:  # stopped while this request waited: the engine session is gone
                raise _ClickHouseError(210, self.error_text(210, "the server is shutting down. (NETWORK_ERROR)"))
            if session_id:
                if params.get("session_check") == "1" and session_id not in self.sessions:
                    raise _ClickHouseError(372, self.error_text(372, f"Session {session_id} not found. (SESSION_NOT_FOUND)"))
                self.sessions.add(session_id)
            self.queries.append((user, session_id, statement))
            if refused and not self._temporary_target(sql):
                raise _ClickHouseError(164, self.error_text(
                    164, f"{user}: Cannot execute query in readonly mode. (READONLY)"))
            restore = self._apply(settings, params.get("database", ""), readonly)
            started = time.perf_counter_ns()
            try:
                if insert:
                    result = self._insert(insert.group(1).decode().strip(), insert.group(2).decode(), text[insert.end():])
                else:
                    result = self.session.query(sql, fmt, params=bind or None)
            except Exception as exc:  # the engine refused: its code and text, as a server sends them
                raise self._engine_error(exc) from None
            finally:
                self._restore(restore)
            elapsed = time.perf_counter_ns() - started
            body = b"" if insert else result.bytes()
        summary = {"read_rows": str(result.rows_read()), "read_bytes": str(result.bytes_read()),
                   "written_rows": str(getattr(result, "rows_written", lambda: 0)()),
                   "written_bytes": str(getattr(result, "bytes_written", lambda: 0)()),
                   "total_rows_to_read": str(result.rows_read()), "result_rows": "0", "result_bytes": str(len(body)),
                   "elapsed_ns": str(elapsed)}
        headers = {"X-ClickHouse-Summary": json.dumps(summary, separators=(",", ":")),
                   "X-ClickHouse-Timezone": self.timezone}
        if keyword in _RESULT and not insert:
            headers["X-ClickHouse-Format"] = fmt
            headers["Content-Type"] = _CONTENT_TYPES.get(fmt, "text/plain; charset=UTF-8")
        return body, headers

    def _temporary_target(self, sql: str) -> bool:
        """Whether ``sql`` inserts into or drops a temporary table: ClickHouse's access check grants every access
        to temporary tables but their creation (ContextAccess), so readonly refuses neither."""
        if re.match(r"\s*DROP\s+TEMPORARY\s+TABLE\s", sql, re.IGNORECASE):
            return True  # names only a temporary table (or none: IF EXISTS)
        found = re.match(r"\s*(?:INSERT\s+INTO|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+`?(\w+)`?(?=[\s(]|$)",
                         sql, re.IGNORECASE)
        if not found:
            return False
        return self.session.query(f"SELECT count() FROM system.tables WHERE is_temporary AND name = '{found.group(1)}'",
                                  "TSV").bytes().strip() != b"0"

    def _apply(self, settings: dict[str, str], database: str, readonly: int) -> list[str]:
        """SET the request's settings (and USE its database) in the engine session; the statements that undo them."""
        undo: list[str] = []
        try:
            if settings:
                names = ", ".join("'" + name.replace("'", "") + "'" for name in settings)
                known = dict(line.split("\t", 1) for line in self.session.query(
                    f"SELECT name, value FROM system.settings WHERE name IN ({names})", "TSV").bytes().decode().splitlines())
                for name, value in settings.items():
                    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                        raise _ClickHouseError(115, self.error_text(115, f"Unknown setting '{name}'. (UNKNOWN_SETTING)"))
                    if known.get(name) == value:
                        continue
                    if readonly == 1 or (readonly and name == "readonly"):
                        raise _ClickHouseError(164, self.error_text(
                            164, f"Cannot modify '{name}' setting in readonly mode. (READONLY)"))
                    self.session.query(f"SET {name} = {_literal(value)}")  # the engine checks name and value
                    if name in known:
                        undo.append(f"SET {name} = {_literal(known[name])}")
            if database:
                current = self.session.query("SELECT currentDatabase()", "TSV").bytes().decode().strip()
                if current != database:
                    self.session.query(f"USE `{database}`")
                    undo.append(f"USE `{current}`")
        except _ClickHouseError:
            self._restore(undo)
            raise
        except Exception as exc:
            self._restore(undo)
            raise self._engine_error(exc) from None
        return undo

    def _restore(self, undo: list[str]) -> None:
        for statement in reversed(undo):
            self.session.query(statement)

    def _insert(self, target: str, fmt: str, data: bytes) -> Any:
        """``INSERT INTO target FORMAT fmt`` + data: the data goes through a file the engine reads in that format."""
        with tempfile.NamedTemporaryFile(dir=self._tmp.name, suffix=".data", delete=False) as out:
            out.write(data)
        try:
            path = out.name.replace("'", "")
            return self.session.query(f"INSERT INTO {target} SELECT * FROM file('{path}', '{fmt}')", "TSV")
        finally:
            os.unlink(out.name)


def _literal(value: str) -> str:
    """A setting value as SQL: numbers as they are, anything else quoted."""
    if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _decompress(data: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if not encoding or encoding == "identity":
        return data
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    if encoding == "gzip":
        return gzip.decompress(data)
    if encoding == "deflate":
        return zlib.decompress(data)
    raise _ClickHouseError(48, f"Code: 48. DB::Exception: Content-Encoding {encoding} is not supported here. "
                               "(NOT_IMPLEMENTED)")


def _compress(data: bytes, accept: str) -> tuple[bytes, str]:
    """The answer compressed as ClickHouse picks from ``Accept-Encoding`` (zstd, then lz4, gzip, deflate)."""
    if "zstd" in accept:
        import zstandard

        return zstandard.ZstdCompressor().compress(data), "zstd"
    if "lz4" in accept:
        import lz4.frame

        return lz4.frame.compress(data), "lz4"
    if "gzip" in accept:
        return gzip.compress(data), "gzip"
    if "deflate" in accept:
        return zlib.compress(data), "deflate"
    return data, ""


def _handler(server: ClickHouseHTTP) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # the head and the first chunks leave in one segment, not one per write

        def setup(self) -> None:
            super().setup()
            # no Nagle delay: a small answer waiting on the client's delayed ACK costs ~40 ms a statement
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: tests read server.queries
            pass

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _user(self, params: dict[str, str]) -> str:
            user, password = self.headers.get("X-ClickHouse-User"), self.headers.get("X-ClickHouse-Key", "")
            auth = self.headers.get("Authorization", "")
            if user is None and auth.lower().startswith("basic "):
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            if user is None:
                user, password = params.get("user", "default"), params.get("password", "")
            if server.users.get(user, (None,))[0] != password:
                raise _ClickHouseError(516, server.error_text(
                    516, f"{user}: Authentication failed: password is incorrect, or there is no user with such name. "
                         "(AUTHENTICATION_FAILED)"))
            return user

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            if url.path.rstrip("/") == "/ping":
                self._send(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})
                return
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            query_id = params.get("query_id") or str(uuid.uuid4())
            try:
                data = self._body()
                if self.headers.get("Content-Type", "").startswith("multipart/form-data"):
                    raise _ClickHouseError(48, server.error_text(
                        48, "external data (multipart/form-data) is not implemented by this test server. (NOT_IMPLEMENTED)"))
                data = _decompress(data, self.headers.get("Content-Encoding", ""))
                user = self._user(params)
                session_id = params.get("session_id", "")
                with server.busy_lock:  # one statement at a time per session, as ClickHouse enforces
                    if session_id in server.busy:
                        raise _ClickHouseError(373, server.error_text(
                            373, f"Session {session_id} is locked by a concurrent client. (SESSION_IS_LOCKED)"))
                    if session_id:
                        server.busy.add(session_id)
                try:
                    body, headers = server.execute(user=user, params=params, data=data, method=method)
                    headers["X-ClickHouse-Query-Id"] = query_id
                    accept = self.headers.get("Accept-Encoding", "")
                    compress = params.get("enable_http_compression", "1" if server.http_compression else "0")
                    if body and accept and compress not in ("0", "false", "False"):
                        body, encoding = _compress(body, accept)
                        if encoding:
                            headers["Content-Encoding"] = encoding
                    if body:
                        server.encodings.append((session_id, server.queries[-1][2],
                                                 headers.get("Content-Encoding", "")))
                    die = server.die_when is not None and server.die_when(server.queries[-1][2])
                    # the session stays locked while its answer is sent, and is released before the last
                    # bytes leave, as ClickHouse releases it before finalizing the response
                    self._send(200, body, headers, die=bool(die), release=lambda: server.busy.discard(session_id))
                finally:
                    server.busy.discard(session_id)
            except _ClickHouseError as exc:
                self._send(http_status(exc.code), (exc.text + "\n").encode(),
                           {"X-ClickHouse-Exception-Code": str(exc.code), "X-ClickHouse-Query-Id": query_id,
                            "Content-Type": "text/plain; charset=UTF-8"})

        def _send(self, status: int, body: bytes, headers: dict[str, str], die: bool = False,
              release: Callable[[], None] = lambda: None) -> None:
            if server.dead.is_set() and not die:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(status)
            self.send_header("X-ClickHouse-Server-Display-Name", server.display_name)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Keep-Alive", "timeout=10")
            self.end_headers()
            step = 1 << 16
            chunks = [body[i:i + step] for i in range(0, len(body), step)]
            if die:  # half the answer's bytes, then the connection and the port are gone: a crash as the client meets it
                half = body[:len(body) // 2]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))
                self.wfile.flush()
                server.die()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            release()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
