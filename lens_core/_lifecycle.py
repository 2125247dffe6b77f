"""One registry of fork and exit participants, run in a declared order (stdlib; otel_bridge.lifecycle is its door).

Python runs ``os.register_at_fork`` hooks in registration order (``before`` in reverse) and
``atexit`` hooks last-registered-first, so a process's fork and exit behaviour used to
depend on which module happened to be imported first. Here every participant has a name
from :data:`FORK_ORDER` / :data:`EXIT_ORDER`, and the one hook this module gives Python
runs them in that order: ``after_in_child`` and ``after_in_parent`` from the first name to
the last (lower floors first: a participant may use what an earlier one has reset), and
``before`` from the last to the first (the export pipeline quiesces before anything it
uses is touched). Several participants may share a name (one per pipeline, per recorder):
they run in registration order. A participant tied to an object (``owner``) is held weakly
and dropped when the object is gone.

A participant that raises is reported on stderr and the others still run, as Python does
for its own fork hooks: a fork or an exit must never fail because of telemetry.
"""

from __future__ import annotations

import _thread
import os
import sys
import weakref

__all__ = ["EXIT_ORDER", "FORK_ORDER", "on_exit", "on_fork", "participants", "run_exit"]

#: Fork participants, in the order their ``after_in_child`` / ``after_in_parent`` run
#: (``before`` runs in reverse). docs/architecture.md lists what each one does.
FORK_ORDER = (
    "lens_core.log",             # the warning lock: every later participant may warn
    "lens_core.console",         # the lens command's Ctrl-C watch: its thread and pipe are the parent's
    "lens_core.registry",        # the span registry's lock
    "lens_core.state",           # the gate's spec lock
    "lens_core.efficiency",      # the lock over the unregistered efficiency categories
    "lens_core.recorder",        # the native recorder: its queue and open-span ledger are the parent's
    "lens_core.device",          # device timing: the parent's events and anchors are never used
    "otel_bridge.handle",        # the setup lock and the active handle's lock
    "otel_bridge.signals",       # the lost-signal watch: its pipe and thread are the parent's
    "otel_bridge.ids",           # trace/span id generators reseeded
    "otel_bridge.file_writers",  # file exporters: fresh locks, no inherited descriptor
    "otel_bridge.instruments",   # the instrument cache: the parent's meters
    "otel_bridge.pipeline",      # the span pipeline: a sink and export thread of the child's own (last:
                                 # it uses the recorder, the writers and the ids reset above)
)

#: Exit participants, in the order they run at interpreter exit (and, in a multiprocessing
#: child, from multiprocessing's exit path: otel_bridge.lifecycle.exit_through_multiprocessing).
EXIT_ORDER = (
    "otel_bridge.handle",        # flush and shut down within the shutdown deadline
)

_FORK_RANK = {name: i for i, name in enumerate(FORK_ORDER)}
_EXIT_RANK = {name: i for i, name in enumerate(EXIT_ORDER)}

# Copy-on-write tuples: registration (under the lock) swaps in a new tuple, the hooks read
# one reference, so a fork or an exit never waits on a registering thread.
_lock = _thread.allocate_lock()
_fork: tuple = ()   # (rank, seq, name, before, after_in_parent, after_in_child, owner ref or None)
_exit: tuple = ()   # (rank, seq, name, fn, owner ref or None)
_seq = 0
_exit_hooked = False
_exit_done_pid = None  # the pid whose exit participants have run (at most once per process)


def _check(name: str, rank: dict, table: str) -> int:
    found = rank.get(name)
    if found is None:
        raise ValueError(f"unknown lifecycle participant {name!r}: declare it in lens_core._lifecycle.{table} "
                         f"(known: {', '.join(rank)})")
    return found


def on_fork(name: str, *, before=None, after_in_parent=None, after_in_child=None, owner=None) -> None:
    """Run these callables around every ``os.fork()``, at ``name``'s place in :data:`FORK_ORDER`.

    Without ``owner`` each callable takes no argument. With ``owner`` each is called with
    the owner (``after_in_child=Recorder._after_fork``), which is held weakly: the
    participant goes away with it. Raises ValueError for a name not in FORK_ORDER.
    """
    global _fork, _seq
    rank = _check(name, _FORK_RANK, "FORK_ORDER")
    ref = weakref.ref(owner) if owner is not None else None
    with _lock:
        _seq += 1
        _fork = tuple(sorted(_live(_fork, 6) + ((rank, _seq, name, before, after_in_parent, after_in_child, ref),),
                             key=_order))


def on_exit(name: str, fn, *, owner=None) -> None:
    """Run ``fn`` once at interpreter exit, at ``name``'s place in :data:`EXIT_ORDER`
    (``fn(owner)`` when ``owner`` is given; held weakly). The exit hook is given to
    ``atexit`` on the first call, so it runs before the exit hooks registered earlier (as
    one registered at that moment would). Raises ValueError for a name not in EXIT_ORDER."""
    global _exit, _seq, _exit_hooked
    rank = _check(name, _EXIT_RANK, "EXIT_ORDER")
    ref = weakref.ref(owner) if owner is not None else None
    with _lock:
        _seq += 1
        _exit = tuple(sorted(_live(_exit, 4) + ((rank, _seq, name, fn, ref),), key=_order))
        hook, _exit_hooked = not _exit_hooked, True
    if hook:
        import atexit

        atexit.register(run_exit)


def _order(entry):
    return entry[0], entry[1]


def _live(entries: tuple, ref_at: int) -> tuple:
    return tuple(e for e in entries if e[ref_at] is None or e[ref_at]() is not None)


def participants() -> dict:
    """{"fork": [names in run order], "exit": [...]} of the live participants (for tests and docs)."""
    return {"fork": [e[2] for e in _live(_fork, 6)], "exit": [e[2] for e in _live(_exit, 4)]}


def _call(name: str, fn, ref) -> None:
    if fn is None:
        return
    try:
        if ref is None:
            fn()
        else:
            owner = ref()
            if owner is not None:
                fn(owner)
    except Exception as exc:  # never fail a fork or an exit; say which participant broke
        try:
            sys.stderr.write(f"lens: lifecycle participant {name!r} failed: {type(exc).__name__}: {exc}\n")
        except Exception:
            pass


def _before_fork() -> None:
    for rank, seq, name, before, _, _, ref in reversed(_fork):
        _call(name, before, ref)


def _after_fork_in_parent() -> None:
    for rank, seq, name, _, after, _, ref in _fork:
        _call(name, after, ref)


def _after_fork_in_child() -> None:
    global _lock
    _lock = _thread.allocate_lock()  # a parent thread may have been registering at the fork
    for rank, seq, name, _, _, after, ref in _fork:
        _call(name, after, ref)


def run_exit() -> None:
    """Run the exit participants in :data:`EXIT_ORDER` (once per process: atexit and
    multiprocessing's exit path may both reach here)."""
    global _exit_done_pid
    pid = os.getpid()
    if _exit_done_pid == pid:
        return
    _exit_done_pid = pid
    for rank, seq, name, fn, ref in _exit:
        _call(name, fn, ref)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
