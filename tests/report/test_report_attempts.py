"""Runs never merge, even under one run id: two launches sharing LENS_RUN_ID are attempts of one run, never averaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from lens_core.exitcodes import EXIT_OK, EXIT_USAGE  # noqa: E402
from lens_report import AttemptChoiceError, TraceStore, build_report  # noqa: E402
from lens_report.rollup import list_attempts, make_span_facts  # noqa: E402
from lens_report.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BASE = int(time.time()) - 10_000


def _launch(directory: Path, offset: float) -> None:
    """One real Lens process (``lens emit-spans``, file exporter, LENS_RUN_ID fixed): a 100 s step, 50 s of it
    productive and 20 s idle, ``offset`` seconds after BASE."""
    specs = [
        {"name": "rl.grpo.step", "start": BASE + offset, "end": BASE + offset + 100,
         "attributes": {"rl.iteration": 1, "lens.group": "step", "lens.umbrella": True}},
        {"name": "rl.grpo.policy_training", "start": BASE + offset, "end": BASE + offset + 50,
         "attributes": {"rl.iteration": 1, "rl.bucket": "productive"}},
        {"name": "rl.idle.buffer_starvation", "start": BASE + offset + 50, "end": BASE + offset + 70,
         "attributes": {"rl.iteration": 1, "rl.bucket": "idle"}},
    ]
    spec_file = directory / f"specs-{offset}.json"
    spec_file.write_text(json.dumps(specs))
    env = {**os.environ, "LENS_RUN_ID": "fixed", "LENS_EXPORTER": "file", "LENS_FILE_DIR": str(directory / "traces"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run([sys.executable, "-m", "lens_cli", "emit-spans", str(spec_file)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def two_launches(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("launches")
    _launch(directory, 0)
    _launch(directory, 400)  # relaunched 300 s after the first ended, same run id, from step 1 again
    return directory / "traces"


def test_two_launches_under_one_run_id_are_refused_with_each_attempts_goodput(two_launches, capsys):
    """Regression: two launches with a fixed LENS_RUN_ID read as one run whose goodput was averaged over both and the
    gap between them (20 % here, 0.2 % for examples/torchrun_trace.py), with no warning, even with --strict."""
    with TraceStore() as store:
        store.load([two_launches])
        make_span_facts(store)
        attempts = list_attempts(store)
        with pytest.raises(AttemptChoiceError) as caught:
            build_report(store)
    assert [(a.attempt, a.processes, a.ranks) for a in attempts] == [(1, 1, 1), (2, 1, 1)]
    assert [a.goodput for a in caught.value.attempts] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert caught.value.attempts[1].gap_ns == 300 * 10**9 and caught.value.attempts[1].repeated_steps == 1
    assert main([str(two_launches), "--strict"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "was launched 2 times" in err and "goodput 50.0 %" in err and "300 s lost before it" in err
    assert "--attempt N" in err


def test_an_attempt_is_reported_alone_and_lists_every_attempt(two_launches, capsys):
    """--attempt 2 reports the second launch alone (50 %, not 20 %) and its JSON lists both attempts and the time lost."""
    assert main([str(two_launches), "--attempt", "2", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["attempt"] == 2 and data["run"]["goodput"] == pytest.approx(0.5)
    assert [a["goodput"] for a in data["attempts"]] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert data["attempts"][1]["lost_before_s"] == pytest.approx(300)
    assert data["spans"] == 3
    assert main([str(two_launches), "--attempt", "3"]) == EXIT_USAGE
    assert "has attempts 1-2, not 3" in capsys.readouterr().err


def test_one_launch_reads_as_before(two_launches, tmp_path, capsys):
    """A run launched once has no attempts in its report; --attempt 1 is allowed, --attempt 2 is not."""
    single = sorted(two_launches.rglob("traces-*.jsonl"))[0]
    assert main([str(single), "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert "attempts" not in data and data["run"]["goodput"] == pytest.approx(0.5)
    assert main([str(single), "--attempt", "2"]) == EXIT_USAGE
    assert "launched once" in capsys.readouterr().err
