"""File exporters writing OTLP/JSON lines; imported lazily, since it imports the OTel SDK."""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import weakref
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from lens_core.semconv import LENS_LOSS_SPAN_NAME, LENS_TRUNCATED_KEYS

from otel_bridge.exporters._otlp_json import to_otlp_json_line

from otel_bridge.lifecycle import on_fork
from otel_bridge.sdk import upstream

# the SDK's log exporter names moved in 1.39 (upstream.log_exporter_types)
LogRecordExporter, LogRecordExportResult = upstream.log_exporter_types()

__all__ = ["FILE_VALUE_LIMIT", "FileLogExporter", "FileMetricExporter", "FileSpanExporter", "JsonLinesWriter",
           "NAME_TRIES", "TRUNCATED_KEYS", "fit_lines", "truncate_record", "value_limit", "write_records"]

_logger = logging.getLogger(__name__)

# O_NOFOLLOW: a symlink planted at a file's path (a shared LENS_FILE_DIR) is refused, never
# followed and appended to.
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
#: Other names tried when a file's path is refused (a symlink, a file that is not ours).
NAME_TRIES = 8

# Every live writer, so a fork can hand the child fresh locks and no inherited descriptor.
_WRITERS: weakref.WeakSet[JsonLinesWriter] = weakref.WeakSet()


def _dir_mode(mode: int) -> int:
    # execute (search) wherever read is given: 0600 -> 0700, 0640 -> 0750
    return mode | (mode & 0o444) >> 2


class JsonLinesWriter:
    """Appends complete lines to ``<directory>/<run_id>/<signal>-rank<rank>-pid<pid>-<tag>.jsonl``.

    Each line is handed to the kernel with one ``os.write`` on an ``O_APPEND``
    descriptor, with no buffering in Python, so every line is complete once an export
    returns, whatever happens to the process afterwards. Only a SIGKILL that lands
    *during* the write of a large line can leave a torn last line: Linux stops a
    regular-file write between pages when a fatal signal is pending. Such a fragment
    has no trailing newline, so readers must ignore an unterminated last line; and a
    later process reusing the file starts on a new line. The file is created on the first
    write; after a fork the child writes its own file, named for its pid.

    Safety in a shared directory: ``<tag>`` (otel_bridge.sdk.identity.process_tag) tells
    apart processes with the same pid in different pid namespaces; the file is opened
    without following a symlink (O_NOFOLLOW, relative to the run directory, itself opened
    without following one) and must be a regular file of ours with one link, else the path
    is refused, counted (``refused``) and the next name tried (``-2``, ``-3``, ...).
    Files are created with ``otel_bridge.exporters.file_mode()`` (0600 unless
    LENS_FILE_MODE widens it), directories this writer creates 0700 (or the mode's
    widening). Before each write the run directory is compared with the one the file was
    opened in (stat of the path against fstat of the descriptor) and the file's link count
    checked: a directory deleted or replaced, or a file deleted, is noticed, the file
    reopened (``reopened``), and the spans written to the lost file counted (``lost_spans``).
    """

    def __init__(self, directory: str | os.PathLike[str], run_id: str, rank: int | str, signal: str):
        run_id = str(run_id)
        if run_id in ("", ".", "..") or "/" in run_id or "\\" in run_id:
            raise ValueError(f"run_id must be a plain directory name, got {run_id!r}")
        self.directory = Path(directory) / run_id
        self.rank = rank
        self.signal = signal
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._dir_id: tuple[int, int] | None = None
        self._name: str | None = None
        self._pid = os.getpid()
        self._closed = False
        self._suspect_tail = False  # a failed write could not be cut back: check before the next
        self.refused = 0  # paths refused: a symlink, or a file that is not ours
        self.reopened = 0  # files reopened after their directory or the file itself vanished
        self.lost_spans = 0  # spans written to a file that was deleted (or whose directory was)
        self._file_spans = 0  # spans written to the current file
        _WRITERS.add(self)

    def _base_name(self) -> str:
        from otel_bridge.sdk.identity import process_tag

        return f"{self.signal}-rank{self.rank}-pid{os.getpid()}-{process_tag()}"

    @property
    def path(self) -> Path:
        """The file this process writes (it may not exist yet)."""
        if self._name is not None and self._pid == os.getpid():
            return self.directory / self._name
        return self.directory / f"{self._base_name()}.jsonl"

    def write_line(self, line: str, spans: int = 0) -> None:
        """Append ``line`` plus a newline to this process's file, in one write; ``spans`` is
        how many spans the line holds (counted as lost if the file is deleted later)."""
        payload = (line + "\n").encode("utf-8")
        if self._pid != os.getpid():
            self._after_fork()
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.signal} file writer is closed")
            if self._fd is not None and self._vanished():
                self.lost_spans += self._file_spans
                self.reopened += 1
                _logger.warning("lens: %s was deleted or its directory replaced; %d spans written to it are lost, "
                                "writing a new file", self.directory / (self._name or "?"), self._file_spans)
                self._close_fd()
            if self._fd is None or self._suspect_tail:
                if self._fd is None:
                    self._fd = self._open()
                    self._file_spans = 0
                if self._ends_with_torn_line(self._fd):
                    payload = b"\n" + payload
                self._suspect_tail = False
            start = os.fstat(self._fd).st_size
            data = memoryview(payload)
            try:
                while data:  # local file systems take it all in one call; loop for the others
                    data = data[os.write(self._fd, data) :]
            except OSError:
                # A full disk (or a file size limit) took part of the line: cut it back off, so
                # the next line does not start glued to a fragment and what is counted as
                # written is what can be read. If even that fails, the next write checks.
                try:
                    os.ftruncate(self._fd, start)
                except OSError:
                    self._suspect_tail = True
                raise
            self._file_spans += spans

    def _vanished(self) -> bool:
        # Cheap (two stat calls per line written): the file unlinked, or the run directory
        # deleted or replaced by another (a new inode at the same path).
        try:
            if os.fstat(self._fd).st_nlink == 0:
                return True
            st = os.stat(self.directory)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._dir_id

    def _open(self) -> int:
        from otel_bridge.exporters import file_mode

        mode = file_mode()
        self._make_dirs(_dir_mode(mode))
        dir_fd = os.open(self.directory, _DIR_FLAGS)  # a symlink here (ELOOP) is refused too
        try:
            st = os.fstat(dir_fd)
            base = self._base_name()
            for attempt in range(1, NAME_TRIES + 1):
                name = f"{base}.jsonl" if attempt == 1 else f"{base}-{attempt}.jsonl"
                try:
                    fd = os.open(name, _OPEN_FLAGS, mode, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES, errno.EPERM):
                        raise
                    self._refuse(name, f"{exc.strerror}")
                    continue
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
                    os.close(fd)
                    self._refuse(name, "not a regular file of this user with one link")
                    continue
                if stat.S_IMODE(info.st_mode) != mode:
                    os.fchmod(fd, mode)  # the umask may have narrowed it; a setting may widen it
                self._name = name
                self._dir_id = (st.st_dev, st.st_ino)
                return fd
        finally:
            os.close(dir_fd)
        raise OSError(errno.EEXIST, f"every name tried in {self.directory} was refused ({NAME_TRIES} tries)")

    def _make_dirs(self, mode: int) -> None:
        try:
            os.mkdir(self.directory, mode)
        except FileExistsError:
            return
        except FileNotFoundError:
            self.directory.parent.mkdir(parents=True, exist_ok=True, mode=mode)
            try:
                os.mkdir(self.directory, mode)
            except FileExistsError:
                return
        os.chmod(self.directory, mode)  # what the umask took off

    def _refuse(self, name: str, why: str) -> None:
        self.refused += 1
        _logger.warning("lens: refusing to write %s (%s); trying another name", self.directory / name, why)

    @staticmethod
    def _ends_with_torn_line(fd: int) -> bool:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"

    def close(self) -> None:
        """Close the file; later writes raise ``ValueError``."""
        with self._lock:
            self._closed = True
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _after_fork(self) -> None:
        # The child must not write the parent's file, nor wait on a lock that a parent
        # thread held at fork time.
        self._lock = threading.Lock()
        self._close_fd()
        self._name = None
        self._file_spans = 0
        self._pid = os.getpid()


def _after_fork_in_child() -> None:
    for writer in list(_WRITERS):
        writer._after_fork()


on_fork("otel_bridge.file_writers", after_in_child=_after_fork_in_child)


def _write_request(writer: JsonLinesWriter, request: Any) -> bool:
    """Write one Export*ServiceRequest as an OTLP/JSON line; False (logged) on failure."""
    try:
        writer.write_line(to_otlp_json_line(request))
    except (OSError, ValueError) as exc:
        _logger.warning("lens: could not write %s to %s: %s", writer.signal, writer.path, exc)
        return False
    return True


class FileSpanExporter(SpanExporter):
    """Writes each batch of spans as one ``ExportTraceServiceRequest`` OTLP/JSON line."""

    def __init__(self, directory: str | os.PathLike[str], run_id: str, rank: int | str = 0):
        self._writer = JsonLinesWriter(directory, run_id, rank, "traces")

    @property
    def path(self) -> Path:
        """The file this process writes."""
        return self._writer.path

    def export(self, spans) -> SpanExportResult:
        """Encode ``spans`` with the SDK's OTLP encoder and append them as one line."""
        if not spans:
            return SpanExportResult.SUCCESS
        ok = _write_request(self._writer, encode_spans(spans))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Close the file."""
        self._writer.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in Python: every export is already written."""
        return True


class FileMetricExporter(MetricExporter):
    """Writes each metrics collection as one ``ExportMetricsServiceRequest`` OTLP/JSON line."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        run_id: str,
        rank: int | str = 0,
        preferred_temporality: dict | None = None,
        preferred_aggregation: dict | None = None,
    ):
        super().__init__(
            preferred_temporality=preferred_temporality,
            preferred_aggregation=preferred_aggregation,
        )
        self._writer = JsonLinesWriter(directory, run_id, rank, "metrics")

    @property
    def path(self) -> Path:
        """The file this process writes."""
        return self._writer.path

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        """Encode ``metrics_data`` with the SDK's OTLP encoder and append it as one line."""
        if metrics_data is None or not metrics_data.resource_metrics:
            return MetricExportResult.SUCCESS
        ok = _write_request(self._writer, encode_metrics(metrics_data))
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Nothing is buffered in Python: every export is already written."""
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        """Close the file."""
        self._writer.close()


class FileLogExporter(LogRecordExporter):
    """Writes each batch of log records as one ``ExportLogsServiceRequest`` OTLP/JSON line."""

    def __init__(self, directory: str | os.PathLike[str], run_id: str, rank: int | str = 0):
        self._writer = JsonLinesWriter(directory, run_id, rank, "logs")

    @property
    def path(self) -> Path:
        """The file this process writes."""
        return self._writer.path

    def export(self, batch) -> LogRecordExportResult:
        """Encode ``batch`` with the SDK's OTLP encoder and append it as one line."""
        if not batch:
            return LogRecordExportResult.SUCCESS
        ok = _write_request(self._writer, upstream.encode_logs(batch))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        """Close the file."""
        self._writer.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in Python: every export is already written."""
        return True


# ---- trace lines the report can read ----------------------------------------------------------

#: The longest text value written when OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is unset (characters).
#: Longer ones are cut to it and their keys listed under ``lens.truncated_keys``.
FILE_VALUE_LIMIT = 1 << 20
TRUNCATED_KEYS = LENS_TRUNCATED_KEYS
_NAME_KEY = "(span name)"  # lens.truncated_keys entry for a cut span or event name
_MIN_VALUE = 64  # a span still too long with values this short loses its attributes and events


def value_limit(environ=None) -> int:
    """Characters of one text value the file exporter writes: OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT
    when it is a positive whole number, else FILE_VALUE_LIMIT (1 MiB)."""
    raw = (os.environ if environ is None else environ).get("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) <= FILE_VALUE_LIMIT else FILE_VALUE_LIMIT


def _cut_attrs(attrs, limit, cut):
    # Text values (and text items of sequences) past ``limit`` cut in place; keys noted in ``cut``.
    for key, value in list(attrs.items()):
        if isinstance(value, str):
            if len(value) > limit:
                attrs[key] = value[:limit]
                cut.append(key)
        elif isinstance(value, (list, tuple)) and any(isinstance(v, str) and len(v) > limit for v in value):
            attrs[key] = tuple(v[:limit] if isinstance(v, str) else v for v in value)
            cut.append(key)


def _has_long(attrs, limit) -> bool:
    for value in attrs.values():
        if isinstance(value, str):
            if len(value) > limit:
                return True
        elif isinstance(value, (list, tuple)) and any(isinstance(v, str) and len(v) > limit for v in value):
            return True
    return False


def _mark(attrs, cut) -> None:
    old = attrs.get(TRUNCATED_KEYS)
    keys = set(old) if isinstance(old, (list, tuple)) else set()
    attrs[TRUNCATED_KEYS] = tuple(sorted(keys.union(cut)))


def truncate_record(record, limit: int) -> bool:
    """Cut ``record``'s text values (span, event and link attributes; span and event names,
    the status message) longer than ``limit`` characters to ``limit``, in place, listing
    the cut keys in ``lens.truncated_keys`` (on the span, or on the event whose attribute
    it was). True if anything was cut. A record is the export thread's once ended."""
    changed = False
    name = record.name
    if isinstance(name, str) and len(name) > limit:
        record.name = name[:limit]
        if isinstance(record.attrs, dict):
            _mark(record.attrs, [_NAME_KEY])
        changed = True
    message = record.status_msg
    if isinstance(message, str) and len(message) > limit:
        record.status_msg = message[:limit]
        changed = True
    attrs = record.attrs
    if isinstance(attrs, dict) and _has_long(attrs, limit):
        cut = []
        _cut_attrs(attrs, limit, cut)
        _mark(attrs, cut)
        changed = True
    events = record.events
    if events:
        for i, (event_name, ts, event_attrs) in enumerate(events):
            long_name = isinstance(event_name, str) and len(event_name) > limit
            if long_name or (event_attrs and _has_long(event_attrs, limit)):
                event_attrs = dict(event_attrs or {})
                cut = [_NAME_KEY] if long_name else []
                _cut_attrs(event_attrs, limit, cut)
                _mark(event_attrs, cut)
                events[i] = (event_name[:limit] if long_name else event_name, ts, event_attrs)
                changed = True
    links = record.links
    if links:
        for i, link in enumerate(links):
            link_attrs = link[3]
            if link_attrs and _has_long(link_attrs, limit):
                link_attrs = dict(link_attrs)
                cut = []
                _cut_attrs(link_attrs, limit, cut)
                _mark(link_attrs, cut)
                links[i] = link[:3] + (link_attrs,) + link[4:]
                changed = True
    return changed


def _strip(record) -> None:
    # The last resort for a span that fits no line even with short values (say 100,000
    # attributes): its attributes and events go, their keys named, so the span itself
    # (ids, times, status) is still written and counted.
    attrs = record.attrs if isinstance(record.attrs, dict) else {}
    keys = sorted(str(k)[:_MIN_VALUE] for k in attrs)[:64]
    record.attrs = {TRUNCATED_KEYS: tuple(keys) + (("(events)",) if record.events else ())}
    record.events = None
    record.links = None
    if isinstance(record.name, str):
        record.name = record.name[:_MIN_VALUE]


def _fits(line: str, max_bytes: int) -> bool:
    # A character is 1 to 4 bytes of UTF-8: encode only when the length alone cannot tell.
    if len(line) * 4 <= max_bytes:
        return True
    if len(line) > max_bytes:
        return False
    return len(line.encode("utf-8", "surrogatepass")) <= max_bytes


def fit_lines(encode, resource_json, scopes_json, records, *, max_line_bytes: int, limit: int) -> list:
    """``records`` as OTLP/JSON lines of at most ``max_line_bytes`` each: a list of
    (line, spans in it). A batch whose line fits is one line as it is. Otherwise text values
    past ``limit`` characters are cut first (truncate_record), then the batch split in halves
    until each part fits; a single span that still does not fit has its values cut further
    (to a quarter at a time, down to 64 characters) and, as a last resort, its attributes
    and events removed (their keys listed in ``lens.truncated_keys``). Raises what the
    encoder raises."""
    line = encode(resource_json, scopes_json, records)
    # Only a line over the cap is looked into (a batch that fits is written as it is, so
    # the common path costs one length check): its long values are cut first.
    if not _fits(line, max_line_bytes) and any([truncate_record(r, limit) for r in records]):
        line = encode(resource_json, scopes_json, records)
    out: list = []
    _fit(out, encode, resource_json, scopes_json, records, line, max_line_bytes, limit)
    return out


def write_records(writer: JsonLinesWriter, encode, resource_json, scopes_json, records, *,
                  max_line_bytes: int, limit: int) -> int:
    """Write ``records`` as the lines fit_lines makes; returns the lines written and raises
    what the writer raises (OSError, ValueError)."""
    lines = fit_lines(encode, resource_json, scopes_json, records, max_line_bytes=max_line_bytes, limit=limit)
    for line, spans in lines:
        writer.write_line(line, spans)
    return len(lines)


def _spans(records) -> int:
    # the loss record the pipeline appends last is telemetry about spans, not a span
    return len(records) - (records[-1].name == LENS_LOSS_SPAN_NAME)


def _fit(out, encode, resource_json, scopes_json, records, line, max_bytes, limit) -> None:
    if _fits(line, max_bytes):
        out.append((line, _spans(records)))
        return
    if len(records) > 1:
        half = len(records) // 2
        for part in (records[:half], records[half:]):
            _fit(out, encode, resource_json, scopes_json, part, encode(resource_json, scopes_json, part),
                 max_bytes, limit)
        return
    (record,) = records
    while limit > _MIN_VALUE:
        limit = max(_MIN_VALUE, limit // 4)
        truncate_record(record, limit)
        line = encode(resource_json, scopes_json, records)
        if _fits(line, max_bytes):
            break
    else:
        _strip(record)
        line = encode(resource_json, scopes_json, records)
    out.append((line, _spans(records)))
