"""TOTAL spans from a tight loop to an OTLP/HTTP collector (OTEL_EXPORTER_OTLP_ENDPOINT) that is
slow or goes away mid-run; PAUSE_AT > 0 prints "paused" after that many spans and waits for a
line on stdin (the test stops and restarts the collector meanwhile). SHUTDOWN_MS (default
120000) is shutdown's timeout; FLUSH_EVERY (default 0: never) flushes after every that many
spans (10 ms timeout), so the spans go out in batches of that size. Prints the loop's seconds and shutdown's result."""

import sys
import time

from common import setup, span

total, pause_at = int(sys.argv[1]), int(sys.argv[2])
shutdown_ms = int(sys.argv[3]) if len(sys.argv) > 3 else 120_000
flush_every = int(sys.argv[4]) if len(sys.argv) > 4 else 0
handle = setup()
started = time.perf_counter()
for i in range(total):
    if i == pause_at:
        elapsed = time.perf_counter() - started
        print("paused", flush=True)
        sys.stdin.readline()
        started = time.perf_counter() - elapsed
    with span("g", "tight"):
        pass
    if flush_every and (i + 1) % flush_every == 0:
        handle.force_flush(timeout_ms=10)
elapsed = time.perf_counter() - started
print(f"{elapsed:.4f}", handle.shutdown(timeout_ms=shutdown_ms), flush=True)
