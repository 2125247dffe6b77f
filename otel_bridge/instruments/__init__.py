"""Metric registry and the ready-made inference, RL, training and Gym metric groups."""

from otel_bridge.instruments import gym, inference, rl, training
from otel_bridge.instruments.registry import KINDS, OBSERVABLE_KINDS, MetricSpec, record_metrics, register_metric_group

__all__ = [
    "GYM",
    "INFERENCE",
    "KINDS",
    "MetricSpec",
    "OBSERVABLE_KINDS",
    "RL",
    "TRAINING",
    "record_metrics",
    "register_metric_group",
]

GYM = gym.GROUP
"""Group of Gym environment-server metrics (see ``otel_bridge.instruments.gym``)."""
INFERENCE = inference.GROUP
"""Group of GenAI client metrics (see ``otel_bridge.instruments.inference``)."""
RL = rl.GROUP
"""Group of RL training metrics (see ``otel_bridge.instruments.rl``)."""
TRAINING = training.GROUP
"""Group of training-step metrics (see ``otel_bridge.instruments.training``)."""

for _module in (gym, inference, rl, training):
    register_metric_group(_module.GROUP, _module.SPECS)
del _module
