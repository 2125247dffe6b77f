"""Fault programs (tests/faults/programs) as real processes: this checkout first on the path, the
outer run's LENS_/OTEL_ settings dropped, the implementation switches kept."""

import os
import subprocess
import sys

from child_env import without_settings
from trace_files import REPO_ROOT

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")


def child_environ(**extra) -> dict:
    """The environment of a fault program: this checkout first, no outer LENS_/OTEL_ settings."""
    env = without_settings()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GRPC_ENABLE_FORK_SUPPORT"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def program(name: str) -> str:
    """Path of a program under tests/faults/programs."""
    return os.path.join(PROGRAMS, name)


def start(name, *args, **env):
    """Popen of a fault program (text pipes)."""
    return subprocess.Popen([sys.executable, program(name), *map(str, args)], env=child_environ(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
