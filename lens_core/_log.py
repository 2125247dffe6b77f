"""Warnings from lens_core, importing logging only when there is something to say."""

import _thread
import os

from . import _lifecycle

__all__ = ["call_site", "warn", "warn_once", "warn_once_at_call_site"]

_warned = set()
_lock = _thread.allocate_lock()


def warn(message: str) -> None:
    """Log ``message`` as a WARNING on the ``lens_core`` logger."""
    import logging  # deferred: logging costs more than the whole import budget allows

    logging.getLogger("lens_core").warning(message)


_LIMIT = 4096  # distinct warnings remembered; past it, new ones are suppressed (said once)


def warn_once(key, message: str) -> bool:
    """Log ``message`` once per ``key``; True if it was logged now."""
    with _lock:
        if key in _warned:
            return False
        if len(_warned) >= _LIMIT:
            full = "lens_core: too many distinct warnings"
            if full in _warned:
                return False
            key, message = full, f"lens_core: {_LIMIT} distinct warnings logged; further ones are suppressed"
        _warned.add(key)
    warn(message)
    return True


_HERE = os.path.dirname(os.path.abspath(__file__))


def call_site() -> str:
    """``file:line`` of the nearest frame outside lens_core: the instrumented code that called in.

    Only the warning paths call it (a frame walk is not for every span)."""
    import sys  # sys is always loaded; the import is a dict lookup

    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not os.path.abspath(path).startswith(_HERE + os.sep):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def warn_once_at_call_site(kind: str, message: str) -> bool:
    """Log ``message`` (prefixed with the caller's ``file:line``) once per call site and ``kind``."""
    site = call_site()
    return warn_once((kind, site), f"{site}: {message}")


def _after_fork_in_child() -> None:
    global _lock
    _lock = _thread.allocate_lock()


_lifecycle.on_fork("lens_core.log", after_in_child=_after_fork_in_child)


def _reset_for_tests() -> None:
    with _lock:
        _warned.clear()
