"""Canonical protobuf JSON (base64 ids, enum names) written by MessageToJson reads like Collector output."""

from __future__ import annotations

import pytest

from report_helpers import report_of

from lens_report import read_spans

json_format = pytest.importorskip("google.protobuf.json_format")
trace_service_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
trace_pb2 = pytest.importorskip("opentelemetry.proto.trace.v1.trace_pb2")

TRACE_ID = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
STEP_ID = bytes.fromhex("00f067aa0ba902b7")
LEAF_ID = bytes.fromhex("53995c3f42cd8ad8")
T0 = 1_700_000_000_000_000_000


def _request(spans, pid):
    request = trace_service_pb2.ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.int_value = "process.pid", pid
    resource_spans.scope_spans.add().spans.extend(spans)
    return request


def _span(span_id, name, start, end, parent=b"", **attributes):
    span = trace_pb2.Span(trace_id=TRACE_ID, span_id=span_id, parent_span_id=parent, name=name,
                          kind=trace_pb2.Span.SPAN_KIND_INTERNAL, start_time_unix_nano=start,
                          end_time_unix_nano=end)
    for key, value in attributes.items():
        attribute = span.attributes.add()
        attribute.key = key.replace("_", ".")
        if isinstance(value, int):
            attribute.value.int_value = value
        else:
            attribute.value.string_value = value
    return span


def test_message_to_json_lines_are_read_with_ids_times_and_attributes(tmp_path):
    step = _span(STEP_ID, "rl.grpo.step", T0, T0 + 4_000_000_000, rl_iteration=12)
    leaf = _span(LEAF_ID, "rl.grpo.policy_training", T0 + 500_000_000, T0 + 3_500_000_000, parent=STEP_ID,
                 rl_bucket="productive", rl_iteration=12)
    leaf.status.code = trace_pb2.Status.STATUS_CODE_ERROR
    path = tmp_path / "canonical.jsonl"
    lines = [json_format.MessageToJson(_request([step], 1), indent=None),
             json_format.MessageToJson(_request([leaf], 2), indent=None)]
    assert all("\n" not in line for line in lines)
    path.write_text("\n".join(lines) + "\n")

    read = read_spans([path])
    assert read.problems == ()
    by_name = {span.name: span for span in read.spans}
    got_leaf = by_name["rl.grpo.policy_training"]
    assert (got_leaf.trace_id, got_leaf.span_id, got_leaf.parent_span_id) == (
        TRACE_ID.hex(), LEAF_ID.hex(), STEP_ID.hex())
    assert (got_leaf.start_ns, got_leaf.end_ns) == (T0 + 500_000_000, T0 + 3_500_000_000)
    assert got_leaf.attributes == {"rl.bucket": "productive", "rl.iteration": 12}
    assert (got_leaf.kind, got_leaf.error, got_leaf.resource, got_leaf.line) == ("INTERNAL", True,
                                                                               {"process.pid": 2}, 2)
    assert by_name["rl.grpo.step"].parent_span_id is None

    (row,) = report_of(path).steps
    assert (row.iteration, row.span_id, row.totals.wall_ns, row.totals.bucket_ns["productive"]) == (
        12, STEP_ID.hex(), 4_000_000_000, 3_000_000_000)
