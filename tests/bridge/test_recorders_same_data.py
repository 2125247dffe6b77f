"""Both recorders produce the same data: one workload (recorder_workload.py) under
LENS_RECORDER=sdk and LENS_RECORDER=native, into the real OTLP receiver over gRPC and HTTP
and into files, compared span by span: names, parent links, kind, status, events (the
exception event too), attributes (bucket, iteration, thread, user attributes, redaction),
links, resource and scope (with their declared schema urls). Ids are random in each run, so a
span is known by its path of names from the root, and parents and link targets by theirs."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from child_env import without_settings  # noqa: E402
from trace_files import REPO_ROOT, decoded_attributes  # noqa: E402

from lens_core.semconv import SCHEMA_URL  # noqa: E402
from otel_bridge.exporters._otlp_json import to_otlp_json  # noqa: E402

WORKLOAD = Path(__file__).with_name("recorder_workload.py")
# Differ from run to run or process to process, whatever the recorder.
PER_PROCESS = {"process.pid", "service.instance.id", "nemo.run.id", "process.command_args", "process.command_line"}


def _run(recorder, tmp_path, **env):
    environ = without_settings()
    environ.update(PYTHONPATH=str(REPO_ROOT), LENS_RECORDER=recorder, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
                   **env)
    proc = subprocess.run([sys.executable, str(WORKLOAD)], env=environ, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split()[0] == {"sdk": "OTelBackend", "native": "Recorder"}[recorder]


_attrs = decoded_attributes  # OTLP/JSON key-values, compared span by span


def _spans_from_requests(requests):
    """[(span dict, resource attrs, scope dict)] from OTLP/JSON request dicts; the resource
    attrs carry the ResourceSpans' schemaUrl as " schemaUrl", the scope dict the ScopeSpans'."""
    out = []
    for request in requests:
        for rs in request.get("resourceSpans", ()):
            resource = _attrs(rs.get("resource", {}).get("attributes"))
            resource[" schemaUrl"] = rs.get("schemaUrl")
            for ss in rs.get("scopeSpans", ()):
                scope = dict(ss.get("scope", {}), schemaUrl=ss.get("schemaUrl"))
                for span in ss.get("spans", ()):
                    if span["name"] != "lens.telemetry.loss":
                        out.append((span, resource, scope))
    return out


def _normalise(entries):
    """path of names -> sorted list of the spans' comparable content."""
    by_id = {span["spanId"]: span for span, _, _ in entries}

    def path(span_id, seen=()):
        span = by_id.get(span_id)
        if span is None:
            return f"remote:{span_id}"
        parent = span.get("parentSpanId")
        return (path(parent) + "/" if parent else "") + span["name"]

    result = {}
    for span, resource, scope in entries:
        attrs = _attrs(span.get("attributes"))
        assert isinstance(attrs.pop("thread.id"), int)
        events = []
        for event in span.get("events", ()):
            event_attrs = _attrs(event.get("attributes"))
            stack = event_attrs.pop("exception.stacktrace", None)
            if stack is not None:  # frames inside each recorder differ; what was raised does not
                event_attrs["stack_ends"] = stack.strip().splitlines()[-1]
            events.append((event["name"], tuple(sorted(event_attrs.items()))))
        links = tuple(sorted((path(link["spanId"]), tuple(sorted(_attrs(link.get("attributes")).items())),
                              link.get("flags")) for link in span.get("links", ())))
        content = {
            "kind": span.get("kind"),
            "status": span.get("status", {}),
            "flags": span.get("flags"),
            "traceState": span.get("traceState"),
            "attributes": tuple(sorted(attrs.items())),
            "events": tuple(events),
            "links": links,
            "resource": tuple(sorted((k, v) for k, v in resource.items() if k not in PER_PROCESS)),
            "scope": (scope.get("name"), scope.get("version"), scope.get("schemaUrl")),
            "duration_ok": int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 0,
        }
        result.setdefault(path(span["spanId"]), []).append(json.dumps(content, sort_keys=True, default=str))
    return {key: sorted(values) for key, values in result.items()}


def _from_files(directory):
    requests = [json.loads(line) for f in sorted(Path(directory).rglob("traces-*.jsonl"))
                for line in f.read_text().splitlines() if line]
    return _normalise(_spans_from_requests(requests))


def _from_receiver(receiver):
    requests = [to_otlp_json(r.request) for r in receiver.requests("traces")]
    return _normalise(_spans_from_requests(requests))


def _assert_same(sdk, native):
    assert sorted(sdk) == sorted(native)
    for key in sdk:
        assert sdk[key] == native[key], key
    _assert_schema_urls(native)
    counts = Counter({key: len(v) for key, v in native.items()})
    assert counts["job"] == 1 and counts["job/step"] == 2 and counts["job/step/generate/raw.child/lens.in.raw"] == 2
    assert sum(counts.values()) == 31  # job, then 15 spans in each of 2 steps


def _assert_schema_urls(spans):
    """Issue #17: the resource and Lens's scope declare the semantic-conventions version
    (schemaUrl); a library scope that declared none has none written (as the SDK omits it)."""
    scopes = {}
    for values in spans.values():
        for text in values:
            content = json.loads(text)
            assert dict(content["resource"])[" schemaUrl"] == SCHEMA_URL
            scopes[content["scope"][0]] = content["scope"][2]
    assert scopes["lens"] == SCHEMA_URL
    assert scopes["raw-lib"] is None


def test_files_hold_the_same_spans_from_both_recorders(tmp_path):
    outputs = {}
    for recorder in ("sdk", "native"):
        out = tmp_path / recorder
        out.mkdir()
        _run(recorder, out, LENS_EXPORTER="file", LENS_FILE_DIR=str(out / "traces"))
        outputs[recorder] = _from_files(out / "traces")
    _assert_same(outputs["sdk"], outputs["native"])
    generate = json.loads(outputs["native"]["job/step/generate"][0])
    attrs = dict(generate["attributes"])
    assert attrs["api_key"] == attrs["prompt"] == "[REDACTED]" and attrs["rl.bucket"] == "productive"
    assert attrs["rl.iteration"] in (1, 2) and attrs["thread.name"] == "MainThread"
    assert [e[0] for e in generate["events"]] == ["halfway"]
    failing = json.loads(outputs["native"]["job/step/failing"][0])
    assert failing["status"] == {"code": 2, "message": "ValueError: boom"}
    assert dict(failing["events"][0][1])["stack_ends"] == "ValueError: boom"
    linked = outputs["native"]["job/step/linked"]
    assert all(json.loads(s)["links"][0][0] == "job/step" for s in linked)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_otlp_receiver_gets_the_same_spans_from_both_recorders(otlp_receiver, tmp_path, protocol):
    endpoint = otlp_receiver.grpc_endpoint if protocol == "grpc" else otlp_receiver.http_endpoint
    outputs = {}
    for recorder in ("sdk", "native"):
        otlp_receiver.clear()
        _run(recorder, tmp_path, LENS_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
             OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
        outputs[recorder] = _from_receiver(otlp_receiver)
        assert {r.transport for r in otlp_receiver.requests("traces")} == {protocol.split("/")[0]}
    _assert_same(outputs["sdk"], outputs["native"])
