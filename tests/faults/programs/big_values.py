"""SPANS spans, each with a fresh 100 KB attribute value, to a collector that accepts the
connection and never answers (OTEL_EXPORTER_OTLP_ENDPOINT): memory must stay within
LENS_BUFFER_MB (plus what the process needs anyway). Prints the RSS growth in MB (peak during
the loop minus the baseline after setup) and the loss record's dropped count."""

import os
import sys

from common import setup, span

SIZE = 100_000


def rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


handle = setup()
for _ in range(50):  # warm up: the exporter, the encoders and the allocator in place
    with span("g", "warm", v="w" * 100):
        pass
handle.force_flush(1000)
base = rss_mb()
peak = base
for i in range(int(sys.argv[1])):
    value = os.urandom(SIZE // 2).hex()  # a new 100 KB text each time (not one shared object)
    with span("g", "big", v=value):
        pass
    del value
    if i % 50 == 0:
        peak = max(peak, rss_mb())
peak = max(peak, rss_mb())
counts = handle.pipeline.counts()
print(f"{peak - base:.1f}", counts.dropped, counts.created, flush=True)
os._exit(0)  # the collector never answers: no shutdown to wait for
