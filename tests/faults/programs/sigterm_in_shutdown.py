"""SIGTERM lands while the main thread is inside shutdown(): 3,000 spans, then shutdown with a
collector that answers slowly; the signal arrives during it."""

import sys

from common import setup, span

handle = setup()
handle.install_signal_handlers()
for _ in range(int(sys.argv[1])):
    with span("g", "work"):
        pass
print("shutting down", flush=True)
result = handle.shutdown()
print(f"first shutdown returned {result}", flush=True)
