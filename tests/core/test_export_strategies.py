"""Export strategies: the registry (register / unregister / list / get), use by name from
LENS_EXPORT_RANKS, and errors that list what is registered."""

import pytest

import lens_core
from lens_core.config import LensConfig
from lens_core.export_ranks import BUILTIN_STRATEGIES, export_decision, parse_export_ranks


def every_8th(rank, world_size, local_rank):
    return rank % 8 == 0


@pytest.fixture
def registered():
    """``every_8th`` registered for the test, removed afterwards."""
    lens_core.register_export_strategy("Every_8th", every_8th)
    yield every_8th
    if "every_8th" in lens_core.export_strategies():
        lens_core.unregister_export_strategy("every_8th")


def chosen(spec, world_size, local_ranks=None):
    local_ranks = local_ranks or [0] * world_size
    strategy = lens_core.get_export_strategy(spec)
    return [r for r in range(world_size) if strategy(r, world_size, local_ranks[r])]


def test_the_built_ins_are_registered_and_listed():
    assert lens_core.export_strategies() == BUILTIN_STRATEGIES == (
        "all", "first", "last", "list", "per_node", "sample")
    assert chosen("all", 4) == [0, 1, 2, 3]
    assert chosen("first", 4) == [0]
    assert chosen("last", 4) == [3]
    assert chosen("per_node", 4, local_ranks=[0, 1, 0, 1]) == [0, 2]
    assert chosen("1,3", 4) == [1, 3]
    assert chosen("sample:0.5", 4) == [0, 2]


def test_a_registered_strategy_is_listed_got_by_name_and_selected_from_the_environment(registered):
    assert "every_8th" in lens_core.export_strategies()
    assert lens_core.get_export_strategy("EVERY_8TH") is every_8th
    config = LensConfig.from_env(environ={"LENS_EXPORT_RANKS": " every_8th "})
    assert str(config.export_ranks) == "every_8th"
    assert [r for r in range(24) if config.export_ranks.exports(r, 24, 0)] == [0, 8, 16]


def test_an_unknown_name_raises_naming_the_variable_and_listing_the_registered_strategies(registered):
    with pytest.raises(ValueError) as err:
        LensConfig.from_env(environ={"LENS_EXPORT_RANKS": "every_9th"})
    assert str(err.value) == (
        "LENS_EXPORT_RANKS='every_9th': allowed: all, first, last, per_node, a list of ranks like 0,8,16, "
        "or sample:FRACTION (0 < F <= 1), or a registered strategy (every_8th)")


def test_with_none_registered_the_error_says_so():
    with pytest.raises(ValueError, match=r"or a registered strategy \(none registered\)$"):
        lens_core.get_export_strategy("mine")


@pytest.mark.parametrize("spec", ["sample", "list", "sample:0", ""])
def test_get_by_name_needs_the_argument_of_list_and_sample(spec):
    with pytest.raises(ValueError, match="allowed: all, first"):
        lens_core.get_export_strategy(spec)


@pytest.mark.parametrize("name", BUILTIN_STRATEGIES)
def test_a_built_in_cannot_be_replaced_or_unregistered(name):
    with pytest.raises(ValueError, match="built-in export strategy and cannot be replaced"):
        lens_core.register_export_strategy(name, every_8th, replace=True)
    with pytest.raises(ValueError, match="built-in export strategy and cannot be unregistered"):
        lens_core.unregister_export_strategy(name)
    assert lens_core.export_strategies() == BUILTIN_STRATEGIES


def test_registering_a_name_again_needs_replace(registered):
    def none(rank, world_size, local_rank):
        return False

    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        lens_core.register_export_strategy("every_8th", none)
    assert lens_core.get_export_strategy("every_8th") is every_8th
    lens_core.register_export_strategy("every_8th", none, replace=True)
    assert lens_core.get_export_strategy("every_8th") is none


@pytest.mark.parametrize("name", ["", "8th", "a:b", "a,b", "-x", "über", "a b"])
def test_a_name_that_would_not_read_back_from_the_environment_is_refused(name):
    with pytest.raises(ValueError, match="use letters, digits"):
        lens_core.register_export_strategy(name, every_8th)


def test_a_strategy_must_be_callable_and_a_name_a_str():
    with pytest.raises(TypeError, match="must be callable as \\(rank, world_size, local_rank\\) -> bool"):
        lens_core.register_export_strategy("x", True)
    with pytest.raises(TypeError, match="must be a str"):
        lens_core.register_export_strategy(8, every_8th)


def test_unregistering_removes_the_name_and_an_unknown_name_is_an_error(registered):
    lens_core.unregister_export_strategy("every_8th")
    assert "every_8th" not in lens_core.export_strategies()
    with pytest.raises(ValueError, match="no export strategy named 'every_8th'; allowed:"):
        lens_core.unregister_export_strategy("every_8th")


def test_a_config_whose_strategy_was_unregistered_raises_when_asked(registered):
    ranks = parse_export_ranks("every_8th")
    lens_core.unregister_export_strategy("every_8th")
    with pytest.raises(ValueError, match="'every_8th' is not registered"):
        ranks.exports(0, 8)


def test_a_strategy_returning_a_non_bool_raises_naming_it():
    def sloppy(rank, world_size, local_rank):
        return None

    with pytest.raises(TypeError, match=r"'.*sloppy' must return True or False, got NoneType: None \(rank 3 of 8\)"):
        export_decision(sloppy, 3, 8)


def test_a_failing_strategy_raises_naming_it_and_the_rank():
    def broken(rank, world_size, local_rank):
        raise KeyError("hosts")

    with pytest.raises(RuntimeError, match=r"'.*broken' failed for rank 2 of 4 \(local rank 1\): KeyError"):
        export_decision(broken, 2, 4, 1)


def test_export_decision_takes_a_spec_an_export_ranks_or_a_callable(registered):
    assert export_decision("first", 0, 4) and not export_decision("first", 1, 4)
    assert export_decision(parse_export_ranks("last"), 3, 4)
    assert export_decision("every_8th", 16, 24) and not export_decision("every_8th", 17, 24)
    assert export_decision(lambda r, w, l: r == w - 2, 2, 4)
    with pytest.raises(TypeError, match="an export strategy is a spec string"):
        export_decision(3, 0, 4)


def test_outside_lists_the_listed_ranks_beyond_the_world():
    assert parse_export_ranks("0,8,16").outside(10) == (16,)
    assert parse_export_ranks("8,16").outside(8) == (8, 16)
    assert parse_export_ranks("first").outside(1) == ()
