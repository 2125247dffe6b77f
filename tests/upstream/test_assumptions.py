"""Each private upstream API Lens relies on, exercised through its adapter (otel_bridge/sdk/upstream.py).

A failure here after an upgrade names the assumption that broke; the adapter's docstring says
which versions it was checked against. Run at the pinned versions (constraints.txt) and at the
floors (.ci/floor_check.sh).
"""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from otel_bridge.sdk import upstream  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*LoggingHandler.*:DeprecationWarning")


def test_every_assumption_names_an_adapter_function_and_has_a_test_here():
    """The adapter's table and this file agree: every assumption has a function and a test."""
    import inspect
    import sys

    tests = {name for name, obj in inspect.getmembers(sys.modules[__name__]) if name.startswith("test_")}
    for assumption, function in upstream.ASSUMPTIONS.items():
        assert callable(getattr(upstream, function, None)), f"{assumption}: upstream.{function} is missing"
        marker = "test_" + assumption.replace("-", "_")
        assert any(t.startswith(marker) for t in tests), f"{assumption} has no test named {marker}*"


def test_an_upstream_change_is_reported_by_the_assumptions_name():
    """UpstreamChanged says which assumption broke, and the versions it was checked against."""
    error = upstream.UpstreamChanged("trace-span-key", "gone")
    assert isinstance(error, RuntimeError) and error.assumption == "trace-span-key"
    assert "'trace-span-key' broke: gone" in str(error) and "opentelemetry 1.45.0" in str(error)


# ---- OTLP encoding --------------------------------------------------------------------------


def test_otlp_encode_resource_gives_the_protobuf_resource():
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourcePb
    from opentelemetry.sdk.resources import Resource

    message = upstream.encode_resource(Resource({"service.name": "svc", "nv.dl.rank": 3}))
    assert isinstance(message, ResourcePb)
    attrs = {kv.key: kv.value for kv in message.attributes}
    assert attrs["service.name"].string_value == "svc" and attrs["nv.dl.rank"].int_value == 3


def _log_batch(record_extra):
    """Records the real SDK made from one Python log record through the bridge's handler."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    from otel_bridge._log_handler import OTelLogHandler

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = logging.getLogger("lens.test.upstream")
    logger.propagate = False
    handler = OTelLogHandler(provider)
    logger.addHandler(handler)
    try:
        logger.warning("calling the model", extra=record_extra)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    provider.shutdown()
    return exporter.get_finished_logs()


def test_otlp_log_encoder_encodes_the_sdks_log_records():
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = upstream.encode_logs(_log_batch({"model": "m"}))
    assert isinstance(request, ExportLogsServiceRequest)
    (record,) = [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert record.body.string_value == "calling the model"


# ---- logs modules and names ------------------------------------------------------------------


@pytest.mark.parametrize("which", sorted(upstream.LOGS_MODULES))
def test_logs_underscore_modules_import(which):
    module = upstream.logs_module(which)
    assert module.__name__ == upstream.LOGS_MODULES[which]


def test_logs_underscore_modules_missing_one_is_named():
    """A logs module that moved raises UpstreamChanged naming it (not a bare ImportError)."""
    upstream.LOGS_MODULES["gone"] = "opentelemetry.sdk._logs_that_moved"
    try:
        with pytest.raises(upstream.UpstreamChanged, match="logs-underscore-modules.*_logs_that_moved"):
            upstream.logs_module("gone")
    finally:
        del upstream.LOGS_MODULES["gone"]


def test_sdk_log_exporter_names_are_the_exporter_interface():
    exporter_type, result_type = upstream.log_exporter_types()
    assert hasattr(exporter_type, "export") and hasattr(exporter_type, "shutdown")
    assert result_type.SUCCESS is not result_type.FAILURE


# ---- the API's context -----------------------------------------------------------------------


def test_trace_span_key_is_where_the_api_keeps_the_current_span():
    from opentelemetry import context, trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    span = NonRecordingSpan(SpanContext(1, 2, False, TraceFlags(1)))
    ctx = trace.set_span_in_context(span)
    assert context.get_value(upstream.span_key(), ctx) is span


def test_context_runtime_contextvar_holds_the_current_context():
    from opentelemetry import context

    var = upstream.runtime_contextvar()
    assert var is not None, "the default runtime context is ContextVarsRuntimeContext"
    token = context.attach(context.set_value("lens-probe", 1))
    try:
        assert var.get() is context.get_current() and var.get().get("lens-probe") == 1
    finally:
        context.detach(token)


# ---- samplers --------------------------------------------------------------------------------


def test_sampler_static_decision_of_always_on_and_off():
    from opentelemetry.sdk.trace import sampling

    assert upstream.static_decision(sampling.ALWAYS_ON) is sampling.Decision.RECORD_AND_SAMPLE
    assert upstream.static_decision(sampling.ALWAYS_OFF) is sampling.Decision.DROP
    assert upstream.static_decision(sampling.TraceIdRatioBased(0.5)) is None


def test_sampler_parent_based_delegates_in_order():
    from opentelemetry.sdk.trace import sampling

    root = sampling.TraceIdRatioBased(0.25)
    parts = upstream.parent_based_delegates(sampling.ParentBased(root))
    assert parts[0] is root
    assert [upstream.static_decision(p) for p in parts[1:]] == [
        sampling.Decision.RECORD_AND_SAMPLE, sampling.Decision.RECORD_AND_SAMPLE,
        sampling.Decision.DROP, sampling.Decision.DROP]


def test_sampler_from_env_reads_otel_traces_sampler(monkeypatch):
    from opentelemetry.sdk.trace import sampling

    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    monkeypatch.delenv("OTEL_TRACES_SAMPLER_ARG", raising=False)
    default = upstream.sampler_from_env()
    assert isinstance(default, sampling.ParentBased)
    assert upstream.static_decision(upstream.parent_based_delegates(default)[0]) is sampling.Decision.RECORD_AND_SAMPLE
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    assert upstream.static_decision(upstream.sampler_from_env()) is sampling.Decision.DROP
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    ratio = upstream.sampler_from_env()
    assert isinstance(ratio, sampling.TraceIdRatioBased) and ratio.rate == 0.25


def test_sampler_from_env_missing_is_named(monkeypatch):
    from opentelemetry.sdk.trace import sampling

    monkeypatch.delattr(sampling, "_get_from_env_or_default")
    with pytest.raises(upstream.UpstreamChanged, match="'sampler-from-env' broke"):
        upstream.sampler_from_env()


# ---- SDK spans' values -----------------------------------------------------------------------


def _ended_sdk_spans():
    """Ended spans of a real TracerProvider: short and long values, events with and without
    attributes, a sequence value, a link, and none at all."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.trace import Link

    tracer = TracerProvider(span_limits=SpanLimits(max_attributes=4)).get_tracer("probe")
    spans = []
    with tracer.start_as_current_span("bare") as span:
        spans.append(span)
    with tracer.start_as_current_span("short", attributes={"a": 1, "b": "x", "c": 2.5, "d": True}) as span:
        spans.append(span)
    attrs = {"long": "v" * 300, "seq": ("w" * 100, "s", 3), "b": b"y" * 90, "over": "the count limit"}
    with tracer.start_as_current_span("long", attributes=attrs, links=[Link(span.get_span_context())]) as span:
        span.add_event("plain")
        span.add_event("valued", {"k": "z" * 500, "n": 1})
        span.set_attribute("late", "u" * 70)
        spans.append(span)
    return spans


def _public_view_size(span):
    """record_size as it reads a span with no reader: its public views."""
    from lens_core._native import _shared

    extra = _shared.attributes_extra(span.attributes)
    extra += sum(64 + _shared.attributes_extra(event.attributes) for event in span.events)
    return _shared.RECORD_BYTES + extra


def test_sdk_span_value_storage_reads_the_dicts_behind_the_public_views():
    """The reader gives a Tracer's ended span's attributes and event attributes as the plain
    dicts behind ``attributes`` and ``events`` (the same values), so record_size need not
    read them through the Mapping ABC (2-4 µs a span); a change of storage makes it give
    None (record_size then reads the public views), and this test fails by its name."""
    from lens_core._native import _shared

    types, reader = upstream.sdk_span_reader()
    spans = _ended_sdk_spans()
    for span in spans:
        assert type(span) in types, f"a Tracer's span is a {type(span).__qualname__}: the reader is not used for it"
        values = reader(span)
        assert values is not None, f"span {span.name!r} is no longer stored as the reader assumes"
        attrs, event_attrs = values
        assert type(attrs) is dict and attrs == dict(span.attributes)
        assert [type(a) for a in event_attrs] == [dict] * len(span.events)
        assert list(event_attrs) == [dict(e.attributes) for e in span.events]
        size = _shared.record_size(span)  # no reader installed here unless a pipeline was built
        for kind in types:
            _shared.set_record_reader(kind, reader)
        try:
            assert _shared.record_size(span) == size == _public_view_size(span)
        finally:
            for kind in types:
                _shared.set_record_reader(kind, None)
    # what the span holds: "long" went past the count limit when "late" was set
    assert _shared.record_size(spans[2]) == _shared.RECORD_BYTES + (100 + 3 * 8) + 90 + 70 + 64 + (64 + 500)


def test_sdk_span_value_storage_otherwise_falls_back_to_the_public_views():
    """A span whose private fields are not what the reader assumes (an attribute mapping or
    an event of another kind, fields missing): the reader gives None and record_size the
    public views' size, never an exception or another size."""
    from types import MappingProxyType

    from opentelemetry.sdk.trace import Event, ReadableSpan

    from lens_core._native import _shared

    types, reader = upstream.sdk_span_reader()
    given = ReadableSpan("given", attributes=MappingProxyType({"v": "x" * 200}),
                         events=(Event("e", {"k": "y" * 100}),))
    odd_event = ReadableSpan("odd", attributes={"v": "x" * 200},
                             events=(Event("e", MappingProxyType({"k": "y" * 99})),))
    plain = ReadableSpan("plain", attributes={"v": "x" * 200}, events=[Event("e", {"k": "y" * 98})])
    gone = _ended_sdk_spans()[2]
    del gone._attributes._dict  # as if BoundedAttributes kept its values elsewhere
    assert reader(given) is None and reader(odd_event) is None and reader(gone) is None
    assert reader(plain) == ({"v": "x" * 200}, [{"k": "y" * 98}])
    expected = [_public_view_size(s) for s in (given, odd_event, plain)]
    for kind in types:
        _shared.set_record_reader(kind, reader)
    try:
        assert [_shared.record_size(s) for s in (given, odd_event, plain)] == expected
        assert expected == [512 + 200 + 64 + 100, 512 + 200 + 64 + 99, 512 + 200 + 64 + 98]
        _shared.record_size(gone)  # its public views are broken too: whatever they give, no exception
    finally:
        for kind in types:
            _shared.set_record_reader(kind, None)


# ---- the OTLP exporters' transport -----------------------------------------------------------


def _encoded_request(name: str) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name, span.trace_id, span.span_id = name, b"\x01" * 16, b"\x02" * 8
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    return request.SerializeToString()


class _Batch:
    def __init__(self, data, count):
        self.data, self.count = data, count


def test_grpc_exporter_export_hooks_send_lens_bytes_through_the_retry_loop(otlp_receiver):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    exporter = OTLPSpanExporter(endpoint=otlp_receiver.grpc_endpoint, insecure=True)
    try:
        assert upstream.adapt_grpc_exporter(exporter, ExportTraceServiceRequest.FromString)
        result = upstream.grpc_export(exporter, _Batch(_encoded_request("grpc-bytes"), 1))
        assert getattr(result, "name", result) == "SUCCESS"
        assert [s.name for s in otlp_receiver.wait_for_spans(1)] == ["grpc-bytes"]
    finally:
        exporter.shutdown()


def test_grpc_exporter_channel_is_a_grpc_channel(otlp_receiver):
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=otlp_receiver.grpc_endpoint, insecure=True)
    try:
        assert isinstance(upstream.grpc_channel(exporter), grpc.Channel)
    finally:
        exporter.shutdown()


def test_grpc_fork_channel_registry_takes_a_channel_off_and_back(otlp_receiver):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=otlp_receiver.grpc_endpoint, insecure=True)
    try:
        channel = upstream.grpc_channel(exporter)
        upstream.grpc_fork_unregister_channel(channel)
        upstream.grpc_fork_register_channel(channel)
    finally:
        exporter.shutdown()


def test_http_exporter_client_posts_serialized_bytes(otlp_receiver):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=otlp_receiver.http_endpoint + "/v1/traces")
    try:
        upstream.http_exporter_ready(exporter)
        result = upstream.http_export(exporter, _encoded_request("http-bytes"))
        assert result.success, result
        assert [s.name for s in otlp_receiver.wait_for_spans(1)] == ["http-bytes"]
    finally:
        exporter.shutdown()


def test_http_exporter_client_missing_is_named():
    """An exporter without the serialized-payload client fails by the assumption's name."""

    class OldExporter:  # what opentelemetry-exporter-otlp-proto-http 1.44 and older look like here
        pass

    with pytest.raises(upstream.UpstreamChanged, match="http-exporter-client.*1.45 or newer"):
        upstream.http_exporter_ready(OldExporter())


# ---- the logging handler ---------------------------------------------------------------------


def test_logging_handler_get_attributes_is_the_hook_the_handler_asks():
    from opentelemetry.instrumentation.logging.handler import LoggingHandler

    assert upstream.log_record_attributes_hook(LoggingHandler) == "_get_attributes"


def test_logging_handler_get_attributes_redaction_runs_on_a_real_record():
    """A secret in an ``extra`` goes through the real upstream handler's emit and arrives
    redacted: the override the redaction lives in is actually called."""
    (record,) = _log_batch({"api_key": "sk-live-abcdefghijklmnop", "model": "m"})
    attributes = dict(getattr(record, "log_record", record).attributes)
    assert attributes["api_key"] == "[REDACTED]" and attributes["model"] == "m"


def test_logging_handler_get_attributes_missing_refuses_to_load():
    """A handler without the hook (a renamed upstream method) raises by name: records would
    otherwise leave unredacted."""

    class RenamedHook(logging.Handler):
        def emit(self, record):
            self._attributes_of(record)

    with pytest.raises(upstream.UpstreamChanged, match="logging-handler-get-attributes.*no _get_attributes"):
        upstream.log_record_attributes_hook(RenamedHook)

    class NeverAsks(logging.Handler):
        def _get_attributes(self, record):
            return {}, None

        def emit(self, record):
            pass

    with pytest.raises(upstream.UpstreamChanged, match="no longer calls self._get_attributes"):
        upstream.log_record_attributes_hook(NeverAsks)


# ---- Ray -------------------------------------------------------------------------------------


def test_ray_global_worker_exists():
    ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")
    worker = upstream.ray_global_worker(ray)
    assert hasattr(worker, "mode") and hasattr(ray, "WORKER_MODE")


def test_ray_internal_kv_functions_exist():
    pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")
    kv = upstream._internal_kv()
    assert callable(kv._internal_kv_get) and callable(kv._internal_kv_put)


def test_ray_keeps_its_node_where_ray_started_head_looks():
    """ray_cluster_source reads whether ray.init() booted the head from the worker module's
    _global_node (None before init) and the node's ``head`` attribute: both must still exist."""
    pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")
    import inspect

    from ray._private import node, worker

    assert hasattr(worker, "_global_node")
    assert "self.head = " in inspect.getsource(node.Node.__init__)
    assert upstream.ray_started_head() in (None, False)  # no ray.init() in this process


@pytest.mark.engines
def test_ray_internal_kv_round_trip_in_a_local_cluster():
    """The driver's published run id is what a reader gets back (a local one-CPU Ray)."""
    ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        upstream.ray_kv_put(b"lens/test/key", b"run-123")
        assert upstream.ray_kv_get(b"lens/test/key") == b"run-123"
        worker = upstream.ray_global_worker(ray)
        assert worker.node.session_name.startswith("session_")
    finally:
        ray.shutdown()
