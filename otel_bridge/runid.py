"""The run id a process reports under: explicit, LENS_RUN_ID, the launcher's shared job id (SLURM, torchrun, Ray), else fresh."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

__all__ = ["RAY_KV_PREFIX", "publish_ray_run_id", "ray_job", "ray_run_id", "resolve_run_id", "slurm_run_id",
           "torchelastic_run_id"]

RAY_KV_PREFIX = b"lens/run_id/"
"""Ray internal-KV key prefix under which a driver publishes its run id, per Ray job id."""


def slurm_run_id(environ: Mapping[str, str]) -> str | None:
    """The SLURM job as a run id, shared by every task of the job; ``None`` outside SLURM.

    An array task is its own run (``<array job>_<task>``, as ``slurm.job.id`` reads); a
    requeued job is a new run (``-r<restart count>``), as ``nv.dl.run.uuid`` is new for it.
    """
    job = (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or "").strip()
    if not job:
        return None
    array_job = environ.get("SLURM_ARRAY_JOB_ID", "").strip()
    task = environ.get("SLURM_ARRAY_TASK_ID", "").strip()
    if array_job and task.isdigit():
        job = f"{array_job}_{int(task)}"
    restarts = environ.get("SLURM_RESTART_COUNT", "").strip()
    if restarts.isdigit() and int(restarts) > 0:
        job += f"-r{int(restarts)}"
    return job


def torchelastic_run_id(environ: Mapping[str, str]) -> str | None:
    """torchrun's ``TORCHELASTIC_RUN_ID`` (the rendezvous id: a fresh UUID per single-node or
    ``--standalone`` job, ``--rdzv-id`` otherwise), with ``-r<n>`` after an elastic restart.
    ``None`` outside torchrun, and for the static rendezvous's placeholder ``none``, which every
    job shares."""
    run = environ.get("TORCHELASTIC_RUN_ID", "").strip()
    if not run or run == "none":
        return None
    restarts = environ.get("TORCHELASTIC_RESTART_COUNT", "").strip()
    if restarts.isdigit() and int(restarts) > 0:
        run += f"-r{int(restarts)}"
    return run


def _ray():
    """The ``ray`` module when this process already imported it and joined a cluster (never imports it)."""
    ray = sys.modules.get("ray")
    try:
        return ray if ray is not None and ray.is_initialized() else None
    except Exception:  # a half-imported or stubbed module: no Ray here
        return None


def ray_job() -> tuple[str, str, bool] | None:
    """(job id, cluster session name, is a worker) of the Ray job this process belongs to."""
    ray = _ray()
    if ray is None:
        return None
    from lens_core import _log  # (here, not at import: only a process inside Ray gets this far)

    from otel_bridge.sdk import upstream

    try:
        job = ray.get_runtime_context().get_job_id()
        worker = upstream.ray_global_worker(ray)  # the session name has no public accessor
        session = getattr(getattr(worker, "node", None), "session_name", "") or ""
        return job, session, worker.mode == ray.WORKER_MODE
    except upstream.UpstreamChanged as exc:  # ranks may now derive different ids: say so
        _log.warn(f"lens telemetry: cannot read the Ray job's session ({exc})")
        return None
    except Exception:
        return None


def ray_run_id() -> str | None:
    """The run id for a process of a Ray job (``None`` outside Ray; Ray is never imported here).

    A worker (an actor or a task) takes the id its driver published
    (:func:`publish_ray_run_id`); otherwise every process of the job derives the same one from
    the cluster's session and the job id, ``ray-<session time>-<job id>``.
    """
    job = ray_job()
    if job is None:
        return None
    job_id, session, is_worker = job
    if is_worker:
        from lens_core import _log

        from otel_bridge.sdk import upstream

        try:
            published = upstream.ray_kv_get(RAY_KV_PREFIX + job_id.encode())
        except upstream.UpstreamChanged as exc:  # the driver's id is unreadable: this worker's may differ
            _log.warn(f"lens telemetry: cannot read the run id the Ray driver published ({exc})")
            published = None
        except Exception:
            published = None
        if published:
            return published.decode()
    stamp = session.removeprefix("session_").replace("_", "-")
    return f"ray-{stamp}-{job_id}" if stamp else f"ray-{job_id}"


def publish_ray_run_id(run_id: str) -> bool:
    """Publish ``run_id`` for the workers of this process's Ray job (a driver's call; a no-op
    elsewhere). True when published. Workers that set up telemetry afterwards use it."""
    job = ray_job()
    if job is None or job[2]:
        return False
    from lens_core import _log

    from otel_bridge.sdk import upstream

    try:
        upstream.ray_kv_put(RAY_KV_PREFIX + job[0].encode(), run_id.encode())
    except upstream.UpstreamChanged as exc:
        _log.warn(f"lens telemetry: cannot publish the run id to the Ray job's workers ({exc})")
        return False
    except Exception:
        return False
    return True


def resolve_run_id(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The run id: ``explicit`` (the config's), else ``LENS_RUN_ID``, else the launcher's job id
    shared by every rank (SLURM, then torchrun, then Ray), else a fresh random id.

    In a Ray driver the id is published for its workers (:func:`publish_ray_run_id`). The
    fresh id comes from ``os.urandom`` (no ``uuid`` import on a quiet rank).
    """
    env = os.environ if environ is None else environ
    run_id = (explicit or env.get("LENS_RUN_ID", "").strip() or slurm_run_id(env) or torchelastic_run_id(env)
              or ray_run_id() or os.urandom(8).hex())
    if _ray() is not None:
        publish_ray_run_id(run_id)
    return run_id
