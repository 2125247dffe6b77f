"""The efficiency/* timer metrics: one seconds histogram per category, labelled with how it was measured."""

from __future__ import annotations

import threading

from lens_core import _log

from otel_bridge.instruments.registry import SECONDS_BOUNDARIES

__all__ = ["EfficiencyTimers"]


class EfficiencyTimers:
    """What setup_telemetry installs as lens_core's efficiency sink on a rank that exports metrics.

    ``record(name, seconds, attributes)`` records into the histogram ``name``
    (``efficiency/<category>``, unit ``s``), created on first use: its sum is the category's
    total, its count the number of waits. Attributes: ``rl.efficiency.measurement``
    (``driver_wall_clock``, ``collector_wall_clock`` or ``thread_seconds``: always filter on it,
    the three do not add up) and ``rl.efficiency.category``. Never raises.
    """

    def __init__(self, meter) -> None:
        self._meter = meter
        self._histograms = {}
        self._lock = threading.Lock()

    def record(self, name: str, seconds: float, attributes) -> None:
        """Record ``seconds`` into the histogram ``name`` with ``attributes``."""
        histogram = self._histograms.get(name)
        try:
            if histogram is None:
                with self._lock:
                    histogram = self._histograms.get(name)
                    if histogram is None:
                        histogram = self._histograms[name] = self._meter.create_histogram(
                            name, "s", f"Seconds of the {name[len('efficiency/'):]} efficiency timer.",
                            explicit_bucket_boundaries_advisory=SECONDS_BOUNDARIES)
            if seconds >= 0:
                histogram.record(seconds, attributes)
        except Exception as exc:  # a timer must never fail the wait it measures
            _log.warn_once(("efficiency-metric", name), f"efficiency metric {name!r} not recorded: {exc!r}")
