"""Run ``lens report`` as ``python -m lens_report PATH...``."""

import signal

from lens_core.interrupts import watch_interrupts

# Ctrl-C from here on is one line and status 130 (the package's modules have imported by now)
watching = watch_interrupts("lens report")

from .cli import main  # noqa: E402  imported once Ctrl-C is watched

try:
    status = main()
finally:  # the report is over (--help too): a Ctrl-C in the interpreter's teardown changes nothing
    if watching:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
raise SystemExit(status)
