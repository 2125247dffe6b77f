"""Run-id resolution: explicit, LENS_RUN_ID, the launcher's shared job id (SLURM, torchrun), else fresh."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_bridge.runid import resolve_run_id, slurm_run_id, torchelastic_run_id

REPO = Path(__file__).resolve().parents[2]


def test_the_order_is_explicit_then_lens_run_id_then_slurm_then_torchrun():
    env = {"LENS_RUN_ID": "lens", "SLURM_JOB_ID": "77", "TORCHELASTIC_RUN_ID": "elastic"}
    assert resolve_run_id("cfg", env) == "cfg"
    assert resolve_run_id(None, env) == "lens"
    assert resolve_run_id(None, {**env, "LENS_RUN_ID": " "}) == "77"
    assert resolve_run_id(None, {"TORCHELASTIC_RUN_ID": "elastic"}) == "elastic"


def test_a_fresh_id_is_16_hex_digits_and_new_each_time():
    first, second = resolve_run_id(None, {}), resolve_run_id(None, {})
    assert len(first) == 16 and int(first, 16) >= 0 and first != second


def test_slurm_array_tasks_and_requeues_are_runs_of_their_own():
    assert slurm_run_id({"SLURM_JOB_ID": "4242"}) == "4242"
    assert slurm_run_id({"SLURM_JOBID": "4242", "SLURM_RESTART_COUNT": "0"}) == "4242"
    assert slurm_run_id({"SLURM_JOB_ID": "4250", "SLURM_ARRAY_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": "7"}) == "4242_7"
    assert slurm_run_id({"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "2"}) == "4242-r2"
    assert slurm_run_id({}) is None


def test_torchruns_placeholder_id_is_not_shared_and_elastic_restarts_are_new_runs():
    """torchrun's static rendezvous sets TORCHELASTIC_RUN_ID=none for every job: sharing it
    would merge unrelated jobs into one run."""
    assert torchelastic_run_id({"TORCHELASTIC_RUN_ID": "none"}) is None
    assert torchelastic_run_id({"TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "1"}) == "abc-r1"
    assert torchelastic_run_id({"TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "0"}) == "abc"


def _child_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LENS_", "OTEL_", "SLURM_", "TORCHELASTIC_", "RANK", "WORLD_SIZE", "LOCAL_RANK"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def test_a_quiet_rank_resolves_its_run_id_without_importing_uuid():
    code = ("import sys; from lens_core import LensConfig; from otel_bridge import setup_telemetry; "
            "h = setup_telemetry(LensConfig()); print(h.run_id, 'uuid' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], env=_child_env(), capture_output=True, text=True, timeout=60)
    run_id, uuid_imported = proc.stdout.split()
    assert len(run_id) == 16 and uuid_imported == "False", proc.stderr


_WORKER = """
import os, sys
from lens_core import LensConfig, span_cm
from otel_bridge import setup_telemetry
handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], metrics_enabled=False))
with span_cm("rank.work"):
    pass
assert handle.shutdown()
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (torchrun): pip install 'lens-telemetry[torch]'")
def test_every_rank_started_by_torchrun_reports_under_its_rendezvous_id(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    out = tmp_path / "traces"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(script), str(out)], env=_child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = out.iterdir()
    assert sorted(p.name.split("-pid")[0] for p in run_dir.iterdir()) == ["traces-rank0", "traces-rank1"]
    assert len(run_dir.name) == 36  # the rendezvous id torchrun made up for the job (a UUID)
