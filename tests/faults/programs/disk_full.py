"""The disk fills, then frees: a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) lets the trace
file grow to LIMIT bytes; spans recorded while it is full fail to write; then the limit is
lifted and more spans go out. Counted exported must equal what is readable."""

import resource
import signal
import sys
import time

from common import setup, span

limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
handle = setup()
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
for batch in range(10):
    for _ in range(300):
        with span("g", "while-full", batch=batch, text="y" * 40):
            pass
    handle.force_flush()
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # freed
for batch in range(5):
    for _ in range(300):
        with span("g", "after", batch=batch):
            pass
    handle.force_flush()
ok = handle.shutdown()
counts = handle.pipeline.counts()
print(counts.created, counts.exported, counts.failed, ok, flush=True)
