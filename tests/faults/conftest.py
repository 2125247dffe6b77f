"""Fixtures of the fault suite."""

import pytest


@pytest.fixture(params=["native", "sdk"])
def recorder(request):
    """Each recorder in turn (the fault programs read LENS_RECORDER)."""
    return request.param
