"""The async-GRPO trajectory collector: a loop thread plus batch-worker threads filling a buffer.

It stands in for the collector actor of an async RL run. It gets the driver's trace
carrier (taken inside ``rl.grpo.job``) and reopens it with ``remote_trace_context`` in the
loop thread and in every batch-worker thread, since a thread inherits no context. Its two
loop waits are efficiency spans without a bucket (the collector's clock runs concurrently
with the driver's); each batch is one ``rl.grpo.generation`` umbrella span.
"""

from __future__ import annotations

import copy
import threading
import time

import torch

from lens_core import efficiency_span, remote_trace_context, umbrella_span
from lens_core import semconv as sc
from lens_core.catalogs.rl import RLSpanGroup as G

from lens_cli.demo import _grpo
from lens_cli.demo._pace import paced

__all__ = ["TrajectoryCollector"]


class TrajectoryCollector:
    """Generates a batch for each target step ``w+1 .. w+1+max_age`` (``w``: weight version).

    ``max_workers`` batches run at once, each with a snapshot of the generation weights it
    started from (``rl.weight_version``). The driver takes batches with ``take(step)`` and
    swaps weights with ``refit(state_dict)`` once the loop thread reached a safe point.
    """

    def __init__(self, generation_policy, cfg, prompts, carrier, *, last_step, seed,
                 max_age=1, max_workers=2):
        self._policy = generation_policy
        self._cfg = cfg
        self._prompts = prompts
        self._carrier = carrier
        self._last_step = last_step
        self._seed = seed
        self._max_age = max_age
        self._max_workers = max_workers
        self._cond = threading.Condition()
        self.weight_version = 0
        self._buffer = {}
        self._dispatched = set()
        self._in_flight = 0
        self._refit_requested = False
        self._at_safe_point = False
        self._stopping = False
        self._error = None
        self._loop_done = False
        self._workers = []
        self._loop_thread = threading.Thread(target=self._run_loop, name="lens-demo-collector", daemon=True)

    # ---- driver side -----------------------------------------------------------------

    def start(self) -> None:
        """Start the collection loop."""
        self._loop_thread.start()

    def ready(self, step: int) -> bool:
        """True when the batch for ``step`` is in the buffer (raises a worker's error)."""
        with self._cond:
            self._raise_error()
            return step in self._buffer

    def wait_ready(self, step: int) -> None:
        """Block (no polling) until the batch for ``step`` is in the buffer."""
        with self._cond:
            self._cond.wait_for(lambda: step in self._buffer or self._error is not None)
            self._raise_error()

    def take(self, step: int):
        """Remove and return the batch for ``step``, or None when it is not there yet."""
        with self._cond:
            self._raise_error()
            batch = self._buffer.pop(step, None)
            if batch is not None:
                self._cond.notify_all()
            return batch

    def refit(self, state_dict) -> None:
        """Park the loop at a safe point, load the new weights, bump the weight version."""
        with self._cond:
            self._refit_requested = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._at_safe_point or self._loop_done)
            with paced("refit"):
                self._policy.load_state_dict(state_dict)
            self.weight_version += 1
            self._refit_requested = False
            self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and wait (bounded) for in-flight batch workers: no span outlives us."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in [self._loop_thread, *self._workers]:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _raise_error(self):
        if self._error is not None:
            raise RuntimeError("a collector batch worker failed") from self._error

    # ---- collector side ----------------------------------------------------------------

    def _window(self):
        first = self.weight_version + 1
        return [t for t in range(first, min(first + self._max_age, self._last_step) + 1)
                if t not in self._dispatched]

    def _run_loop(self) -> None:
        try:
            with remote_trace_context(self._carrier):  # per thread: threads inherit no context
                self._collect()
        except BaseException as exc:
            with self._cond:
                self._error = exc
        finally:
            with self._cond:
                self._loop_done = True
                self._cond.notify_all()

    def _collect(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                if self._refit_requested:
                    self._at_safe_point = True
                    self._cond.notify_all()
                    with efficiency_span("idle/refit_event_wait"):
                        self._cond.wait_for(lambda: not self._refit_requested or self._stopping)
                    self._at_safe_point = False
                    continue
                pending = self._window()
                if not pending:
                    if self.weight_version + 1 > self._last_step:
                        return  # nothing left to generate
                    with efficiency_span("idle/generation_limit_pause"):
                        self._cond.wait_for(lambda: self._refit_requested or self._stopping)
                    continue
                if self._in_flight >= self._max_workers:
                    self._cond.wait_for(lambda: self._in_flight < self._max_workers
                                        or self._refit_requested or self._stopping)
                    continue
                target = pending[0]
                self._dispatched.add(target)
                self._in_flight += 1
                version = self.weight_version
                snapshot = copy.deepcopy(self._policy)
            worker = threading.Thread(target=self._generate_batch, args=(target, version, snapshot),
                                      name=f"lens-demo-batch-{target}", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _generate_batch(self, target: int, version: int, policy) -> None:
        cfg = self._cfg
        batch = None
        try:
            with remote_trace_context(self._carrier):
                attrs = {
                    sc.RL_WEIGHT_VERSION: version,
                    sc.RL_TARGET_WEIGHT_VERSION: target,
                    sc.RL_NUM_GENERATIONS_PER_PROMPT: cfg.generations_per_prompt,
                    sc.RL_NUM_PROMPT_GROUPS: cfg.prompts_per_step,
                }
                with umbrella_span(G.U_ROLLOUT, "rl.grpo.generation", **attrs), paced("async_generation"):
                    prompts = _grpo.repeat_prompts(self._prompts(target), cfg)
                    generator = torch.Generator().manual_seed(self._seed * 1000 + target)
                    responses = _grpo.generate(policy, prompts, generator)
                    rewards = _grpo.reward(prompts, responses, cfg.vocab_size)
                batch = _grpo.Rollouts(prompts, responses, rewards=rewards, weight_version=version)
        except BaseException as exc:
            with self._cond:
                self._error = exc
        finally:
            with self._cond:
                self._in_flight -= 1
                if batch is not None:
                    self._buffer[target] = batch
                self._cond.notify_all()
