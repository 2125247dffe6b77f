"""Secrets on every path into the output, in real processes under both recorders (issue #18,
item 9): the 20 credential shapes through attributes, the OpenTelemetry span API on a Lens span,
events, exception messages and stacks, span names, status messages, log bodies and extras, raw
OpenTelemetry spans and OTEL_RESOURCE_ATTRIBUTES; look-alikes kept. A figure per recorder."""

import json
import re
from pathlib import Path

import pytest

from secret_cases import LOOK_ALIKE_TEXTS, SHAPES
from trace_files import read_logs, read_spans, run_script

from .figures import record_figure

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

TESTS = str(Path(__file__).resolve().parents[1])

_PATHS = f"""
import json, logging, sys
sys.path.insert(0, {TESTS!r})
import lens_core
from lens_core import LensConfig, SpanRegistry
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from otel_bridge import setup_telemetry
from secret_cases import LOOK_ALIKE_TEXTS, SHAPES

SpanRegistry.register("faults", ["g"])
handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], run_id="paths",
                                    span_groups="g", metrics_enabled=False, logs_enabled=True))
raw = trace.get_tracer("raw.library")
log = logging.getLogger("app.paths")
texts = [text for _, text, _ in SHAPES] + LOOK_ALIKE_TEXTS
for i, text in enumerate(texts):
    with lens_core.managed_span("g", "attribute", i=i, note=text):
        pass
    with lens_core.managed_span("g", "otel-api", i=i) as span:
        api = trace.get_current_span()
        api.set_attribute("note", text)
        api.add_event(text, {{"note": text}})
        api.set_status(Status(StatusCode.ERROR, text))
    try:
        with lens_core.managed_span("g", "exception", i=i):
            raise RuntimeError(text)
    except RuntimeError:
        pass
    with lens_core.managed_span("g", text, i=i, path="name"):
        pass
    with raw.start_as_current_span(text, attributes={{"i": i, "path": "raw"}}) as span:
        span.set_attribute("note", text)
        span.add_event(text, {{"note": text}})
        span.record_exception(ValueError(text))
        span.set_status(Status(StatusCode.ERROR, text))
    log.warning(text, extra={{"i": i, "note": text}})
print(json.dumps({{"shutdown": handle.shutdown()}}))
"""

_RESOURCE = ("deploy.db=mysql -h db -u ci -pS3cr3tPassw0rd,db.password=hunter2x9,"
             "deploy.repo=https://x-access-token:ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r.git,"
             "deploy.model=meta-llama/Llama-3.1-8B-Instruct")


def _fragments(text, expected):
    """The secret-looking words of ``text`` (6+ characters with a digit) its redacted form
    leaves out; none may appear anywhere in the output."""
    return {w for w in re.findall(r"[A-Za-z0-9_]{6,}", text) if w not in expected and any(c.isdigit() for c in w)}


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_every_credential_shape_is_redacted_on_every_path(tmp_path, recorder):
    """Regression: six shapes passed every redaction path; under LENS_RECORDER=sdk all 20
    passed through span.set_attribute and events; span names, log message bodies, raw OTel
    exception events and OTEL_RESOURCE_ATTRIBUTES were never redacted."""
    out = run_script(_PATHS, tmp_path, timeout=300,
                     env={"LENS_RECORDER": recorder, "OTEL_RESOURCE_ATTRIBUTES": _RESOURCE})
    assert out.returncode == 0, out.stderr[-3000:]
    spans = read_spans(tmp_path)
    logs = read_logs(tmp_path)
    shapes = len(SHAPES)
    by_path = {}
    for span in spans:
        attrs = span["attributes"]
        path = attrs.get("path") or span["name"]
        by_path.setdefault(path, {})[int(attrs["i"])] = json.dumps(span)
    by_path["log"] = {int(r["attributes"]["i"]): json.dumps(r) for r in logs if "i" in r["attributes"]}
    leaks, kept = {}, {}
    for path, items in sorted(by_path.items()):
        leaks[path] = sorted(i for i, (_, text, expected) in enumerate(SHAPES)
                             if any(f in items.get(i, "") for f in _fragments(text, expected)))
        assert all(i in items for i in range(shapes + len(LOOK_ALIKE_TEXTS))), (path, sorted(items))
        kept[path] = sum(json.dumps(t)[1:-1] in items[shapes + j] for j, t in enumerate(LOOK_ALIKE_TEXTS))
    resource = spans[0]["resource"]
    raw_text = "".join(p.read_text() for p in Path(tmp_path).rglob("*.jsonl"))
    record_figure(f"secrets on every path ({recorder})", paths=len(by_path) + 1,
                  shapes_leaked=sum(len(v) for v in leaks.values()),
                  look_alikes_kept=f"{sum(kept.values())}/{len(kept) * len(LOOK_ALIKE_TEXTS)}")
    assert leaks == {path: [] for path in by_path}
    assert kept == {path: len(LOOK_ALIKE_TEXTS) for path in by_path}
    assert set(by_path) == {"attribute", "otel-api", "exception", "name", "raw", "log"}
    assert resource["deploy.db"] == "mysql -h db -u [REDACTED] -p[REDACTED]" and resource["db.password"] == "[REDACTED]"
    assert resource["deploy.repo"] == "https://[REDACTED]@github.com/o/r.git"
    assert resource["deploy.model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "S3cr3tPassw0rd" not in raw_text and "hunter2x9" not in raw_text
