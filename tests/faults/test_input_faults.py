"""Bad input under a real setup, in real processes: fuzzed carriers, secrets, unprintable
exceptions and settings beyond their bounds (issue #9, items 10-13), with a figure per case."""

import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from carrier_fuzz import expected_parent, fuzzed_carriers, remote_sampled  # noqa: E402
from secret_cases import SECRET_CASES, VISIBLE_CASES  # noqa: E402
from trace_files import read_spans, run_script  # noqa: E402

from .figures import record_figure  # noqa: E402

TESTS = str(Path(__file__).resolve().parents[1])
CARRIERS = 20_000

# Every script sets up real telemetry writing OTLP-JSON files, does its part and prints
# one JSON line of what it saw in-process.
_SETUP = f"""
import json, sys
sys.path.insert(0, {TESTS!r})
import lens_core
from lens_core import LensConfig, SpanRegistry
from otel_bridge import setup_telemetry

SpanRegistry.register("faults", ["g", "efficiency"])
handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], run_id="faults",
                                    span_groups="g,efficiency", metrics_enabled=False))
"""


RECORDERS = pytest.mark.parametrize("recorder", ["native", "sdk"])


def _run(body, tmp_path, recorder, *args, timeout=300):
    out = run_script(_SETUP + body, tmp_path, *args, timeout=timeout, env={"LENS_RECORDER": recorder})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _value(raw):
    # an OTLP-JSON AnyValue as Python: arrays become tuples
    if isinstance(raw, dict) and "values" in raw:
        return tuple(_value(next(iter(v.values()))) for v in raw["values"])
    return raw


# ---- carriers (item 11) ---------------------------------------------------------------------------

_CARRIERS = """
from carrier_fuzz import fuzzed_carriers
from lens_core import remote_trace_context

n = int(sys.argv[2])
carriers = fuzzed_carriers(n)
raised = 0
for first in range(0, n, 500):  # flushed per chunk: the batch queue (2048) never overflows
    with lens_core.span_cm("chunk", first=first):
        for i in range(first, min(n, first + 500)):
            carrier = carriers[i]
            try:
                with lens_core.span_cm("via.span_cm", context=carrier, i=i):
                    pass
            except Exception:
                raised += 1
            try:
                with remote_trace_context(carrier):
                    with lens_core.managed_span("g", "via.remote_trace_context", i=i):
                        pass
            except Exception:
                raised += 1
            try:
                with lens_core.deferred_child_span("g", "via.deferred_child_span", carrier, i=i):
                    pass
            except Exception:
                raised += 1
    handle.force_flush()
print(json.dumps({"raised": raised, "shutdown": handle.shutdown(),
                  "ignored": lens_core.carrier.ignored_carrier_count()}))
"""


@RECORDERS
def test_fuzzed_carriers_neither_raise_nor_adopt_an_invalid_context(tmp_path, recorder):
    seen = _run(_CARRIERS, tmp_path, recorder, CARRIERS)
    carriers = fuzzed_carriers(CARRIERS)
    spans = read_spans(tmp_path)
    chunks = {s["attributes"]["first"]: s for s in spans if s["name"] == "chunk"}
    children = [s for s in spans if s["name"].startswith("via.")]
    adopted_invalid = wrong_parent = adopted_valid = 0
    for span in children:
        i = span["attributes"]["i"]
        chunk = chunks[i - i % 500]
        placed = (int(span["trace_id"], 16), int(span["parent_span_id"] or "0", 16))
        remote = expected_parent(carriers[i])
        expected = remote or (int(chunk["trace_id"], 16), int(chunk["span_id"], 16))
        if placed != expected:
            wrong_parent += 1
            adopted_invalid += remote is None
        else:
            adopted_valid += remote is not None
    # a child of a valid but unsampled remote parent is not recorded (parent-based sampling)
    unsampled = sum(expected_parent(c) is not None and not remote_sampled(c) for c in carriers)
    missing = 3 * (CARRIERS - unsampled) - len(children)
    record_figure(f"carriers ({recorder})", fuzzed=CARRIERS, raised=seen["raised"], adopted_invalid=adopted_invalid,
                  wrong_parent=wrong_parent, valid_adopted=adopted_valid, malformed_ignored=seen["ignored"],
                  spans_missing=missing)
    assert seen["raised"] == 0 and adopted_invalid == 0 and wrong_parent == 0 and missing == 0
    assert seen["shutdown"] is True
    assert adopted_valid > 3 * 2000 and seen["ignored"] > 3 * 2000  # both kinds were exercised


# ---- secrets (item 13) ----------------------------------------------------------------------------

_SECRETS = """
from secret_cases import SECRET_CASES, VISIBLE_CASES

for i, (key, value, _) in enumerate(SECRET_CASES):
    # twice: the first meets an unknown key (the slow path), the second a key known not to
    # be secret, which the compiled recorder's fast path takes
    for name in (f"secret.{i}", f"secret.{i}.again"):
        with lens_core.managed_span("g", name, **{key: value}):
            pass
for i, (key, value) in enumerate(VISIBLE_CASES):
    with lens_core.managed_span("g", f"visible.{i}", **{key: value}):
        pass
try:
    with lens_core.managed_span("g", "secret.exception"):
        raise ConnectionError(sys.argv[2])
except ConnectionError:
    pass
print(json.dumps({"shutdown": handle.shutdown()}))
"""
_LEAKY_ERROR = ("cannot reach https://alice:hunter2@db.example.com/prod",
                "cannot reach https://[REDACTED]@db.example.com/prod")


def _fragments(value, expected):
    """The secret-looking words of a value (6+ characters with a digit: hunter2, key
    material) that its redacted form leaves out; none may appear anywhere in the file."""
    import re

    texts = value if isinstance(value, (list, tuple)) else (value,)
    kept = " ".join(expected) if isinstance(expected, tuple) else expected
    return {w for text in texts for w in re.findall(r"[A-Za-z0-9_]{6,}", text)
            if w not in kept and any(c.isdigit() for c in w)}


@pytest.mark.usefixtures("twin")  # the ledger and the recorder differ between twins
@RECORDERS
def test_every_secret_case_is_redacted_in_the_exported_file(tmp_path, recorder):
    seen = _run(_SECRETS, tmp_path, recorder, _LEAKY_ERROR[0])
    spans = {s["name"]: s for s in read_spans(tmp_path)}
    raw = "".join(p.read_text() for p in Path(tmp_path).rglob("traces-*.jsonl"))
    redacted = [i for i, (key, _, expected) in enumerate(SECRET_CASES)
                if all(_value(spans[name]["attributes"].get(key)) == expected
                       for name in (f"secret.{i}", f"secret.{i}.again"))]
    kept = [i for i, (key, value) in enumerate(VISIBLE_CASES)
            if _value(spans[f"visible.{i}"]["attributes"].get(key)) == (tuple(value) if isinstance(value, list) else value)]
    pairs = [(value, expected) for _, value, expected in SECRET_CASES] + [_LEAKY_ERROR]
    leaked = sorted({f for value, expected in pairs for f in _fragments(value, expected) if f in raw})
    (event,) = spans["secret.exception"]["events"]
    message = {a["key"]: next(iter(a["value"].values())) for a in event["attributes"]}["exception.message"]
    record_figure(f"secrets ({recorder})", redacted=f"{len(redacted)}/{len(SECRET_CASES)}",
                  look_alikes_kept=f"{len(kept)}/{len(VISIBLE_CASES)}", fragments_in_file=len(leaked))
    assert len(redacted) == len(SECRET_CASES) == 35, [SECRET_CASES[i][0] for i in set(range(35)) - set(redacted)]
    assert len(kept) == len(VISIBLE_CASES)
    assert leaked == []
    assert message == _LEAKY_ERROR[1]
    assert seen["shutdown"] is True


# ---- unprintable exceptions (item 12) -------------------------------------------------------------

_EXCEPTIONS = """
from exception_paths import PATHS, UNPRINTABLE

unchanged = other = 0
for path, (run, _) in PATHS.items():
    for kind in UNPRINTABLE:
        error = kind("payload")
        try:
            run(error)
        except BaseException as caught:
            unchanged += caught is error
            other += caught is not error
print(json.dumps({"unchanged": unchanged, "other": other, "shutdown": handle.shutdown()}))
"""


@pytest.mark.usefixtures("twin")  # the ledger and the recorder differ between twins
@RECORDERS
def test_unprintable_exceptions_propagate_unchanged_and_are_recorded(tmp_path, recorder):
    from exception_paths import PATHS, RECORDS_NO_FAILURE, UNPRINTABLE

    seen = _run(_EXCEPTIONS, tmp_path, recorder)
    cases = len(PATHS) * len(UNPRINTABLE)
    recording = (len(PATHS) - len(RECORDS_NO_FAILURE)) * len(UNPRINTABLE)
    errors = [s for s in read_spans(tmp_path) if s["status"].get("code") == 2]  # STATUS_CODE_ERROR
    described = [s for s in errors if any(k.__name__ in s["status"].get("message", "") for k in UNPRINTABLE)]
    record_figure(f"exceptions ({recorder})", raised=cases, propagated_unchanged=seen["unchanged"], replaced=seen["other"],
                  recorded_as_error=f"{len(described)}/{recording}")
    assert seen["unchanged"] == cases and seen["other"] == 0
    assert len(errors) == len(described) == recording
    assert seen["shutdown"] is True


# ---- settings beyond their bounds (item 10) -------------------------------------------------------


_BOUNDS = """
import glob, json, os, sys, time
from lens_core import LensConfig
from lens_core.config import NUMERIC_RANGES
from otel_bridge import setup_telemetry

config = LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], run_id="bounds", traces_enabled=False,
                    shutdown_timeout_ms=NUMERIC_RANGES["shutdown_timeout_ms"][1],
                    metric_export_interval_ms=NUMERIC_RANGES["metric_export_interval_ms"][1])
handle = setup_telemetry(config)
handle.meter.create_counter("lens.faults.steps").add(3)
started = time.monotonic()
ok = handle.shutdown()
seconds = time.monotonic() - started
lines = sum(1 for path in glob.glob(os.path.join(sys.argv[1], "**", "metrics-*.jsonl"), recursive=True)
            for line in open(path) if line.strip())
print(json.dumps({"shutdown": ok, "seconds": seconds, "metric_lines": lines}))
"""


def test_settings_beyond_their_bounds_are_rejected_and_the_bounds_themselves_work(tmp_path):
    """Regression: LENS_SHUTDOWN_TIMEOUT_MS=99999999999999999999 was accepted, then
    shutdown() raised OverflowError; the same for the metric interval killed the metrics
    thread (0 metric lines, shutdown still True). Now from_env rejects every numeric setting
    beyond its range, and a process at the largest allowed millisecond values shuts down
    at once and exports its metrics."""
    from lens_core.config import NUMERIC_RANGES

    huge = "99999999999999999999"
    rejected = []
    for field, (low, high, unit) in NUMERIC_RANGES.items():
        variable = f"LENS_{field.upper()}"
        out = run_script("from lens_core import LensConfig; LensConfig.from_env()", env={variable: huge})
        message = f"ValueError: {variable}={huge!r}: must be a whole number of {unit} from {low} to {high}"
        if out.returncode == 1 and out.stderr.strip().splitlines()[-1] == message:
            rejected.append(variable)
    out = run_script(_BOUNDS, tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    record_figure("settings", overflowing_values_rejected=f"{len(rejected)}/{len(NUMERIC_RANGES)}",
                  shutdown_at_the_bounds=seen["shutdown"], shutdown_seconds=round(seen["seconds"], 2),
                  metric_lines=seen["metric_lines"])
    assert rejected == [f"LENS_{field.upper()}" for field in NUMERIC_RANGES]
    assert seen["shutdown"] is True and seen["metric_lines"] >= 1
    assert seen["seconds"] < 60  # it returns when done, not at its one-hour deadline
