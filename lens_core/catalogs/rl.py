"""The RL post-training span catalog (namespace ``nemo_rl``): groups, buckets, presets, span names.

Importing this module registers it. It mirrors how an RL framework declares its spans:
umbrella groups time phases that contain other work and carry no bucket; leaf groups
carry the goodput bucket of what they measure. ``per_step`` deliberately omits
``per_prompt`` (its span count scales with prompts, not steps) and includes ``job`` (the
run-long root that joins the collector's rollouts to the driver's steps).

The span names of each algorithm are constants here (``GRPO.POLICY_TRAINING`` is
``"rl.grpo.policy_training"``), with the group that controls each one:
``check_span_name(group, name)`` raises when a name does not belong to a group, for
library authors' tests; ``lens report`` resolves a span's group, umbrella status and
"never bucketed" rule from these tables when the span carries no ``lens.group``.
"""

from ..efficiency import register_efficiency_categories
from ..registry import Bucket, SpanRegistry

__all__ = [
    "ALGORITHMS",
    "BUCKETS",
    "CATEGORY_MEASUREMENT",
    "CHECKPOINT_FINALIZE",
    "COLLECTOR_LOOP_CATEGORIES",
    "DPO",
    "DataPlane",
    "Distillation",
    "EFFICIENCY_CATEGORY_BUCKET",
    "GRPO",
    "Gym",
    "INIT_TOTAL",
    "Idle",
    "MEASUREMENT_COLLECTOR",
    "MEASUREMENT_DRIVER",
    "MEASUREMENT_THREADS",
    "NAMESPACE",
    "NEVER_BUCKETED",
    "PPO",
    "PRESETS",
    "RLSpanGroup",
    "RM",
    "SFT",
    "SFTv2",
    "SPAN_GROUPS",
    "SingleController",
    "Startup",
    "TIMER_ONLY_CATEGORIES",
    "TIMER_ONLY_METRIC",
    "UMBRELLAS",
    "UNBUCKETED_SPAN_CATEGORIES",
    "Vllm",
    "Workers",
    "category_measurement",
    "check_span_name",
    "groups_of_span",
    "register",
    "span_name_belongs",
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


# Timer-only categories: measured as efficiency/* metrics, never emitted as spans. Their
# windows are already counted (validation is overhead generation) or are thread-seconds
# that can exceed wall time (batch-worker backoff, failed trajectories).
TIMER_ONLY_CATEGORIES = ("idle/validation", "idle/buffer_full_backoff", "wasted/failed_trajectory")
# How an efficiency/* metric's seconds were measured (rl.efficiency.measurement): on the
# driver's timeline, on the collector's loop thread (sequential, but concurrent with the
# driver's), or summed over batch-worker threads (can exceed the wall time it happened in).
MEASUREMENT_DRIVER = "driver_wall_clock"
MEASUREMENT_COLLECTOR = "collector_wall_clock"
MEASUREMENT_THREADS = "thread_seconds"
CATEGORY_MEASUREMENT = {
    **{category: MEASUREMENT_COLLECTOR for category in COLLECTOR_LOOP_CATEGORIES},
    "idle/buffer_full_backoff": MEASUREMENT_THREADS,
    "wasted/failed_trajectory": MEASUREMENT_THREADS,
}


def category_measurement(category: str) -> str:
    """The ``rl.efficiency.measurement`` of ``category``'s efficiency/* metric (driver wall clock by default)."""
    return CATEGORY_MEASUREMENT.get(category, MEASUREMENT_DRIVER)


TIMER_ONLY_METRIC = "efficiency/"
"""Metric-name prefix of an efficiency category's timer: ``efficiency/`` + category (``efficiency/idle/validation``)."""


# ---- span names -----------------------------------------------------------------------------


class _Algorithm:
    """The span names of one algorithm: ``rl.<algorithm>.<phase>``, phase = its Timer key."""

    # phase -> controlling group; every algorithm emits a subset of these
    PHASE_GROUPS = {
        "job": G.JOB,
        "step": G.STEP,
        "data_processing": G.DATA_PROCESSING,
        "generation": G.ROLLOUT,
        "reward_calculation": G.REWARD,
        "policy_and_reference_logprobs": G.LOGPROB,
        "teacher_logprob_inference": G.LOGPROB,
        "advantage_calculation": G.ADVANTAGE,
        "policy_training": G.POLICY_UPDATE,
        "value_training": G.POLICY_UPDATE,
        "checkpointing": G.CHECKPOINT,
        "evaluate": G.EVALUATE,
    }

    def __init__(self, algorithm, phases):
        self.ALGORITHM = algorithm
        self.SPANS = {}
        for phase in phases:
            name = f"rl.{algorithm}.{phase}"
            setattr(self, phase.upper(), name)
            self.SPANS[name] = self.PHASE_GROUPS[phase]

    def __repr__(self):
        return f"<RL span names of {self.ALGORITHM}: {', '.join(self.SPANS)}>"


_COMMON = ("job", "step", "checkpointing", "evaluate")
GRPO = _Algorithm("grpo", _COMMON + ("data_processing", "generation", "reward_calculation",
                                     "policy_and_reference_logprobs", "advantage_calculation", "policy_training"))
PPO = _Algorithm("ppo", _COMMON + ("data_processing", "generation", "reward_calculation",
                                   "policy_and_reference_logprobs", "advantage_calculation", "policy_training",
                                   "value_training"))
SFT = _Algorithm("sft", _COMMON + ("data_processing", "policy_training"))
DPO = _Algorithm("dpo", _COMMON + ("policy_training",))
RM = _Algorithm("rm", _COMMON)
Distillation = _Algorithm("distillation", _COMMON + ("data_processing", "generation", "teacher_logprob_inference",
                                                     "policy_training"))
ALGORITHMS = (GRPO, PPO, SFT, DPO, RM, Distillation)
"""Every algorithm's span names (``GRPO.STEP``, ``PPO.VALUE_TRAINING``, ...)."""


class SingleController:
    """The SingleController path (opened inside the SingleControllerActor, where the run lives): ``rl.sc.*``.

    Phase groups follow the algorithms' Timer keys: the inference preps and value inference are
    logprob-side overhead, the training prep is data processing, the optimizer step and both
    trainings are the policy update. ``rl.sc.generate_and_push`` is the per-prompt rollout umbrella.
    """

    JOB = "rl.sc.job"
    STEP = "rl.sc.step"
    LOGPROB_INFERENCE_PREP = "rl.sc.logprob_inference_prep"
    POLICY_AND_REFERENCE_LOGPROBS = "rl.sc.policy_and_reference_logprobs"
    VALUE_INFERENCE_PREP = "rl.sc.value_inference_prep"
    VALUE_INFERENCE = "rl.sc.value_inference"
    ADVANTAGE_CALCULATION = "rl.sc.advantage_calculation"
    TRAINING_PREP = "rl.sc.training_prep"
    POLICY_TRAINING = "rl.sc.policy_training"
    POLICY_OPTIMIZER_STEP = "rl.sc.policy_optimizer_step"
    VALUE_TRAINING = "rl.sc.value_training"
    CHECKPOINTING = "rl.sc.checkpointing"
    GENERATE_AND_PUSH = "rl.sc.generate_and_push"
    SPANS = {
        JOB: (G.JOB,), STEP: (G.STEP,),
        LOGPROB_INFERENCE_PREP: (G.LOGPROB,), POLICY_AND_REFERENCE_LOGPROBS: (G.LOGPROB,),
        VALUE_INFERENCE_PREP: (G.LOGPROB,), VALUE_INFERENCE: (G.LOGPROB,),
        ADVANTAGE_CALCULATION: (G.ADVANTAGE,), TRAINING_PREP: (G.DATA_PROCESSING,),
        POLICY_TRAINING: (G.POLICY_UPDATE,), POLICY_OPTIMIZER_STEP: (G.POLICY_UPDATE,),
        VALUE_TRAINING: (G.POLICY_UPDATE,), CHECKPOINTING: (G.CHECKPOINT,),
        GENERATE_AND_PUSH: (G.PER_PROMPT,),
    }
    """Span name -> the groups that may emit it."""


class SFTv2:
    """SFT v2: the driver umbrella, the controller's job and step (all unbucketed), the loader
    owners' batch reads and preparation (data_processing), the controller's training (policy_update)."""

    DRIVER = "rl.sft_v2.driver"
    JOB = "rl.sft_v2.job"
    STEP = "rl.sft_v2.step"
    READ_BATCH = "rl.sft_v2.read_batch"
    PREPARE_BATCH = "rl.sft_v2.prepare_batch"
    POLICY_TRAINING = "rl.sft_v2.policy_training"
    SPANS = {
        DRIVER: (G.JOB,), JOB: (G.JOB,), STEP: (G.STEP,),
        READ_BATCH: (G.DATA_PROCESSING,), PREPARE_BATCH: (G.DATA_PROCESSING,),
        POLICY_TRAINING: (G.POLICY_UPDATE,),
    }
    """Span name -> the groups that may emit it."""


class Startup:
    """Startup (every algorithm), ``setup`` group: ``rl.startup`` and the phases under it."""

    STARTUP = "rl.startup"
    RAY_INIT = "rl.setup.ray_init"
    TOKENIZER = "rl.setup.tokenizer"
    DATA = "rl.setup.data"
    NEMO_GYM_CONFIG = "rl.setup.nemo_gym_config"
    WORKERS = "rl.setup.workers"
    ALL = (STARTUP, RAY_INIT, TOKENIZER, DATA, NEMO_GYM_CONFIG, WORKERS)


class DataPlane:
    """Transfer-queue operations: ``rl.data_plane.<op>``, ``data_plane`` group (``per_prompt`` in a rollout)."""

    REGISTER = "rl.data_plane.register"
    CLAIM_META = "rl.data_plane.claim_meta"
    GET_DATA = "rl.data_plane.get_data"
    CHECK_CONSUMPTION_STATUS = "rl.data_plane.check_consumption_status"
    PUT = "rl.data_plane.put"
    GET = "rl.data_plane.get"
    LIST_SAMPLE_IDS = "rl.data_plane.list_sample_ids"
    CLEAR = "rl.data_plane.clear"
    SAVE_CHECKPOINT = "rl.data_plane.save_checkpoint"
    LOAD_CHECKPOINT = "rl.data_plane.load_checkpoint"
    CLOSE = "rl.data_plane.close"
    ALL = (REGISTER, CLAIM_META, GET_DATA, CHECK_CONSUMPTION_STATUS, PUT, GET, LIST_SAMPLE_IDS, CLEAR,
           SAVE_CHECKPOINT, LOAD_CHECKPOINT, CLOSE)


class Idle:
    """Efficiency spans (``efficiency`` group), named ``rl.`` + category with ``/`` -> ``.``."""

    BUFFER_STARVATION = "rl.idle.buffer_starvation"  # driver, idle
    REFIT_BUBBLE = "rl.idle.refit_bubble"  # driver, idle
    REFIT_EVENT_WAIT = "rl.idle.refit_event_wait"  # collector loop: never bucketed
    GENERATION_LIMIT_PAUSE = "rl.idle.generation_limit_pause"  # collector loop: never bucketed
    ALL = (BUFFER_STARVATION, REFIT_BUBBLE, REFIT_EVENT_WAIT, GENERATION_LIMIT_PAUSE)


class Vllm:
    """Generation spans: driver-side ``generation`` group, worker-side ``model_init``."""

    GENERATE = "rl.vllm.generate"
    GENERATE_TEXT = "rl.vllm.generate_text"
    LOAD_MODEL = "rl.vllm.load_model"


class Workers:
    """Training workers' model loads, ``model_init`` group."""

    POLICY_LOAD_MODEL = "rl.policy.load_model"
    VALUE_LOAD_MODEL = "rl.value.load_model"


class Gym:
    """NeMo-Gym and single-controller rollout dispatch (umbrellas: these overlap)."""

    RUN_ROLLOUTS = "rl.gym.run_rollouts"  # rollout group, or per_prompt from the single controller
    GENERATE_AND_PUSH = SingleController.GENERATE_AND_PUSH  # per_prompt group


CHECKPOINT_FINALIZE = "rl.checkpoint.finalize"
"""The asynchronous checkpoint tail (``checkpoint`` group), never bucketed: it overlaps the next step."""

INIT_TOTAL = "rl.init.total"
"""The initial replay-buffer fill of async GRPO (category ``init/total``), never bucketed."""


def _span_groups():
    table = {}
    for algorithm in ALGORITHMS:
        for name, group in algorithm.SPANS.items():
            table[name] = (group,)
    table.update({name: (G.SETUP,) for name in Startup.ALL})
    table.update({name: (G.DATA_PLANE, G.PER_PROMPT) for name in DataPlane.ALL})
    table.update({name: (G.EFFICIENCY,) for name in Idle.ALL + (INIT_TOTAL,)})
    table.update({
        Vllm.GENERATE: (G.GENERATION,), Vllm.GENERATE_TEXT: (G.GENERATION,), Vllm.LOAD_MODEL: (G.MODEL_INIT,),
        Workers.POLICY_LOAD_MODEL: (G.MODEL_INIT,), Workers.VALUE_LOAD_MODEL: (G.MODEL_INIT,),
        Gym.RUN_ROLLOUTS: (G.ROLLOUT, G.PER_PROMPT), Gym.GENERATE_AND_PUSH: (G.PER_PROMPT,),
        CHECKPOINT_FINALIZE: (G.CHECKPOINT,),
    })
    table.update(SingleController.SPANS)
    table.update(SFTv2.SPANS)
    return table


SPAN_GROUPS = _span_groups()
"""Every catalogued span name -> the groups that may emit it (most have one)."""

NEVER_BUCKETED = {
    CHECKPOINT_FINALIZE: "a checkpoint finalize overlaps the next step's work",
    Idle.REFIT_EVENT_WAIT: "a collector-loop wait runs on the collector's clock, concurrent with the driver's",
    Idle.GENERATION_LIMIT_PAUSE: "a collector-loop wait runs on the collector's clock, concurrent with the driver's",
    INIT_TOTAL: "the initial buffer fill overlaps the generation fleet's work",
    **{name: "startup phases nest and run concurrently" for name in Startup.ALL},
}
"""Leaf-group span names that must carry no bucket, with the reason (their time overlaps other work)."""


def groups_of_span(name: str) -> tuple:
    """The groups that may emit span ``name`` (``()`` when the catalog does not know it)."""
    return SPAN_GROUPS.get(name, ())


def span_name_belongs(group: str, name: str) -> bool:
    """True when the catalog lists span ``name`` under ``group``."""
    return group in SPAN_GROUPS.get(name, ())


def check_span_name(group: str, name: str) -> None:
    """Raise ``ValueError`` unless span ``name`` belongs to ``group`` in this catalog.

    For library authors' tests: ``check_span_name(RLSpanGroup.POLICY_UPDATE, GRPO.POLICY_TRAINING)``.
    The message names the groups the span does belong to, or says the name is not catalogued.
    """
    if group not in G.ALL:
        raise ValueError(f"{group!r} is not a group of the {NAMESPACE} catalog; groups: {', '.join(G.ALL)}")
    groups = SPAN_GROUPS.get(name)
    if groups is None:
        raise ValueError(f"span name {name!r} is not in the {NAMESPACE} catalog")
    if group not in groups:
        raise ValueError(f"span {name!r} belongs to group {' or '.join(map(repr, groups))}, not {group!r}")


def register() -> None:
    """Register the catalog (idempotent: an identical re-registration replaces it)."""
    SpanRegistry.register(NAMESPACE, G.ALL, PRESETS, buckets=BUCKETS, umbrellas=UMBRELLAS,
                          allow_override=NAMESPACE in SpanRegistry.namespaces())
    register_efficiency_categories(EFFICIENCY_CATEGORY_BUCKET, TIMER_ONLY_CATEGORIES, CATEGORY_MEASUREMENT)


register()
