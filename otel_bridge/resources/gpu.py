"""The GPU this process drives, described through NVML (``pip install 'lens-telemetry[nvml]'``)."""

from __future__ import annotations

import logging
import os

from lens_core import semconv

from otel_bridge.resources.local import cuda_visible_devices

__all__ = ["detect_gpu"]

_logger = logging.getLogger(__name__)


def _local_rank(environ, local_rank):
    if local_rank is not None:
        return int(local_rank)
    for name in ("LOCAL_RANK", "SLURM_LOCALID"):
        value = environ.get(name, "").strip()
        if value:
            return int(value)
    return 0


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _handle(nvml, entry):
    """(handle, physical index) for one ``CUDA_VISIBLE_DEVICES`` entry or NVML index."""
    if entry.isascii() and entry.isdigit():
        handle = nvml.nvmlDeviceGetHandleByIndex(int(entry))
        return handle, int(entry)
    handle = nvml.nvmlDeviceGetHandleByUUID(entry)
    # A MIG instance has no index of its own: report its parent GPU's.
    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle) if entry.startswith("MIG-") else handle
    return handle, int(nvml.nvmlDeviceGetIndex(parent))


def _describe(nvml, entry):
    nvml.nvmlInit()
    try:
        handle, index = _handle(nvml, entry)
        return {
            semconv.NV_GPU_INDEX: index,
            semconv.NV_GPU_UUID: _text(nvml.nvmlDeviceGetUUID(handle)),
            semconv.NV_GPU_NAME: _text(nvml.nvmlDeviceGetName(handle)),
            semconv.NV_GPU_MEMORY_TOTAL: int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
        }
    finally:
        nvml.nvmlShutdown()


def detect_gpu(environ=None, local_rank=None, nvml=None) -> dict:
    """Index, UUID, name and total memory (bytes) of this process's GPU; ``{}`` on any failure.

    The device is ``CUDA_VISIBLE_DEVICES[local_rank]`` (the only entry when there is one,
    as when SLURM binds one GPU per task), or physical index ``local_rank`` when the
    variable is unset. ``local_rank`` defaults to ``LOCAL_RANK``, then ``SLURM_LOCALID``,
    then 0. Entries may be indices or full ``GPU-``/``MIG-`` UUIDs. Indices are taken as
    NVML's (PCI bus order), which is CUDA's order when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or
    the GPUs are identical. ``nvml`` replaces the ``pynvml`` module (for tests). Never raises.
    """
    environ = os.environ if environ is None else environ
    try:
        if nvml is None:
            import pynvml as nvml
        rank = _local_rank(environ, local_rank)
        devices = cuda_visible_devices(environ)
        if devices is not None and len(devices) == 1:
            entry = devices[0]
        elif rank < 0 or (devices is not None and rank >= len(devices)):
            raise IndexError(f"local rank {rank} has no device in CUDA_VISIBLE_DEVICES={devices}")
        else:
            entry = str(rank) if devices is None else devices[rank]
        return _describe(nvml, entry)
    except ImportError as exc:
        _logger.debug("lens: no GPU resource attributes (pip install 'lens-telemetry[nvml]'): %r", exc)
    except Exception as exc:  # best effort: no driver, bad index, NVML errors of any kind
        _logger.debug("lens: no GPU resource attributes: %r", exc)
    return {}
