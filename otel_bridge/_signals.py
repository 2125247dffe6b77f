"""Keep the signals a process is sent on its main thread, where Python runs their handlers.

CPython runs a signal's Python handler on the main thread, when that thread runs bytecode
again. A main thread blocked in C (a multiprocessing pool worker waiting on its task queue's
semaphore) runs it only if the signal interrupts that wait, which it can miss two ways: the
kernel may deliver the signal to another thread (any thread that does not block it), or the
signal may land just before the wait begins. Lens's threads, and the SDK's and gRPC's threads
started while Lens sets up, block the signals a process is sent, closing the first way;
:func:`watch_for_lost_signal` covers the second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

from otel_bridge.lifecycle import on_fork

__all__ = ["LOST_SIGNAL_GRACE_S", "PROCESS_SIGNALS", "signals_to_main_thread", "watch_for_lost_signal"]

PROCESS_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name))
"""The signals a process is sent to stop it or poke it, which Lens's threads leave to the main thread."""


@contextlib.contextmanager
def signals_to_main_thread() -> Iterator[None]:
    """Threads started inside the block inherit a signal mask that blocks :data:`PROCESS_SIGNALS`.

    The calling thread blocks them for the duration of the block (one arriving then is
    delivered when it ends). Where the platform has no ``pthread_sigmask``, does nothing.
    """
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, PROCESS_SIGNALS)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


LOST_SIGNAL_GRACE_S = 0.5
"""How long the main thread has to start handling a signal before :func:`watch_for_lost_signal` acts."""

_watch: dict[str, int] = {}  # the wakeup pipe this process watches: "read", "write"


def watch_for_lost_signal(signum: int, handled: Callable[[], bool], on_lost: Callable[[], None]) -> bool:
    """Act on ``signum`` even when its Python handler never runs. Call on the main thread.

    CPython runs a signal's Python handler on the main thread once it runs bytecode again.
    A main thread that enters a blocking C call just after the signal arrived never gets
    there: a multiprocessing pool worker waiting for its next task on a semaphore (the
    signal lands after the GIL is released and before the wait starts) waits forever, and
    so does its parent's ``Pool.terminate()``. CPython's C-level handler writes the signal's
    number to the wakeup fd, which a thread of Lens's reads: when ``handled()`` is still
    false :data:`LOST_SIGNAL_GRACE_S` after ``signum`` arrived, it calls ``on_lost()`` on
    that thread. True when the watch started; False when the wakeup fd is taken (asyncio
    sets its own) or the platform has none. A forked child does not inherit the watch.
    """
    if _watch or threading.current_thread() is not threading.main_thread():
        return False
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (AttributeError, OSError, ValueError):
        previous = None
    if previous != -1:  # taken (or not possible here): leave it as it was
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return False
    _watch.update(read=read_fd, write=write_fd)

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signum not in data:
                continue
            deadline = time.monotonic() + LOST_SIGNAL_GRACE_S
            while time.monotonic() < deadline:
                if handled():
                    return
                time.sleep(0.01)
            if not handled():
                on_lost()
            return

    thread = threading.Thread(target=watch, name="lens-signal-watch", daemon=True)
    with signals_to_main_thread():
        thread.start()
    return True


def _forget_watch_in_child() -> None:
    # the watching thread did not survive the fork: the child's signals must not reach the
    # parent's pipe, and the child may start a watch of its own
    if not _watch:
        return
    try:
        current = signal.set_wakeup_fd(-1)
        if current != _watch["write"]:  # set by someone else since (asyncio): theirs to keep
            signal.set_wakeup_fd(current)
    except (OSError, ValueError):
        pass
    for fd in _watch.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _watch.clear()


on_fork("otel_bridge.signals", after_in_child=_forget_watch_in_child)
