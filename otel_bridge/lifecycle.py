"""The bridge's door to the lifecycle registry: fork and exit participants in a declared order.

The registry itself is ``lens_core._lifecycle`` (stdlib, so lens_core's own locks register
with it too and one order covers both packages); this module adds what only the bridge
needs: running the exit participants from multiprocessing's exit path, which a
multiprocessing child takes instead of ``atexit`` (it ends through ``os._exit``).
The order is listed in docs/architecture.md ("Lifecycle").
"""

from __future__ import annotations

from lens_core._lifecycle import EXIT_ORDER, FORK_ORDER, on_exit, on_fork, participants, run_exit

__all__ = ["EXIT_ORDER", "FORK_ORDER", "exit_through_multiprocessing", "on_exit", "on_fork", "participants",
           "run_exit"]

#: multiprocessing's finalizer priority for the exit participants: above the default (0),
#: so telemetry flushes before multiprocessing's own queues and pools are torn down.
MULTIPROCESSING_EXIT_PRIORITY = 100

_finalizer_pid = None


def exit_through_multiprocessing() -> None:
    """In a multiprocessing child, also run the exit participants from multiprocessing's
    exit path (its finalizers), once per process; ``atexit`` does not run there."""
    global _finalizer_pid
    import os

    if _finalizer_pid == os.getpid():
        return
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, run_exit, exitpriority=MULTIPROCESSING_EXIT_PRIORITY)
    _finalizer_pid = os.getpid()
