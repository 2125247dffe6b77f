"""Ctrl-C and a closed stdout for the ``lens`` commands: one line and status 130, or a quiet end; no database left."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from lens_core.exitcodes import EXIT_INTERRUPTED, EXIT_OK

__all__ = ["interrupt_guard", "quiet_broken_pipe", "stdout_closed"]

_T = TypeVar("_T")


def _remove(path: str) -> None:
    # the engine's threads may still create a spill file while the tree is removed: try again
    for _ in range(3):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return


@contextlib.contextmanager
def interrupt_guard(prog: str) -> Iterator[str]:
    """Run a command that keeps a database in the directory this yields; Ctrl-C ends it at once.

    A ``KeyboardInterrupt`` raised in Python is not enough: while the main thread waits in the
    engine's C++ code, the interrupt either surfaces as an engine error ("Query interrupted",
    "connection is busy") or aborts the process when the connection is closed under running
    worker threads. So SIGINT is also watched through the signal wakeup fd, by a thread that
    sees it whatever the main thread is doing: it writes ``<prog>: interrupted``, removes the
    directory and ends the process with status 130 (``os._exit``: nothing else may run, the
    engine's threads included). Outside the main thread (or where SIGINT is ignored) only the
    directory is made and removed.
    """
    directory = tempfile.mkdtemp(prefix="lens-report-")
    watching = (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    if not watching:
        try:
            yield directory
        finally:
            _remove(directory)
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    message = f"{prog}: interrupted\n".encode()

    def watch() -> None:
        while True:  # other signals write to the fd too: only SIGINT ends the command
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:  # the guard closed the pipe: the command is over
                return
            if signal.SIGINT in data:
                os.write(2, message)
                _remove(directory)
                os._exit(EXIT_INTERRUPTED)

    previous_handler = signal.signal(signal.SIGINT, lambda *_: None)  # the watcher acts; Python must not raise
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="lens-interrupt-watch", daemon=True)
    watcher.start()
    try:
        yield directory
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        os.close(write_fd)  # the watcher's read returns empty and it ends
        watcher.join(1.0)
        os.close(read_fd)
        _remove(directory)


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
        status = command()
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()
        return EXIT_OK
    return status
