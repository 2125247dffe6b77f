"""Run ``lens report`` as ``python -m lens_report PATH...``."""

from .cli import main

raise SystemExit(main())
