"""Fixtures for the goodput tests: the RL catalog registered and switched on."""

import pytest

import lens_core
from lens_core.catalogs import rl as rl_catalog


@pytest.fixture
def rl():
    """The RL catalog (namespace ``nemo_rl``) registered again after the registry was cleared,
    with every group on; yields the catalog module."""
    rl_catalog.register()
    lens_core.set_span_group_spec("all")
    yield rl_catalog


@pytest.fixture
def traced(rl, recorder):
    """The RL catalog on and a RecordingBackend installed; yields the recorder."""
    return recorder
