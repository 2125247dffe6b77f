"""The compiled reader (lens_report._scan) against the SQL reader: the same rows from the same files.

The compiled reader keeps only lines it reads exactly as DuckDB's JSON reader does and leaves any
other file to that reader; these tests write what the Collector and other exporters write (keys
in any order, values in their several spellings, whitespace, several resources a line) and what
they should not (escapes, non-ASCII text, bad ids, invalid JSON), and compare every stored column,
the loss records, the problems and the duplicates. Each test also checks which reader read which
file, so a case meant for the compiled reader cannot pass by falling back.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from lens_report import TraceStore, engine, ingest
from lens_report import store as trace_store
from report_helpers import Otlp, report_of



T0 = Otlp.T0
S = Otlp.S


def _store_rows(paths, monkeypatch, sql):
    """(spans, loss records, problems, duplicates, files the compiled reader read) of one reader."""
    if sql:
        monkeypatch.setenv("LENS_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("LENS_PURE_PYTHON", raising=False)
    with TraceStore() as store:
        store.load(paths)
        columns = ", ".join("s.line - f.first + 1" if c == "line" else f"s.{c}" for c in store.stored_columns)
        join = "s JOIN files f ON f.idx = s.file"
        spans = store.rows(f"SELECT {columns} FROM spans {join} ORDER BY s.file, s.line, s.span, s.name")
        loss = store.rows(f"SELECT {columns} FROM loss {join} ORDER BY s.file, s.line, s.span")
        problems = [(Path(p.file).name, p.line, p.message) for p in store.problems]
        compiled = {Path(f).name for f in store.compiled_files}
        return spans, loss, problems, store.duplicate_count, compiled


def _both(paths, monkeypatch):
    """The compiled reader's rows, after asserting the SQL reader's are the same; and the files it read."""
    *ours, compiled = _store_rows(paths, monkeypatch, sql=False)
    *theirs, none = _store_rows(paths, monkeypatch, sql=True)
    assert none == set()
    for name, a, b in zip(("spans", "loss", "problems", "duplicates"), ours, theirs):
        assert a == b, (name, [x for x in a if x not in b][:3], [x for x in b if x not in a][:3]) if isinstance(a, list) else (name, a, b)
    return ours, compiled


def _span(n, name="rl.grpo.step", start=0, end=1, parent=None, trace=Otlp.TRACE, **fields):
    span = {"traceId": trace, "spanId": Otlp.sid(n), "name": name, "kind": 1,
            "startTimeUnixNano": str(T0 + start * S), "endTimeUnixNano": str(T0 + end * S), "attributes": []}
    if parent is not None:
        span["parentSpanId"] = Otlp.sid(parent)
    span.update(fields)
    return span


def _line(spans, resource=None, **resource_attrs):
    resource = resource if resource is not None else {"attributes": Otlp.attrs(
        {"service.name": "trainer", "nemo.run.id": "run-a", "nv.dl.rank": 3, "process.pid": 77,
         "service.instance.id": "run-a-rank3", "host.name": "node1", **resource_attrs})}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def _write(path, *lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines),
                    encoding="utf-8")
    return path.name


def _attr(key, **value):
    return {"key": key, "value": value}


# ---- files the compiled reader reads --------------------------------------------------------------

def _read_cases(folder: Path) -> list[str]:
    """Files every line of which the compiled reader takes (one case each)."""
    names = []
    # keys in any order, the resource after the spans, fields nobody reads, nested and empty
    span = _span(1, "rl.grpo.job", 0, 20)
    reordered = {"events": [{"name": "e", "timeUnixNano": "1", "attributes": [_attr("x", stringValue="y")]}],
                 "links": [], "flags": 256, "droppedAttributesCount": 0, "traceState": "",
                 "attributes": [_attr("lens.group", stringValue="job"), _attr("lens.umbrella", boolValue=True)],
                 **{k: v for k, v in reversed(list(span.items())) if k != "attributes"}}
    line = {"resourceSpans": [{"scopeSpans": [{"spans": [reordered, _span(2, "rl.grpo.step", 1, 9, 1)],
                                               "scope": {"name": "t", "attributes": [], "version": "1"}}],
                               "schemaUrl": "https://x", "resource": {"droppedAttributesCount": 0,
                                                                      "attributes": Otlp.attrs({"nv.dl.rank": 5})}}],
            "extra": {"nested": [1, 2.5e3, None, True, {"a": []}]}}
    names.append(_write(folder / "reordered.jsonl", line))
    # whitespace inside a line, CRLF, blank and whitespace-only lines (not counted as lines)
    text = json.dumps(_line([_span(3, "rl.grpo.step", 0, 4)]), indent=None, separators=(" , ", " :  "))
    (folder / "whitespace.jsonl").write_bytes(
        ("\n \t\n" + text + "\r\n\r\n" + "  " + json.dumps(_line([_span(4, "rl.vllm.generate", 1, 2, 3)])) + "\t\n")
        .encode())
    names.append("whitespace.jsonl")
    # the spellings of values: kinds, statuses, ints as numbers, booleans as text, missing fields
    spans = [
        _span(10, "a", kind="SPAN_KIND_SERVER", status={"code": 2}),
        _span(11, "b", kind=3, status={"code": "STATUS_CODE_ERROR", "message": "boom"}),
        _span(12, "c", kind=None, status=None, attributes=[_attr("rl.iteration", intValue=7),
                                                          _attr("lens.umbrella", stringValue="true"),
                                                          _attr("thread.id", stringValue="worker-1")]),
        _span(13, "d", startTimeUnixNano=T0, endTimeUnixNano=T0 + S,
              attributes=[_attr("rl.iteration", intValue="-3"), _attr("lens.umbrella", boolValue=False),
                          _attr("rl.bucket", stringValue=""), _attr("thread.id", intValue=12345)]),
        _span(14, "e", startTimeUnixNano="0", endTimeUnixNano=None, parentSpanId=""),
        _span(15, "f", parentSpanId="0000000000000000", attributes=[_attr("rl.iteration", doubleValue=2.0)]),
        {k: v for k, v in _span(16).items() if k not in ("name", "kind", "endTimeUnixNano", "attributes")},
        _span(17, None, trace=Otlp.TRACE.upper(), spanId="00000000000000AB", parentSpanId="00000000000000aA"),
        _span(18, "g", attributes=[_attr("rl.iteration", intValue=None), _attr("rl.bucket", stringValue=None),
                                   {"key": None, "value": {"stringValue": "x"}}, {"value": {"intValue": "1"}},
                                   _attr("rl.efficiency.category", arrayValue={"values": []}), {"key": "z"},
                                   _attr("thread.name", stringValue="main", intValue="9")]),
        _span(19, "h", attributes=None, status={}),
    ]
    names.append(_write(folder / "values.jsonl", _line(spans), _line([_span(20, "i", status={"code": "Error"})])))
    # the first attribute of a key is the one read, whatever the later ones say
    first = _span(30, "rl.grpo.step", attributes=[_attr("rl.iteration", stringValue="x"),
                                                   _attr("rl.iteration", intValue="5"),
                                                   _attr("rl.bucket", stringValue="productive"),
                                                   _attr("rl.bucket", stringValue="idle")])
    resource = {"attributes": Otlp.attrs({"nv.dl.rank": "7"}) + Otlp.attrs({"nv.dl.rank": 8})}
    names.append(_write(folder / "first-wins.jsonl", _line([first], resource)))
    # Lens's loss record, several resources and scopes a line, resources without attributes
    loss = _span(40, "lens.telemetry.loss", attributes=[
        _attr("lens.spans.created", intValue="10"), _attr("lens.spans.dropped", intValue="2"),
        _attr("lens.spans.failed", intValue=0), _attr("lens.spans.unended", intValue="1"),
        _attr("lens.spans.truncated", intValue="3"), _attr("lens.telemetry.final", boolValue=True)])
    multi = {"resourceSpans": [
        {"resource": {"attributes": Otlp.attrs({"service.name": "a", "telemetry.distro.name": "lens"})},
         "scopeSpans": [{"spans": [loss]}, {"spans": [_span(41), _span(42)]}]},
        {"resource": None, "scopeSpans": [{"spans": [_span(43)]}]},
        {"scopeSpans": [{"spans": [_span(44)]}]},
        {"resource": {}, "scopeSpans": [{"spans": [_span(45)]}]},
        {"resource": {"attributes": Otlp.attrs({"host.name": "h", "process.pid": 9})},
         "scopeSpans": [{"spans": [_span(46)]}]},
    ]}
    names.append(_write(folder / "multi.jsonl", multi, multi))  # the second line: every span a duplicate
    return names


@pytest.mark.usefixtures("need_compiled")
def test_the_compiled_reader_reads_every_spelling_as_the_sql_reader(tmp_path, monkeypatch):
    """Keys in any order, whitespace and blank lines, CRLF, every spelling of kinds, statuses,
    integers and booleans, missing and null fields, the first of two attributes of a key, the loss
    record and several resources a line: the compiled reader reads each file, as SQL does."""
    names = _read_cases(tmp_path)
    (spans, loss, problems, duplicates), compiled = _both([tmp_path], monkeypatch)
    assert compiled == set(names)
    assert len(spans) == 22 and len(loss) == 1 and duplicates == 7 and problems == []


# ---- files it leaves to the SQL reader ------------------------------------------------------------

_LEFT = {
    "escaped-name": _line([_span(1, 'a "quoted" name')]),
    "non-ascii-name": _line([_span(1, "étape")]),
    "non-ascii-resource": _line([_span(1)], **{"service.name": "entraîneur"}),
    "escaped-key": '{"resourceSpans":[{"resource":{"attributes":[{"key":"rl.buck\\u0065t","value":{"stringValue":"idle"}}]},'
                   '"scopeSpans":[{"spans":[' + json.dumps(_span(1)) + "]}]}]}",
    "base64-ids": _line([_span(1, traceId="CvdlGRbNQ92ESOshHIAxnA==", spanId="AAAAAAAAAAE=")]),
    "short-id": _line([_span(1, spanId="01")]),
    "missing-trace": _line([{k: v for k, v in _span(1).items() if k != "traceId"}]),
    "time-text": _line([_span(1, startTimeUnixNano="soon")]),
    "time-past-int64": _line([_span(1, endTimeUnixNano="9999999999999999999")]),
    "time-fraction": _line([_span(1, startTimeUnixNano=1.5e18)]),
    "minus-zero": json.dumps(_line([_span(1)])).replace(
        '"attributes": []', '"attributes": [{"key": "rl.iteration", "value": {"intValue": -0}}]'),
    "exponent": json.dumps(_line([_span(1)])).replace('"kind": 1', '"kind": 1e0'),
    "big-int": json.dumps(_line([_span(1)])).replace('{"intValue": "77"}', '{"intValue": 12345678901234567890}'),
    "nested-kept": _line([_span(1, attributes=[_attr("rl.bucket", stringValue={"a": 1})])]),
    "no-resource-spans": {"resourceSpans": []},
    "no-scope-spans": {"resourceSpans": [{"resource": {}, "scopeSpans": []}]},
    "no-spans": {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": []}]}]},
    "not-otlp": {"hello": "world"},
    "invalid-json": '{"resourceSpans": [',
    "two-objects": json.dumps(_line([_span(1)])) + " {}",
    "value-not-object": _line([_span(1, attributes=[{"key": "rl.bucket", "value": "idle"}])]),
    "spans-not-list": {"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]},
    "duplicate-field": json.dumps(_line([_span(1)])).replace('"kind": 1', '"kind": 1, "kind": 2'),
    # what DuckDB's JSON reader accepts beyond JSON (its spans are read there, the file is its)
    "nan-skipped": json.dumps(_line([_span(1)])).replace('"kind": 1', '"kind": 1, "x": NaN'),
    "trailing-comma": json.dumps(_line([_span(1)])).replace('"kind": 1', '"kind": 1, "x": [1, ]'),
    "nested-past-64": json.dumps(_line([_span(1)])).replace('"kind": 1', '"kind": 1, "x": ' + "[" * 80 + "]" * 80),
}


@pytest.mark.usefixtures("need_compiled")
def test_a_file_the_compiled_reader_cannot_read_as_sql_does_is_read_by_sql(tmp_path, monkeypatch):
    """Each way a line can differ (escapes, non-ASCII text, base64 or bad ids, times that are not
    int64, fractions and exponents where text is kept, lines without spans, invalid JSON, a field
    written twice) sends its whole file, good lines before and after with it, to the SQL reader:
    the same spans, problems and line numbers."""
    good = _line([_span(100, "rl.grpo.step", 0, 2)])
    for name, bad in _LEFT.items():
        _write(tmp_path / f"{name}.jsonl", good, bad, good)
    _write(tmp_path / "fine.jsonl", good, good)
    _write(tmp_path / "empty.jsonl")
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    (spans, _, problems, _), compiled = _both([tmp_path], monkeypatch)
    assert compiled == {"fine.jsonl"}
    assert problems and spans  # (every file holds the same good span: one row, the rest duplicates)


@pytest.mark.usefixtures("need_compiled")
def test_a_string_is_read_to_its_first_special_byte_wherever_that_falls(tmp_path, monkeypatch):
    """The reader scans a string's plain bytes 16 at a time: a quote escape, another escape, a
    non-ASCII letter or a raw control character at any offset of a long name (inside a block, at its
    first or last byte, in the bytes after the last whole block) is found, and its file is left to
    the SQL reader; a plain name of any length is read by the compiled reader, to its last byte."""
    plain = []
    for length in range(0, 41):
        name = "".join(chr(ord("a") + i % 26) for i in range(length))
        plain.append(_write(tmp_path / f"plain-{length:02}.jsonl", _line([_span(1 + length, name)])))
    for offset in range(0, 40):
        for k, (tag, special) in enumerate((("quote", '\\"'), ("escape", "\\n"), ("utf8", "é"), ("control", "\t"))):
            name = "x" * offset + "@" + "y" * (40 - offset)
            text = json.dumps(_line([_span(100 + 50 * k + offset, "NAME")]), ensure_ascii=False)
            _write(tmp_path / f"{tag}-{offset:02}.jsonl", text.replace("NAME", name.replace("@", special)))
    (spans, _, problems, _), compiled = _both([tmp_path], monkeypatch)
    assert compiled == set(plain)
    assert len(spans) == 41 + 3 * 40 and len(problems) == 40  # a raw tab in a string: invalid JSON


@pytest.mark.usefixtures("need_compiled")
def test_a_file_left_after_part_of_it_was_inserted_keeps_no_row_twice(tmp_path, monkeypatch):
    """A file whose bad line comes after statements already inserted its first spans (the compiled
    reader inserts every few spans here): those rows are removed and the SQL reader reads the
    file; the files read with it, before and after, keep theirs exactly once."""
    monkeypatch.setattr(trace_store, "_SCAN_SPANS", 7)
    lines = [_line([_span(1000 + 3 * i + k, "x", i, i + 1) for k in range(3)]) for i in range(20)]
    _write(tmp_path / "a-good.jsonl", *lines)
    _write(tmp_path / "b-late-bad.jsonl", *lines, _LEFT["escaped-name"], *lines[:2])
    _write(tmp_path / "c-good.jsonl", *lines[5:])
    (spans, _, problems, duplicates), compiled = _both([tmp_path], monkeypatch)
    assert compiled == {"a-good.jsonl", "c-good.jsonl"}
    assert len(spans) + duplicates == 60 + 67 + 45


@pytest.mark.usefixtures("need_compiled")
def test_a_file_left_after_its_columns_outgrew_their_first_buffers_takes_its_rows_back(tmp_path, monkeypatch):
    """The compiled reader's columns grow as it reads (from 64 KiB each): a file that turns out to
    be the SQL reader's after ten thousand spans is cut back to where it began, texts and all, and
    the file after it in the same statement is read whole."""
    lines = [_line([_span(10_000 + 50 * i + k, "rl.vllm.generate", i, i + 1) for k in range(50)]) for i in range(200)]
    _write(tmp_path / "a-good.jsonl", *lines[:10])
    _write(tmp_path / "b-bad-at-the-end.jsonl", *lines, _LEFT["non-ascii-name"])
    _write(tmp_path / "c-good.jsonl", *lines[50:60])
    (spans, _, _, duplicates), compiled = _both([tmp_path], monkeypatch)
    assert compiled == {"a-good.jsonl", "c-good.jsonl"}
    assert len(spans) + duplicates == 500 + 10_001 + 500


@pytest.mark.usefixtures("need_compiled")
def test_a_full_sink_ends_a_statement_and_a_later_bad_line_takes_those_rows_back(tmp_path, monkeypatch):
    """The compiled reader holds at most ``_SCAN_HELD`` bytes of columns for one statement (1 MiB
    here: a few thousand spans): a file larger than that is inserted over several statements, and
    one whose bad line comes after some of them has those rows deleted and is read by SQL."""
    monkeypatch.setattr(trace_store, "_SCAN_HELD", 1 << 20)
    statements = []
    insert = TraceStore._insert_scanned
    monkeypatch.setattr(TraceStore, "_insert_scanned",
                        lambda self, cursor, sink: statements.append(sink.spans) or insert(self, cursor, sink))
    lines = [_line([_span(10_000 + 50 * i + k, "rl.vllm.generate", i, i + 1) for k in range(50)]) for i in range(300)]
    _write(tmp_path / "a-good.jsonl", *lines)
    _write(tmp_path / "b-bad-at-the-end.jsonl", *lines[:250], _LEFT["non-ascii-name"])
    _write(tmp_path / "c-good.jsonl", *lines[100:])
    (spans, _, _, duplicates), compiled = _both([tmp_path], monkeypatch)
    assert compiled == {"a-good.jsonl", "c-good.jsonl"}
    assert len(spans) + duplicates == 15_000 + 12_501 + 10_000
    assert len(statements) >= 4 and max(statements) < trace_store._SCAN_SPANS  # the bytes ended them, not the spans


def _sink_and_scanner(path, file_index=0):
    scan = engine.compiled_reader()
    sink = scan.ArrowSink(*ingest.SCAN_FIELD_COLUMNS)
    return sink, scan.SpanScanner(str(path), file_index, 1 << 24, ingest.SCAN_SPAN_FIELDS, ingest.SCAN_RESOURCE_FIELDS)


@pytest.mark.usefixtures("need_compiled")
def test_a_batch_is_valid_arrow_and_outlives_its_sink(tmp_path):
    """The columns a sink hands over are what the Arrow C data interface says (pyarrow, another
    reader of that interface, validates every buffer), can be scanned again and again, and stay
    readable after the sink is closed and gone: DuckDB asks for the stream more than once."""
    pa = pytest.importorskip("pyarrow")
    duckdb = pytest.importorskip("duckdb")
    spans = [_span(1, "rl.grpo.step", 0, 9, attributes=[_attr("rl.iteration", intValue=4)]),
             _span(2, "", 1, 2, 1, attributes=[_attr("rl.bucket", stringValue="productive")]),
             _span(3, None, 2, 3, 1, kind=None, startTimeUnixNano=None, status={"code": 2})]
    path = tmp_path / "run.jsonl"
    _write(path, *[_line(spans)] * 3)
    sink, scanner = _sink_and_scanner(path, 5)
    assert scanner.read(sink, 1000) == engine.compiled_reader().DONE
    scanner.close()
    batch, resources = sink.take()
    assert (batch.rows, resources.rows, sink.spans) == (9, 3, 0)
    sink.close()
    del sink
    table = pa.table(batch)
    table.validate(full=True)
    assert table.column("name").to_pylist() == ["rl.grpo.step", "", None] * 3
    assert table.column("st").to_pylist()[:3] == [T0, T0 + S, None]
    assert table.column("parent_id").to_pylist()[:3] == [None, 1, 1]
    assert table.column("status_text").to_pylist()[:3] == [None, None, "2"]
    assert set(table.column("file").to_pylist()) == {5}
    pa.table(resources).validate(full=True)
    con = duckdb.connect()
    con.register("batch", batch)
    first = con.execute("SELECT * FROM batch ORDER BY o, span_id").fetchall()
    assert con.execute("SELECT * FROM batch ORDER BY o, span_id").fetchall() == first
    assert [row[7] for row in first] == ["rl.grpo.step", "", None] * 3


@pytest.mark.usefixtures("need_compiled")
def test_a_rewound_sink_hands_over_only_the_rows_before_its_mark(tmp_path):
    """``rewind`` takes back rows, texts and NULLs with them, so what a file that fell back had
    written is gone; what is written after it lands where the taken-back rows were."""
    pa = pytest.importorskip("pyarrow")
    keep = _write(tmp_path / "keep.jsonl", _line([_span(1, "kept", attributes=[_attr("thread.name", stringValue="a")])]))
    drop = _write(tmp_path / "drop.jsonl", *[_line([_span(100 + i, "dropped-" * 50, attributes=[
        _attr("rl.bucket", stringValue="x" * 300)])]) for i in range(2000)])
    then = _write(tmp_path / "then.jsonl", _line([_span(2, "after", attributes=[_attr("thread.name", stringValue="b"),
                                                                               _attr("rl.bucket", stringValue="y")])]))
    sink, scanner = _sink_and_scanner(tmp_path / keep)
    scanner.read(sink, 10**6)
    mark = sink.mark()
    for name in (drop, then):
        if name == then:
            sink.rewind(mark)
        _, scanner = _sink_and_scanner(tmp_path / name)
        scanner.read(sink, 10**6)
    batch, resources = sink.take()
    table = pa.table(batch)
    table.validate(full=True)
    assert table.column("name").to_pylist() == ["kept", "after"]
    fields = {key: table.column(f"a{i}").to_pylist() for i, (key, field) in enumerate(ingest.SCAN_SPAN_FIELDS)
              if field == 0}
    assert (fields["thread.name"], fields["rl.bucket"]) == (["a", "b"], [None, "y"])
    assert pa.table(resources).num_rows == 2
    with pytest.raises(ValueError, match="not one of this sink's"):
        sink.rewind(mark)  # (the sink is empty again: that mark is past its end)


@pytest.mark.usefixtures("need_compiled")
def test_a_sink_refuses_what_it_cannot_hold_with_what_is_allowed():
    """A size past int32 offsets, a column name twice, a scanner reading other fields, a closed
    sink: each refused with what is allowed, not written past a buffer."""
    scan = engine.compiled_reader()
    with pytest.raises(ValueError, match="1 MiB to 1 GiB"):
        scan.ArrowSink(["a0"], [], 1000)
    with pytest.raises(ValueError, match="given twice"):
        scan.ArrowSink(["name"], [])
    sink = scan.ArrowSink(["a0"], ["run"])
    scanner = scan.SpanScanner(__file__, 0, 1 << 20, ingest.SCAN_SPAN_FIELDS, ingest.SCAN_RESOURCE_FIELDS)
    with pytest.raises(ValueError, match="the sink holds 1 span and 1 resource fields"):
        scanner.read(sink, 10)
    scanner.close()
    sink.close()
    with pytest.raises(ValueError, match="closed"):
        sink.take()


@pytest.mark.usefixtures("need_compiled")
def test_the_compiled_reader_needs_no_pyarrow(tmp_path):
    """DuckDB scans the compiled reader's columns through the Arrow PyCapsule interface, which
    the module implements itself: with pyarrow impossible to import, the files are still read by
    the compiled reader, every span of them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    spans = write_run(tmp_path / "run", 3, 10)
    code = f"""
import sys
sys.modules["pyarrow"] = None  # import pyarrow now raises ImportError
from lens_report import TraceStore
with TraceStore() as store:
    store.load([{str(tmp_path / "run")!r}])
    print(len(store.compiled_files), len(store.files), store.span_count() + store.value("SELECT count(*) FROM loss"))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    compiled, files, count = map(int, out.stdout.split())
    assert compiled == files == 3 and count == spans


@pytest.mark.usefixtures("need_compiled")
def test_a_synthetic_run_reports_the_same_with_either_reader(tmp_path):
    """The benchmark's synthetic run (every RL phase, loss records, 6 ranks x 40 steps): the
    whole report, figures and files, is the same with the compiled and the SQL reader."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    spans = write_run(tmp_path / "run", 6, 40)
    report = report_of(tmp_path / "run").to_json()  # asserts the SQL reader's report is equal
    assert report["spans"] == spans and report["problems"] == [] and len(report["steps"]) == 40


_BYTES = {  # what DuckDB's JSON reader refuses in any string, kept or skipped (UTF-8 it must validate)
    "bad-byte": b"a\xff b",
    "overlong": b"\xc0\xaf",
    "cut-sequence": b"\xc3",
    "encoded-surrogate": b"\xed\xa0\x80",
    "past-u10ffff": b"\xf4\x90\x80\x80",
    "lone-escape": b"\\ud800",
    "low-escape-first": b"\\udc00\\ud800",
}


@pytest.mark.usefixtures("need_compiled")
def test_invalid_unicode_in_a_string_it_skips_sends_the_file_to_sql(tmp_path, monkeypatch):
    """Regression: the compiled reader skipped the strings it does not keep without checking them,
    so a line DuckDB's JSON reader refuses (invalid UTF-8, a lone surrogate) gave its spans there
    and a problem in the SQL reader. Valid UTF-8 and surrogate pairs in such strings are read."""
    good = json.dumps(_line([_span(1, attributes=[_attr("note", stringValue="XX")])])).encode()
    for name, text in _BYTES.items():
        (tmp_path / f"{name}.jsonl").write_bytes(good.replace(b"XX", b"ok") + b"\n" + good.replace(b"XX", text) + b"\n")
    (tmp_path / "fine.jsonl").write_bytes(good.replace(b"XX", "é ✓ 𝄞".encode()) + b"\n"
                                          + good.replace(b"XX", b"\\ud834\\udd1e \\u00e9") + b"\n")
    (spans, _, problems, _), compiled = _both([tmp_path], monkeypatch)
    assert compiled == {"fine.jsonl"}
    assert sorted(name for name, line, _ in problems if line == 2) == sorted(f"{n}.jsonl" for n in _BYTES)


@pytest.mark.parametrize("text", [b"\\ud800", b"\xed\xa0\x80"], ids=["escaped", "encoded"])
def test_a_line_with_a_lone_surrogate_is_a_problem_not_lost_silently(tmp_path, reader, text):
    """Regression: a line whose string held a lone surrogate (``\\ud800`` without its pair) was
    refused by DuckDB's JSON reader, and Python's json, which accepts it, then found a valid
    export: its spans vanished with no problem and no count. It is now a problem naming them."""
    good = json.dumps(_line([_span(1), _span(2, parent=1)])).encode()
    bad = json.dumps(_line([_span(3, "XX"), _span(4)])).encode().replace(b"XX", text)
    (tmp_path / "run.jsonl").write_bytes(b"\n".join([good, bad, good.replace(b'"0000000000000002"', b'"0000000000000005"')]) + b"\n")
    with TraceStore() as store:
        store.load([tmp_path])
        assert store.span_count() == 3
        assert [(p.line, p.message) for p in store.problems] == [
            (2, "2 spans not read: a string holds a lone surrogate (U+D800-U+DFFF without its pair, escaped or "
                "encoded), which the engine's JSON reader refuses")]


# ---- generated lines ------------------------------------------------------------------------------

def _random_value(rng, clean=False):
    """Any of the spellings a field's value can take, good and bad (``clean``: only those the
    compiled reader keeps: no fraction, nesting, escape or non-ASCII text)."""
    pick = rng.choice([0, 1, 2, 8, 9, 10, 11, 12, 13]) if clean else rng.randrange(14)
    if clean and pick == 2:
        return rng.randrange(-5, 10**rng.randrange(1, 19))
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.randrange(-5, 10**rng.randrange(1, 21))
    if pick == 3:
        return rng.choice([1.5, -0.0, 1e20, 2.0])
    if pick == 4:
        return str(rng.randrange(0, 10**rng.randrange(1, 21)))
    if pick == 5:
        return rng.choice(["", "x", "a b", "a,b", "é", "\u2713", "tab\there", 'q"uote', "back\\slash", "\ud834\udd1e"])
    if pick == 6:
        return {"a": [1, {"b": None}]}
    if pick == 7:
        return [rng.randrange(3) for _ in range(rng.randrange(3))]
    if pick == 8:
        return f"{rng.getrandbits(64):016x}"
    if pick == 9:
        return f"{rng.getrandbits(128):032X}"
    if pick == 10:
        return rng.choice(["SPAN_KIND_CLIENT", "STATUS_CODE_ERROR", "Error", "2", "1"])
    return rng.choice(["rl.grpo.step", "productive", "overhead", "idle", "job", "true", "false", "7", "-3"])


_KEYS = ["rl.bucket", "rl.iteration", "lens.group", "lens.umbrella", "rl.efficiency.category", "thread.id",
         "thread.name", "lens.span.truncated", "lens.spans.created", "lens.telemetry.final", "other"]


def _random_attributes(rng, clean=False):
    attributes = []
    for _ in range(rng.randrange(6)):
        value = {rng.choice(["stringValue", "intValue", "boolValue", "doubleValue"]): _random_value(rng, clean)
                 for _ in range(rng.choice([1, 1, 1, 2]))}
        attributes.append({"key": rng.choice(_KEYS), "value": value if rng.random() > 0.05 else None})
    return attributes


def _random_span(rng, n, clean):
    span = _span(n, rng.choice(["rl.grpo.step", "rl.vllm.generate", "lens.telemetry.loss", "x"]), n, n + 2,
                 parent=n - 1 if n % 3 else None)
    span["attributes"] = _random_attributes(rng, clean)
    for field in ("name", "kind", "status") if clean else ("name", "kind", "startTimeUnixNano", "endTimeUnixNano",
                                                           "parentSpanId", "status"):
        roll = rng.random()
        if roll < 0.06:
            span[field] = _random_value(rng, clean) if field != "status" or not clean else None
        elif roll < 0.09:
            span.pop(field, None)
    if rng.random() < 0.2:
        span["status"] = {"code": rng.choice([0, 1, 2, "STATUS_CODE_ERROR", None])}
    if rng.random() < 0.03 and not clean:
        span["spanId"] = _random_value(rng)
    keys = list(span)
    rng.shuffle(keys)
    return {key: span[key] for key in keys}


def _random_file(rng, path, start):
    lines = []
    clean = rng.random() < 0.5  # half the files hold only what the compiled reader keeps
    for i in range(rng.randrange(1, 6)):
        spans = [_random_span(rng, start + 10 * i + k, clean) for k in range(rng.randrange(1, 5))]
        resource = {"attributes": _random_attributes(rng, clean) + Otlp.attrs(
            {rng.choice(["nv.dl.rank", "process.pid", "host.name", "service.instance.id", "nemo.run.id"]):
             _random_value(rng, clean) if rng.random() < 0.3 else "run-a-rank1"})}
        text = json.dumps(_line(spans, resource), ensure_ascii=rng.random() < 0.5,
                          separators=rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")]))
        lines.append(text)
    path.write_text("\n".join(lines) + rng.choice(["\n", "", "\n\n"]), encoding="utf-8", errors="surrogatepass")


@pytest.mark.usefixtures("need_compiled")
@pytest.mark.parametrize("seed", [*range(8), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(8, 108))])
def test_generated_files_read_the_same_with_either_reader(tmp_path, monkeypatch, seed):
    """Forty generated files of random spellings (values of every JSON type in every field, keys
    shuffled, escapes and non-ASCII text, separators): the same rows, problems and duplicates
    with both readers, whichever files the compiled reader keeps (half the files hold only what
    it keeps; 20-26 of 40 a seed are its). Eight seeds by default, a hundred more under ``slow``."""
    rng = random.Random(seed)
    for i in range(40):
        _random_file(rng, tmp_path / f"f{i:02d}.jsonl", 1000 * i)
    (spans, _, _, _), compiled = _both([tmp_path], monkeypatch)
    assert spans and compiled  # (each seed has files of both kinds: the comparison above is the test)
