"""Spans started and never ended: COUNT of them (each with a few attributes), then shutdown;
prints the RSS growth in MB."""

import sys

import lens_core
from common import setup


def rss_mb():
    with open("/proc/self/statm") as fh:
        import os

        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


handle = setup()
backend = lens_core.installed_backend()
for _ in range(1000):  # warm up allocators
    with lens_core.managed_span("g", "warm"):
        pass
before = rss_mb()
for i in range(int(sys.argv[1])):
    # started and dropped on the floor: __enter__ without __exit__
    lens_core.managed_span("g", "leaked", i=i, payload="x" * 32).__enter__()
    if i % 1000 == 999:
        backend.release  # keep the loop honest: nothing here ends the spans
grown = rss_mb() - before
print(f"{grown:.1f}", handle.shutdown(), flush=True)
