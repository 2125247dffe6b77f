"""The enabled path's native wing: the span recorder and the OTLP encoders, compiled and pure twins.

``load(name)`` gives one implementation's names (``Recorder``, ``Span``, ``make_record``,
``encode_traces_pb``, ``encode_traces_json``, ``SAMPLE_*``, ``KIND_INTERNAL``,
``RECORD_BYTES``); ``"cython"`` is the compiled pair (lens_core._native._recorder and
._encode), ``"python"`` the pure twins. lens_core._impl picks the one that goes with the
active gate. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

__all__ = ["Implementation", "LARGE_VALUE", "RECORD_BYTES", "available", "load"]

#: Bytes one queued record is budgeted at (a measured Span with a few attributes), plus
#: the length of each long value it holds (_shared.record_size); the queued records' sizes add
#: up to at most ``buffer_bytes``, so the queue holds at most ``buffer_bytes // RECORD_BYTES``.
#: Here, not in _shared, so the compiled recorder can size its queue without loading _shared.
RECORD_BYTES = 512

#: A text or bytes value longer than this adds its length to its record's size (shorter
#: ones are inside RECORD_BYTES).
LARGE_VALUE = 64

_NAMES = ("KIND_INTERNAL", "RECORD_BYTES", "Recorder", "SAMPLE_ALWAYS_OFF", "SAMPLE_ALWAYS_ON",
          "SAMPLE_CUSTOM", "SAMPLE_PARENT_RATIO", "SAMPLE_RATIO", "Span", "make_record")
_loaded: dict = {}


class Implementation:
    """One implementation of the recorder and encoders, as a namespace of its names."""

    def __init__(self, name: str, recorder, encode):
        self.IMPLEMENTATION = name
        for attr in _NAMES:
            setattr(self, attr, getattr(recorder, attr))
        self.encode_traces_pb = encode.encode_traces_pb
        self.encode_traces_json = encode.encode_traces_json

    def __repr__(self):
        return f"<lens native wing {self.IMPLEMENTATION!r}>"


def load(name: str) -> Implementation:
    """The ``"cython"`` or ``"python"`` implementation (ImportError if the compiled one is not built)."""
    impl = _loaded.get(name)
    if impl is None:
        if name == "cython":
            from lens_core._native import _encode, _recorder
        elif name == "python":
            from lens_core._native import _encode_py as _encode, _recorder_py as _recorder
        else:
            raise ValueError(f"native implementation must be 'cython' or 'python', got {name!r}")
        impl = _loaded[name] = Implementation(name, _recorder, _encode)
    return impl


def available() -> tuple:
    """The implementations that load here: ``("cython", "python")`` or ``("python",)``."""
    try:
        load("cython")
    except ImportError:
        return ("python",)
    return ("cython", "python")
