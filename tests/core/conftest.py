"""Run every core test against both gate implementations (compiled and pure Python)."""

import pytest

from lens_core import _impl
from lens_core.config import pure_python_requested

_PURE = pure_python_requested()
IMPLEMENTATIONS = ["python"] if _PURE else ["cython", "python"]


@pytest.fixture(scope="session", autouse=True, params=IMPLEMENTATIONS)
def gate_implementation(request):
    """Switch lens_core to one gate implementation for a whole pass over the core tests."""
    before = _impl.IMPLEMENTATION
    _impl.use(request.param)  # raises ImportError if the compiled gate was not built
    yield request.param
    _impl.use(before)
