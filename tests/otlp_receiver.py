"""A real in-process OTLP receiver (gRPC and HTTP/protobuf) that records what it is sent."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

__all__ = [
    "OTLPReceiver",
    "ReceivedLog",
    "ReceivedMetric",
    "ReceivedRequest",
    "ReceivedSpan",
    "any_value_to_python",
    "attributes_to_dict",
]

# signal -> (request class, response class, add-servicer function, HTTP path)
_SIGNALS = {
    "traces": (
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server,
        "/v1/traces",
    ),
    "metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server,
        "/v1/metrics",
    ),
    "logs": (
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server,
        "/v1/logs",
    ),
}
_SIGNAL_BY_PATH = {path: signal for signal, (_, _, _, path) in _SIGNALS.items()}


def any_value_to_python(value: Any) -> Any:
    """Convert an OTLP ``AnyValue`` to the matching Python value (lists and dicts nested)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value_to_python(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_to_dict(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_to_dict(key_values: Any) -> dict[str, Any]:
    """Convert repeated OTLP ``KeyValue`` to a plain dict."""
    return {kv.key: any_value_to_python(kv.value) for kv in key_values}


@dataclass(frozen=True)
class ReceivedRequest:
    """One Export call: the signal, ``grpc`` or ``http``, the decoded request, the headers."""

    signal: str
    transport: str
    request: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReceivedSpan:
    """A received span with its ids as lowercase hex ('' when absent) and plain-dict attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    transport: str
    proto: Any


@dataclass(frozen=True)
class ReceivedMetric:
    """A received metric: its name, data kind (``sum``, ``gauge``, ``histogram``, ...) and proto."""

    name: str
    kind: str
    resource: dict[str, Any]
    scope: str
    transport: str
    proto: Any


@dataclass(frozen=True)
class ReceivedLog:
    """A received log record with its body as a Python value and ids as hex."""

    body: Any
    severity_text: str
    severity_number: int
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    transport: str
    proto: Any


class _Servicer:
    """Answers one OTLP service's Export RPC (duck-types the generated ``*Servicer``)."""

    def __init__(self, receiver: OTLPReceiver, signal: str):
        self._receiver = receiver
        self._signal = signal

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802 - gRPC name
        headers = {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}
        self._receiver._record(ReceivedRequest(self._signal, "grpc", request, headers))
        return _SIGNALS[self._signal][1]()


class _HTTPHandler(BaseHTTPRequestHandler):
    """Accepts ``POST /v1/{traces,metrics,logs}`` with ``application/x-protobuf`` bodies."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.receiver._connections.add(self.connection)  # so stop() can close kept-alive ones

    def finish(self) -> None:
        self.server.receiver._connections.discard(self.connection)
        super().finish()

    def do_POST(self) -> None:  # noqa: N802 - http.server name
        signal = _SIGNAL_BY_PATH.get(urlsplit(self.path).path)
        length = self.headers.get("Content-Length")
        body = self.rfile.read(int(length)) if length else b""
        if signal is None:
            return self._reply(404)
        if length is None:
            return self._reply(411)
        if self.headers.get_content_type() != "application/x-protobuf":
            return self._reply(415)
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
        request_cls, response_cls = _SIGNALS[signal][:2]
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding not in ("", "identity"):
                return self._reply(415)
            request = request_cls.FromString(body)
        except Exception:  # bad compression or protobuf: the client sent garbage
            return self._reply(400)
        headers = {key.lower(): value for key, value in self.headers.items()}
        receiver = self.server.receiver
        if receiver.delay_s:  # a slow collector
            time.sleep(receiver.delay_s)
        if receiver.drain_spans_per_s and signal == "traces":  # a collector that drains N spans/s
            spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            with receiver._drain_lock:  # one request drained at a time, whatever the client's concurrency
                time.sleep(spans / receiver.drain_spans_per_s)
        if receiver.reply_status != 200:  # a collector refusing every request (a bad token, a wrong path)
            return self._reply(receiver.reply_status)
        if receiver.max_spans_per_request and signal == "traces":  # a collector with a request size limit
            if sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans) > receiver.max_spans_per_request:
                return self._reply(413)
        self.server.receiver._record(ReceivedRequest(signal, "http", request, headers))
        self._reply(200, response_cls().SerializeToString())

    def _reply(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server name
        """Keep test output quiet."""


class OTLPReceiver:
    """OTLP gRPC and HTTP/protobuf receivers on 127.0.0.1 (free ports) recording every request.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. Point exporters at
    :attr:`grpc_endpoint` or :attr:`http_endpoint` (the HTTP one is a base URL: the
    signal paths ``/v1/traces``, ``/v1/metrics``, ``/v1/logs`` go after it).
    """

    def __init__(self, delay_s: float = 0.0, drain_spans_per_s: float = 0.0, http_port: int = 0) -> None:
        self.delay_s = delay_s  # the HTTP receiver waits this long before taking a request
        # The HTTP receiver takes a traces request only after (its spans / this) seconds,
        # one request at a time: a collector that drains this many spans a second (0: no limit).
        self.drain_spans_per_s = drain_spans_per_s
        self._drain_lock = threading.Lock()
        self.reply_status = 200  # the HTTP receiver answers every request with this status (not recorded unless 200)
        self.max_spans_per_request = 0  # the HTTP receiver answers 413 to a traces request with more spans (0: no limit)
        self._connections: set[Any] = set()  # open HTTP connections (keep-alive outlives serve_forever)
        self._http_port_wanted = http_port  # 0: a free port; else this one (a restart on the same port)
        self._received: list[ReceivedRequest] = []
        self._condition = threading.Condition()
        self._grpc_server: grpc.Server | None = None
        self._http_server: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    @property
    def grpc_endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` of the gRPC receiver."""
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` of the HTTP receiver (no signal path)."""
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> OTLPReceiver:
        """Start both servers; returns ``self``."""
        self._grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        for signal, (_, _, add_servicer, _) in _SIGNALS.items():
            add_servicer(_Servicer(self, signal), self._grpc_server)
        self.grpc_port = self._grpc_server.add_insecure_port("127.0.0.1:0")
        self._grpc_server.start()

        self._http_server = ThreadingHTTPServer(("127.0.0.1", self._http_port_wanted), _HTTPHandler)
        self._http_server.daemon_threads = True
        self._http_server.receiver = self
        self.http_port = self._http_server.server_address[1]
        self._http_thread = threading.Thread(target=self._http_server.serve_forever, name="otlp-http", daemon=True)
        self._http_thread.start()
        return self

    def stop(self) -> None:
        """Stop both servers."""
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None).wait(5)
            self._grpc_server = None
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            for connection in list(self._connections):  # a stopped collector answers no one
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._http_thread.join(5)
            self._http_server = None

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _record(self, received: ReceivedRequest) -> None:
        with self._condition:
            self._received.append(received)
            self._condition.notify_all()

    def clear(self) -> None:
        """Forget everything received so far."""
        with self._condition:
            self._received.clear()

    def requests(self, signal: str | None = None) -> list[ReceivedRequest]:
        """Every Export call received, optionally only those for ``signal``."""
        with self._condition:
            return [r for r in self._received if signal is None or r.signal == signal]

    def spans(self, *, loss_records: bool = False) -> list[ReceivedSpan]:
        """Every span received, flattened, in arrival order; the senders' loss records
        (``lens.telemetry.loss``) are left out, or with ``loss_records=True`` are all there is."""
        return [s for s in self._all_spans() if (s.name == "lens.telemetry.loss") == loss_records]

    def _all_spans(self) -> list[ReceivedSpan]:
        spans = []
        for received in self.requests("traces"):
            for resource_spans in received.request.resource_spans:
                resource = attributes_to_dict(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                attributes=attributes_to_dict(span.attributes),
                                resource=resource,
                                scope=scope_spans.scope.name,
                                transport=received.transport,
                                proto=span,
                            )
                        )
        return spans

    def metrics(self) -> list[ReceivedMetric]:
        """Every metric received, flattened, in arrival order (one entry per export of it)."""
        metrics = []
        for received in self.requests("metrics"):
            for resource_metrics in received.request.resource_metrics:
                resource = attributes_to_dict(resource_metrics.resource.attributes)
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        metrics.append(
                            ReceivedMetric(
                                name=metric.name,
                                kind=metric.WhichOneof("data") or "",
                                resource=resource,
                                scope=scope_metrics.scope.name,
                                transport=received.transport,
                                proto=metric,
                            )
                        )
        return metrics

    def logs(self) -> list[ReceivedLog]:
        """Every log record received, flattened, in arrival order."""
        logs = []
        for received in self.requests("logs"):
            for resource_logs in received.request.resource_logs:
                resource = attributes_to_dict(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        logs.append(
                            ReceivedLog(
                                body=any_value_to_python(record.body),
                                severity_text=record.severity_text,
                                severity_number=record.severity_number,
                                trace_id=record.trace_id.hex(),
                                span_id=record.span_id.hex(),
                                attributes=attributes_to_dict(record.attributes),
                                resource=resource,
                                scope=scope_logs.scope.name,
                                transport=received.transport,
                                proto=record,
                            )
                        )
        return logs

    def _wait(self, collect: Any, n: int, timeout: float, what: str) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                items = collect()
                remaining = deadline - time.monotonic()
                if len(items) >= n or remaining <= 0:
                    break
                self._condition.wait(remaining)
        if len(items) < n:
            raise TimeoutError(f"expected {n} {what} within {timeout}s, got {len(items)}: {items!r}")
        return items

    def wait_for_spans(self, n: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        """Block until at least ``n`` spans arrived and return them all; ``TimeoutError`` otherwise."""
        return self._wait(self.spans, n, timeout, "spans")

    def wait_for_metrics(self, n: int, timeout: float = 10.0) -> list[ReceivedMetric]:
        """Block until at least ``n`` metrics arrived and return them all; ``TimeoutError`` otherwise."""
        return self._wait(self.metrics, n, timeout, "metrics")

    def wait_for_logs(self, n: int, timeout: float = 10.0) -> list[ReceivedLog]:
        """Block until at least ``n`` log records arrived and return them all; ``TimeoutError`` otherwise."""
        return self._wait(self.logs, n, timeout, "log records")
