"""The RL span-name catalog matches the seed's per-algorithm table, and check_span_name guards library tests."""

import subprocess
import sys

import pytest

from lens_core.catalogs import rl

# "Per-algorithm span names" table of the seed: algorithm -> its spans
SEED_ALGORITHM_SPANS = {
    "grpo": {"job", "step", "data_processing", "generation", "reward_calculation", "policy_and_reference_logprobs",
             "advantage_calculation", "policy_training", "checkpointing", "evaluate"},
    "ppo": {"job", "step", "data_processing", "generation", "reward_calculation", "policy_and_reference_logprobs",
            "advantage_calculation", "policy_training", "value_training", "checkpointing", "evaluate"},
    "sft": {"job", "step", "data_processing", "policy_training", "checkpointing", "evaluate"},
    "dpo": {"job", "step", "policy_training", "checkpointing", "evaluate"},
    "rm": {"job", "step", "checkpointing", "evaluate"},
    "distillation": {"job", "step", "data_processing", "generation", "teacher_logprob_inference", "policy_training",
                     "checkpointing", "evaluate"},
}
SEED_DATA_PLANE_OPS = {"register", "claim_meta", "get_data", "check_consumption_status", "put", "get",
                       "list_sample_ids", "clear", "save_checkpoint", "load_checkpoint", "close"}


@pytest.mark.parametrize("algorithm", rl.ALGORITHMS, ids=lambda a: a.ALGORITHM)
def test_each_algorithm_has_exactly_the_seeds_spans_as_constants(algorithm):
    phases = {name.split(".", 2)[2] for name in algorithm.SPANS}
    assert phases == SEED_ALGORITHM_SPANS[algorithm.ALGORITHM]
    for phase in phases:
        assert getattr(algorithm, phase.upper()) == f"rl.{algorithm.ALGORITHM}.{phase}"


def test_span_names_belong_to_the_groups_the_seed_gives_them():
    G = rl.RLSpanGroup
    assert rl.groups_of_span(rl.GRPO.STEP) == (G.STEP,)
    assert rl.groups_of_span(rl.GRPO.GENERATION) == (G.ROLLOUT,)
    assert rl.groups_of_span(rl.PPO.VALUE_TRAINING) == (G.POLICY_UPDATE,)
    assert rl.groups_of_span(rl.GRPO.POLICY_AND_REFERENCE_LOGPROBS) == (G.LOGPROB,)
    assert rl.groups_of_span(rl.Vllm.GENERATE) == (G.GENERATION,)
    assert rl.groups_of_span(rl.Workers.POLICY_LOAD_MODEL) == (G.MODEL_INIT,)
    assert rl.groups_of_span(rl.CHECKPOINT_FINALIZE) == (G.CHECKPOINT,)
    assert rl.groups_of_span(rl.DataPlane.PUT) == (G.DATA_PLANE, G.PER_PROMPT)
    assert {name.rsplit(".", 1)[1] for name in rl.DataPlane.ALL} == SEED_DATA_PLANE_OPS
    assert all(rl.groups_of_span(name) == (G.SETUP,) for name in rl.Startup.ALL)
    assert rl.groups_of_span("rl.grpo.nonsense") == ()


def test_efficiency_span_names_follow_their_categories():
    from lens_core.efficiency import span_name_for

    for category in ("idle/buffer_starvation", "idle/refit_bubble", *rl.COLLECTOR_LOOP_CATEGORIES):
        assert rl.groups_of_span(span_name_for(category)) == (rl.RLSpanGroup.EFFICIENCY,)
    assert span_name_for("init/total") == rl.INIT_TOTAL


def test_the_never_bucketed_spans_are_finalize_the_collector_waits_init_and_startup():
    assert set(rl.NEVER_BUCKETED) == {rl.CHECKPOINT_FINALIZE, rl.Idle.REFIT_EVENT_WAIT, rl.Idle.GENERATION_LIMIT_PAUSE,
                                      rl.INIT_TOTAL, *rl.Startup.ALL}
    assert rl.TIMER_ONLY_CATEGORIES == ("idle/validation", "idle/buffer_full_backoff", "wasted/failed_trajectory")


def test_check_span_name_passes_a_name_of_its_group_and_says_what_is_wrong_otherwise():
    rl.check_span_name(rl.RLSpanGroup.POLICY_UPDATE, rl.GRPO.POLICY_TRAINING)
    rl.check_span_name(rl.RLSpanGroup.PER_PROMPT, rl.DataPlane.PUT)
    with pytest.raises(ValueError, match=r"^span 'rl.grpo.policy_training' belongs to group 'policy_update', "
                                         r"not 'step'$"):
        rl.check_span_name("step", rl.GRPO.POLICY_TRAINING)
    with pytest.raises(ValueError, match="span name 'rl.grpo.typo' is not in the nemo_rl catalog"):
        rl.check_span_name("step", "rl.grpo.typo")
    with pytest.raises(ValueError, match="'stepz' is not a group of the nemo_rl catalog; groups: job, setup"):
        rl.check_span_name("stepz", rl.GRPO.STEP)


def test_importing_lens_core_does_not_import_the_catalog():
    code = "import sys, lens_core; print('lens_core.catalogs.rl' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
