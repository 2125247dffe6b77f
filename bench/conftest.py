"""Benchmarks swap gate implementations the way the tests do (lens_core._impl.use)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from lens_core import _impl, state, uninstall_backend  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402


@pytest.fixture(autouse=True)
def clean_lens_state():
    """Every benchmark starts with no backend, no spec and an empty registry."""
    uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()
    yield
    uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()
    _impl.use("cython" if "cython" in _available() else "python")


def _available():
    names = ["python"]
    try:
        import lens_core._gate  # noqa: F401
    except ImportError:
        return names
    return ["cython"] + names


@pytest.fixture(params=_available())
def gate(request):
    """Each gate implementation in turn; yields the gate module."""
    _impl.use(request.param)
    return _impl.gate

