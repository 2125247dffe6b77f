"""SLURM resource attributes from the job's environment, with stable job and run UUIDs."""

from __future__ import annotations

import logging
import os
import uuid

from lens_core import semconv

__all__ = ["detect_slurm"]

_logger = logging.getLogger(__name__)
# Fixed namespace for the UUID5s below: changing it would change every job's uuid.
_NAMESPACE = uuid.UUID("5d1e6c8e-8f0b-4c1e-9a8e-2f6a1b4c7d30")

# attribute, then the variables read for it in order of preference
_STRINGS = (
    (semconv.SLURM_JOB_NAME, ("SLURM_JOB_NAME",)),
    (semconv.SLURM_PARTITION, ("SLURM_JOB_PARTITION",)),
    (semconv.SLURM_CLUSTER, ("SLURM_CLUSTER_NAME",)),
)
_INTEGERS = (
    (semconv.SLURM_NODES, ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")),
    (semconv.SLURM_NTASKS, ("SLURM_NTASKS",)),
)


def _first(environ, names):
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None, None


def _integer(variable, text):
    try:
        return int(text)
    except ValueError:
        _logger.warning("lens: ignoring %s=%r: not an integer", variable, text)
        return None


def detect_slurm(environ=None) -> dict:
    """SLURM job attributes; ``{}`` when ``SLURM_JOB_ID`` (or ``SLURM_JOBID``) is not set.

    For array tasks ``slurm.job.id`` is ``<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>``.
    ``nv.dl.job.uuid`` is a UUID5 of cluster and job id (the same across requeues);
    ``nv.dl.run.uuid`` adds ``SLURM_RESTART_COUNT`` (default 0), so each restart gets a new
    one. Malformed integers are dropped with a warning.
    """
    environ = os.environ if environ is None else environ
    _, job_id = _first(environ, ("SLURM_JOB_ID", "SLURM_JOBID"))
    if job_id is None:
        return {}
    attrs = {}
    _, array_job = _first(environ, ("SLURM_ARRAY_JOB_ID",))
    _, array_task = _first(environ, ("SLURM_ARRAY_TASK_ID",))
    if array_job is not None and array_task is not None:
        task = _integer("SLURM_ARRAY_TASK_ID", array_task)
        if task is not None:
            job_id = f"{array_job}_{task}"
            attrs[semconv.SLURM_ARRAY_JOB_ID] = array_job
            attrs[semconv.SLURM_ARRAY_TASK_ID] = task
    attrs[semconv.SLURM_JOB_ID] = job_id
    for key, names in _STRINGS:
        _, value = _first(environ, names)
        if value is not None:
            attrs[key] = value
    for key, names in _INTEGERS:
        variable, text = _first(environ, names)
        value = None if text is None else _integer(variable, text)
        if value is not None:
            attrs[key] = value
    restart_text = environ.get("SLURM_RESTART_COUNT", "").strip() or "0"
    restarts = _integer("SLURM_RESTART_COUNT", restart_text)
    if restarts is not None:
        attrs[semconv.SLURM_RESTART_COUNT] = restarts
    job_key = f"slurm/{attrs.get(semconv.SLURM_CLUSTER, '')}/{job_id}"
    attrs[semconv.NV_DL_JOB_UUID] = str(uuid.uuid5(_NAMESPACE, job_key))
    # a malformed restart count still names a distinct run: key on the text as given
    attrs[semconv.NV_DL_RUN_UUID] = str(uuid.uuid5(_NAMESPACE, f"{job_key}/{restart_text}"))
    return attrs
