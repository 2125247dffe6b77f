"""Process-local resource attributes: host, pid, Python runtime and visible GPU count."""

from __future__ import annotations

import os
import socket
import sys

from lens_core import semconv

__all__ = ["cuda_visible_devices", "detect_local"]


def _is_device_entry(entry: str) -> bool:
    return (entry.isascii() and entry.isdigit()) or entry.startswith(("GPU-", "MIG-"))


def cuda_visible_devices(environ=None) -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` the CUDA runtime honours; ``None`` when unset.

    Like CUDA, the list ends at the first entry that is not a device index or a
    ``GPU-``/``MIG-`` UUID, so ``-1``, ``""`` and ``NoDevFiles`` all mean no devices.
    """
    environ = os.environ if environ is None else environ
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    devices = []
    for entry in value.split(","):
        entry = entry.strip()
        if not _is_device_entry(entry):
            break
        devices.append(entry)
    return devices


def detect_local(environ=None) -> dict:
    """Host name, pid, Python runtime, and ``nv.gpu.count`` when ``CUDA_VISIBLE_DEVICES`` is set."""
    attrs = {
        semconv.HOST_NAME: socket.gethostname(),
        semconv.PROCESS_PID: os.getpid(),
        semconv.PROCESS_RUNTIME_NAME: sys.implementation.name,
        semconv.PROCESS_RUNTIME_VERSION: "%d.%d.%d" % sys.implementation.version[:3],
    }
    devices = cuda_visible_devices(environ)
    if devices is not None:
        attrs[semconv.NV_GPU_COUNT] = len(devices)
    return attrs
