"""Attribute and metric name constants, re-exported from ``lens_core.semconv`` (their one home)."""

from lens_core.semconv import *  # noqa: F403
from lens_core.semconv import __all__  # noqa: F401
