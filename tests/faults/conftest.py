"""Fixtures of the fault suite."""

import pytest


@pytest.fixture(params=["native", "sdk"])
def recorder(request):
    """Each recorder in turn (the fault programs read LENS_RECORDER)."""
    return request.param


# Each gate-and-recorder twin in turn, for the cases that opt in (recording paths).
from twins import twin  # noqa: E402,F401
