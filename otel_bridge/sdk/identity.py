"""Who is exporting: the lens version, the process's service.instance.id, seed-independent ids (stdlib)."""

from __future__ import annotations

import os
import random

from otel_bridge.lifecycle import on_fork

__all__ = ["SeedIndependentIdGenerator", "instance_id", "lens_version"]


def lens_version() -> str:
    """The installed lens package version ("0+unknown" when run from a bare checkout)."""
    from importlib import metadata

    try:
        return metadata.version("lens-telemetry")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class SeedIndependentIdGenerator:
    """Trace and span ids from a private generator seeded by the OS, not the ``random``
    module: ranks that all call ``random.seed(1234)`` still get distinct ids. Reseeded in
    forked children. Ids are uniformly random, so the W3C random-trace-id flag stays on."""

    def __init__(self):
        self._reseed()
        on_fork("otel_bridge.ids", after_in_child=SeedIndependentIdGenerator._reseed, owner=self)

    def _reseed(self):
        self._random = random.Random(os.urandom(32))

    def generate_span_id(self) -> int:
        """A non-zero 64-bit span id."""
        span_id = 0
        while span_id == 0:
            span_id = self._random.getrandbits(64)
        return span_id

    def generate_trace_id(self) -> int:
        """A non-zero 128-bit trace id."""
        trace_id = 0
        while trace_id == 0:
            trace_id = self._random.getrandbits(128)
        return trace_id

    def is_trace_id_random(self) -> bool:
        """All 128 bits are random."""
        return True


def instance_id(run_id: str, rank, pid: int = None) -> str:
    """``service.instance.id``: unique per process (``<run>-rank<R>-<host>-<pid>``), so a Ray
    driver and its rank-0 actor, or a forked child and its parent, never share one."""
    import socket

    return f"{run_id}-rank{rank}-{socket.gethostname()}-{os.getpid() if pid is None else pid}"
