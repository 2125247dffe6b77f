"""The instrumented GRPO driver: startup, the job, steps (sync or async), validation, checkpoints.

Span names, groups and attributes follow the RL catalog (namespace ``nemo_rl``): umbrellas
(``rl.startup``, ``rl.grpo.job``, ``rl.grpo.step``, ``rl.grpo.generation``,
``rl.grpo.evaluate``) carry no bucket; every leaf carries the bucket of its group.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lens_core import (
    Bucket,
    IdleWait,
    bucket_scope,
    current_trace_carrier,
    efficiency_span,
    iteration_scope,
    managed_span,
    trace_fn,
    umbrella_span,
    umbrella_trace_fn,
)
from lens_core import semconv as sc
from lens_core.catalogs.rl import RLSpanGroup as G

from lens_cli.demo import _grpo
from lens_cli.demo._checkpoint import Checkpointer
from lens_cli.demo._collector import TrajectoryCollector
from lens_cli.demo._pace import paced

__all__ = ["DemoOptions", "RunStats", "run_training", "startup"]

#: Seconds between two polls of the replay buffer while the driver is starved.
POLL_S = 0.005


@dataclass(frozen=True)
class DemoOptions:
    """What ``lens demo`` runs."""

    steps: int = 6
    async_mode: bool = False
    seed: int = 0
    val_every: int = 3
    checkpoint_every: int = 2
    checkpoint_dir: Path = Path("./lens-demo/checkpoints")
    grpo: _grpo.GRPOConfig = field(default_factory=_grpo.GRPOConfig)


@dataclass
class RunStats:
    """What happened, for the summary and for tests: per-step metrics and idle waits."""

    steps: list = field(default_factory=list)  # dicts: step, reward, loss, kl, seconds
    validations: list = field(default_factory=list)  # (step, mean reward)
    starved_waits: int = 0  # waits on the replay buffer that found it empty at least once
    starved_polls: list = field(default_factory=list)  # rl.idle.polls of each such wait
    checkpoints: list = field(default_factory=list)  # step_N directories written


@dataclass
class Workers:
    """Everything startup builds: tokenizer, data, policy, reference, optimizer."""

    tokenizer: _grpo.Tokenizer
    dataset: torch.Tensor
    policy: _grpo.Policy
    reference: _grpo.Policy
    optimizer: torch.optim.Optimizer
    generation_policy: _grpo.Policy | None = None

    def prompts(self, step: int, cfg: _grpo.GRPOConfig) -> torch.Tensor:
        """The prompts of training step ``step`` (1-based), cycling through the dataset."""
        start = ((step - 1) * cfg.prompts_per_step) % (len(self.dataset) - cfg.prompts_per_step + 1)
        return self.dataset[start:start + cfg.prompts_per_step]


def startup(opts: DemoOptions) -> Workers:
    """``rl.startup`` with the ``rl.setup.*`` phases; model builds are ``model_init`` spans."""
    cfg = opts.grpo
    with umbrella_span(G.U_SETUP, "rl.startup"):
        with umbrella_span(G.U_SETUP, "rl.setup.tokenizer"), paced("tokenizer"):
            tokenizer = _grpo.Tokenizer(cfg.vocab_size)
        with umbrella_span(G.U_SETUP, "rl.setup.data"), paced("data"):
            generator = torch.Generator().manual_seed(opts.seed)
            dataset = torch.randint(0, cfg.vocab_size, (cfg.dataset_size, cfg.prompt_len), generator=generator)
        with umbrella_span(G.U_SETUP, "rl.setup.workers"):
            with umbrella_span(G.U_MODEL_INIT, "rl.policy.load_model", **{sc.RL_BACKEND: "torch"}), \
                    paced("load_model"):
                policy, reference, optimizer = _grpo.build_policy(cfg, opts.seed)
            generation_policy = None
            if opts.async_mode:  # the generation fleet keeps its own copy, refit after each step
                with umbrella_span(G.U_MODEL_INIT, "rl.vllm.load_model"), paced("load_model"):
                    generation_policy = copy.deepcopy(policy).requires_grad_(False)
    return Workers(tokenizer, dataset, policy, reference, optimizer, generation_policy)


@trace_fn(G.GENERATION, "rl.vllm.generate")
def _generate(policy, prompts, generator, phase="generation"):
    """The driver-side generate call (productive, or overhead inside validation's bucket_scope)."""
    with paced(phase):
        return _grpo.generate(policy, prompts, generator)


class _Trainer:
    """The parts of a step both modes share: logprobs, advantages, the update, validation."""

    def __init__(self, opts: DemoOptions, workers: Workers, stats: RunStats):
        self.opts = opts
        self.cfg = opts.grpo
        self.w = workers
        self.stats = stats
        self.checkpointer = Checkpointer(opts.checkpoint_dir)

    def logprobs(self, batch: _grpo.Rollouts) -> None:
        with managed_span(G.LOGPROB, "rl.grpo.policy_and_reference_logprobs"), paced("logprobs"), \
                torch.no_grad():
            batch.old_logprobs = _grpo.sequence_logprobs(self.w.policy, batch.prompts, batch.responses)
            batch.ref_logprobs = _grpo.sequence_logprobs(self.w.reference, batch.prompts, batch.responses)

    def advantages(self, batch: _grpo.Rollouts) -> None:
        with managed_span(G.ADVANTAGE, "rl.grpo.advantage_calculation"), paced("advantage"):
            batch.advantages = _grpo.group_advantages(batch.rewards, self.cfg.generations_per_prompt)

    def train(self, batch: _grpo.Rollouts) -> dict:
        with managed_span(G.POLICY_UPDATE, "rl.grpo.policy_training"), paced("training"):
            return _grpo.policy_update(self.w.policy, self.w.optimizer, batch, self.cfg)

    def after_update(self, step: int) -> None:
        """Validation and checkpoint, when due (both inside the step)."""
        if self.opts.val_every and step % self.opts.val_every == 0:
            self.validate(step)
        if self.opts.checkpoint_every and step % self.opts.checkpoint_every == 0:
            self.checkpointer.save(step, self.w.policy, self.w.optimizer)

    def validate(self, step: int) -> None:
        """``rl.grpo.evaluate``: generation under bucket_scope(OVERHEAD) (its tokens are discarded)."""
        with umbrella_span(G.U_EVALUATE, "rl.grpo.evaluate", **{sc.RL_ITERATION: step}):
            prompts = _grpo.repeat_prompts(self.w.dataset[-self.cfg.prompts_per_step:], self.cfg)
            generator = torch.Generator().manual_seed(12345)
            with bucket_scope(Bucket.OVERHEAD):
                responses = _generate(self.w.policy, prompts, generator, phase="validation")
            score = float(_grpo.reward(prompts, responses, self.cfg.vocab_size).mean())
        self.stats.validations.append((step, score))

    def record(self, step: int, started: float, batch: _grpo.Rollouts, metrics: dict) -> None:
        self.stats.steps.append({"step": step, "reward": float(batch.rewards.mean()),
                                 "seconds": time.perf_counter() - started, **metrics})

    def finish(self) -> None:
        self.checkpointer.finalize_pending()  # the last checkpoint must be durable before exit
        self.stats.checkpoints = [str(p) for p in self.checkpointer.saved]


def _sync_step(trainer: _Trainer, step: int) -> None:
    cfg, w = trainer.cfg, trainer.w
    started = time.perf_counter()
    with umbrella_span(G.U_STEP, "rl.grpo.step"):
        with managed_span(G.DATA_PROCESSING, "rl.grpo.data_processing"), paced("data_processing"):
            prompts = _grpo.repeat_prompts(w.prompts(step, cfg), cfg)
        with umbrella_span(G.U_ROLLOUT, "rl.grpo.generation", **{
                sc.RL_NUM_GENERATIONS_PER_PROMPT: cfg.generations_per_prompt,
                sc.RL_NUM_PROMPT_GROUPS: cfg.prompts_per_step}):
            generator = torch.Generator().manual_seed(trainer.opts.seed * 1000 + step)
            responses = _generate(w.policy, prompts, generator)
        batch = _grpo.Rollouts(prompts, responses)
        with managed_span(G.REWARD, "rl.grpo.reward_calculation"), paced("reward"):
            batch.rewards = _grpo.reward(prompts, responses, cfg.vocab_size)
        trainer.logprobs(batch)
        trainer.advantages(batch)
        metrics = trainer.train(batch)
        trainer.after_update(step)
    trainer.record(step, started, batch, metrics)


def _take_batch(trainer: _Trainer, collector: TrajectoryCollector, step: int) -> _grpo.Rollouts:
    """Poll the buffer; a wait is ONE ``rl.idle.buffer_starvation`` span with ``rl.idle.polls``."""
    wait = IdleWait("idle/buffer_starvation")
    try:
        while (batch := collector.take(step)) is None:
            wait.starved()
            time.sleep(POLL_S)
    finally:
        polls = wait.done()
    if polls:
        trainer.stats.starved_waits += 1
        trainer.stats.starved_polls.append(polls)
    return batch


def _async_step(trainer: _Trainer, collector: TrajectoryCollector, step: int) -> None:
    cfg, w = trainer.cfg, trainer.w
    started = time.perf_counter()
    with umbrella_span(G.U_STEP, "rl.grpo.step", **{sc.RL_WEIGHT_VERSION: collector.weight_version}):
        batch = _take_batch(trainer, collector, step)
        with managed_span(G.DATA_PROCESSING, "rl.grpo.data_processing"), paced("data_processing"):
            batch = _grpo.Rollouts(batch.prompts.clone(), batch.responses.clone(), rewards=batch.rewards.clone(),
                                   weight_version=batch.weight_version)
        trainer.logprobs(batch)
        trainer.advantages(batch)
        metrics = trainer.train(batch)
        if step < trainer.opts.steps:  # the last step's weights are never generated from
            with efficiency_span("idle/refit_bubble"):
                collector.refit(w.policy.state_dict())
        trainer.after_update(step)
    trainer.record(step, started, batch, metrics)


@umbrella_trace_fn(G.U_JOB, "rl.grpo.job")
def run_training(opts: DemoOptions, workers: Workers, stats: RunStats) -> None:
    """``rl.grpo.job``: every step (1-based, under iteration_scope) and, async, the collector."""
    trainer = _Trainer(opts, workers, stats)
    collector = None
    try:
        if opts.async_mode:
            carrier = current_trace_carrier()  # inside rl.grpo.job: the collector joins this trace
            collector = TrajectoryCollector(
                workers.generation_policy, opts.grpo, lambda s: workers.prompts(s, opts.grpo), carrier,
                last_step=opts.steps, seed=opts.seed)
            collector.start()
            with efficiency_span("init/total"):  # the initial buffer fill; before any step
                collector.wait_ready(1)
        for step in range(1, opts.steps + 1):
            with iteration_scope(step):
                if collector is None:
                    _sync_step(trainer, step)
                else:
                    _async_step(trainer, collector, step)
    finally:
        if collector is not None:
            collector.stop()
        trainer.finish()
