"""The compiled and pure-Python twins of lens_core, found in one place: (compiled, pure) pairs.

Every differential test imports the twin modules through this file, so moving a twin is a
one-place edit here. ``compiled`` is None when the extension was not built (the tests then
skip, or fail under LENS_REQUIRE_CYTHON=1 as the rest of the suite does).
"""

import importlib
import os

import pytest

from lens_core.config import pure_python_requested

__all__ = ["CASES", "IMPLEMENTATIONS", "PATHS", "Twin", "count", "encoder_pair", "gate_pair", "recorder_pair",
           "require_pair", "skip_in_pure_pass", "twin"]

#: Where each twin lives: (compiled module, pure module).
PATHS = {
    "gate": ("lens_core._gate", "lens_core._gate_py"),
    "recorder": ("lens_core._native._recorder", "lens_core._native._recorder_py"),
    "encoder": ("lens_core._native._encode", "lens_core._native._encode_py"),
}

#: The implementation names lens_core._impl.use() takes, compiled first.
IMPLEMENTATIONS = ("cython", "python")

#: twin pair ("gate", "recorder", "encoder") -> generated cases fed to both twins this session
CASES = {}

_PURE_PASS = pure_python_requested()

#: For tests that compare both twins themselves: CI's second pass (LENS_PURE_PYTHON=1) would
#: only repeat them, so they run in the default pass.
skip_in_pure_pass = pytest.mark.skipif(_PURE_PASS, reason="compares both twins itself: runs in the default pass")


class Twin:
    """One implementation of a twin, by role: ``impl`` is "cython" or "python"; the names a
    role needs are attributes (a gate module's names for the gate; Recorder, Span,
    make_record and SAMPLE_* for the recorder; encode_traces_pb/json for the encoder)."""

    def __init__(self, impl, module):
        self.impl = impl
        self.module = module

    def __getattr__(self, name):
        return getattr(self.module, name)

    def __repr__(self):
        return f"<{self.impl} twin {self.module.__name__}>"


def _optional(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _pair(role, needs):
    compiled_name, pure_name = PATHS[role]
    compiled = _optional(compiled_name)
    if compiled is not None and not hasattr(compiled, needs):
        compiled = None
    return (Twin("cython", compiled) if compiled is not None else None,
            Twin("python", importlib.import_module(pure_name)))


def gate_pair():
    """(compiled gate, pure gate): managed_span, umbrella_span, is_enabled, wrap_function, null_span."""
    return _pair("gate", "is_enabled")


def recorder_pair():
    """(compiled recorder, pure recorder): Recorder, Span, make_record, SAMPLE_*."""
    return _pair("recorder", "Recorder")


def encoder_pair():
    """(compiled encoders, pure encoders): encode_traces_pb, encode_traces_json."""
    return _pair("encoder", "encode_traces_pb")


def require_pair(pair):
    """``pair`` with both twins, or skip (fail under LENS_REQUIRE_CYTHON=1: a silently failed
    build must not turn a differential test into a skipped one)."""
    compiled, pure = pair
    if compiled is None:
        if os.environ.get("LENS_REQUIRE_CYTHON") == "1":
            pytest.fail(f"LENS_REQUIRE_CYTHON=1 but the compiled twin of {pure.module.__name__} did not load")
        pytest.skip("the compiled extension is not built (LENS_BUILD_EXT=1 python setup.py build_ext --inplace)")
    return compiled, pure


def count(pair, n=1):
    """Count ``n`` differential cases of ``pair`` (called inside each generated example, so
    the figure is what ran, not what was asked for)."""
    CASES[pair] = CASES.get(pair, 0) + n


def _missing_compiled(what):
    if os.environ.get("LENS_REQUIRE_CYTHON") == "1":
        pytest.fail(f"LENS_REQUIRE_CYTHON=1 but the compiled {what} did not load")
    pytest.skip(f"the compiled {what} is not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")


@pytest.fixture(params=["python"] if _PURE_PASS else list(IMPLEMENTATIONS))
def twin(request, monkeypatch):
    """Run a test under each gate-and-recorder twin in turn, in this process
    (lens_core._impl.use) and in the processes it starts (LENS_PURE_PYTHON, which
    tests/child_env.py passes on). Opt in where the twins genuinely differ (recording
    paths): ``pytestmark = pytest.mark.usefixtures("twin")``. With a ``recorder`` fixture
    (tests/faults) the pure twin runs only with the native recorder: the SDK recorder has no twin."""
    from lens_core import _impl

    name = request.param
    if (name == "python" and not _PURE_PASS and "recorder" in request.fixturenames
            and request.getfixturevalue("recorder") != "native"):
        pytest.skip("the SDK recorder has no pure twin: its case runs once, under the compiled gate")
    before = _impl.IMPLEMENTATION
    try:
        _impl.use(name)
    except ImportError:
        _missing_compiled("gate and recorder")
    if name == "python":
        monkeypatch.setenv("LENS_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("LENS_PURE_PYTHON", raising=False)
    yield name
    _impl.use(before)
