"""The span pipeline's sinks: where encoded batches go (OTLP, a file, nowhere, any SDK exporter).

Each sink encodes a batch of records for its destination (``encode``) and delivers it
(``deliver`` -> ``(ok, error, retryable)``); ``for_child`` gives a forked child a sink of its
own (the parent's HTTP connections and gRPC channel are never touched in the child).
"""

from __future__ import annotations

import functools
import os

from lens_core import semconv

from otel_bridge.sdk import upstream

__all__ = [
    "DeferredSink",
    "FileSink",
    "NullSink",
    "OtlpSink",
    "SdkExporterSink",
    "grpc_fork_support_disabled",
    "split_traces_request",
]



class _Encoded:
    """A pre-encoded batch handed through the SDK gRPC exporter's retry loop."""

    __slots__ = ("data", "count")

    def __init__(self, data, count):
        self.data, self.count = data, count


class OtlpSink:
    """OTLP over the SDK exporter's own transport: the request bytes are Lens's."""

    def __init__(self, factory, encoder):
        self._factory = factory  # builds the SDK exporter (again in a forked child)
        self._encode = encoder
        self._exporter = None
        self.last_status = None  # the HTTP status of the last delivery (None: gRPC, or no answer)

    @property
    def exporter(self):
        """The SDK exporter (built on first use)."""
        if self._exporter is None:
            self._exporter = _adapt_otlp(self._factory())
        return self._exporter

    #: Encoded requests can wait in the spool (otel_bridge.sdk.spool) and be sent later.
    spoolable = True

    def encode(self, pipeline, records):
        """``records`` as one OTLP request (protobuf bytes)."""
        return self._encode(pipeline.resource_pb, pipeline.scopes.pb, records, pipeline.resource_schema_url,
                            pipeline.scopes.schema_urls)

    def deliver(self, data, count):
        """Send one encoded request: (ok, error, retryable); not retryable only when the
        collector rejected the request itself (HTTP 4xx other than 408 and 429)."""
        exporter = self.exporter
        self.last_status = None
        if hasattr(exporter, "_lens_grpc"):
            result = upstream.grpc_export(exporter, _Encoded(data, count))
            ok = getattr(result, "name", "") == "SUCCESS"
            return ok, None if ok else f"{type(exporter).__name__} returned {getattr(result, 'name', result)}", True
        result = upstream.http_export(exporter, data)
        self.last_status = result.status_code or None
        if result.success:
            return True, None, False
        code = result.status_code
        detail = result.error or (f"HTTP {code} {result.reason or ''}".strip() if code else "")
        retryable = not code or not 400 <= code < 500 or code in (408, 429)
        return False, f"{type(exporter).__name__}: {detail or 'export failed'}", retryable

    def shutdown(self, timeout_s):
        if self._exporter is not None:
            self._exporter.shutdown()

    def for_child(self):
        if hasattr(self._exporter, "_lens_grpc") and grpc_fork_support_disabled():
            # gRPC's core cannot be used in a child forked after it started, with its fork
            # support off (16 of 20 children segfaulted): the child's spans wait in the spool,
            # and the parent (or the next process of the run, or `lens replay`) sends them.
            return DeferredSink(self._encode)
        return OtlpSink(self._factory, self._encode)

    def before_fork(self):
        # With GRPC_ENABLE_FORK_SUPPORT, gRPC's fork handlers reach into every channel it
        # knows of, in the child, and can deadlock there on a lock one of gRPC's own threads
        # held at the fork. The child never uses the parent's channel: take it off gRPC's
        # list for the fork, so the child never touches it; the parent puts it back after.
        self._hidden = None
        channel = upstream.grpc_channel(self._exporter) if hasattr(self._exporter, "_lens_grpc") else None
        if channel is not None:
            try:
                upstream.grpc_fork_unregister_channel(channel)
                self._hidden = channel
            except Exception:  # another gRPC: its fork handling stays as it is
                pass

    def after_fork_in_parent(self):
        channel, self._hidden = getattr(self, "_hidden", None), None
        if channel is not None:
            upstream.grpc_fork_register_channel(channel)


def grpc_fork_support_disabled(environ=os.environ) -> bool:
    """True when GRPC_ENABLE_FORK_SUPPORT turns gRPC's fork support off explicitly (unset,
    gRPC's core keeps its own fork handlers, and a forked child may build a channel)."""
    return environ.get("GRPC_ENABLE_FORK_SUPPORT", "").strip().lower() in ("0", "false", "no", "off")


class DeferredSink:
    """A forked child's sink when it must not use its parent's transport: encoded requests
    go to the spool only, for the parent (which adopts them once this process has ended),
    the next process of the run or ``lens replay``."""

    spoolable = True
    deferred = True  # nothing is sent from this process

    def __init__(self, encoder):
        self._encode = encoder

    def encode(self, pipeline, records):
        """``records`` as one OTLP request (protobuf bytes)."""
        return self._encode(pipeline.resource_pb, pipeline.scopes.pb, records, pipeline.resource_schema_url,
                            pipeline.scopes.schema_urls)

    def deliver(self, data, count):
        """Never sends: (False, why, retryable)."""
        return False, "this forked child cannot use gRPC (GRPC_ENABLE_FORK_SUPPORT is off): spooled", True

    def shutdown(self, timeout_s):
        pass

    def for_child(self):
        return self


def split_traces_request(payload):
    """An encoded ExportTraceServiceRequest cut in two: [(payload, spans), (payload, spans)],
    each part keeping its spans' resource and scope; None when it holds fewer than 2 spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(payload)
    total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    if total < 2:
        return None
    parts = []
    for first, last in ((0, total // 2), (total // 2, total)):
        part, index = ExportTraceServiceRequest(), 0
        for rs in request.resource_spans:
            target = None
            for ss in rs.scope_spans:
                keep = ss.spans[max(0, first - index):max(0, last - index)]
                index += len(ss.spans)
                if not keep:
                    continue
                if target is None:
                    target = part.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
                target.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url).spans.extend(keep)
        parts.append((part.SerializeToString(), last - first))
    return parts


def _adapt_otlp(exporter):
    """Let the SDK exporter send Lens's bytes: gRPC through its retry loop (the request is
    parsed back into the protobuf message the stub wants), HTTP through its client."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    if upstream.adapt_grpc_exporter(exporter, ExportTraceServiceRequest.FromString):
        exporter._lens_grpc = True
        return exporter
    upstream.http_exporter_ready(exporter)  # an exporter with neither hook fails setup, by name
    return exporter


class FileSink:
    """OTLP/JSON lines in ``<dir>/<run_id>/traces-rank<R>-pid<P>-<tag>.jsonl``, each at most
    ``max_line_bytes``: a batch that would write a longer line has its values past
    ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (1 MiB characters when unset) cut, listed in
    ``lens.truncated_keys``, and is split (otel_bridge.exporters._file.write_records)."""

    def __init__(self, writer, encoder, max_line_bytes: int = 8 << 20):
        from otel_bridge.exporters._file import value_limit

        self._writer = writer
        self._encode = encoder
        self.max_line_bytes = max_line_bytes
        self.value_limit = value_limit()
        self._lost_seen = 0
        self._pipeline = None  # set by encode: the pipeline whose counts a lost file corrects

    @property
    def path(self):
        return self._writer.path

    def encode(self, pipeline, records):
        """``records`` as OTLP/JSON lines that each fit ``max_line_bytes``: [(line, spans)]."""
        from otel_bridge.exporters._file import fit_lines

        self._pipeline = pipeline
        encode = functools.partial(self._encode, resource_schema_url=pipeline.resource_schema_url,
                                   scope_schema_urls=pipeline.scopes.schema_urls)
        return fit_lines(encode, pipeline.resource_json, pipeline.scopes.json, records,
                         max_line_bytes=self.max_line_bytes, limit=self.value_limit)

    def deliver(self, lines, count):
        """Append the lines: (ok, error, retryable)."""
        try:
            for line, spans in lines:
                self._writer.write_line(line, spans)
        except (OSError, ValueError) as exc:
            return False, f"could not write {self._writer.path}: {exc}", False
        finally:
            # Spans already counted exported into a file that was deleted since (or whose
            # directory was): lost after all. The loss record counts them as failed.
            lost = self._writer.lost_spans - self._lost_seen
            pipeline = self._pipeline
            if lost and pipeline is not None:
                self._lost_seen += lost
                pipeline.exported -= lost
                pipeline.failed += lost
        return True, None, False

    def shutdown(self, timeout_s):
        self._writer.close()

    def for_child(self):
        return self  # the writer opens the child's own file on its first write


class NullSink:
    """``LENS_EXPORTER=none``: spans are recorded (for propagation) and discarded."""

    def encode(self, pipeline, records):
        """Nothing to encode."""
        return None

    def deliver(self, data, count):
        """Discard: (True, None, False)."""
        return True, None, False

    def shutdown(self, timeout_s):
        pass

    def for_child(self):
        return self


class SdkExporterSink:
    """Any SDK SpanExporter (console, in-memory, a user's): records become ReadableSpans."""

    def __init__(self, exporter):
        self.exporter = exporter

    def encode(self, pipeline, records):
        """``records`` as SDK ReadableSpans."""
        return [_readable(pipeline, r) for r in records]

    def deliver(self, spans, count):
        """Hand the spans to the exporter: (ok, error, retryable)."""
        try:
            result = self.exporter.export(spans)
        except Exception as exc:  # an exporter bug must not kill the export thread
            return False, f"{type(self.exporter).__name__} raised {type(exc).__name__}: {exc}", False
        ok = getattr(result, "name", "") == "SUCCESS"
        return ok, None if ok else f"{type(self.exporter).__name__} returned {getattr(result, 'name', result)}", False

    def shutdown(self, timeout_s):
        self.exporter.shutdown()

    def for_child(self):
        return self


def _readable(pipeline, r):
    """A record as an SDK ReadableSpan."""
    if r.sdk_span is not None:
        return r.sdk_span
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

    def context(trace_id, span_id, remote, flags, state):
        return SpanContext(trace_id, span_id, remote, TraceFlags(flags),
                           TraceState.from_header([state]) if state else None)

    attrs = dict(r.attrs)
    if r.thread_name is not None:
        attrs[semconv.THREAD_ID] = r.thread_id
        attrs[semconv.THREAD_NAME] = r.thread_name
    return ReadableSpan(
        name=r.name,
        context=context(r.trace_id, r.span_id, False, 1, r.trace_state),
        parent=context(r.trace_id, r.parent_id, r.parent_remote, 1, None) if r.parent_id else None,
        resource=pipeline.resource,
        attributes=attrs,
        events=[Event(name, attributes or None, ts) for name, ts, attributes in r.events or ()],
        links=[Link(context(t, s, remote, 1, state), attributes or None) for t, s, state, attributes, remote in r.links or ()],
        kind=SpanKind(r.kind - 1),
        status=Status(StatusCode(r.status_code), r.status_msg),
        start_time=r.start_ns,
        end_time=r.end_ns,
        instrumentation_scope=pipeline.scopes.objects[r.scope],
    )
