"""``lens demo`` end to end: the run, its files, and a report over its own trace with no violations."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs PyTorch: pip install 'lens-telemetry[torch]'")
pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

# `lens demo` trains a real torch model in child processes: minutes on a loaded 2-core
# machine (2 min for one case). The README's test command leaves it out; .ci/run runs it.
pytestmark = pytest.mark.slow

from lens_cli.demo import run_demo  # noqa: E402
import lens_report  # noqa: E402
from lens_report import read_spans  # noqa: E402
from child_env import IMPLEMENTATION_SWITCHES, without_settings  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _file_exporter():
    """The demo writes files unless LENS_EXPORTER says otherwise: make sure it does not."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("LENS_") and k not in IMPLEMENTATION_SWITCHES}
    yield
    os.environ.update(saved)


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-sync")
    # a checkpoint every step: each one first waits for the previous finalize
    return run_demo(steps=3, out=out, val_every=2, checkpoint_every=1)


@pytest.fixture(scope="module")
def async_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-async")
    # checkpoint and validate late: a short step 2 leaves the driver starved for step 3's batch
    return run_demo(steps=3, async_mode=True, out=out, val_every=3, checkpoint_every=2)


@pytest.fixture(params=["sync", "async"])
def run(request, sync_run, async_run):
    return sync_run if request.param == "sync" else async_run


def named(result, name):
    return [span for span in result.spans if span.name == name]


def due(result, every):
    """The steps at which something runs every ``every`` steps."""
    return [step for step in range(1, result.options.steps + 1) if step % every == 0]


def one(result, name):
    (span,) = named(result, name)
    return span


def test_the_demo_exits_0_and_writes_traces_checkpoints_and_html(run):
    assert run.exit_code == 0
    assert run.trace_files and all(Path(p).stat().st_size > 0 for p in run.trace_files)
    assert all(Path(p).parent == run.out_dir / run.run_id for p in run.trace_files)
    html = run.html_path.read_text()
    assert run.html_path == run.out_dir / "report.html" and "<svg" in html and "rl.grpo.step" in html
    checkpoints = sorted((run.out_dir / "checkpoints").iterdir())
    assert [p.name for p in checkpoints] == [f"step_{n}" for n in due(run, run.options.checkpoint_every)]


def test_checkpoints_are_real_torch_files_of_the_triggering_step(run):
    import torch

    state = torch.load(run.out_dir / "checkpoints" / "step_2" / "policy.pt")
    assert state["step"] == 2 and "mlp.0.weight" in state["policy"] and state["optimizer"]["state"]


def test_a_fresh_report_over_the_files_has_no_violations_and_no_problems(run):
    read = read_spans(run.trace_files)
    report = lens_report.report(run.trace_files)
    assert read.problems == () and report.violations == () and report.problems == ()
    assert report.orphan_count == 0
    assert [step.iteration for step in report.steps] == [1, 2, 3]


def test_bucket_sums_of_each_step_fit_in_its_wall_time_and_productive_is_positive(run):
    for step in run.report.steps:
        assert step.totals.attributed_ns <= step.totals.wall_ns
        assert step.totals.bucket_ns["productive"] > 0
    assert run.report.run.bucket_ns["productive"] > 0
    assert run.report.run.attributed_ns <= run.report.run.wall_ns


def test_umbrellas_are_unbucketed_and_steps_carry_their_iteration(run):
    for name in ("rl.startup", "rl.grpo.job", "rl.grpo.step", "rl.grpo.generation", "rl.grpo.evaluate",
                 "rl.policy.load_model", "rl.setup.workers"):
        assert named(run, name) and all(span.bucket is None for span in named(run, name)), name
    assert sorted(span.iteration for span in named(run, "rl.grpo.step")) == [1, 2, 3]
    assert one(run, "rl.grpo.job").iteration is None


def test_startup_is_its_own_trace_and_the_steps_nest_under_the_job(run):
    startup, job = one(run, "rl.startup"), one(run, "rl.grpo.job")
    assert startup.trace_id != job.trace_id and startup.end_ns <= job.start_ns
    assert {s.name for s in run.spans if s.parent_span_id == startup.span_id} >= {
        "rl.setup.tokenizer", "rl.setup.data", "rl.setup.workers"}
    assert all(step.parent_span_id == job.span_id for step in named(run, "rl.grpo.step"))


def test_each_finalize_is_a_child_of_its_checkpointing_span_and_ends_after_the_next_step_started(run):
    steps = {span.iteration: span for span in named(run, "rl.grpo.step")}
    staging = {span.span_id: span for span in named(run, "rl.grpo.checkpointing")}
    finalizes = named(run, "rl.checkpoint.finalize")
    assert sorted(span.iteration for span in finalizes) == due(run, run.options.checkpoint_every)
    assert any(finalize.iteration + 1 in steps for finalize in finalizes)
    for finalize in finalizes:
        parent = staging[finalize.parent_span_id]
        assert parent.iteration == finalize.iteration and parent.bucket == "overhead"
        assert finalize.bucket is None and finalize.end_ns > parent.end_ns
        if finalize.iteration + 1 in steps:
            assert finalize.end_ns > steps[finalize.iteration + 1].start_ns


def test_validation_generation_is_overhead_under_the_evaluate_span(run):
    (evaluate,) = named(run, "rl.grpo.evaluate")
    assert [evaluate.iteration] == due(run, run.options.val_every)
    children = [s for s in run.spans if s.parent_span_id == evaluate.span_id]
    assert [(s.name, s.bucket) for s in children] == [("rl.vllm.generate", "overhead")]


def test_sync_generation_is_productive_inside_the_rollout_umbrella(sync_run):
    rollouts = {span.span_id for span in named(sync_run, "rl.grpo.generation")}
    training = [s for s in named(sync_run, "rl.vllm.generate") if s.parent_span_id in rollouts]
    assert len(training) == 3 and all(s.bucket == "productive" for s in training)
    assert len(named(sync_run, "rl.grpo.reward_calculation")) == 3


def test_async_has_one_coalesced_starvation_span_per_wait_with_its_poll_count(async_run):
    starved = named(async_run, "rl.idle.buffer_starvation")
    assert len(starved) == async_run.stats.starved_waits >= 1
    assert [s.attributes["rl.idle.polls"] for s in starved] == async_run.stats.starved_polls
    assert all(s.attributes["rl.idle.polls"] >= 1 and s.bucket == "idle" for s in starved)
    steps = {span.span_id for span in named(async_run, "rl.grpo.step")}
    parents = [s.parent_span_id for s in starved]
    assert set(parents) <= steps and len(set(parents)) == len(parents)  # at most one per step


def test_async_refit_bubbles_are_idle_children_of_the_steps_but_the_last(async_run):
    bubbles = named(async_run, "rl.idle.refit_bubble")
    assert sorted(s.iteration for s in bubbles) == [1, 2]
    assert all(s.bucket == "idle" for s in bubbles)


def test_async_collector_spans_join_the_drivers_trace_under_the_job_span(async_run):
    job = one(async_run, "rl.grpo.job")
    batches = named(async_run, "rl.grpo.generation")
    assert len(batches) == 3
    for batch in batches:
        assert (batch.trace_id, batch.parent_span_id) == (job.trace_id, job.span_id)
        assert batch.bucket is None and batch.iteration is None
        assert batch.attributes["rl.target_weight_version"] >= batch.attributes["rl.weight_version"] + 1
        assert batch.attributes["rl.num_generations_per_prompt"] > 0
        assert batch.attributes["rl.num_prompt_groups"] > 0
    assert len({batch.thread or batch.span_id for batch in batches}) == 3
    for name in ("rl.idle.generation_limit_pause", "rl.idle.refit_event_wait"):
        waits = named(async_run, name)
        assert waits, name
        assert all(w.trace_id == job.trace_id and w.parent_span_id == job.span_id for w in waits)
        assert all(w.bucket is None and w.attributes["rl.efficiency.category"] for w in waits)


def test_async_initial_fill_is_an_unbucketed_wait_before_the_first_step(async_run):
    fill = one(async_run, "rl.init.total")
    first = min(named(async_run, "rl.grpo.step"), key=lambda s: s.start_ns)
    assert fill.bucket is None and fill.iteration is None and fill.end_ns <= first.start_ns


def test_async_run_has_no_productive_generation_span(async_run):
    assert all(s.bucket == "overhead" for s in named(async_run, "rl.vllm.generate"))


def test_the_lens_command_runs_the_demo_and_prints_the_report(tmp_path):
    env = without_settings(("LENS_",))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "lens_cli", "demo", "--steps", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "iteration" in proc.stdout and "goodput" in proc.stdout and "violations: 0" in proc.stdout
    assert str(tmp_path / "report.html") in proc.stdout
    assert (tmp_path / "report.html").is_file()


def test_with_the_default_preset_there_are_no_steps_and_no_step_made_of_a_finalize(tmp_path):
    result = run_demo(steps=2, span_groups="default", out=tmp_path, val_every=0, checkpoint_every=1)
    names = {span.name for span in result.spans}
    assert result.exit_code == 0 and result.report.violations == ()
    assert {"rl.grpo.job", "rl.startup", "rl.grpo.checkpointing", "rl.checkpoint.finalize"} <= names
    assert not names & {"rl.grpo.step", "rl.vllm.generate", "rl.grpo.policy_training"}
    assert result.report.steps == ()


def test_with_lens_exporter_otlp_the_same_trace_goes_to_a_collector(otlp_receiver, monkeypatch, tmp_path):
    monkeypatch.setenv("LENS_EXPORTER", "otlp")
    monkeypatch.setenv("LENS_METRICS_ENABLED", "false")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.grpc_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    result = run_demo(steps=2, out=tmp_path, val_every=0, checkpoint_every=0)
    assert (result.exit_code, result.exporter, result.trace_files) == (0, "otlp", ())
    assert not (tmp_path / result.run_id).exists()
    received = otlp_receiver.spans()
    (job,) = [span for span in received if span.name == "rl.grpo.job"]
    steps = [span for span in received if span.name == "rl.grpo.step"]
    assert len(steps) == 2 and all(step.parent_span_id == job.span_id for step in steps)
    assert {step.attributes["rl.iteration"] for step in steps} == {1, 2}


def test_lens_span_groups_chooses_the_demos_groups_unless_the_option_does(monkeypatch, tmp_path):
    """Regression (issue 41): `lens demo` ignored LENS_SPAN_GROUPS (its --span-groups default,
    per_step, always won): LENS_SPAN_GROUPS=default still traced every step."""
    monkeypatch.setenv("LENS_SPAN_GROUPS", "default")
    result = run_demo(steps=1, out=tmp_path / "env", val_every=0, checkpoint_every=0)
    names = {span.name for span in result.spans}
    assert result.exit_code == 0 and "rl.grpo.job" in names and "rl.grpo.step" not in names
    result = run_demo(steps=1, span_groups="per_step", out=tmp_path / "option", val_every=0, checkpoint_every=0)
    assert "rl.grpo.step" in {span.name for span in result.spans}
