"""File exporters writing OTLP/JSON lines; imported lazily, since it imports the OTel SDK."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_bridge.exporters._otlp_json import to_otlp_json_line

from otel_bridge.lifecycle import on_fork
from otel_bridge.sdk import upstream

# the SDK's log exporter names moved in 1.39 (upstream.log_exporter_types)
LogRecordExporter, LogRecordExportResult = upstream.log_exporter_types()

__all__ = ["FileLogExporter", "FileMetricExporter", "FileSpanExporter", "JsonLinesWriter"]

_logger = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)

# Every live writer, so a fork can hand the child fresh locks and no inherited descriptor.
_WRITERS: weakref.WeakSet[JsonLinesWriter] = weakref.WeakSet()


class JsonLinesWriter:
    """Appends complete lines to ``<directory>/<run_id>/<signal>-rank<rank>-pid<pid>.jsonl``.

    Each line is handed to the kernel with one ``os.write`` on an ``O_APPEND``
    descriptor, with no buffering in Python, so every line is complete once an export
    returns, whatever happens to the process afterwards. Only a SIGKILL that lands
    *during* the write of a large line can leave a torn last line: Linux stops a
    regular-file write between pages when a fatal signal is pending. Such a fragment
    has no trailing newline, so readers must ignore an unterminated last line; and a
    later process reusing the file (same pid, e.g. a restarted container) starts on a
    new line. The file is created on the first write; after a fork the child writes its
    own file, named for its pid.
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
        self._pid = os.getpid()
        self._closed = False
        self._suspect_tail = False  # a failed write could not be cut back: check before the next
        _WRITERS.add(self)

    @property
    def path(self) -> Path:
        """The file this process writes (it may not exist yet)."""
        return self.directory / f"{self.signal}-rank{self.rank}-pid{os.getpid()}.jsonl"

    def write_line(self, line: str) -> None:
        """Append ``line`` plus a newline to this process's file, in one write."""
        payload = (line + "\n").encode("utf-8")
        if self._pid != os.getpid():
            self._after_fork()
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.signal} file writer is closed")
            if self._fd is None or self._suspect_tail:
                if self._fd is None:
                    self._fd = self._open()
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

    def _open(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, _OPEN_FLAGS, 0o644)

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
