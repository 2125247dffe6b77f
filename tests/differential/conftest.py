"""Differential tests of the compiled and pure twins: how many cases each pair ran."""

import json
import os

import pytest

from twins import CASES

from lens_core import _impl


@pytest.fixture(autouse=True)
def both_gates_loaded():
    """Both gate twins loaded into lens_core._impl (a snapshot is published to each loaded
    gate), the active one restored afterwards."""
    before = _impl.IMPLEMENTATION
    for name in ("cython", "python"):
        try:
            _impl.use(name)
        except ImportError:  # not built: the tests that need it skip
            pass
    _impl.use(before)
    yield
    _impl.use(before)


def pytest_terminal_summary(terminalreporter):
    """One line with the number of cases each twin pair was compared on (LENS_DIFF_CASES=path
    also writes them there as JSON)."""
    if not CASES:
        return
    terminalreporter.write_line("differential cases run per twin pair: "
                                + ", ".join(f"{k} {v}" for k, v in sorted(CASES.items())))
    path = os.environ.get("LENS_DIFF_CASES")
    if path:
        with open(path, "w") as f:
            json.dump(CASES, f)


def pytest_collection_modifyitems(config, items):
    """The ``slow`` variants (thousands of generated cases, minutes) run only when asked for
    (``-m slow``, as .ci/run does): the README's test command stays short."""
    if "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="many generated cases: run with -m slow (.ci/run does)")
    for item in items:
        if "slow" in item.keywords and "differential" in str(item.fspath):
            item.add_marker(skip)
