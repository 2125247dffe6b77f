"""One exception raised through N nested spans, each recording it: ``deep_exceptions.py N...``
prints {depth: seconds} (JSON) and the outermost span's stack trace length."""

import json
import os
import sys
import time

from common import setup, span

handle = setup(buffer_mb=256)
sys.setrecursionlimit(20_000)


def nest(n):
    with span("g", "level"):
        if n:
            nest(n - 1)
        else:
            raise ValueError("bottom")


def chained(n):
    # each level catches the exception from below and raises its own from it (a chain n long)
    with span("g", "chained"):
        if not n:
            raise ValueError("bottom")
        try:
            chained(n - 1)
        except ValueError as exc:
            raise ValueError(f"level {n}") from exc


seconds = {}
for kind, run in [(k, r) for k, r in (("nested", nest), ("chained", chained)) if k in os.environ.get("KINDS", "nested,chained")]:
    for depth in map(int, sys.argv[1:]):
        best = float("inf")
        for _ in range(3):  # the least disturbed of three (a shared machine)
            started = time.perf_counter()
            try:
                run(depth)
            except ValueError:
                pass
            best = min(best, time.perf_counter() - started)
        seconds[f"{kind} {depth}"] = best
print(json.dumps({"seconds": seconds, "shutdown": handle.shutdown()}))
