"""Known answers for the aggregates the report leads with: badput, step-time quantiles over ranks, straggler scores."""

from __future__ import annotations

import json

import pytest

from report_helpers import Otlp, report_of
from lens_report.aggregates import quantile
from lens_report.cli import main
from lens_core.exitcodes import EXIT_OK

RANKS, STEPS, PERIOD = 8, 100, 40
ALWAYS_SLOW, BECAME_SLOW, SINCE = 3, 6, 80


def _wall(rank: int, step: int) -> int:
    """Step seconds: 10, except rank 3 always 20 and rank 6 30 from step 80 on."""
    if rank == ALWAYS_SLOW:
        return 20
    if rank == BECAME_SLOW and step >= SINCE:
        return 30
    return 10


def write_two_stragglers(path):
    """8 ranks × 100 steps, a step every 40 s: productive for all but the last 2 s (overhead)."""
    lines = []
    for rank in range(RANKS):
        spans, n, trace = [], 1, f"{rank + 1:032x}"
        for step in range(1, STEPS + 1):
            start, wall = step * PERIOD, _wall(rank, step)
            spans += [Otlp.span(n, "rl.grpo.step", start, start + wall, iteration=step, trace=trace),
                      Otlp.span(n + 1, "rl.grpo.policy_training", start, start + wall - 2, n, bucket="productive",
                                iteration=step, trace=trace),
                      Otlp.span(n + 2, "rl.grpo.data_processing", start + wall - 2, start + wall, n,
                                bucket="overhead", iteration=step, trace=trace)]
            n += 3
        lines.append(Otlp.request(spans, nv_dl_rank=rank, service_instance_id=f"two-rank{rank}", nemo_run_id="two"))
    return Otlp.write(path, *lines)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    path = write_two_stragglers(tmp_path_factory.mktemp("agg") / "traces.jsonl")
    return path, report_of(path)


def test_quantile_interpolates_between_the_closest_ranks():
    assert quantile([10.0] * 7 + [20.0], 0.9) == pytest.approx(13.0)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([5.0], 0.99) == 5.0


def test_badput_splits_every_rank_second_and_goodput_leads(two):
    _, report = two
    badput = report.aggregates.badput
    # walls: a rank runs from step 1's start (40 s) to step 100's end
    walls = [100 * PERIOD + _wall(rank, STEPS) - PERIOD for rank in range(RANKS)]
    productive = sum(_wall(r, s) - 2 for r in range(RANKS) for s in range(1, STEPS + 1))
    assert badput.total_ns == sum(walls) * Otlp.S == 31_790 * Otlp.S
    assert badput.productive_ns == productive * Otlp.S == 7_820 * Otlp.S
    assert badput.parts_ns["overhead"] == 1_600 * Otlp.S
    assert badput.parts_ns["unattributed"] == (31_790 - 7_820 - 1_600) * Otlp.S
    assert badput.goodput == pytest.approx(7_820 / 31_790)
    assert badput.goodput + sum(badput.fraction(p) for p in ("overhead", "idle", "wasted", "unattributed")) == \
        pytest.approx(1.0)
    assert not badput.restarts_known and badput.to_json()["parts"]["restarts"] is None


def test_each_step_gives_p50_p90_p99_and_max_over_ranks(two):
    _, report = two
    spread = {s.iteration: s for s in report.aggregates.steps}
    assert len(spread) == STEPS
    early, late = spread[SINCE - 1], spread[SINCE]
    S = Otlp.S
    # 8 ranks: 7 × 10 s and one 20 s; from step 80 six × 10 s, 20 s and 30 s
    assert (early.p50_ns, early.p90_ns, early.p99_ns, early.max_ns, early.max_rank) == (
        10 * S, pytest.approx(13 * S), pytest.approx(19.3 * S), 20 * S, "rank 3")
    assert (late.p50_ns, late.p90_ns, late.p99_ns, late.max_ns, late.max_rank) == (
        10 * S, pytest.approx(23 * S), pytest.approx(29.3 * S), 30 * S, "rank 6")


def test_stragglers_are_found_by_relative_and_by_individual_score(two):
    """A rank always twice as busy as its peers scores 2 relative; a rank that became 3x slower
    at step 80 scores 1 relative (its median step is normal) but 3 individual, since step 80.
    Each says the rank-seconds the others waited for it; the ranks that were never slower are
    not flagged (their scores are 1)."""
    _, report = two
    top = report.aggregates.top(5)
    assert [s.rank for s in top] == ["rank 6", "rank 3"]
    became, always = top
    assert (became.relative, became.individual, became.change_step, became.since_step, became.flagged_by) == (
        1.0, 3.0, SINCE, SINCE, "individual")
    assert (always.relative, always.individual, always.since_step, always.flagged_by) == (2.0, 1.0, 1, "relative")
    S = Otlp.S
    # rank 6 the busiest of steps 80-100: 6 ranks x 20 s and rank 3's 10 s a step; rank 3 of steps 1-79: 7 x 10 s
    assert (became.waited_ns, always.waited_ns) == (21 * 130 * S, 79 * 70 * S)
    assert all(s.score == 1.0 and not s.flagged for s in report.aggregates.stragglers[2:])


def test_text_and_json_lead_with_goodput_and_stragglers_and_drill_into_ranks(two, capsys):
    path, _ = two
    assert main([str(path)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 80
    assert lines[3].startswith("goodput 24.6% of 31,790.0 rank-s; badput: overhead 5.0%, idle 0.0%, wasted 0.0%, "
                               "unattributed 70.4%, lost to restarts -")
    assert lines[5] == "stragglers: 2 of 8 ranks flagged, worst first"
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["rank", "score", "relative"])
    assert lines[header + 2].split() == ["rank", "6", "3.00", "1.00", "3.00", "80", "10.000", "2730.000"]
    assert lines[header + 3].split() == ["rank", "3", "2.00", "2.00", "1.00", "1", "20.000", "5530.000"]
    assert not any(line.startswith("rank detail") for line in lines)
    assert main([str(path), "--ranks", "6", "--step", "79-80"]) == EXIT_OK
    text = capsys.readouterr().out
    detail = text[text.index("\nrank detail") + 1:].splitlines()
    assert detail[0] == "rank detail: 1 rank(s)"
    assert detail[3].split()[:4] == ["rank", "6", "1", "3990.000"]
    per_step = detail[detail.index("") + 1:]
    cells = [line.split() for line in per_step if line.startswith("rank 6 ")]
    # step time, busy time, then busy over the step's median rank and over its own median
    assert [c[2:5] + c[-2:] for c in cells] == [["79", "10.000", "10.000", "1.00", "1.00"],
                                                ["80", "30.000", "30.000", "3.00", "3.00"]]
    assert main([str(path), "--json", "--top", "1", "--ranks", "6"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert list(data)[1:4] == ["badput", "step_time", "straggler_scores"]
    assert data["badput"]["goodput"] == pytest.approx(7_820 / 31_790)
    assert [s["rank"] for s in data["straggler_scores"]] == ["rank 6"]
    assert data["straggler_scores"][0]["since_step"] == SINCE
    assert {row[1] for row in data["rank_steps"]["rows"]} == {"rank 6"}
    assert data["step_time"][SINCE - 1]["p90_s"] == pytest.approx(23.0)


def test_the_aggregates_hold_machine_integers_not_a_tuple_per_rank_step():
    """Regression: the aggregates kept a tuple per (rank, step) twice over (by step and by rank):
    ~140 MB at 1,000 ranks x 500 steps, which set the peak RSS of a 10M-span report past its
    256 MB budget. They now hold each step's and each rank's cell indexes as machine integers:
    under 50 bytes of Python memory a (rank, step) at 200 ranks x 500 steps (~20 measured; the
    tuples took ~220), same answers."""
    import tracemalloc
    from types import SimpleNamespace

    from lens_report.aggregates import aggregate
    from lens_report.model import BUCKETS, BucketTotals, RankSteps

    ranks, steps = 200, 500
    rs = RankSteps(tuple(f"rank {r}" for r in range(ranks)))
    for step in range(1, steps + 1):
        for rank in range(ranks):
            wall = 20_000_000_000 if rank == 17 and step > 400 else 10_000_000_000 + rank * 1_000_003 + step * 7_919
            for column, value in zip((rs.iterations, rs.ranks, rs.wall_ns, rs.productive_ns, rs.overhead_ns,
                                      rs.idle_ns, rs.wasted_ns, rs.busy_ns),
                                     (step, rank, wall, wall // 2, wall // 4, 0, 0, wall)):
                column.append(value)
    report = SimpleNamespace(run=BucketTotals(sum(rs.wall_ns), dict.fromkeys(BUCKETS, 0)), rank_steps=rs)
    tracemalloc.start()
    try:
        result = aggregate(report)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / (ranks * steps) < 50
    assert len(result.steps) == steps and result.steps[-1].max_rank == "rank 17"
    assert result.stragglers[0].rank == "rank 17" and result.stragglers[0].since_step == 401


def test_the_aggregates_are_the_same_whichever_order_the_cells_come_in():
    """The aggregates take a rank's cells as a stride when every step holds the same ranks in the same order (a
    full grid: at 1,000 ranks x 500 steps 0.8 s of a 10M-span report went to gathering them one by one), else
    one by one; and each cell's busy ratio at once when no step's median busy time is 0, else cell by cell. The
    grid, the same cells with each step's ranks in another order, and both with a step of no busy time give the
    same scores, steps and change points."""
    from types import SimpleNamespace

    from lens_report.aggregates import aggregate
    from lens_report.model import BUCKETS, BucketTotals, RankSteps

    ranks, steps = 12, 40

    def report(rotate: bool, idle_step: bool) -> dict:
        rs = RankSteps(tuple(f"rank {r}" for r in range(ranks)))
        for step in range(1, steps + 1):
            order = list(range(ranks))
            if rotate:
                order = order[step % ranks:] + order[:step % ranks]
            for rank in order:
                wall = 30_000 if rank == 5 and step > 25 else 10_000 + 37 * rank + (step * 7919) % 101
                busy = 0 if idle_step and step == 3 else wall
                for column, value in zip((rs.iterations, rs.ranks, rs.wall_ns, rs.productive_ns, rs.overhead_ns,
                                          rs.idle_ns, rs.wasted_ns, rs.busy_ns),
                                         (step, rank, wall, busy // 2, busy // 4, wall - busy, 0, busy)):
                    column.append(value)
        totals = BucketTotals(sum(rs.wall_ns), dict.fromkeys(BUCKETS, 0))
        return aggregate(SimpleNamespace(run=totals, rank_steps=rs)).to_json()

    for idle_step in (False, True):
        grid = report(False, idle_step)
        assert grid == report(True, idle_step)
        assert grid["straggler_scores"][0]["rank"] == "rank 5"
    assert report(False, True) != report(False, False)  # the step of no busy time counts for nothing
