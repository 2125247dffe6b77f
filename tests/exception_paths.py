"""Exceptions whose __str__/__repr__ fail, and every recording path they must pass through unchanged.

The paths open spans of groups ``g`` and ``efficiency``: the caller registers and enables them.
"""

import asyncio

import lens_core


class StrRaises(Exception):
    """Its __str__ fails (a lazy message built from state that is gone)."""

    def __str__(self):
        raise ValueError("__str__ failed")


class BothRaise(Exception):
    """Neither __str__ nor __repr__ works."""

    def __str__(self):
        raise RuntimeError("__str__ failed")

    def __repr__(self):
        raise RuntimeError("__repr__ failed")


class StrNotText(Exception):
    """__str__ returns no str (str() raises TypeError)."""

    def __str__(self):
        return 42


class KeyboardStyle(BaseException):
    """Not an Exception subclass, and unprintable."""

    def __str__(self):
        raise ValueError("no")


UNPRINTABLE = [StrRaises, BothRaise, StrNotText, KeyboardStyle]


def _run(coroutine):
    # Not asyncio.run: its Runner installs a SIGINT handler holding the main task, and
    # on close repr()s that handler, so an exception whose __repr__ raises breaks
    # asyncio.run itself (and every later call in the process), Lens or not.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def _with(cm, error):
    with cm:
        raise error


def _trace_fn_sync(error):
    @lens_core.trace_fn("g", "fn.sync")
    def work():
        raise error

    work()


def _trace_fn_coroutine(error):
    @lens_core.trace_fn("g", "fn.coroutine")
    async def work():
        await asyncio.sleep(0)
        raise error

    _run(work())


def _trace_fn_generator(error):
    @lens_core.trace_fn("g", "fn.generator")
    def work():
        yield 1
        raise error

    list(work())


def _trace_fn_async_generator(error):
    @lens_core.trace_fn("g", "fn.async_generator")
    async def work():
        yield 1
        raise error

    async def drain():
        return [item async for item in work()]

    _run(drain())


def _start_efficiency_span_ended_with_it(error):
    wait = lens_core.start_efficiency_span("idle/wait")
    try:
        raise error
    except BaseException as exc:
        wait.end(exc)
        raise


def _idle_wait(error):
    wait = lens_core.IdleWait("idle/poll")
    try:
        wait.starved()
        raise error
    finally:
        wait.done()


PATHS = {
    "managed_span": (lambda e: _with(lens_core.managed_span("g", "managed"), e), "managed"),
    "umbrella_span": (lambda e: _with(lens_core.umbrella_span("g", "umbrella"), e), "umbrella"),
    "span_cm": (lambda e: _with(lens_core.span_cm("free"), e), "free"),
    "trace_fn": (_trace_fn_sync, "fn.sync"),
    "trace_fn coroutine": (_trace_fn_coroutine, "fn.coroutine"),
    "trace_fn generator": (_trace_fn_generator, "fn.generator"),
    "trace_fn async generator": (_trace_fn_async_generator, "fn.async_generator"),
    "efficiency_span": (lambda e: _with(lens_core.efficiency_span("idle/cm"), e), "rl.idle.cm"),
    "start_efficiency_span": (_start_efficiency_span_ended_with_it, "rl.idle.wait"),
    "deferred_child_span": (lambda e: _with(lens_core.deferred_child_span("g", "deferred", {}), e), "deferred"),
    "IdleWait": (_idle_wait, "rl.idle.poll"),
}
"""Path name -> (run(error): raise ``error`` inside that path, the name of its span)."""
RECORDS_NO_FAILURE = {"IdleWait"}
"""Paths whose span ends without recording the failure (a poll-loop wait only ends)."""
