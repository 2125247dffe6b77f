"""Known answers for the straggler scores on synchronous runs (every rank waits at the all-reduce): 64 and 4,000 ranks."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from report_helpers import _clickhouse_report, comparable, report_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from trace_synth import SYNC_STEP_NS, write_sync_run  # noqa: E402

from lens_report.aggregates import aggregate  # noqa: E402
from lens_report.model import BUCKETS, BucketTotals, RankSteps  # noqa: E402

# the issue's run: 64 ranks x 40 steps, +-3 % compute, rank 53 always 15 % slower, rank 41 30 % slower from step 20
ISSUE_SLOW = {53: (1.15, 1), 41: (1.3, 20)}


@pytest.fixture(scope="module")
def issue_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sync64")
    write_sync_run(out, 64, 40, slow=ISSUE_SLOW, run="sync64")
    return out


def test_a_synchronous_run_flags_the_slow_ranks_from_busy_time_with_where_they_began(issue_run):
    """Regression: every rank of a synchronous job takes the same step wall time, and scores from
    wall time named ranks 0-9 at 1.05 in rank order and missed 41 and 53. From busy time (wall
    less the wait at the all-reduce): rank 41 (30 % slower since step 20) first, then rank 53
    (15 % slower throughout); the 62 ranks that only waited are never flagged. Each flagged rank
    says the rank-seconds the others waited for it."""
    report = report_of(issue_run)
    agg = report.aggregates
    assert [s.rank for s in agg.flagged] == ["rank 41", "rank 53"]
    late, always = agg.flagged
    assert late.since_step == late.change_step == 20 and late.individual == pytest.approx(1.3, abs=0.03)
    assert always.since_step == 1 and always.change_step is None
    assert always.relative == pytest.approx(1.15, abs=0.03) and always.flagged_by == "relative"
    # rank 41 was the busiest of every step from 20 on, rank 53 of every step before: the others waited
    waits = {s.slowest_rank for s in report.steps if s.iteration >= 20}
    assert waits == {"rank 41"}
    assert {s.slowest_rank for s in report.steps if s.iteration < 20} == {"rank 53"}
    assert late.waited_ns == sum(s.wait_ns for s in report.steps if s.iteration >= 20)
    assert always.waited_ns == sum(s.wait_ns for s in report.steps if s.iteration < 20)
    assert all(abs(s.relative - 1) < 0.03 and abs(s.individual - 1) < 0.04 for s in agg.stragglers[2:])


def test_the_straggler_figures_are_the_same_from_clickhouse(issue_run):
    """The same spans read from the Collector's table in chdb give the same scores, flags and waits."""
    files = report_of(issue_run)
    other, error = _clickhouse_report([issue_run], {}, "clickhouse")
    assert error is None, error
    ours, theirs = comparable(files.to_json()), comparable(other.to_json())
    assert theirs["straggler_scores"] == ours["straggler_scores"]
    assert theirs["slowest_steps"] == ours["slowest_steps"] and theirs["steps"] == ours["steps"]
    assert [s["rank"] for s in theirs["straggler_scores"] if s["flagged"]] == ["rank 41", "rank 53"]


def test_equal_ranks_rank_nothing(tmp_path):
    """Regression: on a run where all ranks are exactly equal, a tie made the last rank the slowest
    of 29 of 30 steps. Now a step whose most busy time is shared has no slowest rank, no rank is
    flagged and no rank is said to have made the others wait."""
    write_sync_run(tmp_path, 8, 30, jitter=0.0, run="equal")
    report = report_of(tmp_path)
    assert {s.slowest_rank for s in report.steps} == {""}
    assert not report.stragglers and not report.aggregates.flagged
    assert {s.max_rank for s in report.aggregates.steps} == {""}
    assert not report.aggregates.slowest_steps  # no step is longer than the median step
    assert all(s.score == 1.0 for s in report.aggregates.stragglers)


def _sync_cells(ranks: int, steps: int, seed: int, slow: dict[int, tuple[float, int]]) -> SimpleNamespace:
    """A report-like object of a synchronous run's (rank, step) figures, as the rollup gives them:
    compute +-3 %, then idle until the slowest rank is done."""
    rng = random.Random(seed)
    rs = RankSteps(tuple(f"rank {r}" for r in range(ranks)))
    for step in range(1, steps + 1):
        compute = [int(SYNC_STEP_NS * (1 + rng.uniform(-0.03, 0.03))
                       * (slow[r][0] if r in slow and step >= slow[r][1] else 1.0)) for r in range(ranks)]
        wall = max(compute)
        for rank, busy in enumerate(compute):
            for column, value in zip((rs.iterations, rs.ranks, rs.wall_ns, rs.productive_ns, rs.overhead_ns,
                                      rs.idle_ns, rs.wasted_ns, rs.busy_ns),
                                     (step, rank, wall, busy, 0, wall - busy, 0, busy)):
                column.append(value)
    buckets = {b: 0 for b in BUCKETS}
    return SimpleNamespace(run=BucketTotals(sum(rs.wall_ns), buckets), rank_steps=rs, ranks=())


@pytest.mark.parametrize("seed", range(10))
def test_no_false_alarm_at_4000_ranks_with_3_percent_jitter(seed):
    """4,000 ranks, +-3 % compute jitter, no straggler: no rank is flagged, whatever the seed."""
    agg = aggregate(_sync_cells(4000, 30, seed, {}))
    assert agg.flagged == ()
    assert max(s.score for s in agg.stragglers) < 1.05


@pytest.mark.parametrize("seed", range(10))
def test_a_sustained_10_percent_slowdown_at_4000_ranks_is_flagged_where_it_began(seed):
    """One rank of 4,000 becomes 10 % slower at step 21 of 30: it alone is flagged, since step 21,
    by its individual score (its relative score, the median over all its steps, stays near 1)."""
    agg = aggregate(_sync_cells(4000, 30, seed, {1234: (1.10, 21)}))
    assert [(s.rank, s.flagged_by) for s in agg.flagged] == [("rank 1234", "individual")]
    assert agg.flagged[0].since_step == 21 and agg.flagged[0].individual == pytest.approx(1.10, abs=0.04)  # medians of +-3 % jitter


def test_4000_ranks_from_files_flag_the_one_slow_rank(tmp_path):
    """End to end at 4,000 ranks (8 steps, ~100,000 spans): rank 2999 10 % slower from step 4 is the one
    flagged, since step 4, and the text report stays within 80 lines."""
    from lens_report.render_text import render_text

    write_sync_run(tmp_path, 4000, 8, slow={2999: (1.10, 4)}, run="sync4000", ranks_per_file=500)
    report = report_of(tmp_path)
    assert [(s.rank, s.since_step) for s in report.aggregates.flagged] == [("rank 2999", 4)]
    assert len(render_text(report).splitlines()) <= 80


def test_a_slowdown_every_rank_shares_flags_no_rank():
    """Every rank 20 % slower from step 11 (a longer sequence, a slower shared filesystem): no rank
    is slower than its peers or changed against them, so none is flagged."""
    agg = aggregate(_sync_cells(256, 20, 7, {r: (1.2, 11) for r in range(256)}))
    assert agg.flagged == ()
    assert agg.step_times.drift == pytest.approx(1.2, abs=0.03)


def test_the_text_report_stays_within_80_lines_however_long_the_run_and_however_much_went_wrong(issue_run):
    """Regression: the text report grew with the steps (147 lines at 64 ranks x 100 steps, ~550 at
    500). At 10,000 steps, with hundreds of problems, loss records, unfinished processes and
    violations, it is at most 80 lines; --steps lists every step, and the JSON keeps everything."""
    import dataclasses

    from lens_report.model import LossRow, Problem, UnfinishedProcess, Violation
    from lens_report.render_text import render_text

    report = report_of(issue_run)
    cells = _sync_cells(64, 10_000, 3, {5: (1.2, 4000)})
    big = dataclasses.replace(
        report, rank_steps=cells.rank_steps,
        problems=tuple(Problem(f"f{i}.jsonl", i + 1, "not JSON") for i in range(500)),
        loss=tuple(LossRow(f"rank {i}", f"p{i}", 100, 5, 0, 0, 0) for i in range(300)),
        unfinished=tuple(UnfinishedProcess(f"rank {i}", f"p{i}", 10) for i in range(300)),
        violations=tuple(Violation("step-overflow", "t", "s", "rl.grpo.step", "f", 1, "too long") for _ in range(1000)),
        rule_counts={"step-overflow": 2000, "nested-bucket": 7})
    text = render_text(big)
    lines = text.splitlines()
    assert len(lines) <= 80, len(lines)
    assert "problems: 500" in text and "  ... 497 more (all in --json)" in text
    assert "violations: 2007 (nested-bucket 7, step-overflow 2000)" in text
    assert [s.rank for s in big.aggregates.flagged] == ["rank 5"] and big.aggregates.flagged[0].since_step == 4000
    assert len(render_text(big, every_step=True).splitlines()) > 10_000


def test_the_page_says_the_real_command_for_what_it_does_not_carry(issue_run, tmp_path):
    """Regression: 99 of 100 heatmap columns showed 'lens report PATH... --html OUT --step N' with
    placeholder paths. The page carries the command that made it (its real input and output), to
    which a click on what is not carried adds --step and --ranks."""
    import json
    import re

    from lens_core.exitcodes import EXIT_OK
    from lens_report.cli import main

    out = tmp_path / "page.html"
    assert main([str(issue_run), "--html", str(out), "--run", "sync64"]) == EXIT_OK
    page = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="lens-data">(.*?)</script>', page, re.S)[1])
    assert data["rerun"] == f"lens report {issue_run} --run sync64 --html {out}"
    assert "PATH..." not in page and " OUT " not in page
