"""Ready-made GenAI client metrics (OpenTelemetry semantic conventions): duration and tokens."""

from lens_core import semconv

from otel_bridge.instruments.registry import MetricSpec

__all__ = ["GROUP", "SPECS"]

GROUP = "inference"
"""The metric group name to pass to ``record_metrics``."""

# The bucket boundaries the GenAI semantic conventions advise.
_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_TOKENS = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67108864
_TOKEN_USAGE = "Number of input and output tokens used."

SPECS = (
    MetricSpec("operation_duration", semconv.GEN_AI_CLIENT_OPERATION_DURATION, "histogram", "s",
               "GenAI operation duration.", boundaries=_SECONDS),
    MetricSpec("input_tokens", semconv.GEN_AI_CLIENT_TOKEN_USAGE, "histogram", "{token}", _TOKEN_USAGE,
               attributes={semconv.GEN_AI_TOKEN_TYPE: "input"}, boundaries=_TOKENS),
    MetricSpec("output_tokens", semconv.GEN_AI_CLIENT_TOKEN_USAGE, "histogram", "{token}", _TOKEN_USAGE,
               attributes={semconv.GEN_AI_TOKEN_TYPE: "output"}, boundaries=_TOKENS),
)
"""Keys: operation_duration (s), input_tokens and output_tokens (one histogram, by token type)."""
