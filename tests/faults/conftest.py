"""Fixtures of the fault suite."""

import pytest


@pytest.fixture(params=["native", "sdk"])
def recorder(request):
    """Each recorder in turn (the fault programs read LENS_RECORDER)."""
    return request.param


@pytest.fixture
def unused_port():
    """A 127.0.0.1 port nothing listens on (a collector that is down)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
