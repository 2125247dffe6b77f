"""SIGTERM lands in a tight span loop: print 'ready', then open and close spans until killed."""

from common import setup, span

handle = setup()
handle.install_signal_handlers()
print("ready", flush=True)
while True:
    with span("g", "loop", i=1):
        pass
