"""Fork while the parent exports over gRPC: the parent keeps recording on a thread (its export
thread busy), forks CHILDREN children that each record 50 spans and shut down; each child
must finish (no deadlock) and every span must arrive."""

import os
import sys
import threading
import time

from common import setup, span

children = int(sys.argv[1])
handle = setup()
stop = threading.Event()


def busy():
    while not stop.is_set():
        for _ in range(200):
            with span("g", "parent.busy"):
                pass
        time.sleep(0.001)


worker = threading.Thread(target=busy, name="busy")
worker.start()
pids = []
for _ in range(children):
    time.sleep(0.02)
    pid = os.fork()
    if pid == 0:
        for _ in range(50):
            with span("g", "child"):
                pass
        os._exit(0 if handle.shutdown(timeout_ms=10_000) else 3)
    pids.append(pid)
results = []
for pid in pids:
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            results.append(os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            results.append("hung")
            break
        time.sleep(0.01)
stop.set()
worker.join()
print(" ".join(map(str, results)), handle.shutdown(timeout_ms=10_000), flush=True)
