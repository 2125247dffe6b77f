"""Ctrl-C and a closed stdout for the ``lens`` commands: one line and status 130, or a quiet end; no database left."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import TypeVar

from lens_core._console import forget_on_interrupt, interrupts_watched, remove_on_interrupt
from lens_core.exitcodes import EXIT_OK

__all__ = ["interrupt_guard", "quiet_broken_pipe", "stdout_closed"]

_T = TypeVar("_T")


@contextlib.contextmanager
def interrupt_guard(prog: str) -> Iterator[str]:
    """Run a command that keeps a database in the directory this yields; Ctrl-C ends it at once.

    Ctrl-C is watched as :func:`lens_core._console.watch_interrupts` says (the ``lens``
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


def stdout_closed() -> None:
    """Point stdout at /dev/null after the reader closed the pipe, so the flush at exit
    raises no second ``BrokenPipeError`` (Python prints that one as "Exception ignored")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture): nothing to flush
        pass
    finally:
        os.close(devnull)


def quiet_broken_pipe(command: Callable[[], int]) -> int:
    """Run ``command`` and flush stdout; a reader that closed the pipe early (``| head -1``)
    ends it quietly with status 0, as if the output had been read to the end."""
    try:
        try:
            status = command()
        except SystemExit:  # argparse's --help, --version and usage errors end here: their text too
            sys.stdout.flush()
            raise
    except BrokenPipeError:
        stdout_closed()
        return EXIT_OK
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # what was left in the buffer: the command's own status stands
        stdout_closed()
    return status
