"""The NVTX mirror (LENS_NVTX=1): finds an NVTX range API, so every enabled Lens span opens a range named after it."""

from __future__ import annotations

import sys

from lens_core import _log

__all__ = ["find_nvtx"]


def _probe(push, pop):
    push("lens")
    pop()
    return push, pop


def find_nvtx():
    """``(push, pop)`` of the ``nvtx`` package, else of ``torch.cuda.nvtx`` when torch is already
    imported (Lens never imports torch); None, with one warning, when neither works here."""
    reasons = []
    try:
        import nvtx  # the NVIDIA package (pip install nvtx); optional

        return _probe(nvtx.push_range, nvtx.pop_range)
    except Exception as exc:  # not installed, or its library cannot be loaded
        reasons.append(f"nvtx: {type(exc).__name__}: {exc}")
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            from torch.cuda import nvtx as torch_nvtx

            return _probe(torch_nvtx.range_push, torch_nvtx.range_pop)
        except Exception as exc:  # a CPU build: "NVTX functions not installed"
            reasons.append(f"torch.cuda.nvtx: {type(exc).__name__}: {exc}")
    else:
        reasons.append("torch.cuda.nvtx: torch is not imported")
    _log.warn_once("nvtx", "lens telemetry: LENS_NVTX=1 but no NVTX range API works here (" + "; ".join(reasons)
                   + "); install the nvtx package or use a CUDA build of torch. The NVTX mirror is off")
    return None
