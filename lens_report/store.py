"""The report's file store: trace files read into an embedded DuckDB database, one row per span, memory bounded."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import threading
import weakref
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lens_core import semconv
from lens_core.interrupts import forget_on_interrupt, remove_on_interrupt

from .dialect import DUCKDB, Dialect
from .discovery import _PLAIN_SUFFIXES, find_trace_files
from .engine import _input_errors, compiled_reader, require_duckdb
from .ingest import (
    _BATCH_RESOURCES,
    _NO_SPANS,
    _PLACEHOLDER,
    _SCAN_INGEST_SQL,
    _SCAN_RESOURCES_VIEW,
    _SCAN_SPANS_VIEW,
    _STORE_TYPES,
    RESOURCE_COLUMNS,
    SCAN_FIELD_COLUMNS,
    SCAN_RESOURCE_FIELDS,
    SCAN_SPAN_FIELDS,
    SPAN_COLUMNS,
    _capped_lines,
    _ingest_sql,
    _line_problems,
    _open_text,
    _pieces,
    _sql_text,
    row_columns,
    stored_columns,
)
from .model import DEFAULT_MEMORY_LIMIT, Problem, Span
from .plan import (
    _PIECE_BYTES,
    _SMALL_PIECE_BYTES,
    _PIECES_AT_ONCE,
    _SMALL_FILE_BYTES,
    _THREAD_BYTES,
    _batches,
    _plain_size,
    max_line_bytes,
    memory_plan,
)

__all__ = ["ReadResult", "Store", "TraceStore", "insert_rows", "read_spans", "span_rows_sql"]


@runtime_checkable
class Store(Protocol):
    """What the rollup, the renderers and the Perfetto export need of a store of spans, whichever
    engine holds them: :class:`TraceStore` (DuckDB, trace files) and
    :class:`~lens_report.clickhouse.ClickHouseStore` (the Collector's table).

    The store holds a relation ``spans`` (the columns of :data:`~lens_report.ingest.SPAN_COLUMNS`
    it keeps, and ``rowid``) and ``files`` (``idx``, ``path``, ``first``); the rollup writes its
    working tables beside them in the store's :attr:`dialect`."""

    dialect: Dialect
    """The SQL dialect of the engine holding the spans."""
    files: list[str]
    """What the spans were read from, in order (a ``spans`` row's ``file`` indexes it)."""
    problems: list[Problem]
    """Input that could not be read, in file and line order."""
    duplicate_count: int
    """Spans read more than once (same trace and span id) and kept once."""
    partial_walk: str | None
    """Set by the rollup: None when the walk's tables (``k``, ``anc``) hold every span of the last report; else that
    report's condition on ``spans`` (or ''): it was walked in parts, or some of its spans were summed where they lie,
    and a view draws from :meth:`create_drawn` instead."""

    def execute(self, sql: str) -> None:
        """Run one statement."""

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row of a query (for small results)."""

    def value(self, sql: str) -> Any:
        """The first column of the first row of a query."""

    def stream(self, sql: str) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        """(column names, a chunk of rows) for each chunk of a query's rows."""

    def int_columns(self, sql: str) -> Iterator[list[array]]:
        """Each chunk of a query's rows as one ``array("q")`` per column (every value an integer, none NULL)."""

    def create(self, name: str, select: str) -> None:
        """(Re)create the working table ``name`` from a query."""

    def define(self, name: str, select: str) -> None:
        """(Re)define ``name`` as a query run where it is read."""

    def create_columns(self, name: str, columns: str, rows: list[list[Any]] | list[tuple[Any, ...]] = ()) -> None:
        """(Re)create the working table ``name`` with ``columns``, holding ``rows`` (empty by default)."""

    def drop(self, name: str, *more: str) -> None:
        """Drop the working table ``name`` (and ``more``) when it exists."""

    def hold_outside(self, nbytes: int) -> None:
        """The report now holds ``nbytes`` beside the engine: the engine gives up what it can."""

    def join_parts(self, rows: int, row_bytes: int) -> int:
        """Into how many parts a join of ``rows`` rows of ``row_bytes`` each is split to fit."""

    def span_count(self) -> int:
        """How many spans the store holds (loss records and bad input excluded)."""

    def span_parts(self, timed: bool, where: str) -> int:
        """Into how many parts of whole traces the rollup walks the spans that satisfy ``where`` (1: all at
        once; 0: none, the store sums them all: :meth:`presum`); ``timed`` when the run has device times
        (their rule joins a rank's leaves across traces: every span is walked, and in parts each part is read
        twice, its device intervals first)."""

    def presums(self) -> bool:
        """Whether :meth:`presum` sums some spans no part holds (after :meth:`span_parts`)."""

    def presum(self, where: str, cond: str, prefix: str) -> tuple[int, int, int, int]:
        """Add the sums of the spans no part holds to the tables the parts add to (``prefix`` + ``steps``,
        ``rank_parts``, ... : see :data:`~lens_report.rollup.KEPT`; made when ``prefix`` is '') and return
        their (spans, traces, error spans, orphans)."""

    def load_part(self, part: int, parts: int) -> None:
        """Make ``spans`` hold part ``part`` of ``parts`` (the store's every span when ``parts`` is 1)."""

    def part_relation(self, part: int, parts: int) -> str:
        """SQL: a relation of part ``part`` of ``parts``' spans (the ``spans`` columns, each span once), read where
        they lie rather than loaded into ``spans``."""

    def unload_part(self, walked: tuple[str, ...]) -> None:
        """The part ``spans`` holds is walked and another is loaded next: drop ``spans`` and ``walked``, the
        working tables its walk left, before the next part's are made."""

    def unload_parts(self, walked: tuple[str, ...]) -> None:
        """Every part is walked (``parts`` > 1) and nothing more reads one: drop ``spans`` and ``walked``, the
        working tables the last part's walk left, before the figures are made."""

    def whole(self) -> str:
        """SQL: a relation of every span of the store (the ``spans`` columns), whichever part ``spans`` holds."""

    def create_drawn(self, name: str, join: str, where: str) -> None:
        """(Re)create the working table ``name``: the spans of the whole run (``s``, the ``spans`` columns), joined
        with ``join``, that satisfy ``where``, each once, with ``pid`` (its parent's row id; NULL for a root); a row id
        made of the span's own ids, the same in every such table. What a view draws when the walk's tables hold a
        part of the run (:attr:`partial_walk`)."""

    def spans(self, where: str = "true", order: str = "s.file, s.line, s.rowid") -> Iterator[Span]:
        """The stored spans that satisfy ``where`` as :class:`~lens_report.model.Span` records."""

    def close(self) -> None:
        """Release the engine and whatever the store wrote."""

_DATABASE = "lens_spans"
_ROW_GROUP_SIZE = 30_720
_EVICT_TO = "1MB"
"""The engine's limit for the moment after each statement that reads alone: it evicts the pages
that statement left cached (written to the database file already), and is then set back."""


def insert_rows(con: Any, table: str, rows: list[list[Any]] | list[tuple[Any, ...]]) -> None:
    """Append ``rows`` (each as wide as ``table``) to ``table`` in one statement.

    Each column travels as one list parameter and is unnested in SQL: ``executemany`` runs an
    INSERT per row (~4 ms each: 7.6 s of a 2,000-file report went to the file list alone).
    """
    if not rows:
        return
    columns = [list(column) for column in zip(*rows)]
    con.execute(f"INSERT INTO {table} SELECT {', '.join('unnest(?)' for _ in columns)}", columns)


def _remove_database(directory: str) -> None:
    forget_on_interrupt(directory)
    shutil.rmtree(directory, ignore_errors=True)


class TraceStore:
    """Spans of OTLP-JSON trace files in an embedded DuckDB database (a temporary file), one row each: the
    DuckDB :class:`Store`.

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
        self.partial_walk: str | None = None
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
        compiled = compiled_reader(self.detail) is not None
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
        """Read one large file in line-aligned pieces of ``_PIECE_BYTES``, ``_PIECES_AT_ONCE`` a statement."""
        (file,) = batch
        with self._cursor() as cursor:
            self._read_in_pieces(cursor, file, problems, _PIECE_BYTES, _PIECES_AT_ONCE)

    def _read_in_pieces(self, cursor: Any, source_file: str, problems: list[Problem], size: int, at_once: int, *,
                        as_file: str | None = None, line_offset: int = 0) -> None:
        """Read ``source_file`` (``as_file`` itself, or a piece of it whose lines before it number
        ``line_offset``) in line-aligned pieces of about ``size`` bytes: they are written to the store's
        directory, read ``at_once`` a statement as that file with their lines numbered on from the pieces
        before them, and removed. A file that cannot be read to its end keeps what was read. Pieces of
        ``_SMALL_PIECE_BYTES`` are not split again (see :meth:`_ingest_batch`)."""
        file = as_file or source_file
        group: list[tuple[str, int]] = []  # (piece, lines before it)
        offset = line_offset
        error: BaseException | None = None
        split = size > _SMALL_PIECE_BYTES
        try:
            with _open_text(source_file) as source:
                stem = os.path.join(self._dir, f"piece-{self._index[file]}-{size}-")  # a piece's pieces: their own
                for piece, lines in _pieces(source, stem, size, self._stop_reading):
                    group.append((piece, offset))
                    offset += lines
                    if len(group) == at_once:
                        self._ingest_group(cursor, group, file, problems, split)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            error = exc
        if group:  # what was read before the end, or before the damage (it removes them)
            self._ingest_group(cursor, group, file, problems, split)
        if error is not None:
            problems.append(Problem(file, 0, f"cannot read file: {error}" if offset == line_offset
                                    else f"cannot read the rest of the file: {error}"))

    def _ingest_group(self, cursor: Any, group: list[tuple[str, int]], file: str, problems: list[Problem],
                      split: bool) -> None:
        """Read pieces of ``file`` in one statement (ordinality runs on across them), then remove
        them; if DuckDB cannot read them together, piece by piece (``split``: see :meth:`_ingest_batch`)."""
        try:
            self._ingest_files(cursor, [piece for piece, _ in group], as_file=file, line_offset=group[0][1])
        except _input_errors() as exc:
            if isinstance(exc, require_duckdb().OutOfMemoryException) and self._raise_read_limit():
                self._ingest_group(cursor, group, file, problems, split)
                return
            for piece, offset in group:
                self._ingest_batch(cursor, [piece], problems, as_file=file, line_offset=offset, split=split)
        finally:
            for piece, _ in group:
                if os.path.exists(piece):
                    os.unlink(piece)
            group.clear()

    def _ingest_batch(self, cursor: Any, batch: list[str], problems: list[Problem], *, as_file: str | None = None,
                      line_offset: int = 0, split: bool = True) -> None:
        """Read ``batch`` in one statement; ``as_file``: the batch is one piece or copy standing in for
        that file, whose lines before it number ``line_offset``. ``split``: a file that runs out of
        memory even at the reading limit's cap is read again in small pieces (not again for those)."""
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
            if (split and isinstance(exc, require_duckdb().OutOfMemoryException)
                    and _plain_size(batch[0]) > _SMALL_PIECE_BYTES):
                # the reader's memory grows with the file it reads, not its lines: in small pieces it fits
                self._read_in_pieces(cursor, batch[0], problems, _SMALL_PIECE_BYTES, 1, as_file=as_file,
                                     line_offset=line_offset)
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

    def int_columns(self, sql: str) -> Iterator[list[array]]:
        """Each chunk of a query's rows as one ``array("q")`` per column (every value an integer, none NULL)."""
        for _names, rows in self.stream(sql):
            yield [array("q", map(int, values)) for values in zip(*rows)]  # a column at a time: ~0.4 s less at 3M

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

    def create_columns(self, name: str, columns: str, rows: list[list[Any]] | list[tuple[Any, ...]] = ()) -> None:
        """(Re)create the working table ``name`` with ``columns`` (``a VARCHAR, b BIGINT``; see
        :meth:`~lens_report.dialect.Dialect.column_type`), in the database file as :meth:`create`'s,
        holding ``rows``."""
        self.con.execute(f"CREATE OR REPLACE TABLE {name} ({columns})")
        insert_rows(self.con, name, rows)

    def drop(self, name: str, *more: str) -> None:
        """Drop the working table ``name`` (and ``more``) when it exists (DuckDB drops one a statement, in process:
        no round trip)."""
        for each in (name, *more):
            self.con.execute(f"DROP TABLE IF EXISTS {each}")

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

    def span_parts(self, timed: bool, where: str) -> int:
        """One: the file store's engine bounds its own memory (it spills to its database file)."""
        return 1

    def presums(self) -> bool:
        """False: every span is walked."""
        return False

    def presum(self, where: str, cond: str, prefix: str) -> tuple[int, int, int, int]:
        """Nothing to add: every span is walked."""
        return 0, 0, 0, 0

    def load_part(self, part: int, parts: int) -> None:
        """Nothing: ``spans`` always holds every span read."""

    def part_relation(self, part: int, parts: int) -> str:
        """``spans``: this store is walked at once (:meth:`span_parts`), and ``spans`` holds every span."""
        return "spans"

    def unload_part(self, walked: tuple[str, ...]) -> None:
        """Nothing: this store is walked at once (:meth:`span_parts`)."""

    def unload_parts(self, walked: tuple[str, ...]) -> None:
        """Nothing: this store is walked at once (:meth:`span_parts`), and its ``spans`` kept."""

    def whole(self) -> str:
        """``spans``: it holds every span read."""
        return "spans"

    def create_drawn(self, name: str, join: str, where: str) -> None:
        """Never needed: a report of files is walked at once (:attr:`partial_walk` is None), so a view reads the
        walk's tables."""
        raise NotImplementedError("a report of files is walked at once: its views read the walk's tables")

    def spans(self, where: str = "true", order: str = "s.file, s.line, s.rowid") -> Iterator[Span]:
        """The stored spans as :class:`~lens_report.model.Span` records, in file and line order.

        ``where`` is an SQL condition on the ``spans`` table (alias ``s``), ``order`` an ORDER BY
        list. Attributes, events and links are complete only in a store made with ``detail=True``.
        """
        from .model import span_from_row

        for columns, rows in self.stream(span_rows_sql(self.dialect, where, order, self.stored_columns)):
            for row in rows:
                yield span_from_row(dict(zip(columns, row)))


def span_rows_sql(dialect: Any, where: str, order: str, columns: tuple[str, ...] = SPAN_COLUMNS,
                  relation: str = "spans") -> str:
    """SQL: the rows :func:`~lens_report.model.span_from_row` takes, of the spans of ``relation`` (the store's
    ``spans`` by default) that satisfy ``where``; ``columns``: those it has (every one by default)."""
    d = dialect
    kept = ", ".join(f"s.{c}" for c in columns if c not in ("trace", "span", "parent", "line"))
    return (f"SELECT {kept}, {d.hex_id('s.trace', 32)} AS trace, {d.hex_id('s.span', 16)} AS span, "
            f"CASE WHEN s.parent IS NOT NULL THEN {d.hex_id('s.parent', 16)} END AS parent, "
            f"s.line - f.first + 1 AS line, f.path AS path "
            f"FROM {relation} s JOIN files f ON f.idx = s.file WHERE {where} ORDER BY {order}")


_SCAN_SPANS = 200_000
"""Spans per statement of the compiled reader, at most (see ``_SCAN_HELD``)."""
_SCAN_HELD = 32 * 1024 * 1024
"""The bytes of columns the compiled reader holds for one statement, at most (~150,000 spans of a
training trace). They are outside the engine's limit: at 3M spans the reading peaked at 178-181 MiB
with them (180-186 with the CSV text this replaced), the rollup after it at 182-184."""
_SCAN_BYTES = 64 * 1024 * 1024
"""Bytes of files per job of the compiled reader (a job's files are counted done together)."""


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
