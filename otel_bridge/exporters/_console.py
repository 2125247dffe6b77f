"""Console exporters writing one compact JSON object per line; imported lazily (OTel SDK)."""

from __future__ import annotations

import json
import sys
import threading
from typing import IO, Any

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_bridge.sdk import upstream

# the SDK's log exporter names moved in 1.39 (upstream.log_exporter_types)
LogRecordExporter, LogRecordExportResult = upstream.log_exporter_types()

__all__ = [
    "ConsoleLogExporter",
    "ConsoleMetricExporter",
    "ConsoleSpanExporter",
    "log_record_to_dict",
    "metric_points_to_dicts",
    "span_to_dict",
]


def _service_name(resource: Any) -> Any:
    return None if resource is None else resource.attributes.get("service.name")


def _attributes(attributes: Any) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in (attributes or {}).items()}


def _hex_or_none(value: int, width: int) -> str | None:
    return format(value, f"0{width}x") if value else None


def span_to_dict(span: Any) -> dict[str, Any]:
    """Summarise an SDK ``ReadableSpan`` as a flat JSON-ready dict."""
    context = span.context
    start, end = span.start_time, span.end_time
    record: dict[str, Any] = {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_id": _hex_or_none(span.parent.span_id, 16) if span.parent else None,
        "start_ns": start,
        "end_ns": end,
        "duration_ms": round((end - start) / 1e6, 3) if start and end else None,
        "attributes": _attributes(span.attributes),
        "status": span.status.status_code.name,
        "service_name": _service_name(span.resource),
    }
    if span.status.description:
        record["status_description"] = span.status.description
    if span.events:
        record["events"] = [
            {"name": event.name, "time_ns": event.timestamp, "attributes": _attributes(event.attributes)}
            for event in span.events
        ]
    return record


def metric_points_to_dicts(metrics_data: Any) -> list[dict[str, Any]]:
    """Flatten SDK ``MetricsData`` into one JSON-ready dict per data point."""
    records = []
    for resource_metrics in metrics_data.resource_metrics:
        service = _service_name(resource_metrics.resource)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    record: dict[str, Any] = {
                        "metric": metric.name,
                        "type": type(metric.data).__name__,
                        "unit": metric.unit or None,
                        "attributes": _attributes(point.attributes),
                        "time_ns": point.time_unix_nano,
                        "service_name": service,
                    }
                    if hasattr(point, "value"):
                        record["value"] = point.value
                    else:  # histogram / exponential histogram
                        for field in ("count", "sum", "min", "max", "bucket_counts", "explicit_bounds"):
                            if hasattr(point, field):
                                value = getattr(point, field)
                                record[field] = list(value) if isinstance(value, (tuple, list)) else value
                    records.append(record)
    return records


def log_record_to_dict(item: Any) -> dict[str, Any]:
    """Summarise an SDK ``ReadableLogRecord`` (``LogData`` on older SDKs) as a JSON-ready dict."""
    record = item.log_record
    resource = getattr(item, "resource", None) or getattr(record, "resource", None)
    severity = record.severity_number
    return {
        "time_ns": record.timestamp or record.observed_timestamp,
        "severity": record.severity_text or (severity.name if severity is not None else None),
        "body": record.body,
        "trace_id": _hex_or_none(record.trace_id or 0, 32),
        "span_id": _hex_or_none(record.span_id or 0, 16),
        "attributes": _attributes(record.attributes),
        "service_name": _service_name(resource),
    }


class _ConsoleWriter:
    """Writes JSON lines to a stream (``sys.stdout`` looked up at write time by default)."""

    def __init__(self, stream: IO[str] | None):
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, records: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, separators=(",", ":"), default=str) + "\n" for r in records)
        with self._lock:
            stream = self._stream if self._stream is not None else sys.stdout
            stream.write(text)
            stream.flush()

    def flush(self) -> bool:
        stream = self._stream if self._stream is not None else sys.stdout
        stream.flush()
        return True


class ConsoleSpanExporter(SpanExporter):
    """Prints one compact JSON object per span (see :func:`span_to_dict`)."""

    def __init__(self, stream: IO[str] | None = None):
        self._writer = _ConsoleWriter(stream)

    def export(self, spans) -> SpanExportResult:
        """Print ``spans``, one line each."""
        self._writer.write([span_to_dict(span) for span in spans])
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the stream."""
        return self._writer.flush()


class ConsoleMetricExporter(MetricExporter):
    """Prints one compact JSON object per metric data point (see :func:`metric_points_to_dicts`)."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        preferred_temporality: dict | None = None,
        preferred_aggregation: dict | None = None,
    ):
        super().__init__(
            preferred_temporality=preferred_temporality,
            preferred_aggregation=preferred_aggregation,
        )
        self._writer = _ConsoleWriter(stream)

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        """Print every data point of ``metrics_data``, one line each."""
        self._writer.write(metric_points_to_dicts(metrics_data))
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Flush the stream."""
        return self._writer.flush()

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        """Nothing to release."""


class ConsoleLogExporter(LogRecordExporter):
    """Prints one compact JSON object per log record (see :func:`log_record_to_dict`)."""

    def __init__(self, stream: IO[str] | None = None):
        self._writer = _ConsoleWriter(stream)

    def export(self, batch) -> LogRecordExportResult:
        """Print ``batch``, one line per record."""
        self._writer.write([log_record_to_dict(item) for item in batch])
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the stream."""
        return self._writer.flush()
