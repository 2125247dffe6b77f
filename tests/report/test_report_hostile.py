"""Hostile and oversized report input: lines past the cap skipped with a problem, a decompression bomb bounded,
terminal escapes made visible, every bad argument one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from report_helpers import Otlp, report_of
from lens_core.exitcodes import EXIT_NO_DATA, EXIT_OK, EXIT_USAGE
from lens_report import TraceStore
from lens_report.cli import main
from lens_report.plan import EXPORTER_MAX_LINE, max_line_bytes

REPO = Path(__file__).resolve().parents[2]


def _line_of(size: int, n: int, rank: int = 0) -> str:
    """One export line of about ``size`` bytes: a span whose attribute value fills it."""
    head = Otlp.request([Otlp.span(n, "big", 0, 1, note="")], nv_dl_rank=rank)
    text = json.dumps(head)
    return text.replace('"stringValue": ""', '"stringValue": "' + "x" * (size - len(text)) + '"')


def test_the_line_cap_follows_the_memory_limit_but_never_drops_below_what_the_exporter_writes():
    assert max_line_bytes("1GB", 2) == int(1e9 / 16)
    assert max_line_bytes("256MB", 4) == EXPORTER_MAX_LINE + 2**20
    assert max_line_bytes("64GiB", 4) == 64 * 2**20


def test_a_line_as_long_as_the_exporter_writes_is_read_even_at_the_smallest_memory_limit(tmp_path):
    """Regression: a batch with a 10 MB attribute became a 44 MB line and the report read 0 of its
    spans. The exporter now keeps lines within EXPORTER_MAX_LINE; the report reads all of those."""
    path = tmp_path / "big.jsonl"
    path.write_text(_line_of(EXPORTER_MAX_LINE - 100, 1) + "\n" + json.dumps(Otlp.request([Otlp.span(2, "small", 1, 2)]))
                    + "\n")
    assert os.path.getsize(path) > EXPORTER_MAX_LINE - 200
    with TraceStore(memory_limit="256MB") as store:
        store.load([path])
        assert (store.span_count(), store.problems) == (2, [])


def test_a_line_past_the_cap_is_skipped_with_a_problem_and_the_rest_of_the_file_is_read(tmp_path):
    """Regression: one line past DuckDB's object size cost every span of its file (0 read, exit 3)."""
    good = [json.dumps(Otlp.request([Otlp.span(n, f"s{n}", n, n + 1)])) for n in (1, 2, 3)]
    path = tmp_path / "mixed.jsonl"
    cap = max_line_bytes("256MB", 2)
    path.write_text("\n".join([good[0], _line_of(3 * cap, 9), good[1], "", good[2]]) + "\n")
    with TraceStore(memory_limit="256MB", threads=2) as store:
        store.load([path])
        assert store.span_count() == 3
        assert [(p.line, p.message.split(",")[0]) for p in store.problems] == [
            (2, f"a line of {3 * cap / 2**20:,.1f} MiB")]
        assert "skipped" in store.problems[0].message


@pytest.mark.slow
def test_a_decompression_bomb_stops_with_one_line_exit_3_and_memory_within_the_limit(tmp_path):
    """Regression: a 100 KB .zst expanding to one 3 GB line took the report to 6.4 GB RSS under
    --memory-limit 256MB. The same mechanism, smaller: 12 KB expanding to one 300 MB line."""
    zstandard = pytest.importorskip("zstandard")
    bomb = tmp_path / "bomb.jsonl.zst"
    with open(bomb, "wb") as out, zstandard.ZstdCompressor().stream_writer(out) as writer:
        writer.write(b'{"resourceSpans":[{"resource":{"attributes":[{"key":"x","value":{"stringValue":"')
        for _ in range(300):
            writer.write(b"A" * 2**20)
        writer.write(b'"}}]}}]}\n')
    assert bomb.stat().st_size < 100_000
    # a fresh parent whose only child is the report: its children's peak RSS is the report's
    measure = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "lens_report", str(bomb),
                           "--memory-limit", "256MB"], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    *lines, rss_kb = proc.stderr.splitlines()
    rss_mb = int(rss_kb) / 1024
    proc.stderr = "\n".join(lines)
    assert proc.returncode == EXIT_NO_DATA, proc.stderr
    assert proc.stderr.splitlines() == [f"lens report: no spans read: {bomb}:1: a line of 300.0 MiB, past the 17 MiB "
                                        "the report reads (more memory with --memory-limit reads longer lines): skipped"]
    # never held whole: below the limit and the 300 MB line (before the fix: several times the line)
    assert rss_mb < 256, rss_mb


def test_terminal_control_characters_from_the_input_are_escaped_in_text_output(tmp_path, capsys):
    """Regression: span names, run ids and file names with terminal escapes were printed raw."""
    evil = "\x1b]0;owned\x07\x1b[2J"
    path = tmp_path / f"trace{evil}.jsonl"
    path.write_text(json.dumps(Otlp.request([Otlp.span(1, f"step{evil}", 0, 1, iteration=1),
                                             Otlp.span(2, f"work{evil}", 0, 1, 1, bucket="bogus", iteration=1)],
                                            nemo_run_id=f"run{evil}")) + "\nnot json\n")
    assert main([str(path)]) == EXIT_OK
    streams = capsys.readouterr()
    assert "\x1b" not in streams.out and "\x07" not in streams.out
    assert "work\\x1b]0;owned\\x07\\x1b[2J" in streams.out  # visible, not acted on
    assert "trace\\x1b]0;owned" in streams.out  # the file name in the problem line
    assert main([str(path), "--run", "nope"]) == EXIT_USAGE
    streams = capsys.readouterr()
    assert "\x1b" not in streams.out + streams.err and "run\\x1b" in streams.out


@pytest.mark.parametrize("args", [
    ["--top", "99999999999999999999"], ["--top", "-1"], ["--max-violations", "1e9"], ["--step", "0-99999999999"],
    ["--ranks", "x"], ["--memory-limit", "10KB"], ["--step-pattern", "("], ["--bogus"],
])
def test_every_bad_argument_is_one_line_and_exit_2(two_step_file, capsys, args):
    """Regression: --top 99999999999999999999 exited 1 with a DuckDB exception."""
    with pytest.raises(SystemExit) as stop:
        main([str(two_step_file), *args])
    assert stop.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("lens report: ") and "(see lens report --help)" in err


def test_a_selection_that_matches_nothing_is_exit_2_naming_what_exists(tmp_path, capsys):
    """Regression: --step 99 drew nothing and exited 0."""
    lines = [Otlp.request([Otlp.span(10 * r + s, "rl.grpo.step", s * 10, s * 10 + 5, iteration=s, trace=f"{r + 1:032x}")
                           for s in (1, 2, 3)], nv_dl_rank=r, nemo_run_id="sel") for r in range(4)]
    path = Otlp.write(tmp_path / "t.jsonl", *lines)
    assert main([str(path), "--step", "99"]) == EXIT_USAGE
    assert capsys.readouterr().err == "lens report: --step 99 matches no step of run 'sel'; its steps: 1-3\n"
    assert main([str(path), "--ranks", "7-9", "--html", str(tmp_path / "p.html")]) == EXIT_USAGE
    assert capsys.readouterr().err == "lens report: --ranks 7-9 matches no rank of run 'sel'; its ranks: 0-3\n"
    assert not (tmp_path / "p.html").exists()
    assert main([str(path), "--step", "3-5", "--ranks", "3,4"]) == EXIT_OK  # part of it exists: a note
    err = capsys.readouterr().err.splitlines()
    assert err == ["lens report: no step 4-5 in the run; drawing steps 3", "lens report: no rank 4 in the run; showing ranks 3"]


def test_files_that_need_more_memory_than_the_plan_are_read_with_more_not_lost(tmp_path, sql_reader):
    """Regression: at the 256 MB default (the engine reads within 200 MB) a batch of 16 MB rank
    files ran DuckDB's JSON reader out of memory, and 8 of 10 files became 'cannot read file: Out
    of Memory Error' problems. A batch that runs out of memory is read again with twice the limit
    (up to 4x the plan's); here a 120 MB plan (64 MB to read) meets ~110 MB of reader buffers."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    spans = write_run(tmp_path / "run", 2, 500)
    with TraceStore(memory_limit="120MB", threads=1) as store:
        store.load([tmp_path / "run"])
        assert (store.span_count(), store.problems) == (spans, [])  # every span, no problem
        assert store.read_limit_raised and store.read_limit > store.plan.read_bytes
        # the rollup goes back to the plan's limit
        limit = store.value("SELECT current_setting('memory_limit')")
        assert limit == f"{store.plan.rollup_bytes / 2**20:.1f} MiB"


def test_a_rollup_statement_that_runs_out_of_memory_runs_again_with_more(tmp_path, sql_reader):
    """Regression: 10M spans under the default 256 MB budget (the rollup's engine within 100 MB)
    ended 'the report engine failed: OutOfMemoryException' (exit 1): one of the rollup's operators
    could not spill. A statement that runs out of memory now runs again with twice the limit (up
    to 8x the plan's); here a 60 MB plan (15 MB to roll up) meets the same on 40k spans, and the
    report equals the one made with memory to spare. (That the retry happens relies on DuckDB 2.0
    failing such a statement at 15 MB; one that spilled it would fail only the raised-limit check.)"""
    run = _synthetic_run(tmp_path, 4, 500)
    (tight, store), (spare, _) = _report_at(run, "60MB"), _report_at(run, "1GB")
    assert store.rollup_limit_raised and store.read_limit_raised
    assert tight == spare


def test_a_file_too_large_to_read_whole_at_the_cap_is_read_in_small_pieces(tmp_path, sql_reader):
    """Regression: under a 50 MB budget (100 MB at the reading limit's cap) every 5.5 MB rank file
    was lost, each with "a line of this file needs more memory than --memory-limit gives" though no
    line is long: DuckDB's JSON reader needs ~60 MB plus ~11 MB per MB of the file it reads, and
    the file was retried whole, then salvaged whole. (At 60 MB the cap is ~120 MB and the same
    read failed now and then: the flaky rollup test above.) Such a file is now read again in
    ~1 MB pieces, and the report equals the one made with memory to spare."""
    run = _synthetic_run(tmp_path, 2, 500)
    (tight, store), (spare, _) = _report_at(run, "50MB"), _report_at(run, "1GB")
    assert store.problems == [] and store.read_limit_raised
    assert tight == spare


def _synthetic_run(tmp_path: Path, ranks: int, steps: int) -> Path:
    """A directory of trace_synth's rank files (the benchmark's run)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    write_run(tmp_path / "run", ranks, steps)
    return tmp_path / "run"


def _report_at(run: Path, limit: str) -> tuple[dict, TraceStore]:
    """The JSON report of ``run`` read and rolled up under ``limit`` (2 threads), and the store that made it."""
    from lens_report.rollup import build_report

    with TraceStore(memory_limit=limit, threads=2) as store:
        store.load([run])
        return build_report(store).to_json(), store


def test_the_steps_join_in_parts_and_rank_steps_in_slices_give_the_same_report(tmp_path, monkeypatch):
    """Regression: at 10M spans under the default budget a join as long as the run held 200 MB,
    twice the rollup's plan, and reading the 500,000 (rank, step) figures in one sorted result
    added ~60 MB more: peak RSS 370 MB. A join that would not fit now runs in parts of ids
    (:meth:`TraceStore.join_parts`: the parent join, by span id, and the steps join, by anchor;
    the step sums read ``anc`` alone) and the figures are read a slice of steps at a time; with
    3 parts and slices of 7 rows the report is the same."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    from lens_report import rollup
    from lens_report.plan import STEP_ROW_BYTES
    from lens_report.rollup import build_report

    write_run(tmp_path / "run", 3, 40)
    reports = []
    with TraceStore(threads=2) as store:
        store.load([tmp_path / "run"])
        assert store.join_parts(120, STEP_ROW_BYTES) == 1  # 3 ranks x 40 steps: one part
        reports.append(build_report(store).to_json())
        monkeypatch.setattr(store, "join_parts", lambda rows, row_bytes: 3)
        monkeypatch.setattr(rollup, "_SLICE_ROWS", 7)
        reports.append(build_report(store).to_json())
    assert reports[0]["rank_steps"]["rows"] and len(reports[0]["steps"]) == 40
    assert reports[0] == reports[1]


def test_figures_the_report_holds_in_python_come_off_the_engines_limit(tmp_path):
    """Regression: a 10M-span report peaked at 272 MiB after the step-bucket join was split, past
    its 256 MB budget: the rollup's engine kept its whole 100 MB while the report held the
    500,000 (rank, step) figures beside it. Once they are read back, the engine's limit is the
    plan's less what they take (80 bytes a cell (CELL_BYTES), 32 more for an HTML page), never below half
    the plan's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    from lens_report.render_html import render_html
    from lens_report.rollup import CELL_BYTES, build_report

    write_run(tmp_path / "run", 40, 100)  # 4,000 cells: 320 KB, past the 0.1 MiB DuckDB shows
    with TraceStore(threads=2) as store:
        store.load([tmp_path / "run"])
        report = build_report(store)
        held = len(report.rank_steps) * CELL_BYTES
        assert held == 40 * 100 * 80

        def engine_limit_mib() -> float:  # DuckDB shows it as '95.3 MiB'
            text = store.value("SELECT current_setting('memory_limit')")
            assert text.endswith(" MiB")
            return float(text.split()[0])

        assert engine_limit_mib() == pytest.approx((store.plan.rollup_bytes - held) / 2**20, abs=0.1)
        asked = []
        hold = store.hold_outside
        store.hold_outside = lambda nbytes: (asked.append(nbytes), hold(nbytes))
        render_html(report, store)  # and the page's figures besides (32 bytes a cell)
        assert asked == [40 * 100 * (80 + 32)]
        store.hold_outside(10**12)
        assert engine_limit_mib() == pytest.approx(store.plan.rollup_bytes // 2 / 2**20, abs=0.1)


@pytest.mark.parametrize("text", ["256M", "bogus", "", "MB", "-5MB", "0GB", "nanMB", "infGB", "12 parsecs"])
def test_a_memory_limit_that_is_not_an_amount_is_refused_by_the_engines_not_read_as_1gb(text):
    """memory_bytes read any text it could not parse as 1 GB, so TraceStore(memory_limit="256M")
    (a typo a script makes, which the CLI would refuse) ran with a 1 GB budget and said nothing."""
    from lens_report._units import memory_bytes
    from lens_report.clickhouse import ClickHouseStore

    with pytest.raises(ValueError, match=r"is not an amount of memory: expected a positive number with a unit"):
        memory_bytes(text)
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        TraceStore(memory_limit=text)
    with pytest.raises(ValueError, match="is not an amount of memory"):
        ClickHouseStore(object(), "otel_traces", memory_limit=text)
    assert memory_bytes("256MB") == 256 * 10**6 and memory_bytes("2GiB") == 2 * 2**30 and memory_bytes("1000") == 1000


def _hostile_file_lines(cap: int) -> list[str]:
    """Lines of one rank file with everything a piece boundary could get wrong: blank lines,
    invalid JSON, a span with a bad id, the same span twice far apart, and a line past ``cap``."""
    lines = []
    for n in range(1, 61):
        spans = [Otlp.span(n, f"s{n}", n, n + 0.5, bucket="productive", note="x" * 300)]
        lines.append(json.dumps(Otlp.request(spans, nv_dl_rank=0)))
        if n % 7 == 0:
            lines.append("")
        if n % 11 == 0:
            lines.append("   ")
        if n == 23:
            lines.append("{not json")
        if n == 31:
            bad = Otlp.span(1000, "bad id", 1, 2)
            bad["spanId"] = "xyz"
            lines.append(json.dumps(Otlp.request([bad], nv_dl_rank=0)))
        if n == 40:
            lines.append(_line_of(2 * cap, 999))
    lines.append(lines[2])  # the third line's span, written again at the end
    return lines


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_a_file_read_in_pieces_reads_the_same_spans_problems_and_line_numbers_as_whole(tmp_path, monkeypatch, suffix,
                                                                                     sql_reader):
    """One rank file of 165 MB peaked at 381 MiB under the 256 MB budget: DuckDB's JSON reader
    holds memory that grows with the file it reads, so the engine's limit had to be raised. A
    file past _PIECE_BYTES is now read in line-aligned pieces; with pieces of a few lines, every
    span, problem, line number and duplicate must be what reading it whole finds."""
    import gzip

    from lens_report import store as trace_store

    cap = max_line_bytes("256MB", 1)
    text = "\n".join(_hostile_file_lines(cap)) + "\n"
    path = tmp_path / f"traces-rank0{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())

    def read(piece_bytes):
        monkeypatch.setattr(trace_store, "_PIECE_BYTES", piece_bytes)
        with TraceStore(memory_limit="256MB", threads=1) as store:
            store.load([path])
            spans = store.rows("SELECT file, line, name, span FROM spans ORDER BY line")
            problems = [(p.file, p.line, p.message) for p in store.problems]
            return spans, problems, store.duplicate_count, store.span_count()

    whole, pieces = read(10**12), read(1500)
    assert pieces == whole
    spans, problems, duplicates, count = pieces
    assert count == 60 and duplicates == 1  # s1-s60; the big line, the bad id and the copy are not spans
    lines = text.split("\n")
    assert [(line, lines[line - 1][:9]) for _, line, message in problems if "invalid JSON" in message] == [
        (lines.index("{not json") + 1, "{not json")]
    assert any("spanId xyz" in message for _, _, message in problems)
    assert any(message.startswith("a line of") for _, _, message in problems), problems


def test_a_cut_compressed_file_read_in_pieces_keeps_what_came_before_the_damage(tmp_path, monkeypatch):
    """A .gz file's recorded size is its last bytes: in a cut file they are anything, so a cut
    file may go the piece path; it must keep the spans before the damage and say where it broke."""
    import gzip

    from lens_report import store as trace_store

    text = "".join(json.dumps(Otlp.request([Otlp.span(n, f"s{n}", n, n + 1, note="y" * 2000 + str(n))])) + "\n"
                   for n in range(1, 400))
    data = gzip.compress(text.encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    monkeypatch.setattr(trace_store, "_PIECE_BYTES", 5000)
    with TraceStore(threads=1) as store:
        store.load([path])
        names = [name for (name,) in store.rows("SELECT name FROM spans ORDER BY line")]
        assert 10 < len(names) < 399 and names[:3] == ["s1", "s2", "s3"]
        assert any(p.message.startswith("cannot read the rest of the file") for p in store.problems)


@pytest.mark.slow
def test_one_large_rank_file_is_reported_within_the_default_budget(tmp_path):
    """One rank file of 165 MB (one rank of a long run with fine groups on, which the file
    exporter writes as one file) peaked at 381 MiB under the default 256 MB budget. In pieces,
    a ~110 MB file stays within 256 MB peak RSS and the engine's limit is never raised."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    write_run(tmp_path / "ranks", 8, 1300)
    big = tmp_path / "run" / "traces-all.jsonl"
    big.parent.mkdir()
    with open(big, "wb") as out:
        for part in sorted((tmp_path / "ranks").rglob("*.jsonl")):
            out.write(part.read_bytes())
    assert os.path.getsize(big) > 100e6
    # VmHWM, not ru_maxrss: Linux carries a process's ru_maxrss across exec, so a child forked from
    # this (large) test process would report the test's own size
    code = ("import sys; from lens_report.cli import main; rc = main([sys.argv[1], '--json']); "
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "sys.stderr.write('peak %d\\n' % int(hwm.split()[1])); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(big.parent)], capture_output=True, text=True, timeout=600)
    assert done.returncode == EXIT_OK, done.stderr[-2000:]
    assert "needed more memory" not in done.stderr, done.stderr
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1])
    assert peak_kib * 1024 <= 256 * 10**6, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_pieces_cut_at_line_ends_and_count_the_lines_duckdb_numbers(tmp_path):
    """The pieces of a stream, whatever its lines and chunk sizes: joined, they are the stream;
    each but the last ends a line; each is about the size asked (never a whole long line past it
    held at once); each counts the non-blank lines in it, as DuckDB numbers them."""
    import io
    import random

    from lens_report.ingest import _pieces

    rng = random.Random(7)
    for _ in range(600):
        lines = [rng.choice([b"", b" \t", b"x" * rng.randrange(1, 400), b"  {}" * rng.randrange(1, 30)])
                 for _ in range(rng.randrange(0, 40))]
        text = b"\n".join(lines) + rng.choice([b"", b"\n"])
        size, chunk = rng.choice([1, 10, 100, 1000]), rng.choice([1, 3, 64, 4096])
        pieces = []
        for path, count in _pieces(io.BytesIO(text), str(tmp_path / "p-"), size, chunk=chunk):
            with open(path, "rb") as fh:
                piece = fh.read()
            os.unlink(path)
            assert piece and count == sum(1 for line in piece.split(b"\n") if line.strip())
            assert len(piece) < size + chunk + max(map(len, lines), default=0) + 1
            pieces.append(piece)
        assert b"".join(pieces) == text
        assert all(piece.endswith(b"\n") for piece in pieces[:-1])
        assert os.listdir(tmp_path) == []


def _step_join_inputs(store, anchors):
    """The three tables the ``steps`` join reads, as a 10M-span run (1,000 ranks x 500 steps) leaves them."""
    store.execute(f"""CREATE TEMP TABLE cands AS SELECT i * 20 AS id, (i // 500 * 7919)::UHUGEINT AS trace,
        i % 500 AS iteration, 1760000000000000000 + i * 4000000000 AS start_ns,
        1760000000000000000 + i * 4000000000 + 2533333333 AS end_ns, true AS named_step, NULL::BIGINT AS fb,
        i // 500 AS rank, 'rank ' || (i // 500) AS rank_label, 'rl.grpo.step' AS name, (i * 31 + 7)::UBIGINT AS span
        FROM range({int(anchors)}) t(i)""")
    store.execute("CREATE TEMP TABLE step_walls AS SELECT id AS anchor, end_ns - start_ns AS wall_ns FROM cands")
    store.execute("""CREATE TEMP TABLE step_buckets AS SELECT id AS anchor, 1000 * (id % 7) AS productive,
        2000 AS overhead, 3 * (id % 11) AS idle, 0 AS wasted FROM cands WHERE id % 3 <> 0""")


def _in_parts_and_in_one(store, monkeypatch, build, table):
    """Run ``build`` (a rollup step that makes ``table``) in its parts, within the store's rollup
    limit, then in one statement (the control: it runs out and runs again with more); the rows of
    ``table``, by anchor, which both runs must give."""
    build(store)
    assert not store.rollup_limit_raised
    parted = store.rows(f"SELECT * FROM {table} ORDER BY anchor")
    monkeypatch.setattr(store, "join_parts", lambda rows, row_bytes=0: 1)
    build(store)
    assert store.rollup_limit_raised  # one statement ran out of the limit and ran again with more
    assert store.rows(f"SELECT * FROM {table} ORDER BY anchor") == parted
    return parted


@pytest.mark.slow
def test_the_steps_join_runs_in_parts_of_anchors_within_the_rollups_memory(monkeypatch):
    """Regression: the statement that builds ``steps`` (each step anchor joined with its wall time
    and bucket sums) needed 60-80 MB for the 500,000 anchors of a 10M-span run, and now and then
    ran out of the default plan's 100 MB: it then ran again with 200 MB and the report peaked at
    303-321 MiB against its 256 MB budget. It now runs in parts of anchor ids
    (:data:`~lens_report.plan.STEP_ROW_BYTES`). Here the rollup gets 50 MB: in one statement
    the join needs more (the control), in parts it does not, and the rows are the same."""
    from lens_report import rollup
    from lens_report.plan import STEP_ROW_BYTES

    with TraceStore(memory_limit="181MB", threads=2) as store:
        assert store.plan.rollup_bytes == 50_000_000
        store.con.execute(f"SET memory_limit = '{store.plan.rollup_bytes}B'")
        store.con.execute("SET threads = 2")
        _step_join_inputs(store, 500_000)
        assert store.join_parts(500_000, STEP_ROW_BYTES) == 5
        parted = _in_parts_and_in_one(store, monkeypatch, lambda db: rollup._step_table(db, rollup._step_parts(db)),
                                      "steps")
    assert len(parted) == 500_000
    assert parted[0][-4:] == (0, 0, 0, 0) and parted[1][-4:] == (6000, 2000, 27, 0)  # anchors 0 (no bucket) and 20


@pytest.mark.slow
def test_the_parents_join_fits_the_rollups_memory_with_the_step_sums_carried(tmp_path):
    """Regression: once the parents join carried each child's time and bucket (so the step sums
    read ``anc`` alone), its child side held the bucket text and both times through the join:
    a 1M-span report's parents join ran out of the rollup's 80 MB, ran again with 160 MB and
    peaked at 243 MiB, with a note. The child's side is now made narrow before the join. 300,000
    spans under a 140 MB budget (a 33.6 MB rollup) ran out the same way; they now fit."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    from lens_report.rollup import build_report

    assert write_run(tmp_path / "run", 30, 500) == 300_030
    with TraceStore(memory_limit="140MB", threads=2) as store:
        store.load([tmp_path / "run"])
        report = build_report(store)
        assert not store.read_limit_raised
        assert not store.rollup_limit_raised, f"a rollup statement needed {store.rollup_limit} bytes"
    assert len(report.to_json()["steps"]) == 500


def _bucket_join_inputs(store, anchors, children):
    """The tables the step bucket sums read, as a 10M-span run leaves them: ``anchors`` step anchors
    (each its own candidate), ``children`` counted spans below each in ``anc``."""
    store.execute(f"CREATE TEMP TABLE anchors AS SELECT i * 20 AS cand, i * 20 AS anchor FROM range({int(anchors)}) t(i)")
    store.execute("CREATE TEMP TABLE step_walls AS SELECT anchor, 4000000000 AS wall_ns FROM anchors")
    store.execute(f"""CREATE TEMP TABLE anc AS SELECT i AS id, i // {int(children)} * 20 AS fs, NULL::BIGINT AS fb,
        false AS cyclic, 100 + i % 7 AS counted_ns, (i % 4)::INTEGER AS counted_bucket
        FROM range({int(anchors * children)}) t(i)""")


@pytest.mark.slow
def test_the_step_bucket_sums_run_in_parts_of_anchors_within_the_rollups_memory(monkeypatch):
    """Regression: the statement that sums each step's counted spans (``anc`` joined with the
    anchors and grouped by anchor: 500,000 groups at 10M spans) ran in one statement, and in two
    10M reports of five ran out of the default plan's 80 MB, ran again with 152 MB and peaked at
    281 MiB with a note. It now runs in parts of anchor ids, as the steps join does. Here the
    rollup gets 50 MB: in one statement the sums need more (the control), in parts they do not,
    and the sums are the same."""
    from lens_report import rollup
    from lens_report.plan import STEP_ROW_BYTES

    with TraceStore(memory_limit="181MB", threads=2) as store:
        assert store.plan.rollup_bytes == 50_000_000
        store.con.execute(f"SET memory_limit = '{store.plan.rollup_bytes}B'")
        store.con.execute("SET threads = 2")
        _bucket_join_inputs(store, 500_000, 4)
        assert store.join_parts(500_000, STEP_ROW_BYTES) == 5
        parted = _in_parts_and_in_one(store, monkeypatch,
                                      lambda db: rollup._step_buckets(db, rollup._step_parts(db)), "step_buckets")
    assert len(parted) == 500_000
    assert parted[0][1:] == (100, 101, 102, 103) and parted[1][1:] == (104, 105, 106, 100)


def test_the_steps_join_parts_grow_with_the_anchors():
    """One part up to 160,000 step anchors at the default budget (a 3.2M-span run), four at 500,000."""
    from lens_report.plan import STEP_ROW_BYTES

    with TraceStore(threads=2) as small, TraceStore(memory_limit="1GB", threads=2) as large:
        assert [small.join_parts(n, STEP_ROW_BYTES) for n in (0, 150_000, 190_000, 500_000)] == [1, 1, 2, 4]
        assert large.join_parts(500_000, STEP_ROW_BYTES) == 1


def test_the_parent_join_parts_count_an_interior_row_at_its_hash_table_size():
    """Regression: the parent join's parts counted 26 bytes an interior span (3M a part at the
    default budget), sized when the join held every span, whose rows are narrower. A 10M-span
    training run's interior of 1M spans then joined in one part and now and then ran out of the
    rollup's 80 MB: one report in three ran it again with 152 MB, peaked at 280-297 MiB and said
    so in a note. One part now holds up to 800,000 interior spans at the default budget."""
    from lens_report.plan import PARENT_ROW_BYTES

    with TraceStore(threads=2) as store:
        assert [store.join_parts(n, PARENT_ROW_BYTES) for n in (0, 300_000, 800_000, 1_000_000, 3_000_000)] == \
            [1, 1, 1, 2, 4]


def test_a_statement_past_the_limit_lowered_for_held_figures_is_said_even_within_the_plan():
    """Regression: once the report holds the (rank, step) figures in Python, the rollup's engine
    runs within the plan less what they take (:meth:`TraceStore.hold_outside`). A statement that
    ran out of that lower limit ran again with twice it, which was still within the plan's, so
    ``rollup_limit_raised`` stayed false and nothing was said, while the engine and the figures
    together took the process past its budget: a 10M-span ``--html`` report's waterfall query ran
    out of 38 MiB, ran again with 76, and the report peaked at 273-288 MiB with no note."""
    with TraceStore(memory_limit="306MB", threads=2) as store:
        assert store.plan.rollup_bytes == 100 * 10**6
        store.hold_outside(60 * 10**6)  # the engine's limit: half the plan's
        assert not store.rollup_limit_raised
        # a list of 4M integers is held whole: more than 50 MB, less than 100 (checked here, in DuckDB)
        assert store.value("SELECT len(list(i)) FROM range(4000000) t(i)") == 4_000_000
        assert store.rollup_limit == store.plan.rollup_bytes and store.rollup_held == 50 * 10**6
        assert store.rollup_limit_raised


def test_the_waterfall_reads_the_chosen_spans_without_joining_every_span_again(tmp_path, monkeypatch):
    """Regression: the waterfall's query joined the chosen ids (20,000 for a page) to the whole of
    ``k`` as well as to ``spans`` and ``parents``; in a 10M-span ``--html`` report it ran out of the
    engine's limit lowered for the figures the report holds and ran again with twice it, taking the
    process ~40 MB past its budget. What it draws of ``k`` is now kept when the ids are chosen."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_run

    from lens_report import waterfall
    from lens_report.rollup import build_report

    write_run(tmp_path / "run", 4, 30)
    with TraceStore(threads=2) as store:
        store.load([tmp_path / "run"])
        report = build_report(store)
        queries = []
        stream = store.stream
        monkeypatch.setattr(store, "stream", lambda sql: queries.append(sql) or stream(sql))
        chosen = waterfall.waterfall_spans(store, report, steps=frozenset({3}), ranks=None, small_run=0,
                                           default_ranks=4, limit=1000)
        expected = store.rows("""SELECT k.id, k.start_ns, k.end_ns, k.bucket, k.iteration, k.rank_label, k.error
                                 FROM k JOIN wf_ids w ON w.id = k.id ORDER BY k.start_ns, k.id""")
    (query,) = queries
    assert not re.search(r"\bJOIN k\b", query)
    assert len(chosen.spans) == len(expected) > 20  # the step's spans on four ranks
    assert [(s["id"], s["start_ns"], s["end_ns"], s["bucket"], s["iteration"], s["rank_label"], s["error"])
            for s in chosen.spans] == expected


def test_a_limit_lowered_for_the_pages_figures_runs_the_engine_on_fewer_threads():
    """Regression: with the working tables in the database file and the spans a view of rows and
    resources, a 10M-span report with ``--html`` ran the page's waterfall details (20,000 rows
    joined with the spans, their resources and ``anc``) within the 40 MB the page's figures left
    the engine: on two threads it ran out, ran again with 80 MB, peaked at 240 MiB and printed a
    note. On one thread it fits (48 MB was enough for two). The engine's threads now follow a
    lowered limit, and come back with a full one."""
    from lens_report.plan import _THREAD_BYTES

    def threads(store):
        return store.value("SELECT current_setting('threads')")

    with TraceStore(threads=2) as store:
        assert store.plan.rollup_bytes == 80_000_000 and _THREAD_BYTES == 24_000_000
        store.hold_outside(40_000_000)  # 1,000 ranks x 500 steps of figures and the page's
        assert (store._base, threads(store)) == (40_000_000, 1)
        store.hold_outside(30_000_000)
        assert (store._base, threads(store)) == (50_000_000, 2)
        store.hold_outside(0)
        assert (store._base, threads(store)) == (80_000_000, 2)


_BIDI = "\u202e\u2066\u200f\x1b"


def test_bidi_and_control_characters_from_the_input_are_escaped_on_the_page(tmp_path):
    """Regression (issue 40): a span name with a right-to-left override (U+202E) reached the HTML
    page raw, so the names after it read reversed (the text report escaped it). Now every text
    from the input, in the tables, the SVG and the script's data, shows them as visible escapes."""
    from report_helpers import html_of

    path = tmp_path / "bidi.jsonl"
    spans = [Otlp.span(1, f"rl.grpo.step{_BIDI}evil", 0, 10, iteration=1),
             Otlp.span(2, f"work{_BIDI}gpj.exe", 0, 9, 1, bucket="bogus", iteration=1)]
    path.write_text(json.dumps(Otlp.request(spans, nemo_run_id=f"run{_BIDI}", service_instance_id=f"p{_BIDI}"))
                    + "\n")
    page = html_of(path, step_pattern="step")
    for raw in _BIDI:
        assert raw not in page, hex(ord(raw))
    assert "work\\u202e\\u2066\\u200f\\x1bgpj.exe" in page  # the violation's span name, in a table
    assert page.count("\\\\u202e") >= 2  # and in the script's JSON (names, lanes), as text


def _long_names(path, spans: int, chars: int) -> None:
    """``spans`` spans in 10 steps of one rank, each with its own name ``chars`` characters long."""
    step = spans // 10
    lines = []
    for batch in range(0, spans, 500):
        out = []
        for n in range(batch, min(spans, batch + 500)):
            it = n // step + 1
            if n % step == 0:
                out.append(Otlp.span(n + 1, "rl.grpo.step", it * 100, it * 100 + 99, iteration=it))
            else:
                name = f"{n:07d}" + "x" * (chars - 7)
                parent = (it - 1) * step + 1
                start = it * 100 + (n % step) * 99 / step
                out.append(Otlp.span(n + 1, name, start, start + 0.001, parent, bucket="productive", iteration=it))
        lines.append(Otlp.request(out, nemo_run_id="long", service_instance_id="long-rank0", nv_dl_rank=0))
    Otlp.write(path, *lines)


def test_a_page_of_30000_spans_with_2000_character_names_stays_under_5_mb_and_the_memory_limit(tmp_path):
    """Regression (issue 40): --html on 30,000 spans with 2,000-character names wrote an 88 MB page
    and peaked at 539 MiB under --memory-limit 256MB: the page's budget assumed ~80 bytes a span.
    Names are cut on the page (the engine reads no more of them than it shows), the budget counts
    the bytes written, and the page is at most 5 MB, the peak within the limit."""
    from lens_report.render_html import CUT_MARK, PAGE_LIMIT

    run = tmp_path / "run"
    run.mkdir()
    _long_names(run / "long.jsonl", 30_000, 2_000)
    page = tmp_path / "page.html"
    code = ("import sys; from lens_report.cli import main; rc = main(sys.argv[1:]); "
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "sys.stderr.write('peak %d\\n' % int(hwm.split()[1])); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(run), "--html", str(page), "--step", "1-10",
                           "--memory-limit", "256MB"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == EXIT_OK, done.stderr[-2000:]
    size = page.stat().st_size
    assert size <= PAGE_LIMIT, size
    text = page.read_text(encoding="utf-8")
    assert CUT_MARK in text and "x" * 200 not in text
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1])
    assert peak_kib * 1024 <= 256 * 10**6, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_the_text_report_cuts_2000_character_names(tmp_path, capsys):
    """A 2,000-character span name made 2,000-character lines of the text report's top spans and
    violations; the text cuts names (the JSON keeps them whole)."""
    path = tmp_path / "long.jsonl"
    _long_names(path, 100, 2_000)
    assert main([str(path)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "…[cut]" in text and max(map(len, text.splitlines())) < 500
    assert main([str(path), "--json"]) == EXIT_OK
    assert "x" * 1_990 in capsys.readouterr().out
