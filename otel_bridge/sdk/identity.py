"""Who is exporting: the lens version, the process's service.instance.id, seed-independent ids (stdlib)."""

from __future__ import annotations

import os
import random

from otel_bridge.lifecycle import on_fork

__all__ = ["SeedIndependentIdGenerator", "instance_id", "lens_version", "process_tag"]


_version = None  # found once per process


def lens_version() -> str:
    """The lens version: from the source tree's pyproject.toml when lens runs from one (a
    checkout on PYTHONPATH, an editable install: the tree, not what was installed before,
    is what runs), else from the installed package's metadata; "0+unknown" only when
    neither says."""
    global _version
    if _version is None:
        _version = _source_tree_version() or _installed_version() or "0+unknown"
    return _version


def _installed_version():
    from importlib import metadata

    try:
        return metadata.version("lens-telemetry")
    except metadata.PackageNotFoundError:
        return None


def _source_tree_version():
    """``[project] version`` of the pyproject.toml beside the package, when it is lens's."""
    from pathlib import Path

    try:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # an installed package: no pyproject.toml beside it
        return None
    table, fields = None, {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            table = line
        elif table == "[project]" and "=" in line:
            key, _, value = line.partition("=")
            if key.strip() in ("name", "version"):
                fields[key.strip()] = value.strip().strip("\"'")
    return fields.get("version") if fields.get("name") == "lens-telemetry" else None


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


_tags: dict = {}  # pid -> process_tag (a forked child computes its own)


def process_tag(pid: int = None) -> str:
    """Eight hex digits that tell apart processes sharing a host name and a pid: a CRC of
    the kernel's boot id, the pid namespace (its inode: containers on one host each have
    their own) and the process's start time (clock ticks since boot, /proc/<pid>/stat), so a
    pid reused later, or the same pid in two containers, gets another tag. Where /proc does
    not tell (not Linux), eight random hex digits per process."""
    pid = os.getpid() if pid is None else pid
    tag = _tags.get(pid)
    if tag is None:
        import zlib

        # /proc/self, not /proc/<pid>: in a pid namespace whose /proc is the host's, the pid
        # this process sees (say 1) names another process there.
        proc = "/proc/self" if pid == os.getpid() else f"/proc/{pid}"
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
                boot = fh.read().strip()
            namespace = os.stat(f"{proc}/ns/pid").st_ino
            with open(f"{proc}/stat", "rb") as fh:
                # the fields after the command name, which may hold spaces and parentheses
                started = fh.read().rsplit(b")", 1)[1].split()[19]
            tag = f"{zlib.crc32(b'%s/%d/%s' % (boot, namespace, started)):08x}"
        except (OSError, IndexError):
            tag = os.urandom(4).hex()
        _tags.clear()  # only this process's (and a fork's own) is ever asked for again
        _tags[pid] = tag
    return tag


def instance_id(run_id: str, rank, pid: int = None) -> str:
    """``service.instance.id``: unique per process (``<run>-rank<R>-<host>-<pid>-<tag>``, the
    tag from process_tag), so a Ray driver and its rank-0 actor, a forked child and its
    parent, or two containers on one host whose processes have the same pid never share one."""
    import socket

    pid = os.getpid() if pid is None else pid
    return f"{run_id}-rank{rank}-{socket.gethostname()}-{pid}-{process_tag(pid)}"
