"""Shared helpers of the contrib tests: free ports, child environments, telemetry configs, trace files."""

import os
import pathlib
import socket
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra) -> dict:
    """The environment for a child process: this worktree first on PYTHONPATH, no rank variables."""
    from child_env import without_settings  # tests/ is on the path here, not in Ray workers

    env = {k: v for k, v in without_settings().items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS")}
    paths = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def telemetry_config(file_dir, run_id):
    """An enabled LensConfig exporting traces (only) to OTLP-JSON files under ``file_dir``/``run_id``."""
    from lens_core.config import LensConfig

    return LensConfig(enabled=True, exporter="file", file_dir=str(file_dir), run_id=run_id,
                      metrics_enabled=False, span_groups="all")


def read_run(file_dir, run_id):
    """Every span exported under ``file_dir``/``run_id``, read back with the report reader."""
    from lens_report import read_spans

    result = read_spans([pathlib.Path(file_dir) / run_id])
    assert not result.problems, result.problems
    return [span for span in result.spans if span.name != "lens.telemetry.loss"]


def run_python(code: str, timeout: float = 60, **env):
    """Run ``code`` in a fresh interpreter of this worktree; the completed process."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(**env),
                          capture_output=True, text=True, timeout=timeout)
