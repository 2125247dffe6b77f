"""Ready-made training-step metrics: step duration, loss, throughput and GPU memory."""

from lens_core import semconv

from otel_bridge.instruments.registry import SECONDS_BOUNDARIES, MetricSpec

__all__ = ["GROUP", "SPECS"]

GROUP = "training"
"""The metric group name to pass to ``record_metrics``."""

SPECS = (
    MetricSpec("step_duration", semconv.NV_DL_TRAINING_STEP_DURATION, "histogram", "s",
               "Duration of a training step.", boundaries=SECONDS_BOUNDARIES),
    MetricSpec("loss", semconv.NV_DL_TRAINING_LOSS, "gauge", "1", "Training loss."),
    MetricSpec("samples_per_second", semconv.NV_DL_TRAINING_SAMPLES_THROUGHPUT, "gauge", "{sample}/s",
               "Samples processed per second."),
    MetricSpec("tokens_per_second", semconv.NV_DL_TRAINING_TOKENS_THROUGHPUT, "gauge", "{token}/s",
               "Tokens processed per second."),
    MetricSpec("gpu_memory_allocated", semconv.NV_GPU_MEMORY_ALLOCATED, "gauge", "By",
               "GPU memory held by tensors."),
    MetricSpec("gpu_memory_reserved", semconv.NV_GPU_MEMORY_RESERVED, "gauge", "By",
               "GPU memory held by the caching allocator."),
)
"""Keys: step_duration, loss, samples_per_second, tokens_per_second, gpu_memory_allocated,
gpu_memory_reserved."""
