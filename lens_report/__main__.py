"""Run ``lens report`` as ``python -m lens_report PATH...``."""

from lens_core._console import watch_interrupts

# Ctrl-C from here on is one line and status 130; the watch lasts until the process ends
watch_interrupts("lens report")

from .cli import main  # noqa: E402  imported once Ctrl-C is watched

raise SystemExit(main())
