"""Fixtures for tests that call setup_telemetry: every handle is shut down afterwards."""

import logging

import pytest


@pytest.fixture(autouse=True)
def no_active_telemetry(monkeypatch):
    """Tests start with no OTLP endpoint in the environment and leave no active setup
    and no logging-bridge handler behind."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME",
                 "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                 "SLURM_LOCALID", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    yield
    import sys

    handle_module = sys.modules.get("otel_bridge.handle")
    if handle_module is not None and handle_module.active_handle() is not None:
        handle_module.active_handle().shutdown(timeout_ms=2000)
    for logger in [logging.getLogger()] + [
            v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)]:
        for handler in list(logger.handlers):
            if getattr(handler, "_lens_logging_bridge", False):
                logger.removeHandler(handler)
        for f in list(logger.filters):
            if type(f).__name__ == "TraceIdFilter":
                logger.removeFilter(f)


# Each gate-and-recorder twin in turn, for the modules that opt in (recording paths).
from twins import twin  # noqa: E402,F401
