"""Fixtures of the fault suite."""

import pytest


@pytest.fixture(params=["native", "sdk"])
def recorder(request):
    """Each recorder in turn (the fault programs read LENS_RECORDER)."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """The whole fault suite is `slow` (real processes, signals, full disks: ~20 minutes on a
    loaded 2-core machine): the README's test command leaves it out, .ci/run runs it in full."""
    import os

    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here + os.sep):
            item.add_marker(pytest.mark.slow)


# Each gate-and-recorder twin in turn, for the cases that opt in (recording paths).
from twins import twin  # noqa: E402,F401


@pytest.fixture
def unused_port():
    """A 127.0.0.1 port nothing listens on (a collector that is down)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
