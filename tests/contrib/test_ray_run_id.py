"""A real local Ray: a driver and its actors report under one run id with none configured."""

import os

import pytest

from contrib_helpers import HERE, ROOT
from lens_core import LensConfig, span_cm
from otel_bridge import setup_telemetry
from otel_bridge.contrib.ray import publish_run_id

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lens-telemetry[ray]'")

GET_TIMEOUT_S = 60


def _config(file_dir):
    return LensConfig(enabled=True, exporter="file", file_dir=str(file_dir), metrics_enabled=False)


def _init():
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})


def _actor_run_id(file_dir):
    from ray_run_id_actors import RunIdActor

    actor = ray.remote(RunIdActor).remote(str(file_dir))
    try:
        run_id = ray.get(actor.run_id.remote(), timeout=GET_TIMEOUT_S)
        assert ray.get(actor.flush.remote(), timeout=GET_TIMEOUT_S) is True
    finally:
        ray.kill(actor)
    return run_id


@pytest.fixture
def no_run_id_env(monkeypatch):
    for name in ("LENS_RUN_ID", "SLURM_JOB_ID", "SLURM_JOBID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.engines
def test_actors_take_the_run_id_of_a_driver_that_set_up_after_ray_init(tmp_path, no_run_id_env):
    _init()
    try:
        job = ray.get_runtime_context().get_job_id()
        handle = setup_telemetry(_config(tmp_path), rank=0, world_size=2, local_rank=0, _allow_reinit=True)
        assert handle.run_id.startswith("ray-") and handle.run_id.endswith(job)
        assert _actor_run_id(tmp_path) == handle.run_id
        with span_cm("driver.work"):
            pass
        assert handle.shutdown()
    finally:
        ray.shutdown()
    (run_dir,) = tmp_path.iterdir()
    assert run_dir.name == handle.run_id
    assert sorted(p.name.split("-pid")[0] for p in run_dir.iterdir()) == ["traces-rank0", "traces-rank1"]


@pytest.mark.engines
def test_a_driver_that_set_up_before_ray_init_publishes_its_run_id_for_its_actors(tmp_path, no_run_id_env):
    handle = setup_telemetry(_config(tmp_path), rank=0, world_size=2, local_rank=0, _allow_reinit=True)
    _init()
    try:
        assert publish_run_id() is True
        assert publish_run_id() is False  # once per job
        assert _actor_run_id(tmp_path) == handle.run_id
    finally:
        ray.shutdown()
        handle.shutdown()
    assert [p.name for p in tmp_path.iterdir()] == [handle.run_id]
