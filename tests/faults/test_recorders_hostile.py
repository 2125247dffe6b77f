"""Both recorders write the same data from hostile span content (issue #18, item 3): the
OpenTelemetry span limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the rest, the SDK's 128 defaults)
applied by the native recorder exactly as by the SDK, dropped counts in the OTLP dropped_*_count
fields. One workload per recorder into files, compared span by span, with a figure."""

import json
from pathlib import Path

import pytest

from .figures import record_figure
from .processes import start
from trace_files import decoded_attributes

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


_attrs = decoded_attributes  # OTLP/JSON key-values, compared span by span


def _spans(directory):
    """name -> the span's comparable content (ids and times left out)."""
    out = {}
    for path in sorted(Path(directory).rglob("traces-*.jsonl")):
        for line in path.read_text().splitlines():
            for rs in json.loads(line).get("resourceSpans", ()):
                for ss in rs.get("scopeSpans", ()):
                    for span in ss.get("spans", ()):
                        if span["name"] == "lens.telemetry.loss":
                            continue
                        attrs = _attrs(span.get("attributes"))
                        if "thread.id" in attrs:  # differs between processes; whether it is there does not
                            attrs["thread.id"] = "present"
                        out[span["name"]] = {
                            "attributes": attrs,
                            "dropped_attributes": span.get("droppedAttributesCount", 0),
                            "events": [(e["name"], _attrs(e.get("attributes"))) for e in span.get("events", ())],
                            "dropped_events": span.get("droppedEventsCount", 0),
                            "links": [_attrs(link.get("attributes")) for link in span.get("links", ())],
                            "dropped_links": span.get("droppedLinksCount", 0),
                            "status": span.get("status", {}),
                        }
    return out


def _run(recorder, out, **env):
    proc = start("hostile_spans.py", LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="hostile",
                 LENS_RECORDER=recorder, **env)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    return _spans(out)


@pytest.mark.parametrize("limits", [
    {},
    {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "20", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100",
     "OTEL_SPAN_EVENT_COUNT_LIMIT": "5", "OTEL_SPAN_LINK_COUNT_LIMIT": "3", "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "7",
     "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT": "4"},
    {"OTEL_ATTRIBUTE_COUNT_LIMIT": "10"},
], ids=["defaults", "each-limit-set", "global-count"])
def test_hostile_spans_are_written_the_same_by_both_recorders(tmp_path, limits):
    """Regression: the span limits applied only under LENS_RECORDER=sdk: the native recorder
    kept 100,004 attributes on one span, so the two recorders wrote different data."""
    written = {recorder: _run(recorder, tmp_path / recorder, **limits) for recorder in ("sdk", "native")}
    sdk, native = written["sdk"], written["native"]
    assert sorted(sdk) == sorted(native)
    differing = sorted(name for name in sdk if sdk[name] != native[name])
    many = native["many.attributes"]
    record_figure(f"hostile spans, both recorders ({'defaults' if not limits else ','.join(sorted(limits))})",
                  spans=len(native), differing=len(differing),
                  attributes_kept=len(many["attributes"]), attributes_dropped=many["dropped_attributes"],
                  events_dropped=native["many.events"]["dropped_events"],
                  links_dropped=native["many.links"]["dropped_links"])
    for name in differing:  # the first difference, readably
        for field in sdk[name]:
            assert sdk[name][field] == native[name][field], (name, field)
    cap = int(limits.get("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", limits.get("OTEL_ATTRIBUTE_COUNT_LIMIT", 128)))
    assert len(many["attributes"]) == cap and many["attributes"]["k99990"] == "set again: now the newest"
    assert many["dropped_attributes"] == 100_000 + 3 + 4 - cap  # + lens.group, rl.bucket, thread.id/name
    assert "renamed with [REDACTED] inside" in native and "hunter2" not in json.dumps(native)
