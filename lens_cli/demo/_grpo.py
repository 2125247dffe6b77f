"""The toy GRPO workload of ``lens demo``: a tiny torch policy, sampling, reward, advantages, one update.

Nothing here knows about telemetry; the loops in ``_loop`` wrap these calls in spans. The
model is deliberately small (a 2-layer MLP over a 16-symbol vocabulary) so every phase
finishes in milliseconds on a CPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "GRPOConfig",
    "Policy",
    "Rollouts",
    "Tokenizer",
    "build_policy",
    "generate",
    "group_advantages",
    "policy_update",
    "reward",
    "sequence_logprobs",
]


@dataclass(frozen=True)
class GRPOConfig:
    """Sizes and hyper-parameters of the toy run."""

    vocab_size: int = 16
    prompt_len: int = 4
    response_len: int = 8
    hidden: int = 64
    prompts_per_step: int = 8
    generations_per_prompt: int = 8
    learning_rate: float = 3e-3
    kl_coef: float = 0.05
    clip: float = 0.2
    dataset_size: int = 256


class Tokenizer:
    """A 16-symbol toy vocabulary ``a``..``p`` (token id = position in the alphabet)."""

    def __init__(self, vocab_size: int):
        self.symbols = "abcdefghijklmnopqrstuvwxyz"[:vocab_size]

    def decode(self, ids) -> str:
        """Token ids -> text."""
        return "".join(self.symbols[int(i)] for i in ids)


class Policy(nn.Module):
    """logits(next token | previous token, position, prompt) from a 2-layer MLP."""

    def __init__(self, cfg: GRPOConfig):
        super().__init__()
        self.cfg = cfg
        self.token = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position = nn.Embedding(cfg.response_len, cfg.hidden)
        self.prompt = nn.Linear(cfg.prompt_len * cfg.vocab_size, cfg.hidden)
        self.mlp = nn.Sequential(nn.Linear(cfg.hidden, cfg.hidden), nn.Tanh(), nn.Linear(cfg.hidden, cfg.vocab_size))

    def _prompt_vector(self, prompts: torch.Tensor) -> torch.Tensor:
        one_hot = nn.functional.one_hot(prompts, self.cfg.vocab_size).float()
        return self.prompt(one_hot.flatten(1))

    def logits(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits for every response position: ``[batch, response_len, vocab]``."""
        batch, length = responses.shape
        previous = torch.cat([prompts[:, -1:], responses[:, :-1]], dim=1)
        positions = torch.arange(length).expand(batch, length)
        hidden = self.token(previous) + self.position(positions) + self._prompt_vector(prompts)[:, None, :]
        return self.mlp(hidden)

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Autoregressively sample one response per prompt row."""
        prompt_vec = self._prompt_vector(prompts)
        token = prompts[:, -1]
        out = []
        for t in range(self.cfg.response_len):
            hidden = self.token(token) + self.position.weight[t] + prompt_vec
            probs = torch.softmax(self.mlp(hidden), dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            out.append(token)
        return torch.stack(out, dim=1)


def build_policy(cfg: GRPOConfig, seed: int):
    """The trainable policy, a frozen reference copy and its Adam optimizer."""
    torch.manual_seed(seed)
    policy = Policy(cfg)
    reference = copy.deepcopy(policy).requires_grad_(False)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
    return policy, reference, optimizer


@dataclass
class Rollouts:
    """One batch of generations: each prompt repeated ``generations_per_prompt`` times."""

    prompts: torch.Tensor  # [n, prompt_len]
    responses: torch.Tensor  # [n, response_len]
    rewards: torch.Tensor | None = None  # [n]
    old_logprobs: torch.Tensor | None = None  # [n, response_len]
    ref_logprobs: torch.Tensor | None = None  # [n, response_len]
    advantages: torch.Tensor | None = None  # [n]
    weight_version: int = 0


def repeat_prompts(prompts: torch.Tensor, cfg: GRPOConfig) -> torch.Tensor:
    """Each prompt row repeated for its group of generations."""
    return prompts.repeat_interleave(cfg.generations_per_prompt, dim=0)


def generate(policy: Policy, prompts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Sample a response for every (already repeated) prompt row."""
    return policy.sample(prompts, generator)


def reward(prompts: torch.Tensor, responses: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Toy verifier: the fraction of positions ``t`` where the response says ``(prompt[0] + t) % V``."""
    target = (prompts[:, :1] + torch.arange(responses.shape[1])) % vocab_size
    return (responses == target).float().mean(dim=1)


def sequence_logprobs(policy: Policy, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """Per-token log-probabilities of ``responses`` under ``policy``: ``[n, response_len]``."""
    logp = torch.log_softmax(policy.logits(prompts, responses), dim=-1)
    return logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1)


def group_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """GRPO advantages: each reward normalised by the mean and std of its prompt's group."""
    grouped = rewards.view(-1, group_size)
    mean, std = grouped.mean(dim=1, keepdim=True), grouped.std(dim=1, keepdim=True)
    return ((grouped - mean) / (std + 1e-4)).flatten()


def policy_update(policy: Policy, optimizer, batch: Rollouts, cfg: GRPOConfig) -> dict:
    """One clipped policy-gradient step with a k3 KL penalty to the reference; returns metrics."""
    logp = sequence_logprobs(policy, batch.prompts, batch.responses)
    ratio = torch.exp(logp - batch.old_logprobs)
    adv = batch.advantages[:, None]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv)
    log_ref_ratio = batch.ref_logprobs - logp
    kl = (torch.exp(log_ref_ratio) - log_ref_ratio - 1).mean()
    loss = -surrogate.mean() + cfg.kl_coef * kl
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()
    return {"loss": loss.item(), "kl": kl.item(), "grad_norm": grad_norm.item()}
