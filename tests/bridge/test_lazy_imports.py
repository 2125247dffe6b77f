"""Importing the resources, nccl, instruments, emit, semconv and logging-bridge modules loads no
OpenTelemetry or NVML."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = ["otel_bridge.semconv", "otel_bridge.resources", "otel_bridge.contrib.nccl",
           "otel_bridge.instruments", "otel_bridge.emit", "otel_bridge.logging_bridge"]


def test_importing_these_modules_loads_no_opentelemetry_or_pynvml():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + "loaded = [m for m in sys.modules if m.startswith(('opentelemetry', 'pynvml'))]\n"
            + "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
