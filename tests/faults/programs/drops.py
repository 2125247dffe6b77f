"""More spans than the buffer holds, from THREADS threads: TOTAL spans with a small buffer and a
slow sink, so most are dropped; the loss record must count them exactly."""

import sys
import threading

from common import setup, span

total, threads = int(sys.argv[1]), int(sys.argv[2])
handle = setup(buffer_mb=1)
per = total // threads


def loop():
    for _ in range(per):
        with span("g", "flood"):
            pass


workers = [threading.Thread(target=loop) for _ in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(handle.shutdown(timeout_ms=60_000), flush=True)
