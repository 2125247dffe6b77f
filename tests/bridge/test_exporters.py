"""Tests for otel_bridge.exporters: OTLP to a real receiver, OTLP/JSON files, console, selection."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common",
                    reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from google.protobuf import json_format  # noqa: E402
from opentelemetry._logs import LogRecord, SeverityNumber  # noqa: E402
from opentelemetry.context import get_current  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from otel_bridge import exporters  # noqa: E402
from otel_bridge.sdk.identity import process_tag  # noqa: E402
from otel_bridge.exporters import (  # noqa: E402
    DEFAULT_FILE_DIR,
    EXPORTER_NAMES,
    build_log_exporter,
    build_metric_exporter,
    build_span_exporter,
    console_log_exporter,
    console_metric_exporter,
    console_span_exporter,
    file_log_exporter,
    file_metric_exporter,
    file_span_exporter,
    otlp_log_exporter,
    otlp_metric_exporter,
    otlp_span_exporter,
    resolve_exporter_name,
    resolve_otlp_protocol,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
RESOURCE = {"service.name": "lens-test", "lens.rank": 3}


# -- helpers -----------------------------------------------------------------------------


def _hex_ids_to_base64(node):
    """Undo the one OTLP/JSON rule protobuf's JSON parser does not know, in place.

    OTLP/JSON writes traceId/spanId/parentSpanId as hex; protobuf's canonical JSON
    mapping (what ``json_format.Parse`` implements) expects every ``bytes`` field as
    base64. Everything else in OTLP/JSON is canonical protobuf JSON, so after this
    rewrite ``Parse`` must accept each line unchanged.
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            else:
                _hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)
    return node


def _parse_otlp_json_line(line, request_cls):
    """Parse one OTLP/JSON line into ``request_cls`` with protobuf's strict JSON parser."""
    return json_format.Parse(json.dumps(_hex_ids_to_base64(json.loads(line))), request_cls())


def _read_lines(path):
    text = Path(path).read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last line must be complete"
    return text.splitlines()


def _walk(node, key):
    """Yield every value stored under ``key`` anywhere in a JSON tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, key)


def _attrs(key_values):
    from otlp_receiver import attributes_to_dict

    return attributes_to_dict(key_values)


def _tracer_provider(*exporters_and_processors):
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    for processor in exporters_and_processors:
        provider.add_span_processor(processor)
    return provider


def _make_two_spans(provider):
    """Emit parent ``step`` and child ``forward`` with typed attributes; return their contexts."""
    tracer = provider.get_tracer("lens.test")
    with tracer.start_as_current_span(
        "step", attributes={"iteration": 7, "loss": 0.25, "phase": "train", "ok": True, "ranks": [0, 1]}
    ) as parent:
        with tracer.start_as_current_span("forward", attributes={"micro_batch": 2}) as child:
            pass
    return parent.get_span_context(), child.get_span_context()


def _meter_provider(exporter):
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    return MeterProvider(metric_readers=[reader], resource=Resource.create(RESOURCE))


def _record_metrics(provider):
    meter = provider.get_meter("lens.test")
    counter = meter.create_counter("lens.tokens", unit="1")
    histogram = meter.create_histogram("lens.step.duration", unit="s")
    counter.add(2, {"phase": "train"})
    counter.add(3, {"phase": "train"})
    for value in (0.5, 1.5, 4.0):
        histogram.record(value)


def _logger_provider(exporter):
    provider = LoggerProvider(resource=Resource.create(RESOURCE))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider


def _emit_log_in_span(logger_provider):
    """Emit one WARN record inside a span; return the span's context."""
    tracer = TracerProvider().get_tracer("lens.test")
    with tracer.start_as_current_span("with-log") as span:
        logger_provider.get_logger("lens.test").emit(
            LogRecord(
                timestamp=time.time_ns(),
                context=get_current(),
                severity_text="WARN",
                severity_number=SeverityNumber.WARN,
                body="checkpoint slow",
                attributes={"step": 12},
            )
        )
    return span.get_span_context()


def _subprocess_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


# -- (a) OTLP to a real receiver ---------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "compression"),
    [("grpc", None), ("http/protobuf", None), ("http/protobuf", "gzip")],
)
def test_otlp_spans_reach_receiver(otlp_receiver, monkeypatch, protocol, compression):
    endpoint = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    if compression:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    exporter = build_span_exporter("auto")  # endpoint set -> otlp; protocol from the env
    provider = _tracer_provider(BatchSpanProcessor(exporter))
    parent_ctx, child_ctx = _make_two_spans(provider)
    assert provider.force_flush()
    spans = {s.name: s for s in otlp_receiver.wait_for_spans(2)}
    provider.shutdown()

    transport = "grpc" if protocol == "grpc" else "http"
    assert set(spans) == {"step", "forward"}
    step, forward = spans["step"], spans["forward"]
    assert step.transport == forward.transport == transport
    assert step.trace_id == forward.trace_id == format(parent_ctx.trace_id, "032x")
    assert step.span_id == format(parent_ctx.span_id, "016x")
    assert forward.span_id == format(child_ctx.span_id, "016x")
    assert forward.parent_span_id == step.span_id
    assert step.parent_span_id == ""
    assert step.attributes == {"iteration": 7, "loss": 0.25, "phase": "train", "ok": True, "ranks": [0, 1]}
    assert forward.attributes == {"micro_batch": 2}
    assert step.resource["service.name"] == "lens-test"
    assert step.resource["lens.rank"] == 3
    assert step.scope == "lens.test"
    if compression:
        (received,) = otlp_receiver.requests("traces")
        assert received.headers.get("content-encoding") == "gzip"


def test_otlp_http_per_signal_endpoint_is_used_as_is(otlp_receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otlp_receiver.http_endpoint + "/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-lens-token=abc")
    provider = _tracer_provider(SimpleSpanProcessor(otlp_span_exporter("http/protobuf")))
    _make_two_spans(provider)
    assert len(otlp_receiver.wait_for_spans(2)) == 2
    assert all(r.headers.get("x-lens-token") == "abc" for r in otlp_receiver.requests("traces"))
    provider.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_metrics_reach_receiver(otlp_receiver, monkeypatch, protocol):
    endpoint = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "nonsense-ignored-because-signal-var-wins")
    provider = _meter_provider(otlp_metric_exporter())
    _record_metrics(provider)
    assert provider.force_flush()
    metrics = {m.name: m for m in otlp_receiver.wait_for_metrics(2)}
    provider.shutdown()
    assert metrics["lens.tokens"].kind == "sum"
    assert [p.as_int for p in metrics["lens.tokens"].proto.sum.data_points] == [5]
    histogram = metrics["lens.step.duration"].proto.histogram.data_points[0]
    assert (histogram.count, histogram.sum) == (3, 6.0)
    assert metrics["lens.tokens"].resource["service.name"] == "lens-test"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_logs_reach_receiver(otlp_receiver, monkeypatch, protocol):
    endpoint = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    provider = _logger_provider(otlp_log_exporter(protocol))
    span_ctx = _emit_log_in_span(provider)
    (log,) = otlp_receiver.wait_for_logs(1)
    provider.shutdown()
    assert log.body == "checkpoint slow"
    assert log.severity_text == "WARN"
    assert log.severity_number == SeverityNumber.WARN.value
    assert log.attributes == {"step": 12}
    assert log.trace_id == format(span_ctx.trace_id, "032x")
    assert log.span_id == format(span_ctx.span_id, "016x")
    assert log.resource["service.name"] == "lens-test"


# -- OTLP protocol selection -------------------------------------------------------------


def test_otlp_protocol_default_is_spec_default():
    assert resolve_otlp_protocol("traces", {}) == "http/protobuf"
    assert resolve_otlp_protocol("traces", {"OTEL_EXPORTER_OTLP_PROTOCOL": " "}) == "http/protobuf"


def test_otlp_protocol_per_signal_wins_over_generic():
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}
    assert resolve_otlp_protocol("traces", env) == "grpc"
    assert resolve_otlp_protocol("metrics", env) == "grpc"
    assert resolve_otlp_protocol("logs", env) == "http/protobuf"


@pytest.mark.parametrize("value", ["http/json", "udp"])
def test_otlp_protocol_rejects_unsupported_value_naming_the_variable(value):
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") as info:
        resolve_otlp_protocol("metrics", {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": value})
    assert "grpc, http/protobuf" in str(info.value)
    assert value in str(info.value)


def test_otlp_factories_pick_sdk_exporter_by_protocol():
    assert type(otlp_span_exporter("grpc")).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    assert type(otlp_span_exporter("http/protobuf")).__module__.startswith("opentelemetry.exporter.otlp.proto.http")
    assert type(otlp_metric_exporter("grpc")).__name__ == "OTLPMetricExporter"
    assert type(otlp_log_exporter("http/protobuf")).__name__ == "OTLPLogExporter"
    with pytest.raises(ValueError, match="protocol='http/json'"):
        otlp_span_exporter("http/json")


# -- (b) file exporters: OTLP/JSON lines -------------------------------------------------


def test_file_span_exporter_writes_otlp_json_lines(tmp_path):
    file_exporter = file_span_exporter(tmp_path, run_id="run-1", rank=2)
    memory = InMemorySpanExporter()
    provider = _tracer_provider(SimpleSpanProcessor(file_exporter), SimpleSpanProcessor(memory))
    parent_ctx, child_ctx = _make_two_spans(provider)
    provider.shutdown()

    path = tmp_path / "run-1" / f"traces-rank2-pid{os.getpid()}-{process_tag()}.jsonl"
    assert file_exporter.path == path
    lines = _read_lines(path)
    assert len(lines) == 2  # SimpleSpanProcessor: one export (one line) per span
    finished = memory.get_finished_spans()
    for line, sdk_span in zip(lines, finished):
        data = json.loads(line)
        assert list(data) == ["resourceSpans"]  # camelCase, nothing else
        (span,) = list(_walk(data, "spans"))[0]
        assert HEX32.match(span["traceId"]) and HEX16.match(span["spanId"])
        assert isinstance(span["startTimeUnixNano"], str) and span["startTimeUnixNano"].isdigit()
        assert isinstance(span["kind"], int)  # enums as integers
        for int_value in _walk(data, "intValue"):
            assert isinstance(int_value, str)
        assert "droppedAttributesCount" not in span  # defaults omitted
        # Round trip: the line parses strictly and is exactly the SDK's own OTLP encoding.
        assert _parse_otlp_json_line(line, ExportTraceServiceRequest) == encode_spans([sdk_span])

    forward = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    step = json.loads(lines[1])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert (forward["name"], step["name"]) == ("forward", "step")
    assert step["traceId"] == forward["traceId"] == format(parent_ctx.trace_id, "032x")
    assert step["spanId"] == format(parent_ctx.span_id, "016x")
    assert forward["spanId"] == format(child_ctx.span_id, "016x")
    assert forward["parentSpanId"] == step["spanId"]
    assert "parentSpanId" not in step

    request = _parse_otlp_json_line(lines[1], ExportTraceServiceRequest)
    resource_spans = request.resource_spans[0]
    assert _attrs(resource_spans.resource.attributes)["service.name"] == "lens-test"
    parsed = resource_spans.scope_spans[0].spans[0]
    assert parsed.span_id.hex() == step["spanId"]
    assert _attrs(parsed.attributes) == {
        "iteration": 7,
        "loss": 0.25,
        "phase": "train",
        "ok": True,
        "ranks": [0, 1],
    }


def test_file_metric_exporter_writes_otlp_json_lines(tmp_path):
    exporter = file_metric_exporter(tmp_path, run_id="run-1", rank=0)
    provider = _meter_provider(exporter)
    _record_metrics(provider)
    assert provider.force_flush()
    provider.shutdown()  # exports once more, then closes the file

    lines = _read_lines(tmp_path / "run-1" / f"metrics-rank0-pid{os.getpid()}-{process_tag()}.jsonl")
    assert len(lines) >= 1
    for line in lines:
        data = json.loads(line)
        metrics = {metric["name"]: metric for group in _walk(data, "metrics") for metric in group}
        tokens = metrics["lens.tokens"]["sum"]
        assert tokens["isMonotonic"] is True
        assert tokens["aggregationTemporality"] == 2  # CUMULATIVE, as an integer
        (point,) = tokens["dataPoints"]
        assert point["asInt"] == "5"  # 64-bit integers are strings
        assert isinstance(point["timeUnixNano"], str)
        (hist_point,) = metrics["lens.step.duration"]["histogram"]["dataPoints"]
        assert hist_point["count"] == "3"
        assert hist_point["sum"] == 6.0
        assert all(isinstance(c, str) for c in hist_point["bucketCounts"])

        request = _parse_otlp_json_line(line, ExportMetricsServiceRequest)
        parsed = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}
        assert parsed["lens.tokens"].sum.data_points[0].as_int == 5
        assert _attrs(parsed["lens.tokens"].sum.data_points[0].attributes) == {"phase": "train"}
        assert parsed["lens.step.duration"].histogram.data_points[0].count == 3
        assert parsed["lens.step.duration"].histogram.data_points[0].max == 4.0
        assert _attrs(request.resource_metrics[0].resource.attributes)["lens.rank"] == 3


def test_file_log_exporter_writes_otlp_json_lines(tmp_path):
    exporter = file_log_exporter(tmp_path, run_id="run-1", rank=1)
    provider = _logger_provider(exporter)
    span_ctx = _emit_log_in_span(provider)
    provider.shutdown()

    (line,) = _read_lines(tmp_path / "run-1" / f"logs-rank1-pid{os.getpid()}-{process_tag()}.jsonl")
    (record,) = [r for records in _walk(json.loads(line), "logRecords") for r in records]
    assert record["traceId"] == format(span_ctx.trace_id, "032x")
    assert record["spanId"] == format(span_ctx.span_id, "016x")
    assert record["severityNumber"] == SeverityNumber.WARN.value
    assert record["body"] == {"stringValue": "checkpoint slow"}
    assert isinstance(record["timeUnixNano"], str)

    request = _parse_otlp_json_line(line, ExportLogsServiceRequest)
    parsed = request.resource_logs[0].scope_logs[0].log_records[0]
    assert parsed.trace_id.hex() == record["traceId"]
    assert parsed.body.string_value == "checkpoint slow"
    assert _attrs(parsed.attributes) == {"step": 12}


def test_file_exporter_after_shutdown_fails_softly(tmp_path):
    from opentelemetry.sdk.trace.export import SpanExportResult

    memory = InMemorySpanExporter()
    _make_two_spans(_tracer_provider(SimpleSpanProcessor(memory)))
    exporter = file_span_exporter(tmp_path, run_id="r")
    exporter.shutdown()
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    assert exporter.export([]) is SpanExportResult.SUCCESS
    assert exporter.force_flush() is True


@pytest.mark.parametrize("run_id", ["", ".", "..", "a/b", "a\\b"])
def test_file_exporter_rejects_run_id_that_is_not_a_plain_name(tmp_path, run_id):
    with pytest.raises(ValueError, match="run_id"):
        file_span_exporter(tmp_path, run_id=run_id)


def test_file_exporter_creates_nothing_until_first_export(tmp_path):
    file_span_exporter(tmp_path, run_id="quiet").shutdown()
    assert not (tmp_path / "quiet").exists()


# -- (c) lines stay complete when the process is killed ----------------------------------

_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otel_bridge.exporters import file_span_exporter

    directory, mode = sys.argv[1], sys.argv[2]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(file_span_exporter(directory, "killed", 0)))
    tracer = provider.get_tracer("kill-test")
    big = "x" * 100_000  # far larger than any I/O buffer
    for i in range(5):
        with tracer.start_as_current_span("before-ready", attributes={"i": i, "payload": big}):
            pass
    print("ready", flush=True)
    if mode == "idle":  # killed right after exporting
        time.sleep(60)
    i = 0
    while True:  # killed while exporting, most likely inside a write
        with tracer.start_as_current_span("after-ready", attributes={"i": i, "payload": big}):
            pass
        i += 1
    """
)


def _run_and_kill(directory, mode):
    process = subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT, str(directory), mode],
        stdout=subprocess.PIPE,
        env=_subprocess_env(),
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    (path,) = (Path(directory) / "killed").iterdir()
    assert path.name.startswith(f"traces-rank0-pid{process.pid}-") and path.name.endswith(".jsonl")
    return path


def _span_name(line):
    return _parse_otlp_json_line(line, ExportTraceServiceRequest).resource_spans[0].scope_spans[0].spans[0].name


def test_file_lines_complete_after_sigkill_following_export(tmp_path):
    lines = _read_lines(_run_and_kill(tmp_path, "idle"))  # asserts the file ends with a newline
    assert [_span_name(line) for line in lines] == ["before-ready"] * 5


def test_sigkill_during_export_can_only_tear_an_unterminated_last_line(tmp_path):
    # Linux may cut a regular-file write short between pages when SIGKILL arrives
    # mid-syscall, so the one thing that may be incomplete is a last line without a
    # newline; every newline-terminated line must be whole.
    text = _run_and_kill(tmp_path, "spin").read_text(encoding="utf-8")
    *lines, fragment = text.split("\n")
    if fragment:
        with pytest.raises(json.JSONDecodeError):
            json.loads(fragment)
    names = [_span_name(line) for line in lines]
    assert names[:5] == ["before-ready"] * 5
    assert set(names[5:]) <= {"after-ready"}


def test_file_exporter_starts_a_new_line_after_a_torn_one(tmp_path):
    exporter = file_span_exporter(tmp_path, run_id="reused", rank=0)
    exporter.path.parent.mkdir(parents=True)
    exporter.path.write_text('{"resourceSpans":[{"resou', encoding="utf-8")  # a killed earlier process
    provider = _tracer_provider(SimpleSpanProcessor(exporter))
    _make_two_spans(provider)
    provider.shutdown()
    torn, *lines = _read_lines(exporter.path)
    assert torn == '{"resourceSpans":[{"resou'
    assert [_span_name(line) for line in lines] == ["forward", "step"]


# -- (d) selection -----------------------------------------------------------------------


def test_exporter_names_constant():
    assert EXPORTER_NAMES == ("auto", "otlp", "console", "file", "none")
    assert isinstance(EXPORTER_NAMES, tuple)
    assert DEFAULT_FILE_DIR == "./lens-traces"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "file"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, "file"),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"}, "file"),
    ],
)
def test_auto_resolution(environ, expected):
    assert resolve_exporter_name("auto", environ) == expected


def test_auto_resolution_per_signal():
    environ = {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"}
    assert resolve_exporter_name("auto", environ, signal="metrics") == "otlp"
    assert resolve_exporter_name("auto", environ, signal="logs") == "file"
    assert resolve_exporter_name("auto", environ, signal="traces") == "file"


@pytest.mark.parametrize("name", ["otlp", "console", "file", "none", " Console ", "NONE"])
def test_explicit_names_resolve_to_themselves(name):
    assert resolve_exporter_name(name, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}) == name.strip().lower()


@pytest.mark.parametrize("name", ["jaeger", "", "otlp_grpc", None])
def test_bad_exporter_name_lists_allowed_names(name):
    with pytest.raises(ValueError) as info:
        resolve_exporter_name(name, {})
    message = str(info.value)
    assert repr(name) in message
    for allowed in EXPORTER_NAMES:
        assert allowed in message


def test_build_exporters_by_name(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("OTEL_EXPORTER_OTLP_"):
            monkeypatch.delenv(name)
    for build in (build_span_exporter, build_metric_exporter, build_log_exporter):
        assert build("none") is None
        assert type(build("console")).__name__.startswith("Console")
        assert type(build("otlp")).__name__.startswith("OTLP")
        file_exporter = build("auto", file_dir=tmp_path, run_id="r", rank=5)
        assert type(file_exporter).__name__.startswith("File")
        assert file_exporter.path.parent == tmp_path / "r"
        assert "-rank5-pid" in file_exporter.path.name
    assert isinstance(build_span_exporter("file"), exporters.FileSpanExporter)
    assert str(build_span_exporter("file").path).startswith(str(Path(DEFAULT_FILE_DIR) / "default"))


# -- console exporters -------------------------------------------------------------------


def test_console_exporters_write_one_json_object_per_line():
    stream = io.StringIO()
    provider = _tracer_provider(SimpleSpanProcessor(console_span_exporter(stream)))
    parent_ctx, child_ctx = _make_two_spans(provider)
    provider.shutdown()
    forward, step = (json.loads(line) for line in stream.getvalue().splitlines())
    assert step["name"] == "step" and step["parent_id"] is None
    assert forward["parent_id"] == step["span_id"] == format(parent_ctx.span_id, "016x")
    assert forward["trace_id"] == format(child_ctx.trace_id, "032x")
    assert step["attributes"]["ranks"] == [0, 1]
    assert step["service_name"] == "lens-test"
    assert step["status"] == "UNSET"
    assert step["end_ns"] - step["start_ns"] >= 0 and step["duration_ms"] >= 0

    stream = io.StringIO()
    meters = _meter_provider(console_metric_exporter(stream))
    _record_metrics(meters)
    meters.force_flush()
    points = {p["metric"]: p for p in map(json.loads, stream.getvalue().splitlines())}
    meters.shutdown()
    assert points["lens.tokens"]["value"] == 5
    assert points["lens.tokens"]["attributes"] == {"phase": "train"}
    assert points["lens.step.duration"]["count"] == 3

    stream = io.StringIO()
    logs = _logger_provider(console_log_exporter(stream))
    span_ctx = _emit_log_in_span(logs)
    logs.shutdown()
    (record,) = map(json.loads, stream.getvalue().splitlines())
    assert record["body"] == "checkpoint slow" and record["severity"] == "WARN"
    assert record["span_id"] == format(span_ctx.span_id, "016x")


def test_console_exporter_defaults_to_current_stdout(capsys):
    provider = _tracer_provider(SimpleSpanProcessor(console_span_exporter()))
    _make_two_spans(provider)
    provider.shutdown()
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == ["forward", "step"]


# -- (e) importing the package does not import the SDK -----------------------------------

_IMPORT_CHECK = textwrap.dedent(
    """
    import sys
    import otel_bridge.exporters as e
    from otel_bridge.exporters import *
    assert e.resolve_exporter_name("auto", {}) == "file"
    assert e.build_span_exporter("none") is None
    loaded = sorted(m for m in sys.modules if m == "opentelemetry.sdk" or m.startswith("opentelemetry.sdk."))
    assert not loaded, loaded
    e.FileSpanExporter  # first access loads the SDK
    assert "opentelemetry.sdk" in sys.modules
    print("ok")
    """
)

_NO_SDK_CHECK = textwrap.dedent(
    """
    import sys

    class BlockOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError("blocked: " + name)

    sys.meta_path.insert(0, BlockOpenTelemetry())
    import otel_bridge.exporters as e
    assert e.resolve_exporter_name("file", {}) == "file"
    try:
        e.file_span_exporter("/nonexistent", "r")
    except ImportError as exc:
        assert "lens-telemetry[otel]" in str(exc), exc
    else:
        raise AssertionError("expected ImportError")
    print("ok")
    """
)


@pytest.mark.parametrize("script", [_IMPORT_CHECK, _NO_SDK_CHECK], ids=["sdk-not-imported", "sdk-missing"])
def test_import_is_cheap(script):
    result = subprocess.run(
        [sys.executable, "-c", script], env=_subprocess_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# -- (f) a forked child writes its own file ----------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_writes_file_named_for_its_pid(tmp_path):
    exporter = file_span_exporter(tmp_path, run_id="forked", rank=0)
    provider = _tracer_provider(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("lens.test")
    with tracer.start_as_current_span("parent-before-fork"):
        pass

    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            with tracer.start_as_current_span("child"):
                pass
            code = 0
        finally:
            os._exit(code)

    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with tracer.start_as_current_span("parent-after-fork"):
        pass
    provider.shutdown()

    def names(path):
        return [_span_name(line) for line in _read_lines(path)]

    run_dir = tmp_path / "forked"
    (child_file,) = run_dir.glob(f"traces-rank0-pid{child}-*.jsonl")
    parent_file = run_dir / f"traces-rank0-pid{os.getpid()}-{process_tag()}.jsonl"
    assert sorted(run_dir.iterdir()) == sorted([parent_file, child_file])
    assert names(parent_file) == ["parent-before-fork", "parent-after-fork"]
    assert names(child_file) == ["child"]


# -- the receiver itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content_type", "body", "status"),
    [
        ("/v1/nope", "application/x-protobuf", b"", 404),
        ("/v1/traces", "application/json", b"{}", 415),
        ("/v1/traces", "application/x-protobuf", b"\xff\xff\xff", 400),
        ("/v1/traces", "application/x-protobuf", b"", 200),
    ],
)
def test_receiver_http_status_codes(otlp_receiver, path, content_type, body, status):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        otlp_receiver.http_endpoint + path, data=body, method="POST", headers={"Content-Type": content_type}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            code, payload = response.status, response.read()
    except urllib.error.HTTPError as error:
        code, payload = error.code, b""
    assert code == status
    if status == 200:
        assert payload == b""  # an empty ExportTraceServiceResponse serializes to nothing
        assert len(otlp_receiver.requests("traces")) == 1
    else:
        assert otlp_receiver.requests() == []
