"""Metric registry and the ready-made inference, RL and training metric groups."""

from . import inference, rl, training
from .registry import KINDS, OBSERVABLE_KINDS, MetricSpec, record_metrics, register_metric_group

__all__ = [
    "INFERENCE",
    "KINDS",
    "MetricSpec",
    "OBSERVABLE_KINDS",
    "RL",
    "TRAINING",
    "record_metrics",
    "register_metric_group",
]

INFERENCE = inference.GROUP
"""Group of GenAI client metrics (see ``otel_bridge.instruments.inference``)."""
RL = rl.GROUP
"""Group of RL training metrics (see ``otel_bridge.instruments.rl``)."""
TRAINING = training.GROUP
"""Group of training-step metrics (see ``otel_bridge.instruments.training``)."""

for _module in (inference, rl, training):
    register_metric_group(_module.GROUP, _module.SPECS)
del _module
