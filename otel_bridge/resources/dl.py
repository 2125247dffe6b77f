"""The ``nv.dl.*`` resource families and process attributes: topology, software, training config and targets.

What a process can know by itself is detected: the topology sizes from the launcher's environment
(torchrun, SLURM) and, on exporting ranks only, the installed versions of the packages a training
stack is made of. What only the job knows it passes through documented calls that return
attributes for ``setup_telemetry(resource_attributes=...)``: :func:`process_attributes`,
:func:`topology_attributes`, :func:`training_attributes`.
"""

from __future__ import annotations

import logging
import re

from lens_core import semconv

__all__ = [
    "CAMPAIGN_STAGES",
    "SOFTWARE_PACKAGES",
    "detect_software",
    "detect_topology",
    "process_attributes",
    "rank_numbers",
    "topology_attributes",
    "training_attributes",
]

_logger = logging.getLogger(__name__)

SOFTWARE_PACKAGES = ("torch", "nemo_rl", "megatron-core", "nemo-toolkit", "vllm", "sglang", "transformers", "ray",
                     "deepspeed", "flash-attn", "transformer-engine", "lens-telemetry", "opentelemetry-sdk")
"""Distributions whose installed version :func:`detect_software` reports (those not installed are left out)."""

CAMPAIGN_STAGES = {"sft": "SFT", "sft_v2": "SFT", "rm": "RM"}
"""Algorithm -> ``nv.dl.campaign.stage``; every other algorithm (grpo, ppo, dpo, distillation, ...) is ``RL``."""

# size -> the launcher variables read for it, in order of preference
_TOPOLOGY_ENV = (
    ("world", ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
    ("local", ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE")),
    ("nodes", ("NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "GROUP_WORLD_SIZE")),
)
_PARALLELISM = ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel", "data_parallel",
                "virtual_pipeline_parallel", "expert_tensor_parallel")
_KEY = re.compile(r"[^a-z0-9_.]+")


def detect_topology(environ) -> dict:
    """``nv.dl.topology.size.{world,local,nodes}`` from the launcher's variables (``WORLD_SIZE``,
    ``LOCAL_WORLD_SIZE``, ``NNODES``; SLURM's and Open MPI's counterparts); ``nodes`` is derived as
    world / local when no variable names it. ``SLURM_NTASKS_PER_NODE`` may read ``4(x2)``."""
    sizes = {}
    for size, names in _TOPOLOGY_ENV:
        for name in names:
            raw = environ.get(name, "").strip()
            if not raw:
                continue
            match = re.match(r"\d+", raw)
            if match is None or int(match.group()) < 1:
                _logger.warning("lens: ignoring %s=%r for nv.dl.topology.size.%s: not a positive integer",
                                name, raw, size)
                continue
            sizes[size] = int(match.group())
            break
    if "nodes" not in sizes and "world" in sizes and "local" in sizes and sizes["world"] % sizes["local"] == 0:
        sizes["nodes"] = sizes["world"] // sizes["local"]
    return {semconv.NV_DL_TOPOLOGY_SIZE + size: value for size, value in sizes.items()}


_RANK_KEYS = (semconv.NV_DL_RANK, semconv.NV_DL_WORLD_SIZE, semconv.NV_DL_LOCAL_RANK)


def rank_numbers(attributes) -> dict:
    """``attributes`` with ``nv.dl.rank`` / ``nv.dl.world_size`` / ``nv.dl.local_rank`` given as
    decimal text (all ``OTEL_RESOURCE_ATTRIBUTES`` can carry) made ints, as Lens writes them;
    any other value is left as it is."""
    out = dict(attributes)
    for key in _RANK_KEYS:
        value = out.get(key)
        if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
            out[key] = int(value.strip())
    return out


def topology_attributes(**sizes: int) -> dict:
    """``nv.dl.topology.size.<name>`` attributes from parallelism sizes the job knows
    (``tensor_parallel=8, pipeline_parallel=4, data_parallel=16``, ...); each a positive int.
    Raises ValueError naming a bad size, or a name outside the known ones
    (tensor/pipeline/context/expert/data/virtual_pipeline/expert_tensor ``_parallel``, world, local, nodes)."""
    allowed = _PARALLELISM + ("world", "local", "nodes")
    out = {}
    for name, value in sizes.items():
        if name not in allowed:
            raise ValueError(f"topology size {name!r} is not one of {', '.join(allowed)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"topology size {name}={value!r}: must be a positive int")
        out[semconv.NV_DL_TOPOLOGY_SIZE + name] = value
    return out


def _package_key(name: str) -> str:
    return _KEY.sub("_", name.lower().replace("-", "_"))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def detect_software(packages=SOFTWARE_PACKAGES, paths=None) -> dict:
    """``nv.dl.software.<package>`` = its installed version, for each of ``packages`` that is
    installed; keys are lower-case with ``-`` as ``_`` (``megatron_core``). Read from the
    ``<name>-<version>.dist-info`` directory names on ``paths`` (``sys.path``; the first one
    found wins, as for ``importlib.metadata``): one directory listing per path entry, where
    ``importlib.metadata.version`` scans every entry again for each package (~160 ms for these
    13 on this machine, against ~2 ms). Imports none of the packages. Exporting ranks only."""
    import os
    import sys

    wanted = {_canonical(package): package for package in packages}
    found = {}
    for entry in (sys.path if paths is None else paths):
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip, a missing directory
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            project, _, version = name.rsplit(".", 1)[0].partition("-")
            key = _canonical(project)
            if key in wanted and key not in found and version:
                found[key] = version
    return {semconv.NV_DL_SOFTWARE + _package_key(wanted[key]): version for key, version in found.items()}


def _flatten(prefix, mapping, out, what):
    for key, value in mapping.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{what}: key {key!r} must be a non-empty str")
        name = prefix + _package_key(key.strip())
        if isinstance(value, dict):
            _flatten(name + ".", value, out, what)
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        elif isinstance(value, (list, tuple)) and value and len({type(v) for v in value}) == 1 \
                and isinstance(value[0], (bool, int, float, str)):
            out[name] = tuple(value)
        elif value is None:
            continue
        else:
            raise ValueError(f"{what}: {key}={value!r} is a {type(value).__name__}; allowed: bool, int, float, str, "
                             "a homogeneous list of them, or a nested dict")


def training_attributes(config=None, target=None) -> dict:
    """``nv.dl.training.config.*`` and ``nv.dl.training.target.*`` resource attributes.

    ``config`` holds the run's settings (``{"micro_batch_size": 4, "optimizer": {"lr": 1e-5}}``),
    ``target`` what it aims at (``{"steps": 10000, "tokens": 2e12}``); nested dicts become dotted
    keys, None values are left out, anything not a scalar or a homogeneous list raises ValueError.
    Pass the result to ``setup_telemetry(resource_attributes=...)``: resources are fixed once set.
    """
    out = {}
    _flatten(semconv.NV_DL_TRAINING_CONFIG, dict(config or {}), out, "training config")
    _flatten(semconv.NV_DL_TRAINING_TARGET, dict(target or {}), out, "training target")
    return out


def process_attributes(*, algorithm=None, model=None, precision=None, provider=None, campaign_stage=None) -> dict:
    """The process tags: ``rl.algorithm``, ``rl.model``, ``nemo.precision``, ``nv.dl.provider.name`` and
    ``nv.dl.campaign.stage`` (from ``algorithm`` by :data:`CAMPAIGN_STAGES` unless given: SFT, RM or RL).
    Arguments left None are left out. Pass the result to ``setup_telemetry(resource_attributes=...)``."""
    out = {}
    for key, value in ((semconv.RL_ALGORITHM, algorithm), (semconv.RL_MODEL, model),
                       (semconv.NEMO_PRECISION, precision), (semconv.NV_DL_PROVIDER_NAME, provider),
                       (semconv.NV_DL_CAMPAIGN_STAGE, campaign_stage)):
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{key}={value!r}: must be a non-empty str")
        out[key] = value.strip()
    if algorithm is not None and campaign_stage is None:
        out[semconv.NV_DL_CAMPAIGN_STAGE] = CAMPAIGN_STAGES.get(algorithm.strip().lower(), "RL")
    return out
