"""The examples of docs/guide/multi-process.md run as real processes, with the commands the page shows
(torchrun with gloo on CPU; a plain trainer), and write the traces it promises; ``lens report`` reads them."""

import os
import re
import shlex
import subprocess
import sys
from collections import defaultdict

import pytest

from lens_core import semconv
from trace_files import REPO_ROOT, read_spans
from child_env import without_settings  # noqa: E402
from doc_pages import REPO as DOCS_REPO, marked  # noqa: E402

pytest.importorskip("torch", reason="needs PyTorch: pip install 'lens-telemetry[torch]'")
pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

ITERATION = semconv.RL_ITERATION


PAGE = "docs/guide/multi-process.md"


def _page_command(program):
    """The page's command that runs ``program``: its ``VAR=value`` settings and the interpreter's arguments
    (``python X`` runs X; ``torchrun ...`` runs ``-m torch.distributed.run ...``)."""
    (block,) = marked(DOCS_REPO / PAGE, "tested by tests/examples/test_examples.py")
    (line,) = [line for line in block.text.replace("\\\n", " ").splitlines() if program in line and "lens report" not in line]
    words = shlex.split(line)
    settings = {}
    while re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        settings[name] = value
    command = words.pop(0)
    assert command in ("python", "torchrun"), line
    return settings, (["-m", "torch.distributed.run"] if command == "torchrun" else []) + words


def _run(args, file_dir, run_id, timeout=180, **env):
    environ = without_settings()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID"):
        environ.pop(name, None)
    environ.update(PYTHONPATH=os.pathsep.join([str(REPO_ROOT), environ.get("PYTHONPATH", "")]),
                   LENS_ENABLED="1", LENS_SPAN_GROUPS="per_step", LENS_EXPORTER="file",
                   LENS_FILE_DIR=str(file_dir), LENS_RUN_ID=run_id, OMP_NUM_THREADS="1", **env)
    result = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=environ, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _report_exits_0(directory):
    result = subprocess.run([sys.executable, "-m", "lens_cli", "report", str(directory)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.engines  # torchrun starts torch.distributed processes (~2 min at load ~15)
def test_the_torchrun_example_is_one_trace_rooted_on_rank_0_that_the_other_ranks_join(tmp_path):
    settings, args = _page_command("examples/torchrun_trace.py")
    assert settings == {"LENS_ENABLED": "1", "LENS_SPAN_GROUPS": "per_step", "LENS_RUN_ID": "first-job"}
    _run(args, tmp_path, "first-job", EXAMPLE_STEPS="3", LENS_METRICS_ENABLED="0")
    spans = read_spans(tmp_path / "first-job")
    assert {s["trace_id"] for s in spans} == {spans[0]["trace_id"]}, "the ranks' spans are not one trace"
    (job,) = [s for s in spans if not s["parent_span_id"]]
    assert job["name"] == "example.job" and job["resource"]["nv.dl.rank"] == 0
    assert job["attributes"]["world_size"] == 2

    steps = defaultdict(dict)  # rank -> iteration -> step span
    for span in spans:
        if span["name"] == "example.step":
            steps[span["resource"]["nv.dl.rank"]][span["attributes"][ITERATION]] = span
    assert {rank: sorted(by_iteration) for rank, by_iteration in steps.items()} == {0: [1, 2, 3], 1: [1, 2, 3]}
    assert all(step["parent_span_id"] == job["span_id"] for by_iteration in steps.values()
               for step in by_iteration.values())

    leaves = [s for s in spans if s["name"] not in ("example.job", "example.step")]
    assert len(leaves) == 2 * 3 * 3  # ranks x steps x (forward_backward, all_reduce, optimizer_step)
    for leaf in leaves:
        step = steps[leaf["resource"]["nv.dl.rank"]][leaf["attributes"][ITERATION]]
        assert leaf["parent_span_id"] == step["span_id"], leaf
        assert step["start"] <= leaf["start"] <= leaf["end"] <= step["end"]
    buckets = {s["name"]: s["attributes"][semconv.RL_BUCKET] for s in leaves}
    assert buckets == {"example.forward_backward": "productive", "example.all_reduce": "overhead",
                       "example.optimizer_step": "productive"}
    _report_exits_0(tmp_path / "first-job")


@pytest.mark.slow  # trains a real torch model in a child process (~2 min at load ~15)
def test_the_generic_trainer_has_steps_carrying_their_iteration_and_bucketed_leaves(tmp_path):
    settings, args = _page_command("examples/generic_trainer.py")
    assert settings == {"LENS_ENABLED": "1", "LENS_SPAN_GROUPS": "per_step", "LENS_RUN_ID": "trainer"}
    _run(args, tmp_path, "trainer", EXAMPLE_STEPS="4")
    spans = read_spans(tmp_path / "trainer")
    steps = {s["attributes"][ITERATION]: s for s in spans if s["name"] == "train.step"}
    assert sorted(steps) == [1, 2, 3, 4]
    assert all(not step["parent_span_id"] and semconv.RL_BUCKET not in step["attributes"] for step in steps.values())
    names = defaultdict(list)
    for span in spans:
        if span["name"] != "train.step":
            step = steps[span["attributes"][ITERATION]]
            assert (span["trace_id"], span["parent_span_id"]) == (step["trace_id"], step["span_id"]), span
            names[span["attributes"][ITERATION]].append((span["name"], span["attributes"][semconv.RL_BUCKET]))
    every_step = [("train.load_batch", "overhead"), ("train.forward", "productive"),
                  ("train.backward", "productive"), ("train.optimizer_step", "productive")]
    checkpoint = [("train.checkpoint", "overhead")]
    assert {i: sorted(n) for i, n in names.items()} == {
        1: sorted(every_step), 2: sorted(every_step + checkpoint), 3: sorted(every_step), 4: sorted(every_step + checkpoint)}
    assert list((tmp_path / "trainer").glob("metrics-rank0-*.jsonl")), "the trainer's metrics were not exported"
    _report_exits_0(tmp_path / "trainer")
