"""Shared fixtures: a clean lens_core state per test and an in-memory recording backend."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import lens_core  # noqa: E402
from lens_core import _log, state  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from recording import RecordingBackend  # noqa: E402


@pytest.fixture(autouse=True)
def clean_lens_state():
    """Every test starts and ends with no backend, no spec and an empty registry."""
    lens_core.uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()
    _log._reset_for_tests()
    yield
    lens_core.uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()


@pytest.fixture
def recorder():
    """A RecordingBackend installed into lens_core for the test."""
    backend = RecordingBackend()
    lens_core.install_backend(backend)
    yield backend
    lens_core.uninstall_backend()
