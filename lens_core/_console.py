"""The ``lens`` command's first code: from here on Ctrl-C exits 130 with one line and removes the command's temporary files."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import sys
import threading

from .exitcodes import EXIT_INTERRUPTED

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import Any, Dict, List, Optional, Sequence

__all__ = ["forget_on_interrupt", "interrupts_watched", "main", "program_name", "remove_on_interrupt",
           "stop_watching", "watch_interrupts"]

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
    if not _once.acquire(blocking=False):
        return
    try:
        os.write(2, _watch.get("message", b"lens: interrupted\n"))
    except OSError:  # stderr closed too: the status still says it
        pass
    _remove_all()
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
    """
    if _watch or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return False
    _watch["message"] = f"{prog}: interrupted\n".encode()
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


def _forget_in_child() -> None:
    # a forked child has no watching thread: its Ctrl-C is its own again, and its directories are its own
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


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def main(argv: Optional[List[str]] = None) -> int:
    """The ``lens`` console script: watch Ctrl-C first, then import the command (which takes
    a while: the report engine, the OpenTelemetry SDK) and run it. The watch lasts while the
    command's exit hooks run; a Ctrl-C during the interpreter's teardown after them is ignored.

    What no code of Lens can cover is the interpreter's start before this function runs (site,
    the console script's own imports, lens_core's package): a Ctrl-C then ends the process as
    Python's default does (killed by SIGINT, or a ``KeyboardInterrupt`` traceback).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if watch_interrupts(program_name(args)):
        # exit hooks run last-registered first: this one runs after the command's own (the SDK's
        # flush, watched like the rest). What follows is the interpreter's teardown, which puts
        # SIGINT back to its default action and can take a second after torch: a Ctrl-C then would
        # kill the process silently. The command is over, so its status stands instead.
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
    from otel_bridge.cli import main as run

    return run(args)
