"""One rank of a job: STEPS steps of SPANS spans each, flushed; then shut down, or (with
``hang``) print "flushed" and wait to be killed."""

import sys
import time

from common import setup, span

steps, spans, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
handle = setup()
for step in range(1, steps + 1):
    with span("g", "rl.grpo.step", **{"rl.iteration": step}):
        for _ in range(spans - 1):
            with span("g", "work", **{"rl.bucket": "productive"}):
                pass
handle.force_flush(timeout_ms=10_000)
if mode == "hang":
    print("flushed", flush=True)
    time.sleep(600)
print(handle.shutdown(timeout_ms=10_000), flush=True)
