"""Ctrl-C and a closed stdout for the ``lens`` commands: one line and status 130, or a quiet end; no database left."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

# the closed-pipe helpers live with the watch, in lens_core (the lens command reaches them there)
from lens_core.interrupts import (
    forget_on_interrupt,
    interrupts_watched,
    quiet_broken_pipe,
    remove_on_interrupt,
    stdout_closed,
)

__all__ = ["interrupt_guard", "quiet_broken_pipe", "stdout_closed"]

@contextlib.contextmanager
def interrupt_guard(prog: str) -> Iterator[str]:
    """Run a command that keeps a database in the directory this yields; Ctrl-C ends it at once.

    Ctrl-C is watched as :func:`lens_core.interrupts.watch_interrupts` says (the ``lens``
    console script's watch when it runs, else one for the block): ``<prog>: interrupted`` on
    stderr, the directory removed, status 130. Outside the main thread (or where SIGINT is
    ignored) only the directory is made and removed.
    """
    directory = tempfile.mkdtemp(prefix="lens-report-")
    remove_on_interrupt(directory)
    try:
        with interrupts_watched(prog):
            yield directory
    finally:
        forget_on_interrupt(directory)
        # the engine's threads may still create a spill file while the tree is removed: try again
        for _ in range(3):
            shutil.rmtree(directory, ignore_errors=True)
            if not os.path.exists(directory):
                break
