"""Run ``lens report`` as ``python -m otel_bridge.report PATH...``."""

from .cli import main

raise SystemExit(main())
