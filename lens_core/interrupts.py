"""Ctrl-C and a closed stdout for the ``lens`` commands (stdlib only): status 130 and one line, or a quiet end; no temporary files left."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import threading

from . import _lifecycle
from .exitcodes import EXIT_INTERRUPTED, EXIT_OK

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import Any, Callable, Dict, Sequence

__all__ = ["forget_in_child", "forget_on_interrupt", "interrupts_watched", "program_name", "quiet_broken_pipe",
           "remove_on_interrupt", "stdout_closed", "stop_watching", "watch_interrupts"]

_COMMAND = re.compile(r"[a-z][a-z0-9-]{0,31}")
_paths: Dict[str, None] = {}  # directories to remove on Ctrl-C (a dict keeps the order they came in)
_watch: Dict[str, Any] = {}  # the watch this process runs: pipe ends, what it replaced, the message
_once = threading.Lock()  # the first of the handler and the watching thread to act ends the process


def program_name(argv: Sequence[str]) -> str:
    """``lens`` and the subcommand ``argv`` names (``lens report``), as its messages start."""
    command = next((arg for arg in argv if not arg.startswith("-")), "")
    return f"lens {command}" if _COMMAND.fullmatch(command) else "lens"


def remove_on_interrupt(path: str) -> None:
    """Have Ctrl-C remove the directory ``path`` (a database, a spill folder) before the process ends."""
    _paths[path] = None


def forget_on_interrupt(path: str) -> None:
    """Undo :func:`remove_on_interrupt` (the command removed ``path`` itself)."""
    _paths.pop(path, None)


def _remove_all() -> None:
    for path in list(_paths):
        # the report engine's threads may still create a spill file while the tree goes: try again
        for _ in range(3):
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                break


def _interrupted(*_: object) -> None:
    # both the Python handler (main thread, between bytecodes) and the watching thread (while the
    # main thread is in C: an engine query, a torch op, a join) call this: one of them acts
    if os.getpid() != _watch.get("pid", os.getpid()):  # a forked child's own Ctrl-C: Python's default
        raise KeyboardInterrupt
    if not _once.acquire(blocking=False):
        return
    _remove_all()
    # the line last, right before the exit: the main thread runs on while the folders go, and a
    # line it writes then ("wrote page.html") must not follow "interrupted"
    try:
        os.write(2, _watch.get("message", b"lens: interrupted\n"))
    except OSError:  # stderr closed too: the status still says it
        pass
    os._exit(EXIT_INTERRUPTED)  # nothing else may run: exit hooks, the engine's threads


def watch_interrupts(prog: str) -> bool:
    """From now on Ctrl-C (SIGINT) writes ``<prog>: interrupted`` to stderr, removes the
    directories given to :func:`remove_on_interrupt` and ends the process with status 130,
    whatever the process is doing: importing, in C code, in a thread's join, in its exit hooks.

    A ``KeyboardInterrupt`` raised in Python is not enough: while the main thread waits in a C
    call the interrupt surfaces late or as that library's error ("Query interrupted"), and
    closing a database under its running threads aborts the process. So the signal is also
    watched through the signal wakeup fd, by a thread that sees it at once (a wakeup fd set
    before, by asyncio or Lens's lost-signal watch, still gets every signal's byte). Call on
    the main thread; False where the watch did not start (another thread, SIGINT ignored as in
    a background job, a watch already running). :func:`stop_watching` ends it.

    A process forked under the watch shares its wakeup pipe until :func:`forget_in_child` runs
    in it (for the lifecycle registry to run as a fork participant): till then a SIGINT sent to the
    child alone ends the parent too. No ``lens`` command forks.
    """
    if _watch or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return False
    _watch.update(message=f"{prog}: interrupted\n".encode(), pid=os.getpid())
    # the handler first: a Ctrl-C from here on is one line, even before the thread runs
    _watch["handler"] = signal.signal(signal.SIGINT, _interrupted)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (OSError, ValueError):  # no wakeup fd here: the Python handler alone acts
        os.close(read_fd)
        os.close(write_fd)
        return True
    _watch.update(read=read_fd, write=write_fd, previous_fd=previous_fd)

    def watch() -> None:
        while True:  # other signals write to the fd too: only SIGINT ends the process
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:  # stop_watching closed the pipe
                return
            if previous_fd >= 0:
                try:
                    os.write(previous_fd, data)
                except OSError:
                    pass
            if signal.SIGINT in data:
                _interrupted()

    _watch["thread"] = threading.Thread(target=watch, name="lens-interrupt-watch", daemon=True)
    _watch["thread"].start()
    return True


def stop_watching() -> None:
    """End the watch :func:`watch_interrupts` started: the SIGINT handler and wakeup fd it replaced come back."""
    if not _watch:
        return
    if "write" in _watch:
        signal.set_wakeup_fd(_watch["previous_fd"])
    signal.signal(signal.SIGINT, _watch["handler"])
    if "write" in _watch:
        os.close(_watch["write"])  # the thread's read returns empty and it ends
        _watch["thread"].join(1.0)
        os.close(_watch["read"])
    _watch.clear()


class interrupts_watched:  # noqa: N801  used as a function: with interrupts_watched(prog): ...
    """Watch Ctrl-C (:func:`watch_interrupts`) inside a ``with`` block, unless a watch already runs
    (the ``lens`` console script's, which lasts until the process ends)."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.started = False

    def __enter__(self) -> bool:
        self.started = watch_interrupts(self.prog)
        return self.started

    def __exit__(self, *exc: object) -> None:
        if self.started:
            stop_watching()


def forget_in_child() -> None:
    """In a forked child: drop the parent's watch (its thread did not survive the fork), so the
    child's Ctrl-C is Python's default again and its signals no longer reach the parent's pipe."""
    if not _watch:
        return
    try:
        if "write" in _watch and signal.set_wakeup_fd(-1) != _watch["write"]:
            signal.set_wakeup_fd(_watch["previous_fd"])
        signal.signal(signal.SIGINT, _watch["handler"])
    except (OSError, ValueError):  # forked from another thread than the main one
        pass
    for key in ("read", "write"):
        if key in _watch:
            try:
                os.close(_watch[key])
            except OSError:
                pass
    _watch.clear()
    _paths.clear()


_lifecycle.on_fork("lens_core.console", after_in_child=forget_in_child)


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
    ends it quietly with status 0, as if the output had been read to the end. A pipe found
    closed only by the last flush leaves the command's own status as it was."""
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
