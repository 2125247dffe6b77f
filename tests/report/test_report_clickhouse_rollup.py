"""The report through the schema helper's rollup table: the span report's figures from its rows, or the spans (and why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("chdb")

from lens_report import TraceStore, build_report  # noqa: E402
from lens_report.clickhouse import ChdbSource, ClickHouseStore, load_otlp_files, otel_traces_ddl, schema_sql  # noqa: E402
from lens_report.model import BUCKETS  # noqa: E402
from lens_report.clickhouse_rollup import NOT_COMPUTED, rollup_report  # noqa: E402
from lens_report.rollup import DEFAULT_TOP_N, RunChoiceError  # noqa: E402
from report_helpers import counting_source, figures, rollup_schema  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import trace_synth  # noqa: E402

pytestmark = pytest.mark.engines


def _files_json(*paths, **options):
    with TraceStore() as store:
        store.load(paths)
        return build_report(store, **options).to_json(top=DEFAULT_TOP_N)


def _statements(sql):
    text = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    return [part.strip() for part in text.split(";") if part.strip()]


def _cli(db, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "lens_cli", "report", "--clickhouse", f"chdb:{db}", "--json", *args],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _chdb(db, *paths):
    """The chdb database ``db`` with the schema helper's columns and rollup, holding the spans of ``paths``."""
    db.mkdir()
    source = ChdbSource(str(db))
    try:
        rollup_schema(source)
        load_otlp_files(source, "otel_traces", list(paths), create=False)
    finally:
        source.close()
    return db


def _view_made_between(db, before, after):
    """The chdb database ``db`` whose otel_traces took the spans of ``before`` with the schema helper's columns
    only, then the rollup's view, then the spans of ``after``: a rollup that missed the first rows."""
    db.mkdir()
    source = ChdbSource(str(db))
    try:
        source.command(otel_traces_ddl("otel_traces"))
        for statement in _statements(schema_sql("otel_traces", rollup=False)):
            source.command(statement)
        load_otlp_files(source, "otel_traces", list(before), create=False)
        for statement in _statements(schema_sql("otel_traces")):
            source.command(statement)
        load_otlp_files(source, "otel_traces", list(after), create=False)
    finally:
        source.close()
    return db


def _through_rollup(paths, **options):
    """(the report through the rollup, or the reason it read the spans) of ``paths`` in a fresh otel_traces."""
    source = ChdbSource()
    try:
        rollup_schema(source)
        load_otlp_files(source, "otel_traces", list(paths), create=False)
        return rollup_report(source, "otel_traces", **options)
    finally:
        source.close()


@pytest.mark.parametrize("shape", ["synth", "sync-stragglers"])
def test_the_synthetic_runs_through_the_rollup_have_the_span_reports_figures(tmp_path, shape):
    """Known answers through the rollup: the benchmark's run (20 spans a step, umbrellas, a job span) and a
    synchronous run with two stragglers (one slow from step 20 on): every figure key of the JSON (run, steps,
    ranks, rank_steps, straggler scores, badput, step time, the slowest steps, telemetry loss) is the files'."""
    if shape == "synth":
        trace_synth.write_run(tmp_path / "files", 6, 12)
    else:
        trace_synth.write_sync_run(tmp_path / "files", 16, 40, slow={5: (1.3, 1), 11: (1.2, 20)}, ranks_per_file=4)
    db = _chdb(tmp_path / "db", tmp_path / "files")
    data = _cli(db)
    assert data["path"]["name"] == "rollup", data["path"]
    assert data["path"]["not_computed"] == list(NOT_COMPUTED)
    expected = _files_json(tmp_path / "files")
    assert figures(data, NOT_COMPUTED) == figures(expected, NOT_COMPUTED)
    if shape == "sync-stragglers":  # the answer holds what it is meant to: the two slow ranks flagged
        flagged = [s["rank"] for s in data["straggler_scores"] if s["flagged"]]
        assert sorted(flagged) == ["rank 11", "rank 5"], data["straggler_scores"]
    forced = _cli(db, "--from-spans")
    assert forced["path"] == {"name": "spans", "reason": "--from-spans: reading the spans; every span walked at once",
                              "parts": 1, "not_computed": []}
    assert figures(forced) == figures(expected)


def test_the_benchmarks_sql_rows_through_the_rollup_are_the_files_report_in_a_handful_of_statements(tmp_path,
                                                                                                   monkeypatch):
    """otel_traces filled by trace_synth.otel_traces_insert (the benchmark's SQL) with the rollup's view: the report
    through the rollup is the files' report, read in a bounded number of statements whatever the span count.

    Regression: at 10M spans it took 45 statements (the (rank, step) figures read a slice of steps at a time, as
    DuckDB needs, a statement to create each small table and one to fill it, a drop per table). Now the figures
    are one streamed read, a small table is made with its rows, and one statement drops them all: 24 (here with
    slices of one step, so a read per step would show). The rollup's rows are aggregated twice, per process
    (the coverage, flags, span facts and rank totals read that small table) and per step: four aggregations
    took 0.8 s at 10M spans."""
    from lens_report import rollup

    monkeypatch.setattr(rollup, "_SLICE_ROWS", 1)
    trace_synth.write_run(tmp_path / "files", 4, 7)
    source, calls = counting_source()
    try:
        rollup_schema(source)
        source.command(trace_synth.otel_traces_insert("otel_traces", 4, 7))
        calls.clear()
        report = rollup_report(source, "otel_traces")
    finally:
        source.close()
    assert not isinstance(report, str), report
    assert figures(report.to_json(top=DEFAULT_TOP_N), NOT_COMPUTED) == figures(_files_json(tmp_path / "files"),
                                                                               NOT_COMPUTED)
    creates = [sql for sql in calls if sql.lstrip().startswith("CREATE")]
    drops = [sql for sql in calls if sql.lstrip().startswith("DROP")]
    # the version check, the coverage counts, 10 small tables, their figures, the loss records; one drop at close
    assert len(calls) <= 25 and len(creates) <= 10 and len(drops) == 1, [sql[:80] for sql in calls]


def test_a_run_half_covered_by_the_rollup_reads_the_spans_and_says_why_until_backfilled(tmp_path):
    """Mixed: half the ranks' files inserted before the rollup's view was made (no backfill): the rollup holds half
    the run's spans, so the report reads the spans, says so, and gives the spans' answer; once the rollup is filled
    again by --backfill's INSERT (truncated first: the view had taken the later rows) it reads the rollup; a
    backfill run twice counts rows twice, and the report reads the spans again."""
    trace_synth.write_sync_run(tmp_path / "files", 8, 10, slow={3: (1.25, 1)}, ranks_per_file=1)
    files = sorted((tmp_path / "files" / "sync").glob("*.jsonl"))
    db = _view_made_between(tmp_path / "db", files[:4], files[4:])
    expected = _files_json(tmp_path / "files")
    half = _cli(db)
    assert half["path"]["name"] == "spans"
    assert half["path"]["reason"].startswith("the rollup covers 124 of 248 spans of run 'sync': reading the spans")
    assert figures(half) == figures(expected)
    backfill = [s for s in _statements(schema_sql("otel_traces", backfill=True)) if s.startswith("INSERT INTO")]
    assert len(backfill) == 1
    source = ChdbSource(str(db))
    try:
        source.command("TRUNCATE TABLE otel_traces_lens_steps")
        source.command(backfill[0])
    finally:
        source.close()
    filled = _cli(db)
    assert filled["path"]["name"] == "rollup", filled["path"]
    assert figures(filled, NOT_COMPUTED) == figures(expected, NOT_COMPUTED)
    source = ChdbSource(str(db))
    try:
        source.command(backfill[0])
    finally:
        source.close()
    twice = _cli(db)
    assert twice["path"]["name"] == "spans" and "covers 496 of 248 spans" in twice["path"]["reason"]
    assert figures(twice) == figures(expected)


def _ineligible(otlp, kind):
    span = otlp.span
    job = [span(1, "rl.grpo.job", 0, 20), span(2, "rl.grpo.step", 1, 9, 1, iteration=1),
           span(3, "rl.vllm.generate", 1, 5, 2, bucket="productive", iteration=1)]
    resource = {"service_name": "trainer", "nv_dl_rank": 0, "service_instance_id": "r-rank0", "nemo_run_id": "r"}
    if kind == "device times":
        timed = span(4, "rl.grpo.policy_training", 5, 8, 2, bucket="productive", iteration=1)
        timed["attributes"] += otlp.attrs({"lens.device.start_time_unix_nano": str(otlp.T0 + 5 * otlp.S),
                                           "lens.device.end_time_unix_nano": str(otlp.T0 + 7 * otlp.S)})
        job.append(timed)
        return [otlp.request(job, **resource)]
    if kind == "a step in two traces":  # its leaf's trace is not its step span's (a root of its own)
        job.append(span(4, "rl.grpo.policy_training", 5, 8, bucket="productive", iteration=1, trace="ab" * 16))
        return [otlp.request(job, **resource)]
    if kind == "a bucketed umbrella":
        job.append(span(4, "rl.grpo.generation", 5, 8, 2, bucket="overhead", iteration=1))
        return [otlp.request(job, **resource)]
    # a step across processes: an actor's leaf (another process, same trace) under the driver's step span
    actor = [span(9, "rl.grpo.policy_training", 5, 8, 2, bucket="productive", iteration=1)]
    return [otlp.request(job, **resource), otlp.request(actor, service_name="actor", service_instance_id="r-actor",
                                                        nemo_run_id="r")]


@pytest.mark.parametrize("kind, why", [
    ("device times", "1 spans with device times"),
    ("a bucketed umbrella", "1 bucketed spans the report flags"),
    ("a step across processes", "1 (process, rank, step) rows without exactly one step span"),
    ("a step in two traces", "1 (process, rank, step) rows whose spans lie in several traces"),
])
def test_what_the_rollup_cannot_represent_is_read_from_the_spans(tmp_path, otlp, kind, why):
    """Ineligible runs: device times (the device clock), a bucketed umbrella (a violation, not counted), a step
    whose leaves run in another process (the span report walks parents across processes), a step whose spans
    lie in two traces (the span report's steps are per trace): the rollup says why and the report is the
    spans', equal to the files'."""
    path = otlp.write(tmp_path / "t.jsonl", *_ineligible(otlp, kind))
    reason = _through_rollup([path])
    assert isinstance(reason, str) and why in reason, reason
    db = _chdb(tmp_path / "db", path)
    data = _cli(db)
    assert data["path"]["name"] == "spans" and why in data["path"]["reason"], data["path"]
    assert figures(data) == figures(_files_json(path))


def test_an_older_rollup_table_two_launches_and_several_runs_are_said(tmp_path, otlp):
    """A rollup table without this version's comment is never read (its columns mean other things): re-create it;
    a run launched twice reads the spans (attempts); a table of several runs without --run is refused with the
    runs the span report lists."""
    trace_synth.write_run(tmp_path / "a", 2, 3, run="a")
    trace_synth.write_sync_run(tmp_path / "b", 3, 4, run="b")  # other ids than write_run's: no span twice
    source = ChdbSource()
    try:
        source.command(otel_traces_ddl("otel_traces"))
        source.command("CREATE TABLE otel_traces_lens_steps (LensRun String) ENGINE = Memory COMMENT 'lens: old'")
        assert "an older lens made it" in rollup_report(source, "otel_traces")
    finally:
        source.close()
    with pytest.raises(RunChoiceError) as from_rollup:
        _through_rollup([tmp_path / "a", tmp_path / "b"])
    with TraceStore() as store, pytest.raises(RunChoiceError) as from_files:
        store.load([tmp_path / "a", tmp_path / "b"])
        build_report(store)
    assert str(from_rollup.value) == str(from_files.value)
    assert from_rollup.value.runs == from_files.value.runs
    report = _through_rollup([tmp_path / "a", tmp_path / "b"], run="b")
    assert figures(report.to_json(top=DEFAULT_TOP_N), NOT_COMPUTED) == figures(
        _files_json(tmp_path / "a", tmp_path / "b", run="b"), NOT_COMPUTED)
    span = otlp.span
    launches = [otlp.request([span(1, "rl.grpo.job", t, t + 10), span(2, "rl.grpo.step", t + 1, t + 9, 1, iteration=1),
                              span(3, "rl.vllm.generate", t + 1, t + 5, 2, bucket="productive", iteration=1)],
                             service_name="trainer", nemo_run_id="r", nv_dl_rank=0, service_instance_id=f"r-{t}")
                for t in (0, 100)]
    path = otlp.write(tmp_path / "two.jsonl", *launches)
    assert "was launched 2 times" in _through_rollup([path])


def test_a_process_that_wrote_only_loss_records_is_named_through_the_rollup(tmp_path, otlp):
    """The rollup holds no loss records, so a process that wrote nothing else has no row there: its resource fields
    (whether Lens set it up) come from its loss records' rows, and it is named unfinished as the files' report
    names it. Failure this guards: the processes' fields read only at the rollup's first starts lost it."""
    span, lens = otlp.span, {"telemetry_distro_name": "lens", "nemo_run_id": "job"}
    final = otlp.span(3, "lens.telemetry.loss", 9, 9, trace="01" * 16, lens_spans_created=2, lens_spans_dropped=0)
    final["attributes"] += otlp.attrs({"lens.telemetry.final": True})
    done = otlp.request([span(1, "rl.grpo.step", 0, 10, iteration=1),
                         span(2, "rl.vllm.generate", 1, 5, 1, bucket="productive", iteration=1), final],
                        service_instance_id="job-rank0", nv_dl_rank=0, **lens)
    quiet = otlp.request([otlp.span(4, "lens.telemetry.loss", 6, 6, trace="02" * 16, lens_spans_created=9,
                                    lens_spans_dropped=9)], service_instance_id="job-rank1", nv_dl_rank=1, **lens)
    path = otlp.write(tmp_path / "t.jsonl", done, quiet)
    data = _cli(_chdb(tmp_path / "db", path))
    assert data["path"]["name"] == "rollup", data["path"]
    expected = _files_json(path)
    assert [u["process"] for u in expected["telemetry_loss"]["unfinished"]] == ["job-rank1"], expected
    assert figures(data, NOT_COMPUTED) == figures(expected, NOT_COMPUTED)


def test_a_run_the_rollup_never_saw_is_named_and_read_from_the_spans(tmp_path):
    """Run 'a' inserted before the rollup's view was made, run 'b' after: without --run the rollup names the run
    it does not cover (counted apart, as the rollup's runs are counted by comparing the run column with
    each), with --run b it reads the rollup, with --run a the spans."""
    trace_synth.write_run(tmp_path / "a", 2, 3, run="a")
    trace_synth.write_sync_run(tmp_path / "b", 3, 4, run="b")
    db = _view_made_between(tmp_path / "db", [tmp_path / "a"], [tmp_path / "b"])
    source = ChdbSource(str(db))
    try:
        a_spans = source.rows("SELECT count() FROM otel_traces WHERE LensRun = 'a'")[0][0]
        every = rollup_report(source, "otel_traces")
    finally:
        source.close()
    assert every == f"the rollup covers 0 of {a_spans:,} spans of run 'a': reading the spans", every
    b = _cli(db, "--run", "b")
    assert b["path"]["name"] == "rollup", b["path"]
    assert figures(b, NOT_COMPUTED) == figures(_files_json(tmp_path / "a", tmp_path / "b", run="b"), NOT_COMPUTED)
    a = _cli(db, "--run", "a")
    assert a["path"]["name"] == "spans" and "covers 0 of" in a["path"]["reason"], a["path"]


@pytest.mark.parametrize("name, bucket, attributes, counted", [
    ("my.leaf", "productive", {}, True),
    ("my.leaf", "bogus", {}, False),  # no bucket of the four
    ("my.leaf", "productive", {"lens_umbrella": True}, False),
    ("my.leaf", "productive", {"lens_umbrella": "1"}, False),  # the exporter's map holds every value as text
    ("my.leaf", "productive", {"lens_umbrella": False, "lens_group": "g"}, True),
    ("rl.grpo.generation", "overhead", {}, False),  # the catalog's umbrella, no lens.group
    ("rl.grpo.generation", "overhead", {"lens_umbrella": False}, True),  # said to be a leaf
    ("rl.grpo.generation", "overhead", {"lens_umbrella": "yes"}, False),  # not a boolean: the catalog's
    ("rl.grpo.generation", "overhead", {"lens_group": "gen"}, True),  # stamped without lens.umbrella: a leaf
    ("rl.checkpoint.finalize", "overhead", {}, False),  # a name that never carries a bucket
    ("my.leaf", "idle", {"rl_efficiency_category": "idle/validation"}, False),  # a category that never does
    ("rl.idle.validation", "idle", {}, False),  # the catalog's category of its name
    ("rl.idle.validation", "idle", {"rl_efficiency_category": "idle/other"}, True),  # its own category wins
])
def test_the_rollups_counted_leaves_are_the_span_reports_rule_by_rule(tmp_path, otlp, name, bucket, attributes,
                                                                      counted):
    """Each rule of the rollup's ``Counted`` (the schema helper's SQL, kept at insert time) against the span
    report's over the same table (its own SQL over the spans): a leaf the span report counts is counted through
    the rollup with the same figures; one it leaves out makes the rollup say so, and the span report flags it.
    The two are written apart, so a rule changed in one alone fails here."""
    span = otlp.span
    spans = [span(1, "rl.grpo.job", 0, 20), span(2, "rl.grpo.step", 1, 9, 1, iteration=1),
             span(3, "rl.vllm.generate", 1, 4, 2, bucket="productive", iteration=1),
             span(4, name, 5, 8, 2, bucket=bucket, iteration=1, **attributes)]
    path = otlp.write(tmp_path / "t.jsonl", otlp.request(spans, service_name="trainer", nv_dl_rank=0,
                                                         service_instance_id="r-rank0", nemo_run_id="r"))
    source = ChdbSource()
    try:
        rollup_schema(source)
        load_otlp_files(source, "otel_traces", [path], create=False)
        report = rollup_report(source, "otel_traces")
        with ClickHouseStore(source, "otel_traces") as store:
            store.load_table()
            expected = build_report(store).to_json(top=DEFAULT_TOP_N)
    finally:
        source.close()
    leaf = expected["steps"][0]["buckets_s"][bucket] if bucket in BUCKETS else 0.0
    if not counted:
        assert report == ("the rollup holds 1 bucketed spans the report flags and does not count (violations) of "
                          "run 'r': reading the spans"), report
        assert expected["violation_count"] > 0 and leaf == 3.0 * (bucket == "productive"), expected["steps"]
        return
    assert not isinstance(report, str), report
    assert leaf == 3.0 + 3.0 * (bucket == "productive"), expected["steps"]
    assert figures(report.to_json(top=DEFAULT_TOP_N), NOT_COMPUTED) == figures(expected, NOT_COMPUTED)
