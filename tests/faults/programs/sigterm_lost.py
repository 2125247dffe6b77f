"""A spawned multiprocessing child records SPANS spans, says it is ready, then blocks in a C
call that retries EINTR itself (libc ``system("sleep 8")``), so SIGTERM's Python handler
cannot run until it returns: as a pool worker blocked on its task queue's semaphore when the
signal lands just before the wait. The parent terminates it; prints its exit code and how
long it took to end."""

import ctypes
import multiprocessing
import os
import sys
import time

from common import setup, span


def child(n, ready):
    setup()
    for _ in range(n):
        with span("g", "child"):
            pass
    ready.set()
    for fd in os.listdir("/proc/self/fd"):  # the shell must not hold the parent's sentinel open
        try:
            os.set_inheritable(int(fd), False)
        except OSError:
            pass
    ctypes.CDLL(None).system(b"sleep 8")


if __name__ == "__main__":
    n = int(sys.argv[1])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    process = ctx.Process(target=child, args=(n, ready))
    process.start()
    assert ready.wait(60)
    time.sleep(0.3)  # inside system() by now
    started = time.monotonic()
    process.terminate()
    process.join(20)
    print(process.exitcode, round(time.monotonic() - started, 2), flush=True)
