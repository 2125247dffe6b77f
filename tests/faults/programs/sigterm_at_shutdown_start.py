"""SIGTERM lands while shutdown() is still starting its closing thread: a real signal, sent by
the process to itself when shutdown() calls the function that starts that thread (a trace
hook picks the moment). Prints "shutting down" with a timestamp; the process then ends by the
signal (exit 143) once the handler's shutdown has written everything."""

import os
import signal
import sys
import time

from common import setup, span

handle = setup()
handle.install_signal_handlers()
for _ in range(int(sys.argv[1])):
    with span("g", "work"):
        pass


def at_thread_start(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "_start_bounded":
        sys.settrace(None)
        os.kill(os.getpid(), signal.SIGTERM)  # handled on this thread at its next bytecode
    return None


print(f"shutting down {time.time()}", flush=True)
sys.settrace(at_thread_start)
handle.shutdown(timeout_ms=10_000)
print("the signal did not end the process", flush=True)
