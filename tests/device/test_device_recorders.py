"""Device-timed spans through the whole pipeline, under both recorders and both gates: a workload
(device_workload.py) on the CPU stand-in writes trace files; each device-timed span carries when
the stand-in's device reached its events, host-only spans carry none, the device is asked only
on the export thread, and what the shutdown deadline cannot wait for is counted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from child_env import without_settings  # noqa: E402
from trace_files import REPO_ROOT, final_losses, read_spans  # noqa: E402

from lens_core import semconv  # noqa: E402

WORKLOAD = Path(__file__).with_name("device_workload.py")
START, END, INDEX = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME, semconv.LENS_DEVICE_INDEX


def _run(tmp_path, recorder, pure=False, **env):
    environ = without_settings()
    environ.update(PYTHONPATH=str(REPO_ROOT), LENS_RECORDER=recorder, **{k: str(v) for k, v in env.items()})
    if pure:
        environ["LENS_PURE_PYTHON"] = "1"
    proc = subprocess.run([sys.executable, str(WORKLOAD)], env=environ, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == {"sdk": "OTelBackend", "native": "Recorder"}[recorder]
    return json.loads(lines[1]), read_spans(tmp_path / "traces"), final_losses(tmp_path / "traces")


@pytest.mark.parametrize("recorder,pure", [("native", False), ("native", True), ("sdk", False)],
                         ids=["native-compiled", "native-pure", "sdk"])
def test_device_times_are_when_the_device_reached_the_span(tmp_path, recorder, pure):
    """A stand-in 3 ms behind the host: every device-timed span is stamped with the host times
    its device reached the span's start and end (within a microsecond), 3 ms or more after its
    host start; the host-only leaf and the umbrella carry no device time; nothing is untimed; the
    device was asked whether it was done only on the export thread while the loop ran."""
    out, spans, losses = _run(tmp_path, recorder, pure, LAG_MS=3, STEPS=4, PAUSE_S=0.03)
    truth = out["truth"]
    timed = [s for s in spans if s["name"] in ("train.forward", "train.backward")]
    assert len(timed) == 8 and len(truth) == 8
    for span in timed:
        a = span["attributes"]
        start_truth, end_truth = truth[span["span_id"]]
        assert abs(a[START] - start_truth) <= 1_000 and abs(a[END] - end_truth) <= 1_000
        assert a[START] >= span["start"] + 3_000_000 - 1_000
        assert a[INDEX] == 0
    for span in spans:
        if span["name"] in ("train.log", "train.step"):
            assert not {START, END, INDEX} & set(span["attributes"])
    (final,) = losses.values()
    assert semconv.LENS_DEVICE_UNTIMED not in final and final[semconv.LENS_TELEMETRY_FINAL] is True
    assert set(out["asked_on"]) <= {"lens-export"}, out["asked_on"]


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_shutdown_counts_what_the_device_did_not_reach_in_time(tmp_path, recorder):
    """A device 60 s behind and a 1 s shutdown deadline: shutdown waits for it within the deadline,
    then exports the device-timed spans host-only and counts them in the final loss record."""
    out, spans, losses = _run(tmp_path, recorder, LAG_MS=60_000, STEPS=2, LENS_SHUTDOWN_TIMEOUT_MS=1000)
    timed = [s for s in spans if s["name"] in ("train.forward", "train.backward")]
    assert len(timed) == 4 and not any(START in s["attributes"] for s in timed)
    (final,) = losses.values()
    assert final[semconv.LENS_DEVICE_UNTIMED] == 4
    assert len(spans) == 8 and final[semconv.LENS_SPANS_CREATED] == 8 and final[semconv.LENS_SPANS_UNENDED] == 0


def test_a_pool_smaller_than_the_spans_in_flight_counts_the_rest(tmp_path):
    """LENS_DEVICE_EVENTS=4 and a device 200 ms behind: two spans at a time hold the pool, the
    others are host-only, counted; every span is still exported."""
    out, spans, losses = _run(tmp_path, "native", LAG_MS=200, STEPS=3, LENS_DEVICE_EVENTS=4)
    timed = [s for s in spans if s["name"] in ("train.forward", "train.backward")]
    stamped = [s for s in timed if START in s["attributes"]]
    assert len(timed) == 6 and 2 <= len(stamped) < 6
    (final,) = losses.values()
    assert final[semconv.LENS_DEVICE_UNTIMED] == 6 - len(stamped)
