"""Chooses the gate implementation (compiled or pure Python); every module imports it from here.

The recorder and encoders of lens_core._native follow the gate's choice (recorder()).
"""

from __future__ import annotations

import os
import sys

__all__ = ["IMPLEMENTATION", "gate", "publish", "recorder", "set_factories", "use"]

# Public names whose object comes straight from the gate, and the modules that re-export them.
GATE_EXPORTS = {
    "managed_span": "managed_span",
    "umbrella_span": "umbrella_span",
    "is_span_group_enabled": "is_enabled",
}
_REBIND_MODULES = ("lens_core", "lens_core.spans", "lens_core.state")
_loaded = []  # every gate module loaded so far: all get each snapshot and factory
_factories = None
_snapshot = ({}, 0, None)
_native = None
_hooks = None
_attribute_loader = None


def _load(name: str):
    if name == "python":
        from . import _gate_py as module
    elif name == "cython":
        from . import _gate as module
    else:
        raise ValueError(f"gate implementation must be 'cython' or 'python', got {name!r}")
    return module


def _build_failed() -> None:
    # An install whose compiled build failed says so here, once per process, on stderr: pip
    # shows build output only with -v, so the build's own warning is easily never seen.
    # (LENS_BUILD_EXT=0 installs leave no mark: pure Python was asked for.)
    mark = os.path.join(os.path.dirname(__file__), "_native", "BUILD_FAILED")
    if os.path.exists(mark):
        try:
            with open(mark) as f:
                why = f.readline().strip()
        except OSError:
            why = "see the install log"
        if len(why) > 160:  # a compiler's whole command line: the start says which step failed
            why = why[:157] + "..."
        sys.stderr.write(f"lens_core: the compiled gate and recorder failed to build at install ({why}); "
                         "running the pure-Python twins (set LENS_PURE_PYTHON=1 to choose them and silence this)\n")


def _pure_python_requested() -> bool:
    # lens_core.config reads and validates the variable; it is loaded only when the variable is
    # set, so choosing the gate costs no config import
    if not os.environ.get("LENS_PURE_PYTHON", "").strip():
        return False
    from .config import pure_python_requested

    return pure_python_requested()


if _pure_python_requested():
    gate, IMPLEMENTATION = _load("python"), "python"
else:
    try:
        gate, IMPLEMENTATION = _load("cython"), "cython"
    except ImportError:  # not built (LENS_BUILD_EXT=0 or a failed optional build)
        gate, IMPLEMENTATION = _load("python"), "python"
        _build_failed()


_loaded.append(gate)


def publish(ids, bits, infos=None) -> None:
    """Push a gate snapshot into every loaded implementation (wrappers made while another
    implementation was active keep working). ``infos`` (id -> (name, umbrella, bucket_key,
    bucket)) lets the compiled recorder stamp spans without calling back into Python."""
    global _snapshot
    _snapshot = (ids, bits, infos)
    for module in _loaded:
        module.publish(ids, bits, infos)


def set_native(backend) -> None:
    """Tell the compiled gate which backend is installed: a compiled Recorder is recorded
    into directly; anything else goes through the span factory."""
    global _native, _attribute_loader
    if backend is not None and _attribute_loader is not None:
        loader, _attribute_loader = _attribute_loader, None
        loader()  # the gate's attribute hooks, before any span can take its fast path
    _native = backend
    for module in _loaded:
        if hasattr(module, "set_native"):
            module.set_native(backend)


def set_attribute_loader(loader) -> None:
    """Run ``loader`` (lens_core.spans: it loads attribute safety and calls
    set_attribute_hooks) when a backend is first installed; a quiet rank never loads it. With a
    backend installed already (lens_core.spans imported after setup), it runs now."""
    global _attribute_loader
    if _native is not None:
        loader()
    else:
        _attribute_loader = loader


def set_attribute_hooks(*hooks) -> None:
    """Hand the compiled gate what its attribute fast path needs (see _gate.set_attribute_hooks)."""
    global _hooks
    _hooks = hooks
    for module in _loaded:
        if hasattr(module, "set_attribute_hooks"):
            module.set_attribute_hooks(*hooks)


def set_factories(span_factory, call_factory) -> None:
    """Install the enabled-path builders in every loaded implementation."""
    global _factories
    _factories = (span_factory, call_factory)
    for module in _loaded:
        module.set_factories(span_factory, call_factory)


def use(name: str) -> None:
    """Switch the gate implementation at run time (tests and benchmarks run both)."""
    global gate, IMPLEMENTATION
    gate, IMPLEMENTATION = _load(name), name
    if gate not in _loaded:
        _loaded.append(gate)
        gate.publish(*_snapshot)
        if _factories is not None:
            gate.set_factories(*_factories)
        if hasattr(gate, "set_native"):
            gate.set_native(_native)
            if _hooks is not None:
                gate.set_attribute_hooks(*_hooks)
    for modname in _REBIND_MODULES:
        module = sys.modules.get(modname)
        if module is None:
            continue
        for public, attr in GATE_EXPORTS.items():
            if public in vars(module):
                setattr(module, public, getattr(gate, attr))
        if "IMPLEMENTATION" in vars(module):
            module.IMPLEMENTATION = name


def recorder():
    """The span recorder and encoders that go with the active gate (lens_core._native):
    ``Recorder``, ``Span``, ``make_record``, ``encode_traces_pb``, ``encode_traces_json``,
    ``SAMPLE_*``. The compiled gate builds spans straight into the compiled recorder, so the
    two are always chosen together."""
    from lens_core import _native

    return _native.load(IMPLEMENTATION)
