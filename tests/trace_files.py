"""Read what the file exporters wrote: spans and log records from OTLP/JSON lines."""

import json
import os
import subprocess
import sys
from pathlib import Path
from child_env import without_settings  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def _attrs(key_values):
    out = {}
    for kv in key_values or ():
        value = kv["value"]
        (kind, raw), = value.items() if value else (("none", None),)
        out[kv["key"]] = int(raw) if kind == "intValue" else raw
    return out


def decoded_value(any_value):
    """An OTLP/JSON AnyValue as a comparable Python value: arrays as tuples, ints as int."""
    (kind, raw), = any_value.items() if any_value else (("none", None),)
    if kind == "arrayValue":
        return tuple(decoded_value(v) for v in raw.get("values", []))
    return int(raw) if kind == "intValue" else raw


def decoded_attributes(key_values):
    """OTLP/JSON key-values as a dict of decoded_value (what tests compare span by span)."""
    return {kv["key"]: decoded_value(kv["value"]) for kv in key_values or ()}


def _lines(path, only_with=None):
    # an unterminated last line is a torn write (see JsonLinesWriter): ignore it
    text = Path(path).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1] if line and (only_with is None or only_with in line)]


LOSS_SPAN_NAME = "lens.telemetry.loss"


def read_spans(directory, pattern="traces-*.jsonl", *, loss_records=False):
    """Every span under ``directory`` (recursively) as a dict: name, trace_id, span_id,
    parent_span_id, attributes, resource, start/end ns, file. Loss records (telemetry
    about telemetry) are left out, or with ``loss_records=True`` are all that is returned."""
    return [s for s in _read_all(directory, pattern) if (s["name"] == LOSS_SPAN_NAME) == loss_records]


def count_spans(directory, name, pattern="traces-*.jsonl"):
    """How many spans called ``name`` the files under ``directory`` hold, without parsing
    them (for millions of spans): complete lines only, like every reader."""
    needle = '"name":%s' % json.dumps(name)
    count = 0
    for path in Path(directory).rglob(pattern):
        text = path.read_text(encoding="utf-8")
        complete = text[: text.rfind("\n") + 1]
        count += complete.count(needle)
    return count


def final_losses(directory):
    """service.instance.id -> the newest loss record's attributes (counters are cumulative)."""
    newest = {}
    for record in _read_all(directory, "traces-*.jsonl", only_with=LOSS_SPAN_NAME):
        process = record["resource"].get("service.instance.id")
        if process not in newest or record["end"] >= newest[process]["end"]:
            newest[process] = record
    return {process: record["attributes"] for process, record in newest.items()}


def _read_all(directory, pattern, only_with=None):
    spans = []
    for path in sorted(Path(directory).rglob(pattern)):
        for request in _lines(path, only_with):
            for rs in request.get("resourceSpans", ()):
                resource = _attrs(rs.get("resource", {}).get("attributes"))
                for ss in rs.get("scopeSpans", ()):
                    for span in ss.get("spans", ()):
                        spans.append({
                            "name": span["name"],
                            "trace_id": span.get("traceId", ""),
                            "span_id": span.get("spanId", ""),
                            "parent_span_id": span.get("parentSpanId", ""),
                            "attributes": _attrs(span.get("attributes")),
                            "status": span.get("status", {}),
                            "events": span.get("events", []),
                            "start": int(span.get("startTimeUnixNano", 0)),
                            "end": int(span.get("endTimeUnixNano", 0)),
                            "scope": ss.get("scope", {}).get("name", ""),
                            "resource": resource,
                            "file": path.name,
                        })
    return spans


def read_logs(directory):
    """Every log record under ``directory`` as a dict: body, trace_id, span_id, severity,
    attributes."""
    records = []
    for path in sorted(Path(directory).rglob("logs-*.jsonl")):
        for request in _lines(path):
            for rl in request.get("resourceLogs", ()):
                for sl in rl.get("scopeLogs", ()):
                    for record in sl.get("logRecords", ()):
                        records.append({
                            "body": record.get("body", {}).get("stringValue"),
                            "trace_id": record.get("traceId", ""),
                            "span_id": record.get("spanId", ""),
                            "severity": record.get("severityText", ""),
                            "attributes": _attrs(record.get("attributes")),
                        })
    return records


def run_script(code, *args, timeout=30, env=None):
    """Run ``code`` in a fresh interpreter that imports this checkout; CompletedProcess."""
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), environ.get("PYTHONPATH", "")])
    environ = without_settings(environ=environ)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=environ,
                          capture_output=True, text=True, timeout=timeout)
