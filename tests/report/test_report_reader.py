"""Reading OTLP-JSON trace files into the store: fields, encodings, compression, files and bad input."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from lens_report import TraceStore, build_report, read_spans
from lens_report import plan
from lens_report import store as trace_store
from lens_report.plan import MemoryPlan


def test_reads_ids_times_attributes_and_kept_resource_keys(tmp_path, otlp):
    span = otlp.span(2, "rl.grpo.generation", 1.5, 4, 1, bucket="productive", iteration=3, ratio=0.25,
                     ok=True, tags=["a", "b"], thread_id=7, thread_name="main")
    span["traceId"] = otlp.TRACE.upper()
    request = otlp.request([span], service_name="trainer", process_pid=42, host_name="node1",
                           nv_dl_rank=3, service_instance_id="inst-1", telemetry_sdk_name="opentelemetry")
    read = read_spans([otlp.write(tmp_path / "a.jsonl", request)])
    assert read.problems == ()
    (s,) = read.spans
    assert (s.trace_id, s.span_id, s.parent_span_id) == (otlp.TRACE, otlp.sid(2), otlp.sid(1))
    assert (s.start_ns, s.end_ns, s.duration_ns) == (otlp.T0 + 1_500_000_000, otlp.T0 + 4 * otlp.S, 2_500_000_000)
    assert s.attributes == {"ratio": 0.25, "ok": True, "tags": ["a", "b"], "thread.id": 7, "thread.name": "main",
                            "rl.bucket": "productive", "rl.iteration": 3}
    assert (s.bucket, s.iteration, s.kind) == ("productive", 3, "INTERNAL")
    assert s.resource == {"service.name": "trainer", "service.instance.id": "inst-1", "process.pid": 42,
                          "host.name": "node1", "nv.dl.rank": 3}
    assert (s.process, s.thread) == ("inst-1", "7 main")
    assert (s.file, s.line) == (str(tmp_path / "a.jsonl"), 1)


def test_integer_times_and_ints_for_int_values_are_accepted(tmp_path, otlp):
    span = otlp.span(1, "x", 0, 1)
    span["startTimeUnixNano"], span["endTimeUnixNano"] = 100, 350
    span["attributes"] = [{"key": "n", "value": {"intValue": 5}}]
    (s,) = read_spans([otlp.write(tmp_path / "a.jsonl", otlp.request([span]))]).spans
    assert (s.start_ns, s.end_ns, s.attributes) == (100, 350, {"n": 5})


def test_base64_ids_are_decoded_to_hex(tmp_path, otlp):
    span = otlp.span(1, "x", 0, 1)
    span["traceId"] = base64.b64encode(bytes.fromhex(otlp.TRACE)).decode()
    span["spanId"] = base64.b64encode(bytes.fromhex("00f067aa0ba902b7")).decode()
    span["parentSpanId"] = base64.b64encode(bytes.fromhex("53995c3f42cd8ad8")).decode()
    (s,) = read_spans([otlp.write(tmp_path / "a.jsonl", otlp.request([span]))]).spans
    assert (s.trace_id, s.span_id, s.parent_span_id) == (otlp.TRACE, "00f067aa0ba902b7", "53995c3f42cd8ad8")


def test_empty_or_all_zero_parent_id_makes_a_root(tmp_path, otlp):
    a, b = otlp.span(1, "a", 0, 1), otlp.span(2, "b", 0, 1)
    a["parentSpanId"], b["parentSpanId"] = "", "0" * 16
    read = read_spans([otlp.write(tmp_path / "a.jsonl", otlp.request([a, b]))])
    assert [s.parent_span_id for s in read.spans] == [None, None]


def test_error_status_is_recognised_as_number_or_name(tmp_path, otlp):
    spans = [otlp.span(n, f"s{n}", 0, 1) for n in (1, 2, 3, 4)]
    spans[0]["status"] = {"code": 2}
    spans[1]["status"] = {"code": "STATUS_CODE_ERROR"}
    spans[2]["status"] = {"code": 1}
    read = read_spans([otlp.write(tmp_path / "a.jsonl", otlp.request(spans))])
    assert [s.error for s in read.spans] == [True, True, False, False]


def test_gzipped_file_is_read_like_plain_text(tmp_path, otlp):
    path = otlp.write(tmp_path / "trace.jsonl.gz", otlp.request([otlp.span(1, "a", 0, 2)]))
    read = read_spans([path])
    assert [s.name for s in read.spans] == ["a"]
    assert read.problems == ()


def test_directory_means_every_trace_file_under_it_recursively(tmp_path, otlp):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    otlp.write(tmp_path / "a.jsonl", otlp.request([otlp.span(1, "a", 0, 1)]))
    otlp.write(tmp_path / "sub" / "b.json", otlp.request([otlp.span(2, "b", 0, 1)]))
    otlp.write(tmp_path / "sub" / "deeper" / "c.json.gz", otlp.request([otlp.span(3, "c", 0, 1)]))
    otlp.write(tmp_path / "sub" / "d.jsonl.gz", otlp.request([otlp.span(4, "d", 0, 1)]))
    otlp.write(tmp_path / "notes.txt", otlp.request([otlp.span(5, "e", 0, 1)]))
    read = read_spans([tmp_path])
    assert sorted(s.name for s in read.spans) == ["a", "b", "c", "d"]
    assert len(read.files) == 4


def test_the_same_span_in_two_files_is_kept_once(tmp_path, otlp):
    request = otlp.request([otlp.span(1, "a", 0, 1)])
    read = read_spans([otlp.write(tmp_path / "a.jsonl", request), otlp.write(tmp_path / "b.jsonl", request)])
    assert len(read.spans) == 1
    assert read.duplicate_count == 1


def test_one_span_id_in_two_traces_is_two_spans_not_a_duplicate(tmp_path, otlp):
    """The duplicate check looks at span ids alone first (cheaper); a repeated span id under
    another trace id must still count as two spans, and a real duplicate beside it as one."""
    other = "ab" * 16
    request = otlp.request([otlp.span(1, "a", 0, 1), otlp.span(1, "b", 0, 1, trace=other)])
    read = read_spans([otlp.write(tmp_path / "a.jsonl", request)])
    assert (sorted(s.name for s in read.spans), read.duplicate_count) == (["a", "b"], 0)
    again = read_spans([tmp_path / "a.jsonl", otlp.write(tmp_path / "b.jsonl", request)])
    assert (sorted(s.name for s in again.spans), again.duplicate_count) == (["a", "b"], 2)


def test_bad_lines_and_spans_become_problems_with_file_and_line_and_good_ones_are_kept(tmp_path, otlp):
    good = otlp.request([otlp.span(1, "good", 0, 1)])
    no_span_id = otlp.span(2, "no-id", 0, 1)
    del no_span_id["spanId"]
    float_time = otlp.span(3, "float-time", 0, 1)
    float_time["startTimeUnixNano"] = 1.5
    list_time = otlp.span(4, "list-time", 0, 1)
    list_time["endTimeUnixNano"] = ["1"]
    truncated = json.dumps(otlp.request([otlp.span(5, "cut", 0, 1)]))[:40]
    path = otlp.write(
        tmp_path / "bad.jsonl",
        good,
        truncated,
        "this is not json",
        otlp.request([no_span_id, float_time, otlp.span(6, "also-good", 0, 1)]),
        otlp.request([list_time]),
        "[1, 2]",
        {"resourceSpans": "nope"},
    )
    read = read_spans([path])
    assert [s.name for s in read.spans] == ["good", "also-good"]
    where = [(p.file, p.line) for p in read.problems]
    assert where == [(str(path), n) for n in (2, 3, 4, 4, 5, 6, 7)]
    messages = [p.message for p in read.problems]
    assert messages[0].startswith("invalid JSON")
    assert messages[1].startswith("invalid JSON")
    assert messages[2] == "missing spanId"
    assert messages[3] == "startTimeUnixNano must be a non-negative integer or a string of one, got 1.5"
    assert messages[4] == 'endTimeUnixNano must be a non-negative integer or a string of one, got ["1"]'
    assert messages[5] == "expected a JSON object, got list"
    assert messages[6] == "no resourceSpans list (not an OTLP trace export?)"


def test_a_store_without_detail_has_no_attribute_event_or_link_columns_and_loses_nothing(tmp_path, otlp):
    """Without detail every span row stored its attributes, events and links as NULL, and DuckDB's
    insert paid for each of those columns all the same (~40 ms of CPU per column per 1M rows).
    A store without detail has no such columns now; its spans still read back with the attributes
    the report keeps, bad lines and times past int64 are still reported, and a store with detail
    keeps them."""
    far = otlp.span(2, "far.future", 0, 1)
    far["startTimeUnixNano"] = "99999999999999999999"
    kept = otlp.span(3, "kept", 0, 1, bucket="idle", iteration=4, ratio=0.5)
    path = otlp.write(tmp_path / "a.jsonl", "not json", otlp.request([otlp.span(1, "good", 0, 1), far, kept]))
    with TraceStore() as store:
        store.load([path])
        columns = [row[0] for row in store.rows("DESCRIBE spans") if row[0] != "rowid"]
        assert columns == list(store.stored_columns)
        assert not {"attrs", "events", "links"} & set(columns)
        assert [(p.line, p.message[:12]) for p in store.problems] == [(1, "invalid JSON")]
        (span,) = store.spans("s.name = 'kept'")
        assert (span.attributes, span.events, span.line) == ({"rl.bucket": "idle", "rl.iteration": 4, "lens.group": "test"}, (), 2)
        report = build_report(store)
    (bad,) = [v for v in report.violations if v.span_name == "far.future"]
    assert (bad.line, bad.reason) == (2, "start 99999999999999999999 ns is out of range; skipped")
    with TraceStore(detail=True) as store:
        store.load([path])
        assert {"attrs", "events", "links"} <= {row[0] for row in store.rows("DESCRIBE spans")}
        (span,) = store.spans("s.name = 'kept'")
        assert span.attributes["ratio"] == 0.5


def test_a_process_resource_is_stored_once_not_with_every_span(tmp_path, otlp, reader):
    """Every span row stored its process's nine resource columns (run, rank, host, ...), and
    DuckDB's insert paid for each of them with every span: ~1.4 s of the 3M reading's ~6.5 s of
    CPU. They are kept once per resource in ``resources`` now, each row names its own (``res``),
    and the view ``spans`` joins them: with either reader, 40 lines of two processes interleaved
    give one resource per process and batch, never a span without its process, and the same
    answers as before."""
    lines = []
    for i in range(40):  # rank 0 and rank 1 take turns, a line each (the file exporter's batches)
        rank = i % 2
        lines.append(otlp.request([otlp.span(3 * i + j + 1, "step", i, i + 1, iteration=i) for j in range(3)],
                                  service_name="trainer", nemo_run_id="r1", nv_dl_rank=rank,
                                  service_instance_id=f"r1-rank{rank}", process_pid=100 + rank))
    folder = tmp_path / "t"
    folder.mkdir()
    otlp.write(folder / "a.jsonl", *lines[:20])
    otlp.write(folder / "b.jsonl", *lines[20:])
    with TraceStore() as store:
        store.load([folder])
        rows, distinct = store.rows("SELECT count(*), count(DISTINCT res) FROM resources")[0]
        assert distinct == rows <= 2 * 2  # two processes in each file's batch, not one per line
        assert store.value("SELECT count(*) FROM span_rows") == store.span_count() == 120
        by_rank = store.rows("SELECT rank, rank_label, process, process_pid, run, count(*) FROM spans "
                             "GROUP BY ALL ORDER BY rank")
        assert by_rank == [(0, "rank 0", "r1-rank0", 100, "r1", 60), (1, "rank 1", "r1-rank1", 101, "r1", 60)]
        assert store.value("SELECT count(*) FROM sql_spans") == 0  # the SQL reader's rows were split


def test_wrong_id_types_are_problems_and_wrong_attribute_types_are_not_crashes(tmp_path, otlp):
    bad_attr = otlp.span(1, "a", 0, 1)
    bad_attr["attributes"] = [{"key": "rl.iteration", "value": {"intValue": "twelve"}}]
    bad_id = otlp.span(2, "b", 0, 1)
    bad_id["traceId"] = 12345
    short_id = otlp.span(3, "c", 0, 1)
    short_id["spanId"] = "abc"
    read = read_spans([otlp.write(tmp_path / "a.jsonl", otlp.request([bad_attr, bad_id, short_id]))])
    assert [(s.name, s.iteration) for s in read.spans] == [("a", None)]
    assert [p.message for p in read.problems] == [  # one line's problems in the order of their messages
        "spanId abc is neither 16 hex digits nor base64 of 8 bytes",
        "traceId 12345 is neither 32 hex digits nor base64 of 16 bytes",
    ]


def test_zstd_compressed_file_is_read_like_plain_text(tmp_path, otlp):
    """The Collector's file exporter compresses with zstd."""
    zstandard = pytest.importorskip("zstandard")
    text = json.dumps(otlp.request([otlp.span(1, "a", 0, 2), otlp.span(2, "b", 0, 1, 1)])) + "\n"
    path = tmp_path / "traces.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    read = read_spans([tmp_path])
    assert sorted(s.name for s in read.spans) == ["a", "b"] and read.problems == ()


def test_line_numbers_are_per_file_across_files_read_together(tmp_path, otlp):
    for name in ("a", "b"):
        otlp.write(tmp_path / f"{name}.jsonl", *[otlp.request([otlp.span(10 * ord(name) + n, f"{name}{n}", 0, 1)])
                                               for n in range(1, 4)], "broken")
    read = read_spans([tmp_path])
    assert sorted((Path(s.file).name, s.line, s.name) for s in read.spans) == [
        ("a.jsonl", 1, "a1"), ("a.jsonl", 2, "a2"), ("a.jsonl", 3, "a3"),
        ("b.jsonl", 1, "b1"), ("b.jsonl", 2, "b2"), ("b.jsonl", 3, "b3")]
    assert [(Path(p.file).name, p.line) for p in read.problems] == [("a.jsonl", 4), ("b.jsonl", 4)]


def test_a_metrics_export_in_the_folder_is_named_as_such(tmp_path, otlp):
    otlp.write(tmp_path / "t.jsonl", otlp.request([otlp.span(1, "a", 0, 1)]))
    (tmp_path / "m.jsonl").write_text(json.dumps({"resourceMetrics": []}) + "\n")
    read = read_spans([tmp_path])
    assert [(Path(p.file).name, p.line, p.message) for p in read.problems] == [
        ("m.jsonl", 1, "a metrics export, not traces")]


def test_missing_paths_and_corrupt_gzip_are_problems(tmp_path, otlp):
    corrupt = tmp_path / "broken.jsonl.gz"
    corrupt.write_bytes(gzip.compress(b'{"resourceSpans": []}\n' * 50)[:30])
    read = read_spans([tmp_path / "missing.jsonl", corrupt])
    assert read.spans == ()
    assert [(p.file, p.message) for p in read.problems][0] == (str(tmp_path / "missing.jsonl"),
                                                              "no such file or directory")
    assert read.problems[1].file == str(corrupt)
    assert read.problems[1].message.startswith("cannot read")


def test_a_truncated_gzip_keeps_the_spans_before_the_damage(tmp_path, otlp):
    """Regression: a .gz cut short (a killed writer) lost every span of the file."""
    lines = "".join(json.dumps(otlp.request([otlp.span(n, f"s{n}", 0, 1, text="x" * 2000 + str(n))])) + "\n"
                    for n in range(1, 200))
    data = gzip.compress(lines.encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    read = read_spans([path])
    assert 0 < len(read.spans) < 199
    assert [s.name for s in sorted(read.spans, key=lambda s: s.line)][:3] == ["s1", "s2", "s3"]
    assert any(p.message.startswith("cannot read the rest of the file") for p in read.problems)


def test_a_run_folder_with_metrics_and_logs_files_reads_only_the_traces(tmp_path, otlp):
    """Regression: every line of the file exporter's metrics-*.jsonl beside the traces was a problem."""
    run = tmp_path / "run"
    run.mkdir()
    otlp.write(run / "traces-rank0-pid1.jsonl", otlp.request([otlp.span(1, "a", 0, 1)]))
    (run / "metrics-rank0-pid1.jsonl").write_text(json.dumps({"resourceMetrics": []}) + "\n")
    (run / "logs-rank0-pid1.jsonl").write_text(json.dumps({"resourceLogs": []}) + "\n")
    read = read_spans([tmp_path])
    assert [s.name for s in read.spans] == ["a"] and read.problems == ()
    assert [Path(f).name for f in read.files] == ["traces-rank0-pid1.jsonl"]


def test_trace_files_named_before_and_after_the_process_tag_are_read_alike(tmp_path, otlp):
    """File names gained a process tag (issue #18: two containers' pid 1 shared one file):
    the old names, the new ones and a refused name's successor (-2) are all read (the reader
    takes any *.jsonl under the folder; it parses no file name)."""
    run = tmp_path / "job"
    run.mkdir()
    otlp.write(run / "traces-rank0-pid1.jsonl", otlp.request([otlp.span(1, "old", 0, 1)], nv_dl_rank=0,
                                                              service_instance_id="job-rank0-host-1"))
    otlp.write(run / "traces-rank1-pid1-1a2b3c4d.jsonl", otlp.request(
        [otlp.span(2, "new", 0, 1)], nv_dl_rank=1, service_instance_id="job-rank1-host-1-1a2b3c4d"))
    otlp.write(run / "traces-rank2-pid1-5e6f7a8b-2.jsonl", otlp.request(
        [otlp.span(3, "refused-then-next", 0, 1)], nv_dl_rank=2, service_instance_id="job-rank2-host-1-5e6f7a8b"))
    read = read_spans([tmp_path])
    assert sorted(s.name for s in read.spans) == ["new", "old", "refused-then-next"] and read.problems == ()
    assert len(read.files) == 3


def test_a_store_nobody_closed_leaves_no_database_behind():
    """Regression: a TraceStore that was not closed left its temporary database (hundreds of MB) in /tmp."""
    import gc
    import os

    from lens_report import TraceStore

    store = TraceStore()
    directory = store._dir
    assert os.path.isdir(directory)
    del store
    gc.collect()
    assert not os.path.exists(directory)


def test_files_read_by_concurrent_statements_keep_lines_problems_and_first_copies(tmp_path, otlp, monkeypatch,
                                                                                   sql_reader):
    """Batches of files are read by several statements at once (one per engine thread): line
    numbers stay per file, problems come in file order, a damaged file is salvaged by its own
    worker, and a span exported twice keeps its copy from the first file, as when read in one go."""
    monkeypatch.setattr(plan, "_BATCH_BYTES", 1)  # every file its own statement
    names = [f"r{n:02d}.jsonl" for n in range(12)]
    for n, name in enumerate(names):
        requests = [otlp.request([otlp.span(100 * n + k, f"{name}:{k}", 0, 1)]) for k in range(1, 4)]
        otlp.write(tmp_path / name, requests[0], "broken", *requests[1:], otlp.request([otlp.span(7, "shared", 0, 1)]))
    lines = "".join(json.dumps(otlp.request([otlp.span(5000 + k, f"gz:{k}", 0, 1, text="x" * 2000 + str(k))])) + "\n"
                    for k in range(1, 100))
    data = gzip.compress(lines.encode())
    (tmp_path / "r05b.jsonl.gz").write_bytes(data[: len(data) // 2])
    with TraceStore(detail=True, threads=2) as store:
        store.load([tmp_path])
        spans = list(store.spans())
        problems = list(store.problems)
        duplicates = store.duplicate_count
    files = sorted(str(p) for p in tmp_path.iterdir())
    for n, name in enumerate(names):
        assert [(s.line, s.name) for s in spans if Path(s.file).name == name and s.name != "shared"] == [
            (1, f"{name}:1"), (3, f"{name}:2"), (4, f"{name}:3")]
    (shared,) = [s for s in spans if s.name == "shared"]
    assert (Path(shared.file).name, shared.line, duplicates) == ("r00.jsonl", 5, len(names) - 1)
    salvaged = [s for s in spans if s.name.startswith("gz:")]
    assert 0 < len(salvaged) < 99 and [s.line for s in salvaged[:3]] == [1, 2, 3]
    assert [p.file for p in problems] == sorted((p.file for p in problems), key=files.index)
    assert [(Path(p.file).name, p.line) for p in problems if p.message.startswith("invalid JSON")] == [
        (name, 2) for name in names]
    assert any(Path(p.file).name == "r05b.jsonl.gz" and p.message.startswith("cannot read the rest")
               for p in problems)


def test_the_memory_plan_reads_with_one_statement_per_256_mb_and_two_for_small_files(tmp_path):
    """The default 256 MB budget: the engine reads within 200 MB and rolls up within 80 MB, one
    reading statement (its JSON buffers take ~115 MB for 5 MB files), two when every file is small."""
    from lens_report.plan import memory_plan

    assert memory_plan("256MB", 2) == MemoryPlan(200 * 10**6, 80 * 10**6, 1)
    assert memory_plan("1GB", 2).readers == 2 and memory_plan("1GB", 1).readers == 1
    assert memory_plan("64GiB", 4).readers == 4
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(b"{}\n" * 1000)
    large.write_bytes(b"{}\n" * 1_000_000)  # 3 MB
    gz = tmp_path / "small.jsonl.gz"
    gz.write_bytes(b"x" * 300_000)  # counted ten times over: 3 MB once expanded
    with TraceStore(threads=2) as store:
        assert [store._readers_for(files) for files in ([str(small)], [str(small), str(large)], [str(gz)])] == [2, 1, 1]
    with TraceStore(threads=1) as store:
        assert store._readers_for([str(small)]) == 1


def _rank_files(folder, otlp, files, spans):
    for f in range(files):
        batch = [otlp.span(f * spans + i + 1, f"s{i % 7}", i, i + 1, bucket="productive", iteration=i % 50)
                 for i in range(spans)]
        otlp.write(folder / f"r{f:02d}.jsonl", otlp.request(batch))


def _pool_after_each_emptying(monkeypatch, evict):
    """The engine's pool in bytes each time the store empties it (one file a statement); with
    ``evict`` False the store is asked to empty it but does not."""
    monkeypatch.setattr(trace_store, "_ROW_GROUP_SIZE", 2048)  # rows enough for whole row groups
    monkeypatch.setattr(trace_store, "_EVICT_TO", "128KB")
    monkeypatch.setattr(plan, "_BATCH_BYTES", 1)
    seen = []
    empty_pool = TraceStore._empty_pool

    def spy(self):
        if evict:
            empty_pool(self)
        with self._limit_lock:  # readers share the connection
            seen.append(self.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0])

    monkeypatch.setattr(TraceStore, "_empty_pool", spy)
    return seen


@pytest.mark.parametrize("evict", [True, False], ids=["emptied", "control-without-emptying"])
def test_reading_alone_empties_the_pool_after_each_statement(tmp_path, otlp, monkeypatch, evict, reader):
    """At 10M spans a single reading statement ran with the rows already read cached in DuckDB's
    pool, which sat at its limit and purged freed memory over and over (6.1M page faults, ~30 %
    of the CPU in the kernel). Each statement that reads alone is now followed by an eviction;
    the control shows the rows piling up without it. (The compiled reader's statements take
    3,000 spans here, so it also runs one a file.)"""
    _rank_files(tmp_path, otlp, 8, 3000)
    monkeypatch.setattr(trace_store, "_SCAN_SPANS", 3000)
    seen = _pool_after_each_emptying(monkeypatch, evict)
    with TraceStore(threads=1) as store:
        store.load([tmp_path])
        assert store._readers == 1 and sum(1 for _ in store.spans()) == 8 * 3000
    assert len(seen) == 8  # once after every statement
    if evict:
        # what stays: the eviction limit, and one block of the table of resources, whose few rows
        # a batch appends stay in memory until the database is checkpointed (they do not pile up)
        assert max(seen) <= 128 * 1024 + 256 * 1024
    else:
        assert seen[-1] > 4 * seen[0] > 0


def test_two_readers_never_empty_the_pool(tmp_path, otlp, monkeypatch, reader):
    """With two statements reading at once the pool is never emptied: one may be running."""
    _rank_files(tmp_path, otlp, 8, 300)  # small files: two readers at the default budget
    seen = _pool_after_each_emptying(monkeypatch, True)
    with TraceStore(threads=2) as store:
        store.load([tmp_path])
        assert store._readers == 2 and sum(1 for _ in store.spans()) == 8 * 300
    assert seen == []
