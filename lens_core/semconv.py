"""Attribute names lens emits: the one place they are spelled (stdlib only)."""

__all__ = [
    "LENS_SPAN_TRUNCATED",
    "RL_BUCKET",
    "RL_EFFICIENCY_CATEGORY",
    "RL_IDLE_POLLS",
    "RL_ITERATION",
]

# Span attributes stamped by lens_core itself.
RL_BUCKET = "rl.bucket"
RL_ITERATION = "rl.iteration"
RL_EFFICIENCY_CATEGORY = "rl.efficiency.category"
RL_IDLE_POLLS = "rl.idle.polls"
LENS_SPAN_TRUNCATED = "lens.span.truncated"
