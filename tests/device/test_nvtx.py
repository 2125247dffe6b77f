"""LENS_NVTX=1: every enabled span opens an NVTX range named after it, through whichever NVTX API is
present; without one, one warning and the mirror is off. A stand-in ``nvtx`` module (a real module
on the child's path) records the ranges."""

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk")

from child_env import without_settings  # noqa: E402
from trace_files import REPO_ROOT  # noqa: E402

STAND_IN = '''
"""A stand-in for the nvtx package: records push_range / pop_range calls."""
import threading
calls = []
def push_range(message=None, **_):
    calls.append(("push", message, threading.get_ident()))
def pop_range(**_):
    calls.append(("pop", None, threading.get_ident()))
'''

WORKLOAD = '''
import json, sys, threading
import lens_core
from lens_core import LensConfig, SpanRegistry, managed_span, umbrella_span
from otel_bridge import setup_telemetry
SpanRegistry.register("n", ["step", "fwd", "off"], umbrellas=["step"])
handle = setup_telemetry(LensConfig.from_env().replace(enabled=True, span_groups="step,fwd", metrics_enabled=False,
                                                      exporter="none"))
with umbrella_span("step", "train.step"):
    with managed_span("fwd", "train.forward"):
        pass
    with managed_span("off", "not.enabled"):
        pass
    with managed_span("fwd", "train.backward"):
        pass
handle.shutdown()
nvtx = sys.modules.get("nvtx")
print(json.dumps([c[:2] for c in nvtx.calls] if nvtx is not None and hasattr(nvtx, "calls") else None))
'''


def _run(tmp_path, recorder, with_stand_in=True):
    if with_stand_in:
        (tmp_path / "nvtx.py").write_text(STAND_IN)
    environ = without_settings()
    environ.update(PYTHONPATH=f"{tmp_path}:{REPO_ROOT}", LENS_RECORDER=recorder, LENS_NVTX="1")
    proc = subprocess.run([sys.executable, "-c", WORKLOAD], env=environ, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_every_enabled_span_opens_a_range_named_after_it(tmp_path, recorder):
    calls, _ = _run(tmp_path, recorder)
    calls = calls[2:]  # the probe at setup: one push and one pop
    assert calls == [["push", "train.step"], ["push", "train.forward"], ["pop", None],
                     ["push", "train.backward"], ["pop", None], ["pop", None]]


@pytest.mark.skipif(__import__("importlib").util.find_spec("nvtx") is not None, reason="the nvtx package is installed")
def test_without_an_nvtx_api_one_warning_and_off(tmp_path):
    calls, stderr = _run(tmp_path, "native", with_stand_in=False)
    assert calls is None
    assert stderr.count("LENS_NVTX=1 but no NVTX range API works here") == 1, stderr
