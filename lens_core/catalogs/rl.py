"""The RL post-training span catalog (namespace ``nemo_rl``): groups, buckets, presets.

Importing this module registers it. It mirrors how an RL framework declares its spans:
umbrella groups time phases that contain other work and carry no bucket; leaf groups
carry the goodput bucket of what they measure. ``per_step`` deliberately omits
``per_prompt`` (its span count scales with prompts, not steps) and includes ``job`` (the
run-long root that joins the collector's rollouts to the driver's steps).
"""

from ..efficiency import register_efficiency_categories
from ..registry import Bucket, SpanRegistry

__all__ = [
    "BUCKETS",
    "COLLECTOR_LOOP_CATEGORIES",
    "EFFICIENCY_CATEGORY_BUCKET",
    "NAMESPACE",
    "PRESETS",
    "RLSpanGroup",
    "UMBRELLAS",
    "UNBUCKETED_SPAN_CATEGORIES",
    "register",
]

NAMESPACE = "nemo_rl"


class RLSpanGroup:
    """Group names; ``U_*`` aliases mark umbrellas so call sites show which kind they open."""

    JOB = U_JOB = "job"
    SETUP = U_SETUP = "setup"
    CHECKPOINT = "checkpoint"
    EVALUATE = U_EVALUATE = "evaluate"
    MODEL_INIT = U_MODEL_INIT = "model_init"
    STEP = U_STEP = "step"
    ROLLOUT = U_ROLLOUT = "rollout"
    GENERATION = "generation"
    LOGPROB = "logprob"
    REWARD = "reward"
    ADVANTAGE = "advantage"
    POLICY_UPDATE = "policy_update"
    DATA_PROCESSING = "data_processing"
    DATA_PLANE = "data_plane"
    PER_PROMPT = U_PER_PROMPT = "per_prompt"
    EFFICIENCY = "efficiency"

    ALL = (JOB, SETUP, CHECKPOINT, EVALUATE, MODEL_INIT, STEP, ROLLOUT, GENERATION, LOGPROB,
           REWARD, ADVANTAGE, POLICY_UPDATE, DATA_PROCESSING, DATA_PLANE, PER_PROMPT, EFFICIENCY)


G = RLSpanGroup
UMBRELLAS = (G.JOB, G.STEP, G.ROLLOUT, G.MODEL_INIT, G.EVALUATE, G.SETUP, G.PER_PROMPT)
BUCKETS = {
    G.GENERATION: Bucket.PRODUCTIVE,
    G.REWARD: Bucket.PRODUCTIVE,
    G.POLICY_UPDATE: Bucket.PRODUCTIVE,
    G.DATA_PROCESSING: Bucket.OVERHEAD,
    G.DATA_PLANE: Bucket.OVERHEAD,
    G.CHECKPOINT: Bucket.OVERHEAD,  # staging blocks the loop; finalize is a deferred, unbucketed child
    G.LOGPROB: Bucket.OVERHEAD,
    G.ADVANTAGE: Bucket.OVERHEAD,
    G.EFFICIENCY: Bucket.IDLE,  # efficiency_span takes the bucket from its category instead
}
PRESETS = {
    "default": (G.JOB, G.CHECKPOINT, G.EVALUATE, G.SETUP, G.MODEL_INIT),
    "per_step": (G.JOB, G.STEP, G.CHECKPOINT, G.EVALUATE, G.SETUP, G.MODEL_INIT, G.ROLLOUT,
                 G.GENERATION, G.LOGPROB, G.REWARD, G.ADVANTAGE, G.POLICY_UPDATE,
                 G.DATA_PROCESSING, G.DATA_PLANE, G.EFFICIENCY),
}

# The collector's loop waits run on its own clock, concurrent with the driver's: emitted as
# spans but never bucketed. init/total overlaps the generation fleet's work the same way.
COLLECTOR_LOOP_CATEGORIES = ("idle/refit_event_wait", "idle/generation_limit_pause")
UNBUCKETED_SPAN_CATEGORIES = COLLECTOR_LOOP_CATEGORIES + ("init/total",)
EFFICIENCY_CATEGORY_BUCKET = {
    "idle/buffer_starvation": Bucket.IDLE,
    "idle/refit_bubble": Bucket.IDLE,
    **{category: None for category in UNBUCKETED_SPAN_CATEGORIES},
}


def register() -> None:
    """Register the catalog (idempotent: an identical re-registration replaces it)."""
    SpanRegistry.register(NAMESPACE, G.ALL, PRESETS, buckets=BUCKETS, umbrellas=UMBRELLAS,
                          allow_override=NAMESPACE in SpanRegistry.namespaces())
    register_efficiency_categories(EFFICIENCY_CATEGORY_BUCKET)


register()
