"""The report over the Collector's ClickHouse table in chdb: the schema helper's columns, the CLI, and what files and maps disagree on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("chdb")

from lens_report import TraceStore, build_report  # noqa: E402
from lens_report.rollup import DEFAULT_TOP_N  # noqa: E402
from lens_report.clickhouse_stamped import CHECK_PART_FACTOR, duplicates_sorted_sql, duplicates_sql  # noqa: E402
from lens_report.clickhouse import (  # noqa: E402
    LENS_COLUMNS,
    ChdbSource,
    ClickHouseStore,
    check_table_name,
    load_otlp_files,
    otel_traces_ddl,
    schema_sql,
)
from report_helpers import comparable, counting_source, report_of, two_step_spans  # noqa: E402

from multirank import write_ddp_run  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _statements(sql: str) -> list[str]:
    """The statements of ``lens clickhouse-schema`` output (comments dropped)."""
    text = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    return [part.strip() for part in text.split(";") if part.strip()]


def _chdb_database(db, *paths):
    """The directory ``db``, made a chdb database whose otel_traces holds the spans of ``paths``."""
    db.mkdir()
    source = ChdbSource(str(db))
    try:
        load_otlp_files(source, "otel_traces", list(paths))
    finally:
        source.close()
    return db


def _file_report(*paths):
    with TraceStore() as store:
        store.load(paths)
        return build_report(store)


@pytest.mark.engines
def test_the_schema_helpers_columns_are_used_and_give_the_same_report_as_the_maps(tmp_path):
    """With LensRun/LensRank/LensStep/LensBucket materialized the report scans them, and reads what the maps give; the
    optional rollup view fills at insert time."""
    pytest.importorskip("opentelemetry.sdk")
    write_ddp_run(tmp_path)
    folder = tmp_path / "ddp"
    source = ChdbSource()
    try:
        load_otlp_files(source, "plain", [folder])
        source.command("CREATE DATABASE IF NOT EXISTS otel")
        from lens_report.clickhouse import otel_traces_ddl

        source.command(otel_traces_ddl("otel.otel_traces"))
        for statement in _statements(schema_sql("otel.otel_traces")):
            source.command(statement)
        load_otlp_files(source, "otel.otel_traces", [folder], create=False)
        with ClickHouseStore(source, "plain") as store:
            store.load_table()
            assert store.columns_used == ()
            from_maps = build_report(store).to_json()
        with ClickHouseStore(source, "otel.otel_traces") as store:
            store.load_table()
            assert store.columns_used == tuple(sorted(LENS_COLUMNS))
            from_columns = build_report(store).to_json()
        for run, expected in (("ddp", from_columns["spans"]), ("other", 0)):  # --run filters where the spans live
            with ClickHouseStore(source, "otel.otel_traces", run=run) as store:
                store.load_table()
                assert store.span_count() == expected
        rollup = source.rows("SELECT LensRank, sum(ProductiveNs) FROM otel.otel_traces_lens_steps "
                             "GROUP BY LensRank ORDER BY LensRank")
    finally:
        source.close()
    assert comparable(from_columns) == comparable(from_maps) == comparable(_file_report(folder).to_json())
    assert [rank for rank, _ in rollup] == list(range(len(from_maps["ranks"])))
    assert all(ns > 0 for _, ns in rollup)


@pytest.mark.engines
def test_lens_report_clickhouse_prints_the_same_json_as_the_files(tmp_path, otlp):
    """``lens report --clickhouse chdb:DIR --table T --json`` reports the spans loaded from files as the files do."""
    path = otlp.write(tmp_path / "t.jsonl", otlp.request(two_step_spans(), service_name="trainer"))
    db = _chdb_database(tmp_path / "db", path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    for work_tables in ("memory", "disk"):  # the working tables in ClickHouse's memory, or on its disk
        out = subprocess.run([sys.executable, "-m", "lens_cli", "report", "--clickhouse", f"chdb:{db}", "--json",
                              "--work-tables", work_tables], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["files"] == ["clickhouse:otel_traces"]
        # the CLI's JSON lists the --top flagged stragglers (default DEFAULT_TOP_N), as the files' does
        assert comparable(data) == comparable(_file_report(path).to_json(top=DEFAULT_TOP_N)), work_tables
    bad = subprocess.run([sys.executable, "-m", "lens_cli", "report", "--clickhouse", f"chdb:{db}",
                          "--table", "nope"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip() == "lens report: no table nope (or it has no columns)"


@pytest.mark.engines
def test_perfetto_and_the_html_page_from_clickhouse_draw_the_spans_the_files_draw(tmp_path, otlp):
    """``--perfetto`` and ``--html`` from otel_traces: the rollup's working tables live in ClickHouse, so the waterfall's
    span choice and the Perfetto export run there; the same spans (names, times, ranks, threads) as from the files."""
    path = otlp.write(tmp_path / "t.jsonl", otlp.request(two_step_spans(), service_name="trainer"))
    db = _chdb_database(tmp_path / "db", path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    drawn = {}
    for name, source_args in (("files", [str(path)]), ("clickhouse", ["--clickhouse", f"chdb:{db}"])):
        out = subprocess.run([sys.executable, "-m", "lens_cli", "report", *source_args,
                              "--perfetto", str(tmp_path / f"{name}.json"), "--html", str(tmp_path / f"{name}.html")],
                             env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        events = json.loads((tmp_path / f"{name}.json").read_text())["traceEvents"]
        drawn[name] = sorted((e["name"], e["ts"], e["dur"], e["pid"], e["args"]["span_id"], e["args"]["rank"])
                             for e in events if e["ph"] == "X")
        assert (tmp_path / f"{name}.html").stat().st_size > 10_000
    assert drawn["clickhouse"] == drawn["files"] and len(drawn["files"]) == len(two_step_spans())


@pytest.mark.engines
def test_an_attribute_set_to_the_empty_string_is_not_an_absent_one(tmp_path, otlp):
    """Regression guard for ClickHouse reading a missing map key as '': a span whose rl.bucket is '' is an unknown
    bucket (flagged), a span without rl.bucket is unbucketed, in files and in otel_traces alike."""
    span = otlp.span
    spans = [span(1, "rl.grpo.step", 0, 10, iteration=1), span(2, "rl.grpo.policy_training", 0, 4, 1, bucket="",
                                                              iteration=1),
             span(3, "rl.grpo.reward_calculation", 4, 6, 1, iteration=1)]
    path = otlp.write(tmp_path / "t.jsonl", otlp.request(spans, service_name="trainer"))
    files = _file_report(path)
    source = ChdbSource()
    try:
        load_otlp_files(source, "otel_traces", [path])
        with ClickHouseStore(source, "otel_traces") as store:
            store.load_table()
            table = build_report(store)
    finally:
        source.close()
    assert files.rule_counts.get("unknown-bucket") == 1
    assert comparable(table.to_json()) == comparable(files.to_json())


@pytest.mark.engines
def test_the_attribute_columns_read_as_the_maps_on_every_value_the_rules_tell_apart(tmp_path, otlp):
    """The rules' attributes materialized (LensGroup, LensUmbrella, LensCategory, LensDeviceStart/End) give the
    report the maps give, on the values the rules tell apart: lens.umbrella 'true', '1', 'TRUE', 'false', 'yes'
    and absent, a category that disagrees with the bucket, an evaluate group, device times that are digits, signed
    ('+N': a number to toInt64OrNull, not to the rule), and half given. And they are read instead of the map: the spans' SQL names none of those keys."""
    from lens_report.clickhouse import _lens_columns, _projection, otel_traces_ddl

    span = otlp.span
    device = {"lens.device.start_time_unix_nano": str(otlp.T0 + 1 * otlp.S),
              "lens.device.end_time_unix_nano": str(otlp.T0 + 2 * otlp.S)}
    spans = [span(1, "rl.grpo.step", 0, 10, iteration=1),
             span(2, "rl.grpo.policy_training", 0, 3, 1, bucket="productive", iteration=1),
             span(3, "work.a", 3, 4, 1, bucket="overhead", iteration=1, lens_umbrella="1"),
             span(4, "work.b", 4, 5, 1, bucket="overhead", iteration=1, lens_umbrella="TRUE"),
             span(5, "work.c", 5, 6, 1, bucket="idle", iteration=1, lens_umbrella="yes"),
             span(6, "work.d", 6, 7, 1, bucket="idle", iteration=1, lens_umbrella="false"),
             span(7, "work.e", 7, 8, 1, bucket="productive", iteration=1, rl_efficiency_category="overhead/x"),
             span(8, "work.f", 8, 9, 1, bucket="wasted", iteration=1, lens_group="evaluate"),
             span(9, "work.g", 9, 10, 1, bucket="productive", iteration=1, lens_umbrella=True)]
    timed = [span(20 + i, f"gpu.{i}", 1, 2, 1, bucket="productive", iteration=1) for i in range(3)]
    timed[0]["attributes"] += otlp.attrs(device)
    timed[1]["attributes"] += otlp.attrs({**device, "lens.device.start_time_unix_nano": "+" + device["lens.device.start_time_unix_nano"]})
    timed[2]["attributes"] += otlp.attrs({"lens.device.end_time_unix_nano": device["lens.device.end_time_unix_nano"]})
    for with_device in (False, True):
        path = otlp.write(tmp_path / f"t{with_device}.jsonl",
                          otlp.request(spans + (timed if with_device else []), service_name="trainer"))
        source = ChdbSource()
        try:
            load_otlp_files(source, "maps", [path])
            source.command(otel_traces_ddl("with_columns"))
            for statement in _statements(schema_sql("with_columns", rollup=False)):
                source.command(statement)
            load_otlp_files(source, "with_columns", [path], create=False)
            reports = {}
            for table in ("maps", "with_columns"):
                with ClickHouseStore(source, table) as store:
                    store.load_table()
                    reports[table] = build_report(store).to_json()
                    columns = store.table_columns()
                    # the passes over every span join nothing (a join made ClickHouse compute every column)
                    assert "JOIN" not in store.whole_relation()
            assert set(LENS_COLUMNS) <= columns
            sql = _projection("with_columns", columns, False, "true")
            assert not [key for key in ("lens.group", "lens.umbrella", "rl.efficiency.category", "lens.device")
                        if key in sql]
            assert "lens.umbrella" in _projection("maps", {c for c in columns if c not in LENS_COLUMNS}, False, "true")
            assert _lens_columns(columns)["LensUmbrella"].startswith("CAST(LensUmbrella")
        finally:
            source.close()
        maps, with_columns = reports["maps"], reports["with_columns"]
        assert comparable(with_columns) == comparable(maps)
        # and the files read the same values alike (they once read lens.umbrella as a JSON boolean only)
        assert comparable(report_of(path).to_json()) == comparable(maps)
        # the known answers (the maps' reading is the columns' fallback, so both share an expression's mistake):
        # umbrellas '1', 'TRUE' and true are bucketed umbrellas ('yes' and 'false' leave a leaf), the category
        # disagrees once, the evaluate group once; one leaf has both device times as numbers
        for report in (maps, with_columns):
            assert {str(rule): n for rule, n in report["violations_by_rule"].items()} == {
                "bucketed-umbrella": 3, "efficiency-bucket": 1, "umbrella-group-bucket": 1}
            assert report["steps"][0]["buckets_s"] == {"productive": 7.0 if with_device else 4.0, "overhead": 0.0,
                                                       "idle": 2.0, "wasted": 1.0}
            clock = report.get("device_clock") or {}
            assert clock.get("device_timed_leaves", 0) == (1 if with_device else 0), clock


def test_table_names_are_checked_before_they_reach_sql():
    """A --table value is NAME or DB.NAME, quoted; anything else is refused with what is allowed."""
    assert check_table_name("otel.otel_traces") == "`otel`.`otel_traces`"
    with pytest.raises(ValueError, match="NAME or DATABASE.NAME"):
        check_table_name("otel_traces; DROP TABLE x")


def test_a_server_that_cannot_be_reached_is_one_line_and_exit_2(capsys):
    """``--clickhouse http://...`` to a closed port: one line naming the URL, no traceback, no client log line; exit 2
    as for a path that does not exist (the --clickhouse value names nothing that answers)."""
    pytest.importorskip("clickhouse_connect")
    from lens_report.cli import main

    assert main(["--clickhouse", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lens report: cannot connect to http://127.0.0.1:1: ")


@pytest.mark.engines
def test_the_benchmarks_sql_generated_otel_traces_rows_equal_loading_the_synthetic_files(tmp_path):
    """The report benchmark fills otel_traces for 10M spans with SQL (trace_synth.otel_traces_insert) instead of
    loading files for minutes: the rows must be exactly what loading the same synthetic run's files gives, and the
    report from them the report of the files."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    trace_synth.write_run(tmp_path / "files", 5, 6)
    source = ChdbSource()
    try:
        load_otlp_files(source, "loaded", [tmp_path / "files"])
        source.command(otel_traces_ddl("generated"))
        source.command(trace_synth.otel_traces_insert("generated", 5, 6))
        columns = ("Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName, "
                   "ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage")
        loaded = source.rows(f"SELECT {columns} FROM loaded ORDER BY TraceId, SpanId")
        generated = source.rows(f"SELECT {columns} FROM generated ORDER BY TraceId, SpanId")
        assert len(loaded) == 5 * (1 + 6 * trace_synth.SPANS_PER_STEP)
        assert generated == loaded
        with ClickHouseStore(source, "generated") as store:
            store.load_table()
            from_table = build_report(store)
        assert comparable(from_table.to_json()) == comparable(_file_report(tmp_path / "files").to_json())
    finally:
        source.close()


_TRACE = "0123456789abcdef" * 2


def _root_and_child(source: ChdbSource, *rows: str) -> None:
    """Table ``t`` (the exporter's columns) holding a root span and its child in trace ``_TRACE``, then ``rows``
    (VALUES tuples of Timestamp, TraceId, SpanId, ParentSpanId, SpanName, Duration)."""
    source.command(otel_traces_ddl("t"))
    values = [f"(now64(9), '{_TRACE}', '0123456789abcdef', '', 'root', 10)",
              f"(now64(9), '{_TRACE}', '1123456789abcdef', '0123456789abcdef', 'child', 5)", *rows]
    source.command("INSERT INTO t (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, Duration) VALUES "
                   + ", ".join(values))


@pytest.mark.engines
def test_rows_whose_ids_are_not_hex_are_problems_and_the_rest_are_spans():
    """Ids are checked once, in the filter that makes the store's spans: a row with a TraceId or ParentSpanId that
    is not hex of the right length is a problem naming it (not a span with a NULL or zero id), an empty
    ParentSpanId is a root, and the valid child still finds its parent."""
    source = ChdbSource()
    try:
        _root_and_child(source, "(now64(9), 'zz', '2123456789abcdef', '', 'bad trace', 5)",
                        f"(now64(9), '{_TRACE}', '3123456789abcdef', 'xyz', 'bad parent', 5)")
        with ClickHouseStore(source, "t") as store:
            store.load_table()
            assert sorted(p.message for p in store.problems) == ["ParentSpanId xyz is not 16 hex digits",
                                                                 "TraceId zz is not 32 hex digits"]
            spans = {span.name: span for span in store.spans()}
            report = build_report(store)
    finally:
        source.close()
    assert sorted(spans) == ["child", "root"]
    assert spans["root"].parent_span_id is None and spans["child"].parent_span_id == "0123456789abcdef"
    assert spans["child"].trace_id == _TRACE and report.orphan_count == 0


@pytest.mark.engines
def test_the_ids_are_tested_once_when_every_one_is_hex():
    """The id test (a regular expression a row and column) cost every scan of the spans 3.5 s at 100M spans.
    When the one pass that lists the rows whose ids are not hex finds none, no later statement tests them, and
    the report is the same."""
    source, calls = counting_source()
    try:
        _root_and_child(source)
        with ClickHouseStore(source, "t") as store:
            store.load_table()
            report = build_report(store)
    finally:
        source.close()
    tested = [sql for sql in calls if "match(TraceId" in sql]
    assert len(tested) == 1 and "is not 32 hex digits" in tested[0], tested
    assert report.span_count == 2 and report.orphan_count == 0 and not report.problems


def test_a_map_value_is_null_when_absent_empty_when_empty_and_the_first_of_a_repeated_key():
    """The map lookup (one search of the keys, in the store's scan and the schema helper's columns alike) reads
    what ``m[key]`` reads when the key is there (the first value of a key stored twice, '' for an empty value)
    and NULL when it is not, on the exporter's ``Map(LowCardinality(String), String)``."""
    from lens_report.dialect import CLICKHOUSE

    source = ChdbSource()
    try:
        source.command("CREATE TABLE m (a Map(LowCardinality(String), String)) ENGINE = Memory")
        source.command("INSERT INTO m VALUES (map('k', 'v', 'e', '')), (map('k', 'first', 'k', 'second')), (map())")
        rows = source.rows(f"SELECT {CLICKHOUSE.map_value('a', 'k')}, {CLICKHOUSE.map_value('a', 'e')}, "
                           f"a['k'] FROM m ORDER BY length(a) DESC, a['k']")
    finally:
        source.close()
    assert sorted(rows, key=repr) == sorted([("v", "", "v"), ("first", None, "first"), (None, None, "")], key=repr)


@pytest.mark.engines
def test_each_spans_resource_fields_are_its_processes_with_the_schema_columns_as_with_the_maps(tmp_path):
    """With ``LensProcess`` materialized the store reads a process's resource attributes from the row at its first
    ``Timestamp`` only: every span still carries its own process's service, instance, pid and host (each rank's file
    loaded by its own INSERT, so the processes' rows lie in different parts), as read from the maps and from files."""
    write_ddp_run(tmp_path)
    files = sorted((tmp_path / "ddp").glob("*.jsonl"))
    source = ChdbSource()

    def resources(table):
        with ClickHouseStore(source, table) as store:
            store.load_table()
            return sorted((span.span_id, sorted(span.resource.items())) for span in store.spans())

    try:
        source.command(otel_traces_ddl("with_columns"))
        for statement in _statements(schema_sql("with_columns", rollup=False)):
            source.command(statement)
        for path in files:
            load_otlp_files(source, "with_columns", [path], create=False)
        load_otlp_files(source, "maps", files)
        from_columns, from_maps = resources("with_columns"), resources("maps")
    finally:
        source.close()
    with TraceStore() as store:
        store.load(files)
        from_files = sorted((span.span_id, sorted(span.resource.items())) for span in store.spans())
    assert from_columns == from_maps == from_files
    assert len({str(resource) for _, resource in from_columns}) == len(files)  # one resource per rank's process


def test_the_schema_helper_prints_map_reads_a_clickhouse_user_reads_and_says_what_each_column_is_for():
    """Issue 42: the DDL's column expressions were 300-700 characters of ``if(indexOf(mapKeys(M),'k')>0,
    mapValues(M)[indexOf(...)], NULL)``; now ``mapContains(M, 'k')`` and ``M['k']``, and a comment above each
    column and the rollup says what it holds."""
    text = schema_sql("otel_traces")
    assert "indexOf(mapKeys" not in text and "mapValues(" not in text, text
    assert "mapContains(SpanAttributes, 'rl.iteration')" in text and "SpanAttributes['rl.iteration']" in text
    lines = text.splitlines()
    for column in LENS_COLUMNS:
        at = next(i for i, line in enumerate(lines) if f"ADD COLUMN IF NOT EXISTS {column} " in line)
        assert lines[at - 1].startswith(f"-- {column}: "), lines[at - 1]
    before_rollup = lines[next(i for i, line in enumerate(lines) if line.startswith("CREATE TABLE")) - 1]
    assert before_rollup.startswith("--"), before_rollup
    # each column's expression laid out by its arguments (LensProcess's was one line of 790 characters), and
    # only laid out: without whitespace it is the expression the schema helper computes
    from lens_report.clickhouse_schema import _map_lookup, _materialized

    expressions = {column: expr for column, (_kind, expr) in _materialized(_map_lookup).items()}
    for column in LENS_COLUMNS:
        at = next(i for i, line in enumerate(lines) if f"ADD COLUMN IF NOT EXISTS {column} " in line)
        statement = lines[at:next(i for i in range(at, len(lines)) if lines[i].endswith(";")) + 1]
        assert max(len(line) for line in statement) <= 130, (column, max(statement, key=len))
        printed = "\n".join(statement).split(" MATERIALIZED", 1)[1].rstrip(";")
        assert "".join(printed.split()) == "".join(expressions[column].split()), column
    # the rollup view's rules a line each, each field said: its counted-leaf rule was one line of 2,207 characters
    view = lines[next(i for i, line in enumerate(lines) if line.startswith("CREATE MATERIALIZED VIEW")):]
    view = view[:next(i for i, line in enumerate(view) if line.startswith("GROUP BY")) + 1]
    assert max(len(line) for line in view) <= 130, max(view, key=len)
    for field in ("WellTimed", "UmbrellaFlag", "EfficiencyCategory", "Counted", "DeviceTimed", "IsStep"):
        at = next(i for i, line in enumerate(view) if line.rstrip(",").endswith(f" AS {field}"))
        start = max(i for i in range(at + 1) if len(view[i]) - len(view[i].lstrip()) == 13)  # the inner fields'
        assert view[start - 1].lstrip().startswith("-- "), (field, view[start - 1])


def test_the_clickhouse_store_is_a_store_of_its_own_not_the_duckdb_stores_subclass():
    """Issue 41: ClickHouseStore subclassed the DuckDB TraceStore, inheriting file reading, memory plans and a
    DuckDB connection it never used; it implements the Store protocol itself."""
    from lens_report.store import Store, TraceStore

    assert not issubclass(ClickHouseStore, TraceStore)
    source = ChdbSource()
    try:
        source.command(otel_traces_ddl("otel_traces"))
        with ClickHouseStore(source, "otel_traces") as store:
            store.load_table()
            assert isinstance(store, Store) and store.span_count() == 0 and list(store.spans()) == []
    finally:
        source.close()


def test_the_rollup_filled_by_its_view_and_by_backfill_equals_the_spans_sums():
    """Issue 42: the schema helper's rollup held only rows inserted after its view was made (nothing filled it for
    rows already in the table), per (run, rank, step) only. With --backfill's statements run right after the view,
    a run inserted before and a run inserted after both sum, per (run, process, rank, step), to what the spans
    give; every span is in one row (the report's coverage check counts them): a rank's spans outside steps in its
    NULL-step row, a span without a rank in a NULL-rank row, loss records in none."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    source = ChdbSource()
    try:
        source.command(otel_traces_ddl("otel_traces"))
        for statement in _statements(schema_sql("otel_traces", rollup=False)):
            source.command(statement)
        source.command(trace_synth.otel_traces_insert("otel_traces", 3, 4, run="before"))
        text = schema_sql("otel_traces", backfill=True)
        assert "INSERT INTO `otel_traces_lens_steps`" in text and "MATERIALIZE COLUMN LensRun" in text
        for statement in _statements(text):
            source.command(statement)
        source.command(trace_synth.otel_traces_insert("otel_traces", 2, 5, run="after"))
        # a stamped span without a rank (no nv.dl.rank on its resource), and a loss record
        source.command("INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, SpanAttributes, Duration) "
                       "VALUES (now64(9), repeat('a', 32), repeat('b', 16), 'x', map('rl.iteration', '1', "
                       "'rl.bucket', 'productive'), 7), (now64(9), repeat('a', 32), repeat('c', 16), "
                       "'lens.telemetry.loss', map(), 0)")
        keys = "LensRun, LensProcess, LensRank, LensStep"
        rollup = source.rows(f"""
            SELECT {keys}, sum(Spans), sum(LeafSpans), sum(ProductiveNs), sum(OverheadNs), sum(IdleNs),
                   sum(WastedNs), sum(StepSpans), max(StepEndNs) - max(StepStartNs), min(FirstStartNs), max(LastEndNs)
            FROM otel_traces_lens_steps GROUP BY {keys} ORDER BY {keys}""")
        spans = source.rows(f"""
            SELECT {keys}, count(), countIf(LensBucket IS NOT NULL), sumIf(Duration, LensBucket = 'productive'),
                   sumIf(Duration, LensBucket = 'overhead'), sumIf(Duration, LensBucket = 'idle'),
                   sumIf(Duration, LensBucket = 'wasted'), countIf(SpanName = 'rl.grpo.step'),
                   toInt64(sumIf(Duration, SpanName = 'rl.grpo.step')), min(toUnixTimestamp64Nano(Timestamp)),
                   max(toUnixTimestamp64Nano(Timestamp) + toInt64(Duration))
            FROM otel_traces WHERE SpanName <> 'lens.telemetry.loss' GROUP BY {keys} ORDER BY {keys}""")
    finally:
        source.close()
    assert {row[0] for row in rollup} == {"before", "after", ""} and len(rollup) == 3 * (4 + 1) + 2 * (5 + 1) + 1
    assert sum(row[4] for row in rollup) == 3 * (1 + 4 * trace_synth.SPANS_PER_STEP) + 2 * (
        1 + 5 * trace_synth.SPANS_PER_STEP) + 1
    assert rollup == spans


@pytest.mark.engines
def test_a_run_past_part_spans_sums_its_stamped_traces_walks_the_rest_and_reports_as_the_files(tmp_path, otlp):
    """``--part-spans`` below the run's size: the traces Lens stamped are summed where they lie, a trace with a
    nested bucket (which only the walk finds) is walked, in parts of at most N spans; the traces' structure is
    checked in parts of about CHECK_PART_FACTOR x N spans; the JSON is the files' and its path says how many
    spans were summed and walked. A part size that is not a positive number is exit 2."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    run = tmp_path / "run"
    trace_synth.write_sync_run(run, 8, 6, slow={5: (1.3, 2)})
    span = otlp.span
    broken = [span(1, "rl.grpo.step", 0, 10, iteration=1), span(2, "rl.grpo.policy_training", 0, 6, 1,
                                                                 bucket="productive", iteration=1),
              span(3, "rl.grpo.reward_calculation", 1, 2, 2, bucket="overhead", iteration=1)]
    extra = otlp.write(tmp_path / "broken.jsonl", otlp.request(broken, service_name="trainer", nemo_run_id="sync",
                                                               nv_dl_rank=8))
    db = _chdb_database(tmp_path / "db", run, extra)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "lens_cli", "report", "--clickhouse", f"chdb:{db}", "--json",
                          "--part-spans", "2"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    files = _file_report(run, extra).to_json(top=DEFAULT_TOP_N)
    assert files["violations_by_rule"] == {"nested-bucket": 1}  # the broken trace is in the answer
    assert comparable(data) == comparable(files)
    total = data["spans"]
    assert data["path"]["name"] == "spans" and data["path"]["parts"] == 2  # 3 walked spans, 2 at most at once
    assert data["path"]["reason"].endswith(f"{total - 3:,} of {total:,} spans summed by their stamps where they "
                                           "lie, 3 walked"), data["path"]
    # past CHECK_PART_FACTOR x 2 spans the span ids were sorted, the rest of the structure checked in parts of
    # PARENT_PART_FACTOR x 2 parents, and still only the broken trace was walked
    assert total > CHECK_PART_FACTOR * 2
    assert re.search(r"traces checked in \d+ parts?, their span ids in one sorted pass; ", data["path"]["reason"]), \
        data["path"]
    for bad in ("0", "-3", "lots"):
        out = subprocess.run([sys.executable, "-m", "lens_cli", "report", "--clickhouse", f"chdb:{db}",
                              "--part-spans", bad], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and "a positive number of spans" in out.stderr, out.stderr


@pytest.mark.engines
@pytest.mark.parametrize("part_spans", [2, 10])
def test_the_structure_check_walks_each_trace_that_breaks_one_rule_and_sums_the_rest(tmp_path, otlp, part_spans):
    """The check that decides which traces are summed by their stamps: a well-formed Lens trace is summed; a trace
    that breaks one rule (a span stored twice, under its parent or another, a parent id no span has, a child of a
    bucketed span, a child that starts before its parent, a leaf stamped with another iteration than its step's,
    a cycle of parents, a parent of another process) is walked whole, and the report is the files'. Each broken
    trace has its own span count, so the count walked names which were walked. With 2 spans a part the run is
    past CHECK_PART_FACTOR x 2 spans: the span ids are sorted (the copies of a span found side by side), the rest
    checked in parts by parents; with 10 the run (72 spans) is checked in one part, its span ids by a set of them."""
    span = otlp.span

    def trace(n: int, *extra: dict, leaf_start: float = 2, leaf_iteration: int = 0) -> list:
        """Step ``n`` under a job, with one leaf, in trace ``n``, plus ``extra`` spans."""
        tid, at = f"{n:032x}", 20 * n
        return [span(1, "rl.grpo.job", at, at + 20, trace=tid),
                span(2, "rl.grpo.step", at + 1, at + 9, 1, iteration=n, trace=tid),
                span(3, "rl.vllm.generate", at + leaf_start, at + 5, 2, bucket="productive",
                     iteration=leaf_iteration or n, trace=tid), *(dict(e, traceId=tid) for e in extra)]

    def leaves(n: int, count: int, parent: int = 2, start: float = 5) -> list:
        """``count`` leaves of step ``n`` from 4 on, under ``parent``."""
        return [span(i, "rl.grpo.checkpointing", 20 * n + start + (i - 4) / 4, 20 * n + start + (i - 3) / 4, parent,
                     bucket="overhead", iteration=n) for i in range(4, 4 + count)]

    good = trace(1) + trace(2, *leaves(2, 1))
    broken = {
        "twice": trace(3, span(3, "rl.vllm.generate", 62, 65, 2, bucket="productive", iteration=3)),
        "orphan": trace(4, *leaves(4, 2, parent=99)),
        "under a leaf": trace(5, *leaves(5, 3, parent=3, start=3)),
        "before its parent": trace(6, *leaves(6, 4), leaf_start=0.5),
        "another iteration": trace(7, *leaves(7, 5), leaf_iteration=6),
        "a cycle": trace(9, span(30, "phase", 183, 184, 31), span(31, "phase", 183, 184, 30), *leaves(9, 6)),
        # leaf 4 again, under a phase of the same step: no rule but the span ids finds it
        "twice, another parent": trace(10, *leaves(10, 9), span(40, "phase", 204, 206, 2, iteration=10),
                                       span(4, "rl.grpo.checkpointing", 205, 205.25, 40, bucket="overhead",
                                            iteration=10)),
    }
    # trace 8 on rank 1's process too: a leaf there whose parent is rank 0's step
    home = trace(8, *leaves(8, 6))
    other = [span(20, "rl.grpo.checkpointing", 167, 168, 2, bucket="overhead", iteration=8, trace=f"{8:032x}")]
    sizes = [len(t) for t in broken.values()] + [len(home) + len(other)]
    assert len(set(sizes)) == len(sizes)
    path = otlp.write(tmp_path / "traces.jsonl",
                      otlp.request(good + [s for t in broken.values() for s in t] + home, service_name="trainer",
                                   service_instance_id="rank0", nemo_run_id="sync", nv_dl_rank=0),
                      otlp.request(other, service_name="trainer", service_instance_id="rank1", nemo_run_id="sync",
                                   nv_dl_rank=1))
    db = _chdb_database(tmp_path / "db", path)
    source = ChdbSource(str(db))
    try:
        with ClickHouseStore(source, "otel_traces", part_spans=part_spans) as store:
            store.load_table()
            report = build_report(store)
            summary = store.walk_summary()
            apart = store.duplicates_sorted
    finally:
        source.close()
    total = len(good) + sum(sizes)
    assert apart == (part_spans == 2), summary
    assert summary.endswith(f"{len(good):,} of {total:,} spans summed by their stamps where they lie, "
                            f"{sum(sizes):,} walked"), summary
    assert comparable(report.to_json(top=DEFAULT_TOP_N)) == comparable(_file_report(path).to_json(top=DEFAULT_TOP_N))


def test_the_span_ids_stored_twice_are_found_by_a_set_or_by_a_sort_alike():
    """The two ways the check finds the traces with a span stored twice give the same traces: a set of span ids a
    trace (a run that fits) and a sort by (trace, span id) that compares each span with the one before (past
    CHECK_PART_FACTOR x --part-spans spans). Copies in one trace are found wherever they lie; the same span id in
    two traces is no copy; the sort's first row (trace 0, span 0 here) has no predecessor, so it is no copy of
    one (a default of zeros made it one)."""
    rows = [(0, 0), (1, 7), (2, 7), (2, 9), (3, 5), (3, 6), (3, 5), (4, 1), (4, 2), (4, 1), (4, 1), (5, 8)]
    values = ", ".join(f"(toUInt128({trace}), toUInt64({span}))" for trace, span in rows)
    relation = f"(SELECT * FROM values('trace UInt128, span UInt64', {values}))"
    source = ChdbSource()
    try:
        found = {kind: sorted(n for (n,) in source.rows(f"SELECT toUInt64(trace) FROM ({sql(relation, '')})"))
                 for kind, sql in (("set", duplicates_sql), ("sort", duplicates_sorted_sql))}
    finally:
        source.close()
    assert found == {"set": [3, 4], "sort": [3, 4]}


def _synthetic_reports(sizes, parts_attribute, make_source=counting_source, **options):
    """Per ``--part-spans`` of ``sizes``: the report of bench/trace_synth's 6 x 4 run loaded into chdb, the statements
    it sent, and the store's ``parts_attribute`` after it (each a dict by part size); ``make_source`` gives the
    (source, list of statements sent) each report reads; ``options`` go to the store."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    reports, sent_by, parts_by = {}, {}, {}
    for part_spans in sizes:
        source, sent = make_source()
        try:
            source.command(otel_traces_ddl("otel_traces"))
            source.command(trace_synth.otel_traces_insert("otel_traces", 6, 4))
            with ClickHouseStore(source, "otel_traces", part_spans=part_spans, **options) as store:
                store.load_table()
                reports[part_spans] = build_report(store).to_json(top=DEFAULT_TOP_N)
                parts_by[part_spans] = getattr(store, parts_attribute)
        finally:
            source.close()
        sent_by[part_spans] = sent
    return reports, sent_by, parts_by


def test_the_check_in_parts_reads_the_table_once_and_each_part_its_own_rows_of_a_sorted_copy():
    """Past CHECK_PART_FACTOR x --part-spans spans the structure check runs in parts of whole traces. Each part's
    two passes read their rows of one copy sorted by part (check_spans), made by the one statement of the check
    that reads the table: before it each pass of each part scanned the whole table (at 100M spans in 6 parts,
    10.5 s a part, the time growing with the square of the run). The report is the one of a check in one part."""
    reports, sent_by, parts_by = _synthetic_reports((5, 10_000), "check_parts")
    parts, sent = parts_by[5], sent_by[5]
    assert parts > 1 and parts_by[10_000] == 1, parts_by
    checks = [sql for sql in sent if "check_parents" in sql and not sql.startswith("DROP")]
    reading = [sql for sql in sent if "`otel_traces`" in sql and ("check_parents" in sql or "check_spans" in sql)]
    assert len(checks) == 2 * parts  # two passes a part, neither reading the table
    assert len(reading) == 1 and reading[0].startswith("CREATE TEMPORARY TABLE check_spans"), reading
    assert not any("check_spans" in sql for sql in sent_by[10_000])
    assert comparable(reports[5]) == comparable(reports[10_000])


def test_each_part_of_a_walk_drops_the_last_parts_tables_in_one_statement_and_counts_its_rules_in_one():
    """A run walked in parts, counted in statements (each a round trip to a server). Regression: every table a
    part's walk left was dropped only as the next part made it again (~15 round trips a part, the last part's
    tables held while the next part's first were made), and each rule was counted by a statement of its own (the
    vocabulary rules' by a table made, counted and dropped): 68-80 statements a part of this run, now 35-47 (at
    10M spans with device times ~95 a part, each walked twice). A table a part drops alone is one it made."""
    reports, sent_by, parts_by = _synthetic_reports((150, 100_000), "parts_walked", stamped=False)
    sent = sent_by[150]
    assert parts_by[150] > 2 and parts_by[100_000] == 1, parts_by
    loads = [i for i, sql in enumerate(sent) if sql.startswith("CREATE TEMPORARY TABLE spans ")]
    assert len(loads) == parts_by[150]
    for start, end in zip(loads, loads[1:]):  # a part's statements, from its spans loaded to the next part's
        made = set()
        for sql in sent[start:end]:
            if created := re.match(r"CREATE TEMPORARY TABLE (\w+)", sql):
                made.add(created[1])
            if dropped := re.match(r"DROP TEMPORARY TABLE IF EXISTS (.*)", sql):
                names = [name.strip() for name in dropped[1].split(",")]
                assert len(names) > 1 or names[0] in made, (sql, made)
    per_part = [end - start for start, end in zip(loads, loads[1:])]
    assert max(per_part) <= 50, per_part
    assert sum(sql.startswith("DROP TEMPORARY TABLE IF EXISTS spans, k, anc") for sql in sent[loads[0]:loads[1]]) == 1
    assert comparable(reports[150]) == comparable(reports[100_000])


def test_a_round_of_the_pointer_jump_is_four_statements_and_a_300_deep_chain_keeps_its_answer(tmp_path):
    """A span's step and bucketed ancestors are found by pointer jumping, a round per doubling of the look. Regression:
    each round sent six statements (the round's table made, its ended looks kept, the old table dropped, the unended
    copied back and the copy dropped, a count): 2-3 rounds a part of a training run, ~9 for a 300-deep chain. Now the
    round's table is read by the next round as it is (two tables in turn): four. Known answer: the leaf 300 levels
    below its step is that step's, as the files say."""
    from report_helpers import Otlp

    chain = [Otlp.span(1, "rl.grpo.step", 0, 10, iteration=1)]
    chain += [Otlp.span(n, f"level{n}", 0, 10, n - 1) for n in range(2, 300)]
    chain += [Otlp.span(300, "leaf", 1, 3, 299, bucket="productive"),
              Otlp.span(301, "leaf.below", 1, 2, 300, bucket="idle")]
    path = Otlp.write(tmp_path / "chain.jsonl", Otlp.request(chain))
    source, sent = counting_source()
    try:
        load_otlp_files(source, "otel_traces", [path])
        with ClickHouseStore(source, "otel_traces", stamped=False) as store:
            store.load_table()
            report = build_report(store)
    finally:
        source.close()
    (step,) = report.steps
    assert step.totals.bucket_ns == {"productive": 2 * 10**9, "overhead": 0, "idle": 10**9, "wasted": 0}
    assert comparable(report.to_json(top=DEFAULT_TOP_N)) == comparable(_file_report(path).to_json(top=DEFAULT_TOP_N))
    start = next(i for i, sql in enumerate(sent) if sql.startswith("CREATE TEMPORARY TABLE found"))
    end = next(i for i, sql in enumerate(sent) if sql.startswith("CREATE TEMPORARY TABLE looked"))
    rounds = sum(sql.startswith("INSERT INTO found") for sql in sent[start:end])
    assert rounds >= 9, rounds  # log2(300) rounds and one to see every look ended
    assert end - start - 1 == 4 * rounds, sent[start:end]


def _page_data(page):
    """The data the page's script draws from: its span rows (lane, row, name, times, bucket, iteration, device) as a
    multiset, names in place of their numbers (numbered as first met, so in the order the engine gave ties), and the
    rest of the script's data."""
    from collections import Counter

    data = json.loads(re.search(r'<script type="application/json" id="lens-data">(.*?)</script>', page, re.S)[1])
    names = data.pop("names")
    spans = Counter(tuple([row[0], row[1], names[row[2]], *row[3:]]) for row in data.pop("spans"))
    return spans, data


def _device_run_walked_three_ways(**options):
    """(label, store, report, statements sent) for each way of walking one run: at once ("once"), in parts of 700
    spans with the stamps trusted ("parts") and not ("unstamped"). The run: bench/trace_synth's 20 ranks x 15 steps
    with device times (6,020 spans), rank 3's spans stored twice; ``options`` go to the store."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    for label, walk in (("once", {"part_spans": 100_000}), ("parts", {"part_spans": 700}),
                        ("unstamped", {"part_spans": 700, "stamped": False})):
        source, sent = counting_source()
        try:
            source.command(otel_traces_ddl("otel_traces"))
            source.command(trace_synth.otel_traces_insert("otel_traces", 20, 15, device=True))
            source.command("INSERT INTO otel_traces SELECT * FROM otel_traces "
                           "WHERE ResourceAttributes['nv.dl.rank'] = '3'")
            with ClickHouseStore(source, "otel_traces", **walk, **options) as store:
                store.load_table()
                yield label, store, build_report(store), sent
        finally:
            source.close()


def test_the_page_of_a_run_walked_in_parts_draws_what_the_page_of_the_run_walked_at_once_draws():
    """``--html`` walked the whole run at once whatever --part-spans said (its waterfall read the walk's tables, which
    a walk in parts leaves for its last part only): 10M device-timed spans held ~4 GB of chdb. Now a report walked in
    parts (or summed by its stamps) draws each view from the spans it draws, read from the table with their parent's
    id. Known answer: the page of a device-timed run of 6,000 spans (past the page's whole-run size: the slowest step,
    the stragglers' and every rank's views), a rank's spans stored twice, walked in parts of 700 spans (stamps trusted,
    and not) draws the spans the page of the run walked at once draws, each once."""
    from lens_report.render_html import render_html

    pages, walked = {}, {}
    for label, store, report, sent in _device_run_walked_three_ways():
        walked[label] = (store.parts_walked, report.duplicate_count, report.span_count)
        before = len(sent)
        pages[label] = _page_data(render_html(report, store, rerun="lens report"))
        if label != "once":  # the page reads the spans it draws, not a part's walk
            drawing = [sql for sql in sent[before:] if "wf_drawn" not in sql]
            assert not any(re.search(r"\b(k|anc|spans)\b", sql) for sql in drawing), drawing
    assert walked["once"] == (1, 301, 6020) and walked["parts"][1:] == (301, 6020), walked
    assert walked["unstamped"][0] > 8, walked
    spans, data = pages["once"]
    assert len(spans) > 600 and max(spans.values()) == 1 and data["windows"]
    assert pages["parts"] == pages["unstamped"] == pages["once"]


def test_perfetto_of_a_run_walked_in_parts_holds_the_events_of_the_run_walked_at_once():
    """``--perfetto`` walked the whole run at once, its attributes copied with every span into ClickHouse's memory
    (it reads the spans from ``spans``, which a walk in parts holds a part of). Now a run walked in parts (or
    summed by its stamps) is walked without them, and the trace reads its spans from the table, each once.
    Known answer: a device-timed run of 6,000 spans, a rank's spans stored twice, walked in
    parts of 700 (stamps trusted, and not): the whole run's events, and those of step 4 on ranks 1, 3 and 7, are
    those of the run walked at once (name, times, rank, ids and attributes), each once; no part carries them."""
    import io
    from lens_report.perfetto import write_trace_events

    traces, sent_by = {}, {}
    for label, store, report, sent in _device_run_walked_three_ways(detail=True):
        traces[label] = []
        for steps, ranks in ((None, None), (frozenset({4}), frozenset({1, 3, 7}))):
            out = io.StringIO()
            count = write_trace_events(store, report, out, steps=steps, ranks=ranks)
            events = [event for event in json.loads(out.getvalue())["traceEvents"] if event["ph"] == "X"]
            assert count == len(events)
            traces[label].append(sorted(json.dumps([event["name"], event["ts"], event["dur"], event["args"]],
                                                   sort_keys=True) for event in events))
        sent_by[label] = sent
    whole, chosen = traces["once"]
    assert len(whole) == len(set(whole)) == 6020 and 0 < len(chosen) == len(set(chosen)) < 100
    assert any('"gen_ai.' in event or '"rl.' in event for event in whole)  # the attributes came along
    assert traces["parts"] == traces["unstamped"] == traces["once"]
    for label in ("parts", "unstamped"):  # the parts walked carry no attributes: only the trace reads them
        walked = [sql for sql in sent_by[label] if sql.startswith(("CREATE TEMPORARY TABLE spans ",
                                                                   "CREATE TEMPORARY TABLE walk_spans "))]
        assert walked and not any("`Events.Name`" in sql for sql in walked), label


def _device_run(tmp_path, ranks=3, steps=6):
    """A device-timed run whose device work runs past each step: ``ranks`` ranks of ``steps`` steps, each step its
    own trace (10 ms: data, forward, backward, log), the backward's device interval ending 1.5 ms into the next
    step, so that the next step's host-only data leaf (1 ms) waits on another trace's device work."""
    from lens_core import semconv
    from report_helpers import Otlp, T0

    ms = 1_000_000
    paths = []
    for rank in range(ranks):
        spans = []
        for step in range(1, steps + 1):
            trace, t0, base = f"{rank + 1:02x}{step:02x}" + "0" * 28, step * 10.0, 100 * step

            def span(n, name, start, end, parent=None, bucket=None, device=None):
                made = Otlp.span(base + n, name, 0, 0, parent and base + parent, bucket=bucket, iteration=step,
                                 trace=trace)
                made["startTimeUnixNano"], made["endTimeUnixNano"] = str(T0 + round(start * ms)), str(T0 + round(end * ms))
                if device:
                    made["attributes"] += Otlp.attrs({semconv.LENS_DEVICE_START_TIME: T0 + round(device[0] * ms),
                                                      semconv.LENS_DEVICE_END_TIME: T0 + round(device[1] * ms)})
                return made

            spans += [span(1, "train.step", t0, t0 + 10), span(2, "train.data", t0, t0 + 1, 1, "overhead"),
                      span(3, "train.forward", t0 + 1, t0 + 2, 1, "productive", (t0 + 2.5, t0 + 6)),
                      span(4, "train.backward", t0 + 2, t0 + 3, 1, "productive", (t0 + 6, t0 + 11.5)),
                      span(5, "train.log", t0 + 3, t0 + 10, 1, "overhead")]
        paths.append(Otlp.write(tmp_path / f"rank{rank}.jsonl", Otlp.request(
            spans, service_name="trainer", service_instance_id=f"p{rank}", nv_dl_rank=rank)))
    return paths


def test_a_device_timed_run_is_walked_in_parts_against_the_whole_runs_device_intervals(tmp_path):
    """A run with device times was walked at once whatever --part-spans said (the device rule reads a rank's
    device intervals across its traces): 10M device-timed spans held 6.2 GiB of chdb. Now it is walked in parts,
    twice: first each part's device intervals are merged into the run's islands, then each part is walked against
    them. Known answer: per rank, each step's log leaf waits 7 ms on its own step's device work and each data leaf
    but the first 1 ms on the last step's (another trace, another part): 3 x (6 x 7 + 5 x 1) ms given back. The JSON
    is the files' and the one-part report's, and the walk reads the table once (its copy sorted by part). The first
    pass reads each part's intervals where they lie in the copy: it loaded and classified every part (at 10M spans
    ~0.4 s a part of ~2 s, with the copy ~15 s of a 30 s report, against ~10 s now)."""
    paths = _device_run(tmp_path)
    files = _file_report(*paths).to_json(top=DEFAULT_TOP_N)
    assert files["device_clock"]["host_blocked_given_back_s"] == 3 * (6 * 7 + 5 * 1) / 1000
    reports, sent_by, walked = {}, {}, {}
    for part_spans in (7, 10_000):
        source, sent = counting_source()
        try:
            load_otlp_files(source, "otel_traces", paths)
            del sent[:]
            with ClickHouseStore(source, "otel_traces", part_spans=part_spans) as store:
                store.load_table()
                reports[part_spans] = build_report(store).to_json(top=DEFAULT_TOP_N)
                walked[part_spans] = (store.parts_walked, store.walk_summary())
        finally:
            source.close()
        sent_by[part_spans] = sent
    parts, summary = walked[7]
    assert parts == -(-90 // 7) and summary == "every span walked twice (the device intervals first), 7 at most at once"
    assert walked[10_000] == (1, "every span walked at once")
    assert comparable(reports[7]) == comparable(files) == comparable(reports[10_000])
    loads = [sql for sql in sent_by[7] if sql.startswith("CREATE TEMPORARY TABLE spans ")]
    reading = [sql for sql in sent_by[7] if "`otel_traces`" in sql and "walk_spans" in sql]
    islands = [sql for sql in sent_by[7] if re.match(r"(CREATE TEMPORARY TABLE|INSERT INTO) device_run_islands ", sql)
               and "FROM walk_spans WHERE part = " in sql]  # each part's, then one merge of them
    assert len(loads) == parts and all("FROM walk_spans WHERE part = " in sql for sql in loads)
    assert len(islands) == parts
    assert len(reading) == 1 and reading[0].startswith("CREATE TEMPORARY TABLE walk_spans"), reading


def test_a_span_stored_twice_adds_only_its_first_device_interval_to_the_runs_islands(tmp_path):
    """A span stored twice is kept once, its first copy (as the files keep it). The first pass of a device-timed
    walk in parts reads each part's device intervals where they lie in the walk's copy, not loaded (loading kept the
    first copy): it must keep the first there too. Known answer: rank 0's step-2 forward is stored again with its
    device interval over step 1's data leaf; were that copy's interval an island, the leaf (1 ms, the one data
    leaf nothing blocks) would be given back too."""
    from lens_core import semconv
    from report_helpers import Otlp, T0

    paths = _device_run(tmp_path)
    first = json.loads(paths[0].read_text().splitlines()[0])["resourceSpans"][0]
    forward = next(span for span in first["scopeSpans"][0]["spans"]
                   if span["traceId"].startswith("0102") and span["name"] == "train.forward")
    again = json.loads(json.dumps(forward))
    again["attributes"] = [a for a in again["attributes"] if not a["key"].startswith("lens.device")]
    again["attributes"] += Otlp.attrs({semconv.LENS_DEVICE_START_TIME: T0 + 10_000_000,
                                       semconv.LENS_DEVICE_END_TIME: T0 + 11_000_000})
    with paths[0].open("a") as out:
        out.write(json.dumps({"resourceSpans": [{**first, "scopeSpans": [{"scope": {"name": "test"},
                                                                          "spans": [again]}]}]}) + "\n")
    files = _file_report(*paths).to_json(top=DEFAULT_TOP_N)
    assert files["duplicate_spans"] == 1 and files["device_clock"]["host_blocked_given_back_s"] == 0.141
    for part_spans in (7, 10_000):
        source = ChdbSource()
        try:
            load_otlp_files(source, "otel_traces", paths)
            with ClickHouseStore(source, "otel_traces", part_spans=part_spans) as store:
                store.load_table()
                report = build_report(store).to_json(top=DEFAULT_TOP_N)
                assert store.parts_walked == (-(-91 // 7) if part_spans == 7 else 1)
        finally:
            source.close()
        assert comparable(report) == comparable(files), part_spans


def test_the_figures_of_a_run_walked_in_parts_are_made_without_the_last_parts_tables(tmp_path):
    """A run walked in parts kept its last part's spans, that part's walk tables and the walk's copy while the
    figures were made from what every part kept (10M device-timed spans in 11 parts: ~0.4 GB of a 1.5 GiB peak).
    Now they are dropped once every part is walked, and chdb's freed memory is given back before the figures;
    the report is the one-part report's."""
    paths = _device_run(tmp_path)
    reports, held, events = {}, [], []
    for part_spans in (7, 10_000):
        source = ChdbSource()
        command, release = source.command, source.release

        def watch(sql, _command=command, _source=source):
            if sql.startswith("CREATE TEMPORARY TABLE rank_totals "):
                held.append({name for (name,) in _source.rows("SELECT name FROM system.tables WHERE is_temporary")})
            events.append(sql.split(" AS ")[0])
            _command(sql)

        source.command = watch
        source.release = lambda _release=release: (events.append("release"), _release())[1]
        try:
            load_otlp_files(source, "otel_traces", paths)
            with ClickHouseStore(source, "otel_traces", part_spans=part_spans) as store:
                store.load_table()
                reports[part_spans] = build_report(store).to_json(top=DEFAULT_TOP_N)
        finally:
            source.close()
    in_parts, at_once = held
    walked = {"spans", "k", "anc", "walk_spans", "device_blocked", "anchors"}
    assert not in_parts & walked and "steps" in in_parts, in_parts  # the parts' steps kept, the part's own gone
    assert {"spans", "k", "anc"} <= at_once and "walk_spans" not in at_once  # at once: nothing to give back
    last_drop = max(i for i, event in enumerate(events) if event.startswith("DROP") and "walk_spans" in event)
    assert "release" in events[last_drop:events.index("CREATE TEMPORARY TABLE rank_totals ENGINE = Memory")]
    assert comparable(reports[7]) == comparable(reports[10_000])


def test_the_spans_working_table_holds_its_texts_as_low_cardinality():
    """The report's ``spans`` held each text column as String: names, processes, rank labels, buckets, groups and
    thread ids, repeated in every span, cost ~230 of its ~430 bytes a span in chdb's memory (a part of 1M spans:
    ~400 MiB). As LowCardinality a part holds ~190 MiB, and the walk's tables derived from it shrink with it."""
    source = ChdbSource()
    try:
        source.command(otel_traces_ddl("otel_traces"))
        with ClickHouseStore(source, "otel_traces") as store:
            store.load_table()
            store.load_part(0, 1)
            types = dict(row[:2] for row in store.rows("DESCRIBE TABLE spans"))
    finally:
        source.close()
    texts = ("name", "kind", "bucket", "grp", "category", "thread", "thread_name", "run", "process", "rank_label",
             "instance", "host", "service")
    assert {column: types[column] for column in texts if not types[column].startswith("LowCardinality(")} == {}


def test_the_walk_in_parts_reads_the_table_once_and_each_part_its_own_rows_of_a_sorted_copy():
    """A run walked in parts (here: its stamps not trusted) copied each part's spans from the table, a scan of
    every span a part (at 10M spans in 11 parts, 1.4 s a part), and the walk's time grew with the square of the
    run. Now the walked spans are copied once, sorted by part (walk_spans), and each
    part reads its own rows; the report equals the one-part report."""
    reports, sent_by, parts_by = _synthetic_reports((30, 10_000), "parts_walked", stamped=False)
    parts, sent = parts_by[30], sent_by[30]
    assert parts > 1 and parts_by[10_000] == 1, parts_by
    loads = [sql for sql in sent if sql.startswith("CREATE TEMPORARY TABLE spans ")]
    assert len(loads) == parts and not any("`otel_traces`" in sql for sql in loads)
    assert sum("`otel_traces`" in sql and "walk_spans" in sql for sql in sent) == 1
    assert not any("walk_spans" in sql for sql in sent_by[10_000])
    assert comparable(reports[30]) == comparable(reports[10_000])


def test_each_attempts_report_walks_its_own_traces_from_a_copy_of_its_own(tmp_path, otlp):
    """A run launched twice is reported attempt by attempt in one store, each walking the traces its own check
    found. Failure this guards: the walk's sorted copy, made by the first attempt's report, was read again by the
    second's (the same number of parts), whose trace that breaks a rule was then never walked."""
    span = otlp.span
    launches = []
    for t, trace in ((0, "0a" * 16), (100, "0b" * 16)):
        launches.append(otlp.request([
            span(1, "rl.grpo.step", t, t + 10, iteration=1, trace=trace),
            span(2, "rl.grpo.policy_training", t, t + 6, 1, bucket="productive", iteration=1, trace=trace),
            span(3, "rl.grpo.reward_calculation", t + 1, t + 2, 2, bucket="overhead", iteration=1, trace=trace),
            span(4, "rl.grpo.step", t + 10, t + 20, iteration=2, trace=trace[::-1]),
            span(5, "rl.grpo.policy_training", t + 10, t + 16, 4, bucket="productive", iteration=2,
                 trace=trace[::-1])],
            service_name="trainer", nemo_run_id="r", nv_dl_rank=0, service_instance_id=f"r-{t}"))
    path = otlp.write(tmp_path / "two.jsonl", *launches)
    with TraceStore() as store:
        store.load([path])
        files = build_report(store, attempt=2).to_json(top=DEFAULT_TOP_N)
    assert files["violations_by_rule"] == {"nested-bucket": 1}, files["violations_by_rule"]
    source = ChdbSource()
    try:
        load_otlp_files(source, "otel_traces", [path])
        with ClickHouseStore(source, "otel_traces", part_spans=2) as store:
            store.load_table()
            report = build_report(store, attempt=2).to_json(top=DEFAULT_TOP_N)
            assert store.parts_walked == 2 and store.walked_spans == 3, store.walk_summary()
    finally:
        source.close()
    assert comparable(report) == comparable(files)


def test_the_benchmarks_device_timed_run_reads_its_device_times_in_one_part_and_in_parts():
    """bench/report_bench.py --device-times: trace_synth's SQL gives each productive leaf device times (a fifth of
    its length after its host interval) and nothing else any; the report counts each such leaf device-timed, in one
    part and in parts (walked twice), with the same JSON."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    reports = {}
    for part_spans in (40, 10_000):
        source = ChdbSource()
        try:
            source.command(otel_traces_ddl("otel_traces"))
            source.command(trace_synth.otel_traces_insert("otel_traces", 4, 3, device=True))
            timed, productive = source.rows(
                "SELECT countIf(mapContains(SpanAttributes, 'lens.device.start_time_unix_nano')), "
                "countIf(SpanAttributes['rl.bucket'] = 'productive') FROM otel_traces")[0]
            with ClickHouseStore(source, "otel_traces", part_spans=part_spans) as store:
                store.load_table()
                reports[part_spans] = build_report(store).to_json(top=DEFAULT_TOP_N)
                assert store.parts_walked == (1 if part_spans == 10_000 else -(-store.span_count() // part_spans))
        finally:
            source.close()
        layout = trace_synth.step_layout(trace_synth.SPANS_PER_STEP)
        assert timed == productive == 4 * 3 * sum(bucket == "productive" for _, _, bucket, *_ in layout)
        assert reports[part_spans]["device_clock"]["device_timed_leaves"] == timed
    assert comparable(reports[40]) == comparable(reports[10_000])


def test_chdb_hands_back_the_memory_a_long_statement_freed_and_stops_asking_an_engine_that_refuses():
    """chdb runs in the report's process and its allocator kept each pass's freed pages, so the peak RSS grew pass
    by pass (10M spans: 919-956 MiB, 682-689 MiB purged). A statement that runs past _PURGE_AFTER_S is followed
    by SYSTEM JEMALLOC PURGE, a short one is not; an engine that refuses the purge (a build without jemalloc) is
    not asked again, and its statements still run."""
    from lens_report import clickhouse_source

    source = ChdbSource()
    sent: list[str] = []
    query = source.session.query
    source.session.query = lambda sql, *a, **k: (sent.append(sql), query(sql, *a, **k))[1]  # type: ignore[method-assign]
    try:
        source.command("CREATE TEMPORARY TABLE quick (n UInt8) ENGINE = Memory")
        assert sent == ["CREATE TEMPORARY TABLE quick (n UInt8) ENGINE = Memory"]
        source.command(f"SELECT sleep({clickhouse_source._PURGE_AFTER_S + 0.1})")
        assert sent[-1] == "SYSTEM JEMALLOC PURGE" and len(sent) == 3, sent

        def refuse(sql: str, *a: object, **k: object) -> object:
            sent.append(sql)
            if sql.startswith("SYSTEM"):
                raise source.errors[0]("Code: 344. DB::Exception: this build has no jemalloc. (SUPPORT_IS_DISABLED)")
            return query(sql, *a, **k)

        source.session.query = refuse  # type: ignore[method-assign]
        del sent[:]
        for _ in range(2):
            source.command(f"SELECT sleep({clickhouse_source._PURGE_AFTER_S + 0.1})")
        assert sent.count("SYSTEM JEMALLOC PURGE") == 1 and len(sent) == 3, sent
        assert source.rows("SELECT 1") == [(1,)]
    finally:
        source.session.query = query  # type: ignore[method-assign]
        source.close()


def test_each_part_walked_hands_chdbs_freed_memory_back_before_the_next_part_loads():
    """A part's statements are short (under _PURGE_AFTER_S), so nothing handed back what chdb freed as the walk went:
    each part's dropped tables stayed in the allocator, and a 10M device-timed run's peak RSS rose part by part to
    the 1 GB line (1,017-1,023 MiB; 936-940 MiB handed back a part). Each part's tables are now dropped, then
    SYSTEM JEMALLOC PURGE sent, before the next part loads."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    source = ChdbSource()
    sent: list[str] = []
    query = source.session.query
    source.session.query = lambda sql, *a, **k: (sent.append(sql), query(sql, *a, **k))[1]  # type: ignore[method-assign]
    try:
        source.command(otel_traces_ddl("otel_traces"))
        source.command(trace_synth.otel_traces_insert("otel_traces", 6, 4))
        with ClickHouseStore(source, "otel_traces", part_spans=150, stamped=False) as store:
            store.load_table()
            build_report(store)
            parts = store.parts_walked
    finally:
        source.session.query = query  # type: ignore[method-assign]
        source.close()
    loads = [i for i, sql in enumerate(sent) if sql.startswith("CREATE TEMPORARY TABLE spans ")]
    assert parts > 2 and len(loads) == parts
    for before, load in zip(loads, loads[1:]):
        (unload,) = [i for i in range(before, load) if sent[i].startswith("DROP TEMPORARY TABLE IF EXISTS spans, k, anc")]
        assert sent[unload + 1] == "SYSTEM JEMALLOC PURGE", sent[unload:load]


def test_the_benchmarks_wide_steps_hold_more_spans_and_the_same_figures_checked_in_parts_of_traces():
    """The report benchmark's 100M run keeps the answer's size and grows the spans (steps of 200 spans,
    trace_synth.step_layout): a run of 3 ranks x 4 steps of 50 spans has 3 x (1 + 4 x 50) spans, every trace
    summed by its stamps (none walked, though the structure check ran in parts of traces), and the figures of
    the same run with 20-span steps (the extra generate calls tile the same window: the buckets agree to the
    nanoseconds lost rounding each call's bounds)."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    reports = {}
    for per_step in (trace_synth.SPANS_PER_STEP, 50):
        source = ChdbSource()
        try:
            source.command(otel_traces_ddl("otel_traces"))
            source.command(trace_synth.otel_traces_insert("otel_traces", 3, 4, spans_per_step=per_step))
            with ClickHouseStore(source, "otel_traces", part_spans=20) as store:
                store.load_table()
                reports[per_step] = build_report(store)
                summary = store.walk_summary()
        finally:
            source.close()
        spans = 3 * (1 + 4 * per_step)
        assert reports[per_step].span_count == spans
        assert spans > 20 * CHECK_PART_FACTOR
        assert re.fullmatch(rf"traces checked in \d+ parts?, their span ids in one sorted pass; {spans:,} of {spans:,} "
                            "spans summed by their stamps where they lie, 0 walked", summary), summary
    narrow, wide = reports[trace_synth.SPANS_PER_STEP].run, reports[50].run
    assert wide.wall_ns == narrow.wall_ns
    for bucket, ns in narrow.bucket_ns.items():
        assert abs(wide.bucket_ns[bucket] - ns) <= 3 * 4 * 40, (bucket, wide.bucket_ns, narrow.bucket_ns)
    assert [s.iteration for s in reports[50].steps] == [1, 2, 3, 4]


def test_the_working_tables_are_dropped_in_one_statement_or_one_by_one_on_an_older_server():
    """A store drops its working tables with one ``DROP`` naming them all (ClickHouse 24.1+). A server that cannot
    parse the list (a syntax error) gets one ``DROP`` a table; one that is gone (any other error) gets no more
    statements: it drops them with the session."""
    from lens_report.clickhouse import ClickHouseStore

    class Server(ChdbSource):
        def __init__(self, answer: str | None) -> None:
            super().__init__()
            self.answer, self.sent = answer, []

        def command(self, sql: str) -> None:
            self.sent.append(sql)
            if self.answer and sql.startswith("DROP") and "," in sql:
                raise RuntimeError(self.answer)
            super().command(sql)

    for answer, drops in ((None, 1), ("Code: 62. DB::Exception: Syntax error: failed at position 32", 1 + 2),
                          ("Connection refused", 1)):
        source = Server(answer)
        try:
            with ClickHouseStore(source, "otel_traces") as store:
                store.create_columns("a", "x BIGINT", [[1]])
                store.create_columns("b", "x BIGINT", [[2], [3]])
                assert store.value("SELECT sum(x) FROM b") == 5
            assert len([sql for sql in source.sent if sql.startswith("DROP")]) == drops, answer
            left = source.rows("SELECT name FROM system.tables WHERE is_temporary AND name IN ('a', 'b')")
            assert (left == []) == (answer != "Connection refused"), (answer, left)
        finally:
            source.close()


def test_a_report_on_a_server_that_cannot_drop_a_list_of_tables_drops_them_one_by_one():
    """The report drops several working tables in one statement mid-report (the stamped sums' tables, the check's,
    a walk's last part), which a server older than ClickHouse 24.1 answers with a syntax error: the report failed
    there, where only the store's close fell back to one DROP a table. Now every drop falls back, after the
    server refused one list; the report equals the one a newer server gives."""
    class OldServer(ChdbSource):
        refused = 0

        def command(self, sql: str) -> None:
            if sql.startswith("DROP") and "," in sql:
                OldServer.refused += 1
                raise RuntimeError("Code: 62. DB::Exception: Syntax error: failed at position 32")
            super().command(sql)

    # a walk in 4 parts, a check in 6 (a walk in 98 parts of 5 spans took 23 s and showed nothing more)
    for size, parts_attribute, options in ((150, "parts_walked", {"stamped": False}), (5, "check_parts", {})):
        old, _, parts = _synthetic_reports((size,), parts_attribute, lambda: (OldServer(), []), **options)
        new, _, _ = _synthetic_reports((size,), parts_attribute, **options)
        assert parts[size] > 1 and comparable(old[size]) == comparable(new[size]), options
    assert OldServer.refused == 2  # once a store


def test_the_stamped_sums_take_few_statements(tmp_path):
    """The stamped sums of a run nothing of which is walked, counted in statements (each a round trip to a
    server). Regression: the steps of one step span were copied to a table of their own and back (five
    statements), the presence of an overflowing step asked apart, and three working tables dropped one by one:
    55 statements at 10M spans, 49 now (61 with the span ids checked apart, was 68); here 50, was 56."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import trace_synth

    trace_synth.write_run(tmp_path / "files", 4, 7)
    source, calls = counting_source()
    try:
        source.command(otel_traces_ddl("otel_traces"))
        source.command(trace_synth.otel_traces_insert("otel_traces", 4, 7))
        calls.clear()
        with ClickHouseStore(source, "otel_traces", part_spans=100) as store:  # parts: the stamped sums
            store.load_table()
            report = build_report(store)
            assert store.walked_spans == 0 and not store.duplicates_sorted
    finally:
        source.close()
    assert comparable(report.to_json()) == comparable(report_of(tmp_path / "files").to_json())
    assert len(calls) <= 50, [" ".join(sql.split())[:80] for sql in calls]
