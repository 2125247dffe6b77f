"""Shut down with spans left in the spool (the collector at OTEL_EXPORTER_OTLP_ENDPOINT is down),
open files that take the descriptor numbers the spool closed, then start a subprocess with a
preexec_fn (Python runs its fork hooks in that child, before the exec), the files as its stdout
and pass_fds, as Ray starts its monitor. Prints whether the files took the spool's numbers, the subprocess's line, then what a plain forked
child finds: whether its pipeline is still closed and holds no spool."""

import os
import subprocess
import sys

from common import setup, span

handle = setup()
held = {handle.pipeline.spool._dir_fd}  # a number the shutdown closes
for _ in range(200):
    with span("g", "step"):
        pass
handle.shutdown(timeout_ms=1_000)
files = [open(os.devnull, "w") for _ in range(16)]  # the lowest free numbers: the spool's among them
fds = [f.fileno() for f in files]
print("numbers reused", held <= set(fds), flush=True)
check = "import os, sys; [os.fstat(int(fd)) for fd in sys.argv[1:]]; print('subprocess ok')"
child = subprocess.run([sys.executable, "-c", check, *map(str, fds)], stdout=subprocess.PIPE, stderr=files[0],
                       pass_fds=fds, preexec_fn=lambda: None, text=True, timeout=60)
print(child.stdout.strip(), child.returncode, flush=True)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    pipeline = handle.pipeline
    os.write(write, f"child closed={pipeline.closed} spool={pipeline.spool}".encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print(os.read(read, 200).decode(), flush=True)
