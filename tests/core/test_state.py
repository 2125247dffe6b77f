"""State: the retained spec, pinned sets, backend-gated enabling, warnings and concurrency."""

import logging
import threading

import pytest

import lens_core
from lens_core import SpanRegistry, state


def register_trainer():
    SpanRegistry.register("trainer", ["job", "step", "microbatch"], {"default": ["job", "step"]})


def lens_warnings(caplog):
    """The WARNING messages logged on the lens_core logger."""
    return [r.getMessage() for r in caplog.records if r.name == "lens_core" and r.levelno == logging.WARNING]


@pytest.fixture
def warnings_log(caplog):
    caplog.set_level(logging.WARNING, logger="lens_core")
    return caplog


# ---- enabled / pending ----------------------------------------------------------------------


def test_set_span_group_spec_returns_and_enables_what_it_resolves_to(recorder):
    register_trainer()
    assert lens_core.set_span_group_spec("default") == {"job", "step"}
    assert lens_core.enabled_span_groups() == {"job", "step"}


def test_set_span_group_spec_accepts_a_list_of_entries(recorder):
    register_trainer()
    assert lens_core.set_span_group_spec(["job", "MICROBATCH"]) == {"job", "microbatch"}


def test_is_span_group_enabled_answers_for_every_spelling(recorder):
    register_trainer()
    lens_core.set_span_group_spec("step")
    assert lens_core.is_span_group_enabled("step") is True
    assert lens_core.is_span_group_enabled(" Step ") is True
    assert lens_core.is_span_group_enabled("job") is False
    assert lens_core.is_span_group_enabled("unregistered") is False


def test_pending_span_groups_lists_unresolved_entries(recorder):
    register_trainer()
    lens_core.set_span_group_spec("step,ghost,-phantom")
    assert lens_core.pending_span_groups() == {"ghost", "-phantom"}
    assert lens_core.enabled_span_groups() == {"step"}


def test_nothing_is_enabled_before_any_spec_or_pin(recorder):
    register_trainer()
    assert lens_core.enabled_span_groups() == frozenset()
    assert lens_core.pending_span_groups() == frozenset()
    assert [g for g in ("job", "step", "microbatch") if lens_core.is_span_group_enabled(g)] == []


def test_nothing_is_enabled_without_a_backend_even_with_a_spec():
    register_trainer()
    assert lens_core.set_span_group_spec("all") == {"job", "step", "microbatch"}  # configured
    assert lens_core.enabled_span_groups() == frozenset()
    assert lens_core.is_span_group_enabled("step") is False
    assert lens_core.managed_span("step", "s") is lens_core._impl.gate.null_span


def test_installing_a_backend_after_the_spec_turns_groups_on(recorder):
    register_trainer()
    lens_core.uninstall_backend()
    lens_core.set_span_group_spec("step")
    lens_core.install_backend(recorder)
    assert lens_core.enabled_span_groups() == {"step"}
    assert lens_core.is_span_group_enabled("step") is True


def test_uninstalling_the_backend_turns_everything_off(recorder):
    register_trainer()
    lens_core.set_span_group_spec("all")
    lens_core.uninstall_backend()
    assert lens_core.enabled_span_groups() == frozenset()
    assert [g for g in ("job", "step", "microbatch") if lens_core.is_span_group_enabled(g)] == []
    with lens_core.managed_span("step", "after.uninstall"):
        pass
    assert recorder.spans == []


def test_install_backend_rejects_an_object_missing_methods():
    with pytest.raises(TypeError, match="missing start, use, release"):
        lens_core.install_backend(object())
    assert lens_core.installed_backend() is None


# ---- the retained spec ----------------------------------------------------------------------


def test_retained_spec_picks_up_a_library_registered_later(recorder):
    register_trainer()
    lens_core.set_span_group_spec("default,generate")
    assert lens_core.pending_span_groups() == {"generate"}
    SpanRegistry.register("rollout", ["generate", "reward"])
    assert lens_core.enabled_span_groups() == {"job", "step", "generate"}
    assert lens_core.pending_span_groups() == frozenset()
    assert lens_core.is_span_group_enabled("generate") is True


def test_retained_spec_picks_up_presets_registered_later(recorder):
    lens_core.set_span_group_spec("all,-job")
    register_trainer()
    assert lens_core.enabled_span_groups() == {"step", "microbatch"}


def test_late_registration_warns_that_it_came_after_setup(recorder, warnings_log):
    register_trainer()
    lens_core.set_span_group_spec("step,generate")
    warnings_log.clear()
    SpanRegistry.register("rollout", ["generate"])
    assert lens_warnings(warnings_log) == [
        "span-group namespace 'rollout' registered after span groups were configured; its "
        "groups were resolved late (now enabled: generate, step)"
    ]


def test_registration_before_any_spec_does_not_warn(warnings_log):
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    assert lens_warnings(warnings_log) == []


def test_unregistering_a_library_disables_its_groups(recorder):
    register_trainer()
    SpanRegistry.register("rollout", ["generate"])
    lens_core.set_span_group_spec("all")
    SpanRegistry.unregister("rollout")
    assert lens_core.enabled_span_groups() == {"job", "step", "microbatch"}
    assert lens_core.is_span_group_enabled("generate") is False


# ---- pinned sets ----------------------------------------------------------------------------


def test_set_enabled_span_groups_pins_an_explicit_set(recorder):
    register_trainer()
    assert lens_core.set_enabled_span_groups([" Step ", "MICROBATCH"]) == {"step", "microbatch"}
    assert lens_core.enabled_span_groups() == {"step", "microbatch"}
    assert lens_core.is_span_group_enabled("job") is False


def test_pinning_drops_the_retained_spec(recorder):
    register_trainer()
    lens_core.set_span_group_spec("all")
    lens_core.set_enabled_span_groups({"job"})
    SpanRegistry.register("rollout", ["generate"])
    assert lens_core.enabled_span_groups() == {"job"}
    assert state.span_group_diagnostics()["spec"] is None


def test_a_pinned_name_becomes_active_when_its_library_registers(recorder):
    register_trainer()
    lens_core.set_enabled_span_groups(["step", "generate"])
    assert lens_core.enabled_span_groups() == {"step"}
    assert lens_core.pending_span_groups() == {"generate"}
    SpanRegistry.register("rollout", ["generate", "reward"], {"default": ["reward"]})
    assert lens_core.enabled_span_groups() == {"step", "generate"}
    assert lens_core.pending_span_groups() == frozenset()


def test_a_pinned_set_accepts_a_single_name(recorder):
    register_trainer()
    assert lens_core.set_enabled_span_groups("Job") == {"job"}


def test_a_spec_after_a_pin_replaces_the_pin(recorder):
    register_trainer()
    lens_core.set_enabled_span_groups(["job"])
    lens_core.set_span_group_spec("step")
    assert lens_core.enabled_span_groups() == {"step"}
    assert state.span_group_diagnostics()["pinned"] is None


# ---- warnings -------------------------------------------------------------------------------


def test_unknown_spec_entries_never_raise(recorder):
    register_trainer()
    assert lens_core.set_span_group_spec("step,no such thing,-ghost,all,-") == {"job", "step", "microbatch"}


def test_unknown_spec_entries_warn_once_naming_what_is_registered(recorder, warnings_log):
    register_trainer()
    SpanRegistry.register("rollout", ["generate"], {"rl": ["generate"]})
    lens_core.set_span_group_spec("step,ghost,-phantom")
    assert lens_warnings(warnings_log) == [
        "span-group spec 'step,ghost,-phantom': unknown entries -phantom, ghost are kept pending "
        "until a library registers them. Presets: all, default, rl. "
        "Groups: generate, job, microbatch, step. Namespaces: rollout, trainer."
    ]


def test_spec_set_with_nothing_registered_warns_distinctly(warnings_log):
    lens_core.set_span_group_spec("default")
    (message,) = lens_warnings(warnings_log)
    assert message.startswith("span-group spec 'default' was set but no span groups are registered")


def test_spec_that_resolves_to_nothing_warns_distinctly(warnings_log):
    register_trainer()
    lens_core.set_span_group_spec("ghost,phantom")
    (message,) = lens_warnings(warnings_log)
    assert message.startswith("span-group spec 'ghost,phantom' resolved to no groups: unknown entries ghost, phantom.")
    assert "Groups: job, microbatch, step." in message


def test_identical_warnings_are_not_repeated(warnings_log):
    register_trainer()
    for _ in range(3):
        lens_core.set_span_group_spec("step,ghost")
    lens_core.set_span_group_spec("step,phantom")
    assert len(lens_warnings(warnings_log)) == 2


def test_a_fully_resolved_spec_does_not_warn(recorder, warnings_log):
    register_trainer()
    lens_core.set_span_group_spec("default,-job,microbatch")
    assert lens_warnings(warnings_log) == []


# ---- diagnostics ----------------------------------------------------------------------------


def test_span_group_diagnostics_reports_spec_sets_and_backend(recorder, gate_implementation):
    register_trainer()
    lens_core.set_span_group_spec("default,ghost")
    assert lens_core.span_group_diagnostics() == {
        "spec": "default,ghost",
        "pinned": None,
        "configured": ["job", "step"],
        "enabled": ["job", "step"],
        "pending": ["ghost"],
        "backend": "recording",
        "implementation": gate_implementation,
    }


def test_pp_trace_carrier_is_stored_as_a_copy():
    carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    lens_core.set_pp_trace_carrier(carrier)
    carrier["traceparent"] = "changed"
    got = lens_core.get_pp_trace_carrier()
    got["x"] = "y"
    assert lens_core.get_pp_trace_carrier() == {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    lens_core.set_pp_trace_carrier(None)
    assert lens_core.get_pp_trace_carrier() == {}


# ---- concurrency ----------------------------------------------------------------------------


def test_concurrent_registration_spec_changes_and_reads_stay_consistent(recorder):
    specs = ["all", "all,-g3", "g1,g5,ghost", "ns7_only,g0"]
    errors = []
    stop = threading.Event()

    def registrar(i):
        try:
            for j in range(5):
                SpanRegistry.register(f"ns{i}_{j}", [f"g{i * 5 + j}"], {f"ns{i}_only": [f"g{i * 5 + j}"]})
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    def setter(k):
        try:
            for n in range(200):
                lens_core.set_span_group_spec(specs[(n + k) % len(specs)])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader():
        try:
            while not stop.is_set():
                for g in ("g0", "g3", "g7", "ghost"):
                    lens_core.is_span_group_enabled(g)
                lens_core.enabled_span_groups()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=registrar, args=(i,)) for i in range(8)]
    writers += [threading.Thread(target=setter, args=(k,)) for k in range(3)]
    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(timeout=30)
    stop.set()
    for t in readers:
        t.join(timeout=30)
    assert [t for t in writers + readers if t.is_alive()] == [], "deadlock: threads still running"
    assert errors == []

    assert len(SpanRegistry.groups()) == 40
    last_spec = state.span_group_diagnostics()["spec"]
    assert last_spec in specs
    expected, _ = SpanRegistry.resolve(last_spec)
    assert lens_core.enabled_span_groups() == expected
    assert {g for g in SpanRegistry.groups() if lens_core.is_span_group_enabled(g)} == expected


def test_an_empty_spec_turns_everything_off_without_warnings(recorder, caplog):
    """Regression: an empty spec (telemetry spans deliberately off) warned it resolved to nothing,
    and a later registration warned it came late."""
    SpanRegistry.register("lib", ["a"])
    with caplog.at_level("WARNING", logger="lens_core"):
        lens_core.set_span_group_spec("")
        SpanRegistry.register("late", ["b"])
    assert lens_core.enabled_span_groups() == frozenset()
    assert caplog.records == []


def test_pinning_all_enables_every_group_including_later_ones(recorder):
    """Regression: set_enabled_span_groups(["all"]) pinned a group literally named 'all'."""
    SpanRegistry.register("lib", ["a", "b"])
    lens_core.set_enabled_span_groups(["all"])
    SpanRegistry.register("late", ["c"])
    assert lens_core.enabled_span_groups() == {"a", "b", "c"}
    assert lens_core.pending_span_groups() == frozenset()


def test_a_forked_child_can_configure_groups_while_a_parent_thread_held_the_lock():
    """Regression: the state and registry locks were inherited by forked children; a fork
    taken while another thread held one deadlocked the child's next registration."""
    import os

    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    held, release = threading.Event(), threading.Event()

    def hold():
        with state._lock, SpanRegistry._lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    pid = os.fork()
    if pid == 0:  # child: must not block on the locks the parent's thread holds
        try:
            SpanRegistry.register("child", ["c"])
            lens_core.set_span_group_spec("c")
        finally:
            os._exit(0)
    release.set()
    holder.join()
    deadline_ok = False
    for _ in range(100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            deadline_ok = status == 0
            break
        threading.Event().wait(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert deadline_ok, "the forked child deadlocked or failed"
