"""Live goodput: an exporting rank's own metrics equal what `lens report` computes from its trace files."""

import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")
pytest.importorskip("duckdb", reason="needs DuckDB: pip install 'lens-telemetry[report]'")

from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, bucket_scope, efficiency_span, iteration_scope, managed_span, umbrella_span  # noqa: E402
from lens_core import semconv  # noqa: E402
from lens_core.catalogs.rl import GRPO, RLSpanGroup as G  # noqa: E402
import lens_report  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from otel_bridge.sdk import goodput  # noqa: E402

STEPS = 3


def _work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _run_job():
    """A GRPO-shaped job: three steps, each with productive, overhead and idle leaves (some under an
    umbrella), a validation pass under bucket_scope, a checkpoint; work outside any step too."""
    with umbrella_span(G.U_JOB, GRPO.JOB):
        with managed_span(G.DATA_PROCESSING, "rl.setup.data_outside_steps"):
            _work(0.002)
        for step in range(1, STEPS + 1):
            with iteration_scope(step), umbrella_span(G.U_STEP, GRPO.STEP):
                with efficiency_span("idle/buffer_starvation"):
                    _work(0.002)
                with umbrella_span(G.U_ROLLOUT, GRPO.GENERATION):
                    with managed_span(G.GENERATION, "rl.vllm.generate"):
                        _work(0.004)
                with managed_span(G.LOGPROB, GRPO.POLICY_AND_REFERENCE_LOGPROBS):
                    _work(0.002)
                with managed_span(G.POLICY_UPDATE, GRPO.POLICY_TRAINING):
                    _work(0.005)
                with umbrella_span(G.U_EVALUATE, GRPO.EVALUATE), bucket_scope("overhead"):
                    with managed_span(G.GENERATION, "rl.vllm.generate"):
                        _work(0.001)
                with managed_span(G.CHECKPOINT, GRPO.CHECKPOINTING):
                    _work(0.001)


def _points(reader):
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    out.setdefault(metric.name, []).append((dict(point.attributes), point.value))
    return out


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_live_totals_equal_the_reports_for_the_same_run(rl, tmp_path, recorder):
    reader = InMemoryMetricReader()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="live",
                                        span_groups="all", recorder=recorder, goodput_ratio=True),
                             metric_reader=reader)
    try:
        _run_job()
        assert handle.force_flush(20_000)
        points = _points(reader)
    finally:
        handle.shutdown()
    report = lens_report.report(tmp_path)
    assert report.violations == ()
    (rank,) = report.ranks
    attrs = {semconv.NEMO_RUN_ID: "live", semconv.NV_DL_RANK: 0}
    by_bucket = {a[semconv.RL_BUCKET]: v for a, v in points[semconv.LENS_GOODPUT_TIME]}
    assert all({k: a[k] for k in attrs} == attrs for a, _ in points[semconv.LENS_GOODPUT_TIME])
    for bucket, ns in rank.totals.bucket_ns.items():
        assert by_bucket[bucket] == pytest.approx(ns / 1e9, abs=1e-9), bucket
    assert by_bucket["productive"] > 0 and by_bucket["idle"] > 0 and by_bucket["overhead"] > 0
    ((_, ratio),) = points[semconv.LENS_GOODPUT_RATIO]
    assert ratio == pytest.approx(rank.totals.goodput, rel=1e-9)
    ((_, step_time),) = points[semconv.LENS_GOODPUT_STEP_TIME]
    assert step_time == pytest.approx(sum(s.totals.wall_ns for s in report.steps) / 1e9, abs=1e-9)
    ((_, current),) = points[semconv.LENS_GOODPUT_STEP_CURRENT]
    assert current == STEPS == report.steps[-1].iteration
    ((_, last),) = points[semconv.LENS_GOODPUT_STEP_DURATION]
    assert last == pytest.approx(report.steps[-1].totals.wall_ns / 1e9, abs=1e-9)
    last_buckets = {a[semconv.RL_BUCKET]: v for a, v in points[semconv.LENS_GOODPUT_STEP_BUCKET_TIME]}
    for bucket, ns in report.steps[-1].totals.bucket_ns.items():
        assert last_buckets[bucket] == pytest.approx(ns / 1e9, abs=1e-9), bucket
    # bounded cardinality: one series per rank (per bucket), whatever the number of steps
    assert {name: len(p) for name, p in points.items() if name.startswith("lens.goodput")} == {
        semconv.LENS_GOODPUT_TIME: 4, semconv.LENS_GOODPUT_STEP_TIME: 1, semconv.LENS_GOODPUT_RATIO: 1,
        semconv.LENS_GOODPUT_STEP_DURATION: 1, semconv.LENS_GOODPUT_STEP_CURRENT: 1,
        semconv.LENS_GOODPUT_STEP_BUCKET_TIME: 4}
    # the per-step sums match too (the snapshot keeps them)
    snap = handle.goodput.snapshot
    for bucket in snap["step_buckets_ns"]:
        assert snap["step_buckets_ns"][bucket] == sum(s.totals.bucket_ns[bucket] for s in report.steps)


def test_the_step_pattern_is_the_reports():
    from lens_report.model import DEFAULT_STEP_PATTERN

    assert goodput.STEP_PATTERN == DEFAULT_STEP_PATTERN


def test_the_goodput_ratio_is_opt_in_as_the_seed_leaves_it_to_the_monitor(rl, tmp_path, monkeypatch):
    """Regression (issue 41): the live goodput ratio was exported by default, with no word of
    the seed's caveat (span-derived, it has no productive generation term on an async run; the
    seed's rolled-up goodput is monitor-derived, not emitted). By default the bucket and step
    series are exported and the ratio is not; goodput_ratio / LENS_GOODPUT_RATIO=1 adds it."""
    monkeypatch.setenv("LENS_GOODPUT_RATIO", "1")
    assert LensConfig.from_env().goodput_ratio is True and LensConfig().goodput_ratio is False
    for opt_in in (False, True):
        reader = InMemoryMetricReader()
        handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path / str(opt_in)),
                                            run_id="ratio", span_groups="all", goodput_ratio=opt_in),
                                 metric_reader=reader, _allow_reinit=True)
        try:
            _run_job()
            assert handle.force_flush(20_000)
            points = _points(reader)
        finally:
            handle.shutdown()
        assert len(points[semconv.LENS_GOODPUT_TIME]) == 4
        assert (semconv.LENS_GOODPUT_RATIO in points) is opt_in


def test_goodput_metrics_off_installs_no_observer(rl, tmp_path):
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="off",
                                        goodput_metrics=False), metric_reader=InMemoryMetricReader())
    try:
        assert handle.goodput is None and handle.pipeline.observer is None
    finally:
        handle.shutdown()


def test_pending_entries_are_bounded_when_parents_never_end_here():
    """A span whose parent is remote leaves an entry no end will take: the oldest are dropped past the bound."""
    from lens_core import _impl

    live = goodput.LiveGoodput(None, run_id="r", rank=0, max_pending=8)
    make = _impl.recorder().make_record
    records = [make(0, "leaf", 1, 1, 100 + i, 10_000 + i, True, None, 1, 2, {semconv.RL_BUCKET: "productive"},
                    None, None, 0, None) for i in range(50)]
    live.observe(records)
    assert live.pending == 8 and live.evicted == 42
    assert live.totals[0] == 50  # still in the rank's totals


@pytest.mark.parametrize("implementation", ["cython", "python"])
def test_the_keys_the_roll_up_looks_up_are_semconvs_own_objects(rl, tmp_path, implementation):
    """The compiled gate stamped ``lens.group`` and ``lens.umbrella`` with equal copies of the
    semconv strings, so the export thread's roll-up found them by string compare instead of by
    pointer: its lookup of ``lens.group`` took half its time per record (35 against 18 ns).
    Every key the roll-up reads must be the very object it looks up."""
    from lens_core import _impl

    if implementation == "cython":
        pytest.importorskip("lens_core._gate",
                            reason="compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
    before = _impl.IMPLEMENTATION
    _impl.use(implementation)
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="all", recorder="native",
                                        metrics_enabled=False), _allow_reinit=True)
    try:
        handle.pipeline._stopping = True  # keep the records: the export thread takes none
        recorder = handle.providers.recorder
        recorder.take(1 << 30)
        with iteration_scope(1), umbrella_span(G.U_STEP, GRPO.STEP):
            with managed_span(G.POLICY_UPDATE, GRPO.POLICY_TRAINING, a=1):
                pass
        records = recorder.take(1 << 30)
    finally:
        handle.pipeline._stopping = False
        handle.shutdown()
        _impl.use(before)
    constants = {key: key for key in (semconv.LENS_GROUP, semconv.LENS_UMBRELLA, semconv.RL_BUCKET,
                                      semconv.RL_ITERATION)}
    found = set()
    for record in records:
        for key in record.attrs:
            if key in constants:
                assert key is constants[key], f"{record.name}: {key!r} is a copy of the semconv string"
                found.add(key)
    assert found == set(constants)
