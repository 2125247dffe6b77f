"""Ready-made RL training metrics: reward, KL, losses, entropy, optimizer state, throughput, durations, response length."""

from lens_core import semconv

from otel_bridge.instruments.registry import SECONDS_BOUNDARIES, MetricSpec

__all__ = ["GROUP", "SPECS"]

GROUP = "rl"
"""The metric group name to pass to ``record_metrics``."""

# Response lengths in tokens: powers of two from 16 to 128k (a response cut at the length
# limit lands in the bucket of the limit).
_TOKENS = tuple(2**i for i in range(4, 18))

SPECS = (
    MetricSpec("reward_mean", semconv.RL_REWARD_MEAN, "gauge", "1", "Mean reward of the step's rollouts."),
    MetricSpec("kl", semconv.RL_KL, "gauge", "1", "KL divergence of the policy from the reference."),
    MetricSpec("policy_loss", semconv.RL_POLICY_LOSS, "gauge", "1", "Policy loss."),
    MetricSpec("value_loss", semconv.RL_VALUE_LOSS, "gauge", "1", "Value (critic) loss."),
    MetricSpec("entropy", semconv.RL_ENTROPY, "gauge", "1", "Policy entropy."),
    MetricSpec("grad_norm", semconv.RL_GRAD_NORM, "gauge", "1", "Gradient norm before clipping."),
    MetricSpec("learning_rate", semconv.RL_LEARNING_RATE, "gauge", "1", "Optimizer learning rate."),
    MetricSpec("tokens_per_second", semconv.RL_TOKENS_THROUGHPUT, "gauge", "{token}/s",
               "Tokens processed per second."),
    MetricSpec("generation_duration", semconv.RL_GENERATION_DURATION, "histogram", "s",
               "Duration of a generation phase.", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("rollout_duration", semconv.RL_ROLLOUT_DURATION, "histogram", "s",
               "Duration of a rollout.", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("response_length", semconv.RL_RESPONSE_LENGTH, "histogram", "{token}",
               "Length of one generated response.", boundaries=_TOKENS),
    MetricSpec("response_length_mean", semconv.RL_RESPONSE_MEAN_LENGTH, "gauge", "{token}",
               "Mean length of the step's generated responses."),
    MetricSpec("setup_duration", semconv.RL_SETUP_DURATION, "histogram", "s",
               "Duration of one startup phase (attribute phase: ray_init, tokenizer, data, nemo_gym_config, "
               "workers, or total_setup for the flat total).", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("init_total", semconv.INIT_TOTAL_METRIC, "histogram", "s",
               "The initial replay-buffer fill before the first step (async GRPO); bucket overhead.",
               attributes={semconv.RL_BUCKET: "overhead"}, boundaries=SECONDS_BOUNDARIES),
)
"""Keys: reward_mean, kl, policy_loss, value_loss, entropy, grad_norm, learning_rate,
tokens_per_second, generation_duration, rollout_duration, response_length (one value per
response), response_length_mean, setup_duration (pass ``attributes={"phase": ...}``; ``phase=total_setup``
is the flat startup total), init_total."""
