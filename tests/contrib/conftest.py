"""The engines marker and an in-process telemetry fixture for the contrib tests."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from contrib_helpers import telemetry_config  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "engines: runs a real engine (torch.distributed, Ray, uvicorn); "
        "deselect with -m 'not engines'")


@pytest.fixture
def active_telemetry(tmp_path):
    """An exporting setup in this process (file exporter, rank 0); shut down afterwards."""
    from otel_bridge import setup_telemetry

    handle = setup_telemetry(telemetry_config(tmp_path, "run"), rank=0, world_size=1,
                             local_rank=0, _allow_reinit=True)
    yield handle
    handle.shutdown()
