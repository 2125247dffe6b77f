"""Goodput rollup: per-step and run bucket seconds, step discovery, top spans and invariant violations."""

from __future__ import annotations

import importlib.util
import os
import random

from report_helpers import ENGINES_ENV, report_of

from lens_report import Rule, TraceStore, build_report

S = 1_000_000_000


def buckets(totals):
    return (totals.wall_ns, totals.bucket_ns, totals.unattributed_ns, totals.goodput)


def test_two_step_trace_gives_exact_seconds_per_bucket_and_goodput(two_step_file):
    report = report_of(two_step_file)
    assert [(s.iteration, s.method, s.name, s.span_id) for s in report.steps] == [
        (1, "pattern", "rl.grpo.step", "0000000000000002"),
        (2, "pattern", "rl.grpo.step", "0000000000000005"),
    ]
    assert buckets(report.steps[0].totals) == (
        8 * S, {"productive": 4 * S, "overhead": 2 * S, "idle": 0, "wasted": 0}, 2 * S, 0.5)
    assert buckets(report.steps[1].totals) == (
        9 * S, {"productive": 6 * S, "overhead": 0, "idle": 2 * S, "wasted": 0}, 1 * S, 6 / 9)
    assert buckets(report.run) == (
        20 * S, {"productive": 10 * S, "overhead": 2 * S, "idle": 2 * S, "wasted": 0}, 6 * S, 0.5)
    assert report.violations == ()
    assert (report.span_count, report.trace_count, report.orphan_count) == (7, 1, 0)


def test_step_spans_join_leaves_from_another_process_and_file_by_parent_id(tmp_path, otlp):
    driver = otlp.write(tmp_path / "driver.jsonl", otlp.request(
        [otlp.span(2, "rl.sft.step", 0, 10, iteration=1)], service_name="driver", process_pid=1))
    worker = otlp.write(tmp_path / "worker.jsonl", otlp.request(
        [otlp.span(10, "rl.policy.train", 1, 7, 2, bucket="productive"),
         otlp.span(11, "rl.policy.save", 7, 9, 2, bucket="overhead")], service_name="worker", process_pid=2))
    report = report_of(driver, worker)
    (step,) = report.steps
    assert buckets(step.totals) == (10 * S, {"productive": 6 * S, "overhead": 2 * S, "idle": 0, "wasted": 0},
                                    2 * S, 0.6)
    assert report.orphan_count == 0


def test_without_step_spans_unbucketed_spans_are_grouped_by_iteration(tmp_path, otlp):
    span = otlp.span
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        span(1, "rl.sft.train_loop", 0, 5, iteration=1),
        span(2, "rl.sft.train", 0, 3, 1, bucket="productive", iteration=1),
        span(3, "rl.sft.validate", 5, 6, iteration=1),
        span(4, "rl.sft.generate", 5, 6, 3, bucket="overhead", iteration=1),
        span(5, "rl.sft.train_loop", 6, 10, iteration=2),
        span(6, "rl.sft.retry", 6, 7, 5, bucket="wasted", iteration=2),
        span(7, "rl.sft.train", 7, 9, 5, bucket="productive", iteration=2),
    ]))
    report = report_of(path)
    assert [(s.iteration, s.method, s.span_id) for s in report.steps] == [
        (1, "iteration", otlp.sid(1)), (2, "iteration", otlp.sid(5))]
    assert buckets(report.steps[0].totals) == (6 * S, {"productive": 3 * S, "overhead": S, "idle": 0, "wasted": 0},
                                               2 * S, 0.5)
    assert buckets(report.steps[1].totals) == (4 * S, {"productive": 2 * S, "overhead": 0, "idle": 0, "wasted": S},
                                               S, 0.5)

    by_pattern = report_of(path, step_pattern=r"train_loop$")
    assert [(s.iteration, s.method, s.totals.wall_ns) for s in by_pattern.steps] == [
        (1, "pattern", 5 * S), (2, "pattern", 4 * S)]
    assert by_pattern.steps[0].totals.bucket_ns["overhead"] == 0


def test_fallback_steps_leave_out_unbucketed_spans_below_a_bucketed_span(tmp_path, otlp):
    """Regression: in a trace without step spans (``lens demo --span-groups default``), a deferred
    ``rl.checkpoint.finalize`` (unbucketed, under the overhead checkpointing span) became a step of
    its own, or stretched its iteration's step past the start of the next one."""
    span = otlp.span
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        span(1, "rl.grpo.job", 0, 20),
        span(2, "rl.grpo.evaluate", 0, 4, 1, iteration=1),
        span(3, "rl.grpo.checkpointing", 4, 5, 1, bucket="overhead", iteration=1),
        span(4, "rl.checkpoint.finalize", 4.5, 8, 3, iteration=1),
        span(5, "rl.grpo.evaluate", 6, 9, 1, iteration=2),
        span(6, "rl.grpo.checkpointing", 10, 11, 1, bucket="overhead", iteration=3),
        span(7, "rl.checkpoint.finalize", 10.5, 15, 6, iteration=3),
    ]))
    report = report_of(path)
    assert [(s.iteration, s.span_id, s.totals.wall_ns) for s in report.steps] == [
        (1, otlp.sid(2), 4 * S), (2, otlp.sid(5), 3 * S)]
    assert report.run.bucket_ns["overhead"] == 2 * S and report.violations == ()


def test_bucketed_spans_outside_steps_and_orphans_still_count_in_the_run(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "rl.job", 0, 10),
        otlp.span(2, "rl.step", 0, 4, 1, iteration=1),
        otlp.span(3, "rl.data.prefetch", 5, 6, 1, bucket="overhead"),
        otlp.span(4, "remote.work", 7, 9, 99, bucket="productive"),
    ]))
    report = report_of(path)
    assert report.orphan_count == 1
    assert report.steps[0].totals.attributed_ns == 0
    assert buckets(report.run) == (10 * S, {"productive": 2 * S, "overhead": S, "idle": 0, "wasted": 0}, 7 * S, 0.2)


def test_each_violated_invariant_is_listed_with_the_span_that_breaks_it(tmp_path, otlp):
    span = otlp.span
    missing_end = span(11, "rl.no_end", 26, 27, 8, bucket="overhead")
    del missing_end["endTimeUnixNano"]
    path = otlp.write(tmp_path / "v.jsonl", otlp.request([
        span(1, "rl.job", 0, 100),
        span(2, "rl.step", 0, 10, 1, iteration=1),
        span(3, "rl.outer", 1, 6, 2, bucket="productive"),
        span(4, "rl.inner", 2, 3, 3, bucket="overhead"),
        span(5, "rl.step", 10, 14, 1, iteration=2),
        span(6, "rl.gen_a", 10, 13, 5, bucket="productive"),
        span(7, "rl.gen_b", 11, 14, 5, bucket="productive"),
        span(8, "rl.step", 20, 30, 1, iteration=3),
        span(9, "rl.inverted", 25, 24, 8, bucket="overhead"),
        span(10, "rl.weird", 21, 22, 8, bucket="bogus"),
        missing_end,
    ]))
    report = report_of(path)
    assert [(v.rule, v.span_id, v.span_name, v.trace_id, v.file, v.line) for v in report.violations] == [
        (Rule.BAD_TIMING, otlp.sid(9), "rl.inverted", otlp.TRACE, str(path), 1),
        (Rule.BAD_TIMING, otlp.sid(11), "rl.no_end", otlp.TRACE, str(path), 1),
        (Rule.NESTED_BUCKET, otlp.sid(3), "rl.outer", otlp.TRACE, str(path), 1),
        (Rule.STEP_OVERFLOW, otlp.sid(5), "rl.step", otlp.TRACE, str(path), 1),
        (Rule.UNKNOWN_BUCKET, otlp.sid(10), "rl.weird", otlp.TRACE, str(path), 1),
    ]
    reasons = [v.reason for v in report.violations]
    assert reasons[0] == "ends 1.000000 s before it starts; skipped"
    assert reasons[1] == "missing end timestamp; skipped"
    assert "'rl.inner'" in reasons[2] and otlp.sid(4) in reasons[2]
    assert reasons[3] == "buckets under step 2 sum to 6.000000 s, more than its wall time 4.000000 s"
    assert reasons[4] == "rl.bucket 'bogus' is not one of productive, overhead, idle, wasted"
    overflowing = report.steps[1].totals
    assert (overflowing.unattributed_ns, overflowing.goodput) == (0, 1.5)
    assert report.steps[2].totals.attributed_ns == 0
    assert report.run.bucket_ns == {"productive": 11 * S, "overhead": S, "idle": 0, "wasted": 0}


def test_step_overflow_allows_one_microsecond_of_rounding(tmp_path, otlp):
    def step_with_leaf_ending_at(end_s):
        return otlp.request([otlp.span(1, "rl.step", 0, 1, iteration=1),
                             otlp.span(2, "a", 0, 0.5, 1, bucket="productive"),
                             otlp.span(3, "b", 0.5, end_s, 1, bucket="productive")])

    within = report_of(otlp.write(tmp_path / "within.jsonl", step_with_leaf_ending_at(1.0000005)))
    beyond = report_of(otlp.write(tmp_path / "beyond.jsonl", step_with_leaf_ending_at(1.000002)))
    assert [v.rule for v in within.violations] == []
    assert [v.rule for v in beyond.violations] == [Rule.STEP_OVERFLOW]


def test_two_busy_ranks_read_full_goodput_not_twice_the_wall_clock(tmp_path, otlp):
    """Regression: the run row added every rank's buckets and divided by one wall clock, so a
    healthy 2-rank job read 200 % goodput and was flagged run-overflow (--strict exited 1)."""
    a = otlp.request([otlp.span(1, "train", 0, 10, bucket="productive")], process_pid=1, nv_dl_rank=0)
    b = otlp.request([otlp.span(2, "train", 0, 10, bucket="productive")], process_pid=2, nv_dl_rank=1)
    report = report_of(otlp.write(tmp_path / "a.jsonl", a, b))
    assert report.violations == ()
    assert (report.run.wall_ns, report.run.bucket_ns["productive"], report.run.goodput) == (20 * S, 20 * S, 1.0)
    assert [(r.rank, r.totals.goodput) for r in report.ranks] == [("rank 0", 1.0), ("rank 1", 1.0)]


def test_bucketed_spans_overlapping_within_one_rank_overflow_it(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "train", 0, 10, bucket="productive", thread_id=1),
        otlp.span(2, "train", 0, 10, bucket="productive", thread_id=2)], nv_dl_rank=0))
    report = report_of(path)
    assert [(v.rule, v.rank) for v in report.violations] == [(Rule.RANK_OVERFLOW, "rank 0")]
    assert report.violations[0].reason == "buckets of rank 0 sum to 20.000000 s, more than its wall time 10.000000 s"


def test_top_spans_rank_names_by_total_time_and_honour_n(two_step_file):
    top = report_of(two_step_file, top_n=3).top_spans
    assert [(t.name, t.count, t.total_ns, t.mean_ns) for t in top] == [
        ("rl.grpo.job", 1, 20 * S, 20 * S),
        ("rl.grpo.step", 2, 17 * S, 8.5 * S),
        ("rl.grpo.policy_training", 1, 6 * S, 6 * S),
    ]
    assert report_of(two_step_file, top_n=0).top_spans == ()


def test_parent_cycles_in_bad_input_are_flagged_and_do_not_hang_the_rollup(tmp_path, otlp):
    path = otlp.write(tmp_path / "a.jsonl", otlp.request([
        otlp.span(1, "rl.step", 0, 4, 2, iteration=1),
        otlp.span(2, "loop", 0, 1, 1, bucket="idle"),
        otlp.span(3, "below.the.cycle", 0, 1, 2),
        otlp.span(4, "fine", 0, 1),
    ]))
    report = report_of(path)
    assert report.steps[0].totals.bucket_ns["idle"] == S
    assert sorted((v.rule, v.span_name) for v in report.violations) == [
        (Rule.PARENT_CYCLE, "loop"), (Rule.PARENT_CYCLE, "rl.step")]
    assert report.violations[0].reason == "parent ids form a cycle of 2 span(s); no root"


def test_a_deep_parent_chain_attributes_the_leaf_to_its_step(tmp_path, otlp):
    chain = [otlp.span(1, "rl.grpo.step", 0, 10, iteration=1)]
    chain += [otlp.span(n, f"level{n}", 0, 10, n - 1) for n in range(2, 300)]
    chain.append(otlp.span(300, "leaf", 1, 3, 299, bucket="productive"))
    chain.append(otlp.span(301, "leaf.below", 1, 2, 300, bucket="idle"))
    report = report_of(otlp.write(tmp_path / "a.jsonl", otlp.request(chain)))
    (step,) = report.steps
    assert step.totals.bucket_ns == {"productive": 2 * S, "overhead": 0, "idle": S, "wasted": 0}
    assert [(v.rule, v.span_name) for v in report.violations] == [(Rule.NESTED_BUCKET, "leaf")]


def _walk_up(k_rows):
    """What ``anc`` must hold, by walking each span's parents one at a time: {id: (fs, fb, cyclic)}."""
    by_key = {(trace, span): row for row in k_rows for (_, trace, span, *_) in [row]}
    answers = {}
    for span_id, trace, _, parent, _, _ in k_rows:
        if (trace, parent) not in by_key:
            continue
        fs = fb = None
        seen = {span_id}
        node = by_key[(trace, parent)]
        while True:
            node_id, _, _, node_parent, cand, counted = node
            fs = node_id if fs is None and cand else fs
            fb = node_id if fb is None and counted else fb
            if node_id in seen or (trace, node_parent) not in by_key:
                break
            seen.add(node_id)
            node = by_key[(trace, node_parent)]
        answers[span_id] = (fs, fb, node_id in seen)
    return answers


def _random_forest(otlp, seed):
    """300 spans in three traces: chains, leaves and parents of both kinds (step candidates,
    counted bucketed spans), parents outside the file, self-parents and cycles."""
    rng = random.Random(seed)
    spans, n = [], 0
    for t in range(3):
        trace = f"{t + 1:032x}"
        ids = []
        for _ in range(100):
            n += 1
            choice = rng.random()
            if not ids or choice < 0.05:
                parent = None if choice < 0.03 else 10_000 + n  # a root, or a parent not in the input
            elif choice < 0.08:
                parent = n  # its own parent
            elif choice < 0.12:
                parent = n + rng.randint(1, 5)  # a later span: cycles once that one points back
            else:
                parent = ids[-rng.randint(1, min(len(ids), 3))] if rng.random() < 0.7 else rng.choice(ids)
            kind = rng.random()
            if kind < 0.3:
                span = otlp.span(n, "rl.grpo.step", 0, 1, parent, iteration=rng.randint(1, 3), trace=trace)
            elif kind < 0.6:
                span = otlp.span(n, "work", 0, 1, parent, bucket="productive", trace=trace)
            else:
                span = otlp.span(n, "phase", 0, 1, parent, trace=trace)
            spans.append(span)
            ids.append(n)
    return spans


def _anc_and_walk(store):
    """(``anc`` as {id: (fs, fb, cyclic)}, what a walk up the parents in ``k`` finds) after reporting the loaded ``store``."""
    build_report(store)
    k_rows = store.rows("SELECT id, trace, span, parent, cand, counted FROM k ORDER BY id")
    found = {row[0]: tuple(row[1:]) for row in store.rows("SELECT id, fs, fb, cyclic FROM anc")}
    return found, _walk_up(k_rows)


def test_every_span_gets_the_nearest_ancestors_a_walk_up_its_parents_finds(tmp_path, otlp):
    """The pointer jumping runs on the spans that are parents only; every other span takes its
    parent's answers in one join. Checked against a walk up each span's parents, span by span,
    on random forests with cycles, self-parents and parents outside the input, in both engines
    (ClickHouse where chdb is installed, and not in the engines runs: their chdb holds this process)."""
    clickhouse = importlib.util.find_spec("chdb") is not None and not os.environ.get(ENGINES_ENV)
    for seed in range(6):
        path = otlp.write(tmp_path / f"forest{seed}.jsonl", otlp.request(_random_forest(otlp, seed)))
        with TraceStore() as store:
            store.load([path])
            found, expected = _anc_and_walk(store)
        assert any(cyclic for _, _, cyclic in expected.values()), "the forest should hold a cycle"
        assert found == expected, f"seed {seed}"
        if clickhouse and seed < 2:  # the same SQL in ClickHouse (chdb is slow to start: two forests)
            from lens_report.clickhouse import ChdbSource, ClickHouseStore, load_otlp_files

            source = ChdbSource()
            try:
                load_otlp_files(source, "otel_traces", [path])
                with ClickHouseStore(source, "otel_traces") as store:
                    store.load_table()
                    found, expected = _anc_and_walk(store)
            finally:
                source.close()
            assert found == expected, f"seed {seed}, ClickHouse"
