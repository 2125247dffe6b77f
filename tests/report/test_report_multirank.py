"""Per-rank truth on known-answer multi-rank traces: rank-seconds, the step spread, stragglers and their cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from report_helpers import report_of
from multirank import PRODUCTIVE, write_ddp_run

from lens_core.exitcodes import EXIT_OK
from lens_report.cli import main

pytest.importorskip("opentelemetry.sdk")

S = 1_000_000_000
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ddp(tmp_path):
    answers = write_ddp_run(tmp_path)
    return tmp_path / "ddp", answers


def test_run_goodput_is_productive_rank_seconds_over_wall_rank_seconds(ddp):
    """Regression: the run row added every rank's buckets and divided by one wall clock
    (64 ranks read 5102.9 % goodput)."""
    folder, answers = ddp
    report = report_of(folder)
    assert report.run_id == "ddp" and [r.rank for r in report.ranks] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert report.run.wall_ns == answers["wall_rank_s"] * S
    assert report.run.bucket_ns["productive"] == answers["productive_s"] * S
    assert report.run.goodput == pytest.approx(answers["productive_s"] / answers["wall_rank_s"])
    assert report.violations == () and report.problems == ()


def test_each_step_shows_the_spread_the_slowest_rank_and_the_wait_for_it(ddp):
    folder, answers = ddp
    report = report_of(folder)
    assert [s.iteration for s in report.steps] == [1, 2, 3]
    for step, slowest, wait, row in zip(report.steps, answers["slowest"], answers["waits_s"], PRODUCTIVE):
        assert (step.ranks, step.wall_min_ns, step.wall_median_ns, step.wall_max_ns) == (4, 10 * S, 10 * S, 10 * S)
        assert step.slowest_rank == f"rank {slowest}"
        assert step.wait_ns == round(wait * S)
        assert step.totals.wall_ns == 40 * S
        assert step.totals.goodput == pytest.approx(sum(row) / 40)
    assert [s.slowest_rank for s in report.steps] == ["rank 2", "rank 3", "rank 1"]
    assert [s.wait_ns / S for s in report.steps] == [6.0, 6.0, 7.5]


def test_the_stragglers_are_ranked_by_the_rank_seconds_others_waited_and_the_idle_it_explains(ddp):
    folder, _ = ddp
    report = report_of(folder)
    assert [(r.rank, r.slowest_steps, r.straggler_cost_ns / S, r.idle_explained_ns / S) for r in report.stragglers] == [
        ("rank 1", 1, 7.5, 7.5), ("rank 2", 1, 6.0, 6.0), ("rank 3", 1, 6.0, 6.0)]
    rank0 = report.ranks[0]
    assert (rank0.slowest_steps, rank0.straggler_cost_ns, rank0.steps) == (0, 0, 3)


def test_every_rank_step_figure_is_kept_column_wise(ddp):
    folder, _ = ddp
    report = report_of(folder)
    rows = report.rank_steps.to_json()["rows"]
    assert len(rows) == 12
    assert rows[2] == [1, "rank 2", 10.0, 7.0, 1.0, 2.0, 0.0, 8.0]  # busy: the step less its 2 s at the barrier
    assert rows[-1] == [3, "rank 3", 10.0, 5.0, 1.0, 4.0, 0.0, 6.0]


def test_text_and_json_carry_the_rank_and_strict_passes_a_healthy_job(ddp, capsys):
    """Regression: a healthy multi-rank job was flagged run-overflow, so --strict exited 1."""
    folder, _ = ddp
    assert main([str(folder), "--strict", "--steps"]) == EXIT_OK
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("lens report: run ddp: 4 ranks, 52 spans")
    step1 = next(line for line in text.splitlines() if line.startswith("1 "))
    # p50, p90, p99 and max step time over ranks, the slowest rank (most busy time), goodput, wait for it
    assert step1.split() == ["1", "4", "10.000", "10.000", "10.000", "10.000", "rank", "2", "55.0%", "6.000"]
    # a different rank is the busiest of each step: no rank is typically slower than its peers
    assert "stragglers: 0 of 4 ranks flagged, worst first" in text
    assert main([str(folder), "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert [s["slowest_rank"] for s in data["steps"]] == ["rank 2", "rank 3", "rank 1"]
    assert data["stragglers"] == ["rank 1", "rank 2", "rank 3"]
    assert [r["rank"] for r in data["ranks"]] == ["rank 0", "rank 1", "rank 2", "rank 3"]


def test_json_written_a_chunk_at_a_time_is_the_text_json_dump_writes(ddp, monkeypatch, reader):
    """``Report.write_json`` streams the rank × step rows; its text must be ``json.dumps``'s, compact
    and indented, every rank's rows and a selection's, with rows across several chunks, by each writer
    of the rows (``reader``: ``compiled`` is lens_report._scan's, ``sql`` the pure-Python one)."""
    import io

    import lens_report.model as model

    folder, _ = ddp
    report = report_of(folder)
    monkeypatch.setattr(model, "_JSON_CHUNK_ROWS", 5)  # 12 rows: chunks of 5, 5 and 2
    for ranks in (None, frozenset({"rank 1", "rank 3"}), frozenset()):
        for indent in (None, 2):
            out = io.StringIO()
            report.write_json(out, top=3, ranks=ranks, indent=indent)
            dump = {"separators": (",", ":")} if indent is None else {"indent": indent}
            assert out.getvalue() == json.dumps(report.to_json(top=3, ranks=ranks), **dump)
            assert len(json.loads(out.getvalue())["rank_steps"]["rows"]) == (12 if ranks is None else 3 * len(ranks))


def test_the_compiled_rows_writer_spells_each_second_as_json_dumps(need_compiled):
    """``lens_report._scan.seconds_rows`` writes the seconds from their nanoseconds' digits, not from the
    float: its text must be ``json.dumps``'s for every value, where ``repr`` switches to an exponent
    (below 100 us), past 15 digits (from 10**15 ns), negative, 0, int64's ends and between; labels that
    JSON escapes; rows a rank filter leaves out, and a range of rows."""
    import random

    from array import array

    from lens_report._scan import seconds_rows

    edges = [0, 1, -1, 9, 99_999, 100_000, 100_001, -99_999, -100_000, 999_999_999, 10**9, 10**9 + 1,
             10**15 - 1, 10**15, -(10**15) + 1, -(10**15), 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 7 * S, 2_533_333_333]
    rng = random.Random(42)
    values = edges + [rng.randrange(-(10**e), 10**e + 1) for e in range(19) for _ in range(3_000)]
    values += [rng.randrange(1, 10**6) * 10 ** rng.randrange(12) for _ in range(3_000)]
    values += [0] * (-len(values) % 6)
    rows = len(values) // 6
    columns = [array("q", values[c::6]) for c in range(6)]
    labels = ["rank 0", 'a "quoted" \\ label', "r\u00e9ang \u2028 \U0001f600", ""]
    iterations = array("q", (rng.randrange(-5, 10**12) for _ in range(rows)))
    ranks = array("q", (rng.randrange(len(labels)) for _ in range(rows)))
    encoded = [json.dumps(label).encode("ascii") for label in labels]

    def expected(start, stop, keep=None):
        return json.dumps([(iterations[i], labels[ranks[i]], *(c[i] / S for c in columns))
                           for i in range(start, stop) if keep is None or keep[ranks[i]]], separators=(",", ":"))[1:-1]

    assert seconds_rows(iterations, ranks, encoded, *columns, 0, rows).decode("ascii") == expected(0, rows)
    keep = bytes([1, 0, 1, 0])
    assert seconds_rows(iterations, ranks, encoded, *columns, 7, rows - 3, keep).decode() == expected(7, rows - 3,
                                                                                                      keep)
    assert seconds_rows(iterations, ranks, encoded, *columns, 5, 5) == b""
    with pytest.raises(ValueError, match="rank index"):
        seconds_rows(iterations, array("q", [9] * rows), encoded, *columns, 0, 1)
    with pytest.raises(ValueError, match="rows 3 to 2"):
        seconds_rows(iterations, ranks, encoded, *columns, 3, 2)


def test_json_of_many_rank_steps_never_holds_every_row(ddp):
    """Regression: ``lens report --json`` built every (rank, step) row as a Python list before
    writing (1,000 ranks × 500 steps took ~120 MB: a 10M-span report peaked at 362 MiB against
    its 256 MB budget). Written compact, the rows are encoded a chunk at a time."""
    import dataclasses
    import io
    import tracemalloc
    from array import array

    folder, _ = ddp
    report = report_of(folder)
    ranks, steps = 400, 500
    cells = ranks * steps
    big = dataclasses.replace(report.rank_steps, rank_labels=tuple(f"rank {r}" for r in range(ranks)),
                              iterations=array("q", (1 + i // ranks for i in range(cells))),
                              ranks=array("l", range(ranks)) * steps,
                              **{name: array("q", [7 * S]) * cells
                                 for name in ("wall_ns", "productive_ns", "overhead_ns", "idle_ns", "wasted_ns",
                                              "busy_ns")})
    report = dataclasses.replace(report, rank_steps=big)
    report.aggregates  # computed once (the text report needs them too), before memory is traced

    class Count(io.TextIOBase):  # the text is counted, not kept
        written = 0

        def write(self, text):
            self.written += len(text)
            return len(text)

    out = Count()
    tracemalloc.start()
    try:
        report.write_json(out)
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        whole = len(json.dumps(report.to_json(), separators=(",", ":")))
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.written == whole
    assert held > 40 * 10**6  # the rows as lists, and their text: what streaming avoids
    assert streamed < held / 8, (streamed, held)


def test_the_engine_gives_up_the_figures_memory_before_they_are_read(ddp, monkeypatch):
    """Regression: the rollup's engine was given less memory only once the rank × step figures
    were read into Python, so its limit no longer bounded the peak while they were read (a
    10M-span report peaked at 245 MiB there, against a 256 MB budget)."""
    from lens_report import build_report
    from lens_report.store import TraceStore
    from lens_report.rollup import CELL_BYTES

    folder, _ = ddp
    events = []
    hold, stream = TraceStore.hold_outside, TraceStore.stream
    monkeypatch.setattr(TraceStore, "hold_outside", lambda self, n: (events.append(("hold", n)), hold(self, n))[1])

    def streamed(self, sql):
        if "FROM rank_steps" in sql:
            events.append(("read", None))
        return stream(self, sql)

    monkeypatch.setattr(TraceStore, "stream", streamed)
    with TraceStore() as store:
        store.load([folder])
        build_report(store)
    first = events.index(("read", None))
    assert ("hold", 12 * CELL_BYTES) in events[:first], events


def test_ranks_sort_numerically(tmp_path):
    """Regression: lanes came in the order rank 0, 1, 10, 11, ..., 2."""
    write_ddp_run(tmp_path, ranks=12)
    report = report_of(tmp_path / "ddp")
    assert [r.rank for r in report.ranks] == [f"rank {n}" for n in range(12)]


_RANK_SCRIPT = """
import sys
from lens_core import LensConfig, efficiency_span, iteration_scope, managed_span, umbrella_span
import lens_core.catalogs.rl
from otel_bridge import setup_telemetry

handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], span_groups="per_step",
                                    metrics_enabled=False))
with umbrella_span("job", "rl.grpo.job"):
    for step in (1, 2):
        with iteration_scope(step), umbrella_span("step", "rl.grpo.step"):
            with managed_span("policy_update", "rl.grpo.policy_training"):
                pass
print(handle.run_id)
assert handle.shutdown()
"""


def test_ranks_of_one_torchrun_job_land_in_one_run_and_one_report(tmp_path):
    """Regression: under torchrun without LENS_RUN_ID each rank made up its own run id, so one
    job landed in as many run folders as it had ranks (TORCHELASTIC_RUN_ID was not read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_", "SLURM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    procs = [subprocess.run([sys.executable, "-c", _RANK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                            timeout=120, env={**env, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                                              "TORCHELASTIC_RUN_ID": "f00dfeed"})
             for rank in (0, 1)]
    assert [p.returncode for p in procs] == [0, 0], [p.stderr for p in procs]
    assert [p.stdout.strip() for p in procs] == ["f00dfeed", "f00dfeed"]
    assert [p.name for p in tmp_path.iterdir()] == ["f00dfeed"]
    report = report_of(tmp_path)
    assert (report.run_id, [r.rank for r in report.ranks]) == ("f00dfeed", ["rank 0", "rank 1"])
    assert [(s.iteration, s.ranks) for s in report.steps] == [(1, 2), (2, 2)]
    assert report.violations == ()


def test_stragglers_that_cost_the_same_are_listed_in_rank_order(tmp_path, otlp):
    """Regression: ties were broken by label text, so rank 10 came before rank 2."""
    lines = []
    for rank, slow_step in ((0, None), (2, 2), (10, 1)):
        spans = []
        for step in (1, 2):
            base, n = 10 * step, 100 * rank + 10 * step
            busy = 8 if step == slow_step else 6
            spans += [otlp.span(n, "rl.grpo.step", base, base + 10, iteration=step, trace=f"{rank + 1:032x}"),
                      otlp.span(n + 1, "work", base, base + busy, n, bucket="productive", iteration=step,
                                trace=f"{rank + 1:032x}"),
                      otlp.span(n + 2, "wait", base + busy, base + 10, n, bucket="idle", iteration=step,
                                trace=f"{rank + 1:032x}")]
        lines.append(otlp.request(spans, service_instance_id=f"job-rank{rank}", nemo_run_id="job", nv_dl_rank=rank))
    report = report_of(otlp.write(tmp_path / "t.jsonl", *lines))
    assert [(r.rank, r.straggler_cost_ns) for r in report.stragglers] == [("rank 2", 4 * S), ("rank 10", 4 * S)]
