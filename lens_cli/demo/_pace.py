"""Simulated latencies: the toy model finishes in milliseconds, a real fleet does not.

Each phase of the demo does its real (tiny) torch work and then sleeps out the rest of a
fixed budget, so the waterfall has the shape of a real run instead of a row of slivers.
The budgets are the only invented numbers in the demo.
"""

from __future__ import annotations

import time

__all__ = ["LATENCY_S", "paced"]

#: Seconds each phase takes at least (the real work counts towards it).
LATENCY_S = {
    "tokenizer": 0.02,
    "data": 0.03,
    "load_model": 0.06,
    "data_processing": 0.015,
    "generation": 0.12,  # sync rollout: one rl.vllm.generate call
    "reward": 0.02,
    "logprobs": 0.03,
    "advantage": 0.005,
    "training": 0.08,
    "validation": 0.06,
    "checkpoint_stage": 0.03,  # copy the weights off the device: blocks the loop
    "checkpoint_finalize": 0.35,  # writers drain, then the rename: outlives the step
    "refit": 0.02,  # weight sync to the generation workers
    "async_generation": 0.35,  # one collector batch (slower than a training step)
}


class paced:
    """Context manager: the block takes at least ``LATENCY_S[phase]`` seconds."""

    __slots__ = ("_seconds", "_start")

    def __init__(self, phase: str):
        self._seconds = LATENCY_S[phase]

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            left = self._start + self._seconds - time.perf_counter()
            if left > 0:
                time.sleep(left)
        return False
