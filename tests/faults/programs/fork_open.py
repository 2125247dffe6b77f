"""Fork with spans open (a Lens span, a raw OpenTelemetry span) and spans queued: the child records
CHILD_SPANS (argv[1]) spans of its own and shuts down; its output must hold only those (none of the parent's open or
queued spans, no counts of them). Prints the child's exit status and the parent's shutdown result."""

import os
import sys

from common import setup, span

handle = setup()
tracer = handle.tracer
for _ in range(500):  # queued, not yet exported, at the fork
    with span("g", "parent.queued"):
        pass
outer = span("g", "parent.open")
outer.__enter__()
raw = tracer.start_span("parent.raw.open")
pid = os.fork()
if pid == 0:
    for _ in range(int(sys.argv[1])):
        with span("g", "child"):
            pass
    os._exit(0 if handle.shutdown(timeout_ms=10_000) else 3)
_, status = os.waitpid(pid, 0)
raw.end()
outer.__exit__(None, None, None)
print(os.waitstatus_to_exitcode(status), handle.shutdown(timeout_ms=10_000), flush=True)
