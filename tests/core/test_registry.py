"""SpanRegistry: namespaces, groups, presets, ownership, ids, buckets and spec resolution."""

import pytest

import lens_core
from lens_core import Bucket, SpanRegistry


def register_trainer(**kwargs):
    """A typical library: three groups, two presets."""
    SpanRegistry.register(
        "trainer",
        ["job", "step", "microbatch"],
        {"default": ["job", "step"], "per_step": ["job", "step", "microbatch"]},
        **kwargs,
    )


# ---- names ----------------------------------------------------------------------------


def test_group_preset_and_namespace_names_are_stripped_and_lower_cased():
    SpanRegistry.register(" Trainer ", [" Step ", "JOB"], {" Default ": ["STEP "]})
    assert SpanRegistry.groups() == {"step", "job"}
    assert SpanRegistry.namespaces() == {"trainer": frozenset({"step", "job"})}
    assert SpanRegistry.presets()["default"] == {"step"}


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_group_name_is_rejected(bad):
    with pytest.raises(ValueError, match="must not be empty"):
        SpanRegistry.register("lib", ["ok", bad])
    assert SpanRegistry.groups() == frozenset()


def test_empty_namespace_is_rejected():
    with pytest.raises(ValueError, match="must not be empty"):
        SpanRegistry.register("  ", ["g"])


def test_empty_preset_name_is_rejected():
    with pytest.raises(ValueError, match="must not be empty"):
        SpanRegistry.register("lib", ["g"], {"": ["g"]})


@pytest.mark.parametrize("name", ["all", " ALL "])
def test_group_named_all_is_rejected(name):
    with pytest.raises(ValueError, match="'all' is reserved"):
        SpanRegistry.register("lib", ["g", name])
    assert SpanRegistry.namespaces() == {}


@pytest.mark.parametrize("name", ["all", "All"])
def test_preset_named_all_is_rejected(name):
    with pytest.raises(ValueError, match="'all' is built in"):
        SpanRegistry.register("lib", ["g"], {name: ["g"]})
    assert SpanRegistry.namespaces() == {}


@pytest.mark.parametrize("name", ["a,b", "-neg"])
def test_names_using_spec_syntax_are_rejected(name):
    with pytest.raises(ValueError, match="spec syntax"):
        SpanRegistry.register("lib", [name])


def test_non_str_group_name_raises_type_error():
    with pytest.raises(TypeError, match="group name must be a str"):
        SpanRegistry.register("lib", ["g", 3])


# ---- readers --------------------------------------------------------------------------


def test_groups_lists_every_group_of_every_namespace():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    assert SpanRegistry.groups() == {"job", "step", "microbatch", "generate"}


def test_namespaces_maps_each_namespace_to_its_groups():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    assert SpanRegistry.namespaces() == {
        "trainer": frozenset({"job", "step", "microbatch"}),
        "rollout": frozenset({"generate"}),
    }


def test_presets_of_the_same_name_are_unioned_across_namespaces():
    register_trainer()
    SpanRegistry.register("rollout", ["generate", "reward"], {"default": ["generate"]})
    assert SpanRegistry.presets()["default"] == {"job", "step", "generate"}


def test_all_preset_is_every_registered_group():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    presets = SpanRegistry.presets()
    assert presets["all"] == {"job", "step", "microbatch", "generate"}
    assert set(presets) == {"all", "default", "per_step"}


def test_preset_members_may_name_groups_another_namespace_registered_earlier():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"], {"rl": ["generate", "step"]})
    assert SpanRegistry.presets()["rl"] == {"generate", "step"}


def test_presets_are_pruned_to_registered_groups_when_the_owner_leaves():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"], {"rl": ["generate", "step"]})
    SpanRegistry.unregister("trainer")
    assert SpanRegistry.presets()["rl"] == {"generate"}
    assert "per_step" not in SpanRegistry.presets()


def test_preset_with_unknown_member_raises_with_a_hint_to_import_the_owner_first():
    register_trainer()
    with pytest.raises(ValueError) as err:
        SpanRegistry.register("rollout", ["generate"], {"rl": ["generate", "weight_sync"]})
    message = str(err.value)
    assert "weight_sync" in message
    assert "import the library that registers them first" in message
    assert "Registered groups: generate, job, microbatch, step" in message
    assert "rollout" not in SpanRegistry.namespaces()


# ---- ownership and re-registration ----------------------------------------------------------


def test_group_owned_by_another_namespace_needs_allow_override():
    register_trainer()
    with pytest.raises(ValueError, match=r"step \(owned by 'trainer'\).*allow_override=True"):
        SpanRegistry.register("rollout", ["generate", "step"])
    assert "rollout" not in SpanRegistry.namespaces()


def test_group_shared_with_allow_override_is_owned_by_both_namespaces():
    register_trainer()
    SpanRegistry.register("rollout", ["generate", "step"], allow_override=True)
    assert SpanRegistry.group_info("step").owners == ("trainer", "rollout")
    assert SpanRegistry.namespaces()["rollout"] == {"generate", "step"}


def test_enabling_a_shared_group_turns_on_both_libraries_spans(recorder):
    register_trainer()
    SpanRegistry.register("rollout", ["generate", "step"], allow_override=True)
    lens_core.set_span_group_spec("step")
    with lens_core.managed_span("step", "trainer.step"):
        pass
    with lens_core.managed_span("step", "rollout.step"):
        pass
    with lens_core.managed_span("generate", "rollout.generate"):
        pass
    assert recorder.names() == ["trainer.step", "rollout.step"]


def test_unregistering_one_owner_keeps_a_shared_group():
    register_trainer()
    SpanRegistry.register("rollout", ["step"], allow_override=True)
    SpanRegistry.unregister("rollout")
    assert "step" in SpanRegistry.groups()
    assert SpanRegistry.group_info("step").owners == ("trainer",)


def test_reregistering_a_namespace_without_allow_override_raises():
    register_trainer()
    with pytest.raises(ValueError, match="'trainer' is already registered"):
        SpanRegistry.register("Trainer", ["other"])
    assert SpanRegistry.namespaces()["trainer"] == {"job", "step", "microbatch"}


def test_reregistering_with_allow_override_replaces_the_namespace_whole():
    register_trainer(buckets={"step": Bucket.PRODUCTIVE})
    SpanRegistry.register("trainer", ["step", "eval"], {"fast": ["eval"]}, allow_override=True)
    assert SpanRegistry.groups() == {"step", "eval"}
    assert set(SpanRegistry.presets()) == {"all", "fast"}
    assert SpanRegistry.bucket_of("step") == Bucket.OVERHEAD  # the old declaration is gone


def test_unregister_reports_whether_the_namespace_was_registered():
    register_trainer()
    assert SpanRegistry.unregister(" TRAINER ") is True
    assert SpanRegistry.unregister("trainer") is False
    assert SpanRegistry.groups() == frozenset()


def test_clear_forgets_every_namespace_and_restarts_ids():
    register_trainer()
    SpanRegistry.clear()
    assert SpanRegistry.namespaces() == {}
    assert SpanRegistry.groups() == frozenset()
    SpanRegistry.register("lib", ["x"])
    assert SpanRegistry.group_info("x").id == 0


# ---- ids ------------------------------------------------------------------------------


def test_group_ids_are_small_ints_in_registration_order():
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    ids = {g: SpanRegistry.group_info(g).id for g in ("job", "step", "microbatch", "generate")}
    assert ids == {"job": 0, "step": 1, "microbatch": 2, "generate": 3}


def test_group_ids_are_stable_when_a_namespace_is_replaced():
    register_trainer()
    SpanRegistry.register("trainer", ["microbatch", "eval", "job"], allow_override=True)
    assert SpanRegistry.group_info("job").id == 0
    assert SpanRegistry.group_info("microbatch").id == 2
    assert SpanRegistry.group_info("eval").id == 3


def test_group_ids_are_not_reused_after_unregister():
    register_trainer()
    SpanRegistry.unregister("trainer")
    SpanRegistry.register("rollout", ["generate"])
    SpanRegistry.register("trainer", ["step"])
    assert SpanRegistry.group_info("generate").id == 3
    assert SpanRegistry.group_info("step").id == 1


def test_more_than_64_groups_work_and_only_the_enabled_one_is_on(recorder):
    names = [f"g{i}" for i in range(200)]
    SpanRegistry.register("big", names)
    assert SpanRegistry.group_info("g149").id == 149
    lens_core.set_span_group_spec("g149")
    assert lens_core.enabled_span_groups() == {"g149"}
    on = [n for n in names if lens_core.is_span_group_enabled(n)]
    assert on == ["g149"]
    for n in ("g21", "g85", "g148", "g149", "g150", "g199"):  # g21 / g85: same bit mod 64
        with lens_core.managed_span(n, f"span.{n}"):
            pass
    assert recorder.names() == ["span.g149"]


# ---- buckets and umbrellas ----------------------------------------------------------------


def test_bucket_of_returns_the_declared_bucket():
    register_trainer(buckets={"step": Bucket.PRODUCTIVE, "microbatch": "idle"})
    assert SpanRegistry.bucket_of("step") == "productive"
    assert SpanRegistry.bucket_of(" MicroBatch ") == "idle"


def test_bucket_of_a_leaf_without_a_declared_bucket_is_overhead():
    register_trainer()
    assert SpanRegistry.bucket_of("microbatch") == "overhead"


def test_bucket_of_an_umbrella_or_unregistered_group_is_none():
    register_trainer(umbrellas=["job"])
    assert SpanRegistry.bucket_of("job") is None
    assert SpanRegistry.bucket_of("nope") is None


def test_is_umbrella_is_true_only_for_declared_umbrellas():
    register_trainer(umbrellas=["JOB"])
    assert SpanRegistry.is_umbrella("job") is True
    assert SpanRegistry.is_umbrella("step") is False
    assert SpanRegistry.is_umbrella("nope") is False


def test_group_info_describes_a_group_under_any_spelling():
    register_trainer(buckets={"step": "wasted"}, bucket_key="x.bucket")
    info = SpanRegistry.group_info(" STEP ")
    assert (info.name, info.id, info.owners, info.umbrella, info.bucket, info.bucket_key, info.declared) == (
        "step", 1, ("trainer",), False, "wasted", "x.bucket", True)
    assert SpanRegistry.group_info("nope") is None


def test_unknown_bucket_is_rejected_naming_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed buckets: productive, overhead, idle, wasted"):
        SpanRegistry.register("lib", ["g"], buckets={"g": "useful"})


def test_buckets_and_umbrellas_must_name_the_namespaces_own_groups():
    with pytest.raises(ValueError, match="buckets name groups it does not register: h"):
        SpanRegistry.register("lib", ["g"], buckets={"h": "idle"})
    with pytest.raises(ValueError, match="umbrellas name groups it does not register: h"):
        SpanRegistry.register("lib", ["g"], umbrellas=["h"])


def test_a_group_cannot_be_both_umbrella_and_bucketed():
    with pytest.raises(ValueError, match="both umbrella and bucketed: g"):
        SpanRegistry.register("lib", ["g"], buckets={"g": "idle"}, umbrellas=["g"])


# ---- conflicting declarations of a shared group ------------------------------------------


def _conflict_warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "lens_core" and "is declared differently" in r.getMessage()]


def _register_both(first, second):
    """Register two namespaces sharing 'step', in the given order."""
    for namespace, kwargs in (first, second):
        SpanRegistry.register(namespace, ["step"], allow_override=True, **kwargs)


@pytest.mark.parametrize("reverse", [False, True])
def test_umbrella_beats_a_bucket_whatever_the_import_order(reverse, caplog):
    """Regression: import order silently decided a shared group's classification."""
    decls = [("trainer", {"buckets": {"step": Bucket.PRODUCTIVE}}), ("rollout", {"umbrellas": ["step"]})]
    _register_both(*(decls[::-1] if reverse else decls))
    info = SpanRegistry.group_info("step")
    assert (info.umbrella, info.bucket) == (True, None)
    assert set(info.owners) == {"trainer", "rollout"}
    [message] = _conflict_warnings(caplog)
    assert "'rollout' declares it an umbrella" in message
    assert "'trainer' declares it bucket 'productive'" in message
    assert "Using 'rollout''s declaration" in message


@pytest.mark.parametrize("reverse", [False, True])
def test_the_bucket_claiming_less_goodput_wins_whatever_the_import_order(reverse, caplog):
    decls = [("a", {"buckets": {"step": Bucket.PRODUCTIVE}}), ("b", {"buckets": {"step": Bucket.IDLE}})]
    _register_both(*(decls[::-1] if reverse else decls))
    assert SpanRegistry.bucket_of("step") == Bucket.IDLE
    [message] = _conflict_warnings(caplog)
    assert "'a' declares it bucket 'productive'; 'b' declares it bucket 'idle'" in message


@pytest.mark.parametrize("reverse", [False, True])
def test_equal_buckets_under_different_keys_go_to_the_namespace_sorting_first(reverse, caplog):
    decls = [("zeta", {"buckets": {"step": "idle"}, "bucket_key": "z.bucket"}),
             ("alpha", {"buckets": {"step": "idle"}, "bucket_key": "a.bucket"})]
    _register_both(*(decls[::-1] if reverse else decls))
    assert SpanRegistry.group_info("step").bucket_key == "a.bucket"
    [message] = _conflict_warnings(caplog)
    assert "'alpha' declares it bucket 'idle' under 'a.bucket'" in message
    assert "'zeta' declares it bucket 'idle' under 'z.bucket'" in message


def test_the_conflict_warning_is_logged_once(caplog):
    _register_both(("a", {"umbrellas": ["step"]}), ("b", {"buckets": {"step": "idle"}}))
    SpanRegistry.register("c", ["other"])  # republishes the view: the same conflict is still there
    SpanRegistry.register("b", ["step"], buckets={"step": "idle"}, allow_override=True)
    assert len(_conflict_warnings(caplog)) == 1


def test_the_same_declaration_in_both_namespaces_is_no_conflict(caplog):
    _register_both(("a", {"buckets": {"step": "idle"}}), ("b", {"buckets": {"step": "idle"}}))
    SpanRegistry.register("c", ["step"], umbrellas=[], allow_override=True)  # declares nothing
    assert SpanRegistry.bucket_of("step") == "idle"
    assert _conflict_warnings(caplog) == []


def test_two_umbrellas_under_different_bucket_keys_are_no_conflict(caplog):
    _register_both(("a", {"umbrellas": ["step"]}), ("b", {"umbrellas": ["step"], "bucket_key": "b.bucket"}))
    assert SpanRegistry.is_umbrella("step")
    assert _conflict_warnings(caplog) == []


@pytest.mark.parametrize("reverse", [False, True])
def test_an_explicit_declaration_beats_an_owner_that_declared_nothing(reverse, caplog):
    decls = [("a", {}), ("b", {"umbrellas": ["step"]})]
    _register_both(*(decls[::-1] if reverse else decls))
    assert SpanRegistry.group_info("step").declared and SpanRegistry.is_umbrella("step")
    assert _conflict_warnings(caplog) == []


def test_a_conflicting_shared_group_classifies_spans_by_the_winning_declaration(recorder):
    _register_both(("trainer", {"buckets": {"step": Bucket.PRODUCTIVE}}), ("rollout", {"umbrellas": ["step"]}))
    lens_core.set_span_group_spec("step")
    with lens_core.managed_span("step", "trainer.step"):
        pass
    assert "rl.bucket" not in recorder.spans[0].attributes


# ---- spec resolution ----------------------------------------------------------------------


def test_resolve_unions_presets_and_bare_group_names():
    register_trainer()
    SpanRegistry.register("rollout", ["generate", "reward"])
    assert SpanRegistry.resolve("default,generate") == ({"job", "step", "generate"}, frozenset())


def test_resolve_is_case_insensitive_and_whitespace_tolerant():
    register_trainer()
    assert SpanRegistry.resolve("  DEFAULT ,  MicroBatch ,, ") == ({"job", "step", "microbatch"}, frozenset())


def test_resolve_accepts_an_iterable_of_entries():
    register_trainer()
    assert SpanRegistry.resolve(["Step", " microbatch"]) == ({"step", "microbatch"}, frozenset())


def test_negated_group_is_removed_after_the_union():
    register_trainer()
    assert SpanRegistry.resolve("per_step,-job")[0] == {"step", "microbatch"}
    assert SpanRegistry.resolve("-job,per_step")[0] == {"step", "microbatch"}


def test_negated_preset_is_removed_from_all():
    register_trainer()
    SpanRegistry.register("rollout", ["generate", "reward"], {"per_prompt": ["generate", "reward"]})
    assert SpanRegistry.resolve("all,-per_prompt")[0] == {"job", "step", "microbatch"}
    assert SpanRegistry.resolve("all, - Default")[0] == {"microbatch", "generate", "reward"}


def test_unknown_entries_are_returned_as_pending():
    register_trainer()
    assert SpanRegistry.resolve("step,Nope,-ghost") == ({"step"}, {"nope", "-ghost"})


def test_empty_spec_resolves_to_nothing():
    register_trainer()
    assert SpanRegistry.resolve("") == (frozenset(), frozenset())
    assert SpanRegistry.resolve(None) == (frozenset(), frozenset())


def test_validate_returns_the_enabled_set_for_a_known_spec():
    register_trainer()
    assert SpanRegistry.validate("default,-job") == {"step"}


def test_validate_raises_listing_unknown_entries_and_valid_names():
    register_trainer()
    with pytest.raises(ValueError) as err:
        SpanRegistry.validate("step,nope")
    assert str(err.value) == (
        "unknown span-group spec entries: nope. Presets: all, default, per_step. "
        "Groups: job, microbatch, step. Namespaces: trainer."
    )


def test_validate_with_nothing_registered_says_so():
    with pytest.raises(ValueError, match="No span groups are registered"):
        SpanRegistry.validate("step")


def test_the_all_preset_exists_before_anything_is_registered():
    """Regression: presets() was {} until a first registration, then had 'all'."""
    assert SpanRegistry.presets() == {"all": frozenset()}
