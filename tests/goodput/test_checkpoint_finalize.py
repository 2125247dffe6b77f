"""The checkpoint finalize span: a deferred child of the staging span that outlives its step."""

import threading

import pytest

import lens_core
from lens_core import (
    current_trace_carrier,
    deferred_child_span,
    iteration_scope,
    managed_span,
    umbrella_span,
)
from lens_core.catalogs.rl import RLSpanGroup as G
from recording import RecordingBackend


def _run_steps(finalize_work, *, steps=3, checkpoint_at=1):
    """Steps under iteration_scope; step ``checkpoint_at`` stages a checkpoint whose finalize
    thread runs ``finalize_work`` once the next step has started. Returns the thread's error."""
    next_step_started = threading.Event()
    outcome = {}
    thread = None

    def finalize(carrier, step):
        next_step_started.wait(5)
        try:
            with deferred_child_span(G.CHECKPOINT, "rl.checkpoint.finalize", carrier, iteration=step):
                finalize_work()
        except Exception as exc:
            outcome["error"] = exc

    for step in range(1, steps + 1):
        with iteration_scope(step), umbrella_span(G.U_STEP, "rl.grpo.step"):
            if step == checkpoint_at + 1:
                next_step_started.set()
            if step == checkpoint_at:
                with managed_span(G.CHECKPOINT, "rl.grpo.checkpointing"):
                    thread = threading.Thread(target=finalize, args=(current_trace_carrier(), step))
                    thread.start()
    thread.join(5)
    return outcome.get("error")


def test_finalize_is_a_child_of_the_checkpointing_span(traced):
    _run_steps(lambda: None)
    staging = traced.named("rl.grpo.checkpointing")
    finalize = traced.named("rl.checkpoint.finalize")
    assert (finalize.trace_id, finalize.parent_id) == (staging.trace_id, staging.span_id)


def test_finalize_ends_after_its_parent_and_after_the_next_step_started(traced):
    _run_steps(lambda: None)
    staging = traced.named("rl.grpo.checkpointing")
    finalize = traced.named("rl.checkpoint.finalize")
    next_step = traced.named("rl.grpo.step")[1]
    assert finalize.end_ns > staging.end_ns
    assert finalize.end_ns > next_step.start_ns


def test_finalize_carries_the_triggering_iteration_and_no_bucket(traced):
    _run_steps(lambda: None, checkpoint_at=2, steps=3)
    finalize = traced.named("rl.checkpoint.finalize")
    assert finalize.attributes["rl.iteration"] == 2
    assert "rl.bucket" not in finalize.attributes
    assert traced.named("rl.grpo.checkpointing").attributes["rl.bucket"] == "overhead"


def test_an_explicit_bucket_passed_to_the_finalize_span_is_dropped(traced):
    with deferred_child_span(G.CHECKPOINT, "fin", {}, iteration=4, **{"rl.bucket": "overhead"}):
        pass
    assert traced.named("fin").attributes == {"rl.iteration": 4}


def test_a_failing_finalize_ends_the_span_with_error_and_the_exception_propagates(traced):
    def fail():
        raise OSError("rename onto a full disk")

    error = _run_steps(fail)
    finalize = traced.named("rl.checkpoint.finalize")
    assert isinstance(error, OSError)
    assert finalize.error is error and finalize.ended


def test_failing_to_open_the_finalize_span_does_not_stop_the_work(rl, caplog):
    class BrokenStart(RecordingBackend):
        def start(self, name, attributes, tracer=None, context=None, links=None):
            if name == "rl.checkpoint.finalize":
                raise RuntimeError("exporter queue is gone")
            return super().start(name, attributes, tracer, context, links)

    backend = BrokenStart()
    lens_core.install_backend(backend)
    done = []
    assert _run_steps(lambda: done.append("durable")) is None
    assert done == ["durable"]
    assert "rl.checkpoint.finalize" not in backend.names()
    assert "untraced" in caplog.text


def test_finalize_with_the_checkpoint_group_off_runs_the_work_untraced(traced):
    lens_core.set_span_group_spec("per_step,-checkpoint")
    done = []
    with deferred_child_span(G.CHECKPOINT, "rl.checkpoint.finalize", {}, iteration=1) as span:
        done.append(span)
    assert done == [None] and traced.spans == []


def test_an_empty_carrier_parents_the_finalize_span_on_the_current_span(traced):
    with umbrella_span(G.U_STEP, "current"):
        with deferred_child_span(G.CHECKPOINT, "fin", {}, iteration=1):
            pass
    # {} means "no parent was captured": the current context of this thread is used
    assert traced.named("fin").parent_id == traced.named("current").span_id


@pytest.mark.parametrize("carrier", [None, {"traceparent": "garbage"}])
def test_a_missing_or_malformed_carrier_does_not_stop_the_work(traced, carrier):
    ran = []
    with deferred_child_span(G.CHECKPOINT, "fin", carrier, iteration=1):
        ran.append(True)
    assert ran == [True]
