"""Shared by the fault programs: set up telemetry from the environment with one span group on."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import lens_core  # noqa: E402
from lens_core import LensConfig, SpanRegistry  # noqa: E402

SpanRegistry.register("faults", ["g"])


def setup(span_exporter=None, **changes):
    """setup_telemetry(LensConfig.from_env() with group ``g`` on, metrics off, and ``changes``)."""
    from otel_bridge import setup_telemetry

    config = LensConfig.from_env().replace(enabled=True, span_groups="g", metrics_enabled=False, **changes)
    return setup_telemetry(config, rank=int(os.environ.get("FAULT_RANK", "0")),
                           world_size=int(os.environ.get("FAULT_WORLD_SIZE", "1")), local_rank=0,
                           span_exporter=span_exporter)


span = lens_core.managed_span
