"""The RL catalog matches the seed's tables: groups, their buckets or umbrella status, and the presets."""

import pytest

from lens_core import Bucket, SpanRegistry

# "RLSpanGroup" table of the seed: every group an RL framework registers.
SEED_GROUPS = {
    "job", "setup", "checkpoint", "evaluate", "model_init", "step", "rollout", "generation", "logprob",
    "reward", "advantage", "policy_update", "data_processing", "data_plane", "per_prompt", "efficiency",
}
# "Span group -> rl.bucket" table of the seed.
SEED_UMBRELLAS = {"job", "step", "rollout", "model_init", "evaluate", "setup", "per_prompt"}
SEED_BUCKETS = {
    "generation": Bucket.PRODUCTIVE, "reward": Bucket.PRODUCTIVE, "policy_update": Bucket.PRODUCTIVE,
    "data_processing": Bucket.OVERHEAD, "data_plane": Bucket.OVERHEAD, "checkpoint": Bucket.OVERHEAD,
    "logprob": Bucket.OVERHEAD, "advantage": Bucket.OVERHEAD,
    "efficiency": Bucket.IDLE,  # idle for the driver-side phases; the collector's carry none
}
# "Preset keywords" table of the seed.
SEED_DEFAULT = {"job", "checkpoint", "evaluate", "setup", "model_init"}
SEED_PER_STEP = {
    "job", "step", "checkpoint", "evaluate", "setup", "model_init", "rollout", "generation", "logprob",
    "reward", "advantage", "policy_update", "data_processing", "data_plane", "efficiency",
}


def test_the_catalog_registers_exactly_the_seeds_groups_under_nemo_rl(rl):
    assert rl.NAMESPACE == "nemo_rl"
    assert SpanRegistry.namespaces() == {"nemo_rl": frozenset(SEED_GROUPS)}
    assert set(rl.RLSpanGroup.ALL) == SEED_GROUPS


@pytest.mark.parametrize("group", sorted(SEED_GROUPS))
def test_each_group_is_an_umbrella_or_a_leaf_with_the_seeds_bucket(rl, group):
    info = SpanRegistry.group_info(group)
    assert info.umbrella == (group in SEED_UMBRELLAS)
    assert info.bucket == SEED_BUCKETS.get(group)
    assert info.declared


def test_umbrella_aliases_name_exactly_the_umbrella_groups(rl):
    aliases = {name[2:].lower(): value for name, value in vars(rl.RLSpanGroup).items() if name.startswith("U_")}
    assert set(aliases.values()) == SEED_UMBRELLAS
    assert all(key == value for key, value in aliases.items())


def test_preset_default_is_the_seeds_coarse_set(rl):
    assert SpanRegistry.resolve("default")[0] == SEED_DEFAULT


def test_preset_per_step_includes_job_and_omits_per_prompt(rl):
    enabled, pending = SpanRegistry.resolve("per_step")
    assert enabled == SEED_PER_STEP and not pending
    assert "job" in enabled and "per_prompt" not in enabled


def test_preset_all_is_every_group_job_and_per_prompt_included(rl):
    assert SpanRegistry.resolve("all")[0] == SEED_GROUPS


def test_per_step_plus_per_prompt_adds_only_per_prompt(rl):
    assert SpanRegistry.resolve("per_step,per_prompt")[0] == SEED_PER_STEP | {"per_prompt"}


def test_all_minus_per_prompt_equals_per_step(rl):
    assert SpanRegistry.resolve("all,-per_prompt")[0] == SpanRegistry.resolve("per_step")[0]


def test_the_seeds_explicit_list_without_job_is_per_step_minus_job(rl):
    spec = ("step,checkpoint,evaluate,setup,model_init,rollout,generation,logprob,reward,advantage,"
            "policy_update,data_processing,data_plane,efficiency")
    assert SpanRegistry.resolve(spec)[0] == SEED_PER_STEP - {"job"}
    assert SpanRegistry.resolve("per_step,-job")[0] == SEED_PER_STEP - {"job"}


def test_presets_resolve_case_insensitively_with_spaces(rl):
    assert SpanRegistry.resolve(" Per_Step , PER_PROMPT ")[0] == SEED_PER_STEP | {"per_prompt"}


def test_efficiency_categories_are_registered_with_the_seeds_buckets(rl):
    from lens_core.efficiency import category_bucket

    assert category_bucket("idle/buffer_starvation") == Bucket.IDLE
    assert category_bucket("idle/refit_bubble") == Bucket.IDLE
    for category in ("idle/refit_event_wait", "idle/generation_limit_pause", "init/total"):
        assert category_bucket(category) is None
