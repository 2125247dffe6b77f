"""Ctrl-C and a closed stdout on a real 1M-span ``lens report``: exit 130 with one line and no database left, or a quiet end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from trace_synth import write_run  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    """1M spans: 100 ranks × 500 steps of the synthetic run (20 spans a step)."""
    out = tmp_path_factory.mktemp("million")
    assert write_run(out, 100, 500, jobs=2) == 100 * (500 * 20 + 1)
    return out / "synth"


def _report(args, tmp, **kwargs):
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "lens_report", *map(str, args)], env=env, cwd=REPO,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_ctrl_c_at_any_point_of_a_1m_span_report_exits_130_with_one_line_and_no_database(million, tmp_path):
    """Regression: Ctrl-C during the rollup gave a 'Query interrupted' traceback, 'connection is
    busy' or a C++ abort (rc 134) in 5 of 14 tries. SIGINT is sent at staggered points of a
    report that also writes a page: reading, rolling up, rendering."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = time.monotonic()
    whole = _report([million, "--html", tmp_path / "page.html"], tmp, stdout=subprocess.DEVNULL)
    assert whole.wait(600) == 0, whole.stderr.read()
    full = time.monotonic() - started
    outcomes = []
    for fraction in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9):
        proc = _report([million, "--html", tmp_path / "page.html"], tmp, stdout=subprocess.DEVNULL)
        begun = time.monotonic()
        while not list(tmp.glob("lens-report-*")) and proc.poll() is None:  # past the imports: the database exists
            time.sleep(0.01)
        time.sleep(max(0.0, fraction * full - (time.monotonic() - begun)))
        proc.send_signal(signal.SIGINT)
        status = proc.wait(120)
        err = proc.stderr.read()
        outcomes.append((fraction, status, err))
        if status == 0:  # it finished first: nothing to check but its silence
            continue
        # what the report finished before the signal may have said so ("wrote page.html"); after it, one line
        before, _, last = err.rstrip("\n").rpartition("\n")
        assert (status, last) == (130, "lens report: interrupted"), (fraction, status, err)
        assert all(line.startswith("lens report: wrote ") for line in before.splitlines()), (fraction, err)
        assert not list(tmp.iterdir()), f"database left behind at {fraction:.0%}"
    assert sum(status == 130 for _, status, _ in outcomes) >= 5, outcomes


def test_a_reader_that_closes_stdout_early_ends_the_report_quietly(million, tmp_path):
    """Regression: ``lens report ... | head -1`` ended in a BrokenPipeError traceback. The JSON
    reader stops after 100 bytes of a many-MB line; the text one is gone before the first write."""
    proc = _report([million, "--json"], tmp_path, stdout=subprocess.PIPE)
    assert proc.stdout.read(100).startswith('{"run_id":"synth"')
    proc.stdout.close()
    assert (proc.wait(600), proc.stderr.read()) == (0, "")
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = _report([million], tmp_path, stdout=write_end)
    os.close(write_end)
    assert (proc.wait(600), proc.stderr.read()) == (0, "")
    assert not list(tmp_path.glob("lens-report-*"))


def test_lens_resolve_into_a_closed_pipe_ends_quietly(tmp_path):
    """Regression: ``lens resolve --json | head -1`` ended in a BrokenPipeError traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write meets EPIPE
    proc = subprocess.Popen([sys.executable, "-m", "lens_cli", "resolve", "per_step", "--json", "--import",
                             "lens_core.catalogs.rl"], env=env, cwd=REPO, stdout=write_end,
                            stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    assert (proc.wait(60), proc.stderr.read()) == (0, "")


@pytest.mark.engines
def test_ctrl_c_while_clickhouse_rolls_up_exits_130_with_one_line(tmp_path):
    """Ctrl-C in the ClickHouse path, where the rollup's queries run inside the embedded engine (chdb): a
    KeyboardInterrupt raised there would be swallowed by the engine and the report would run to its end
    with status 0; the watch ends it at once with one line and 130, at staggered points."""
    pytest.importorskip("chdb")
    from lens_report.clickhouse import ChdbSource, otel_traces_ddl
    from trace_synth import otel_traces_insert

    db = tmp_path / "db"
    db.mkdir()
    source = ChdbSource(str(db))
    try:
        source.command(otel_traces_ddl("otel_traces"))
        source.command(otel_traces_insert("otel_traces", 100, 500))  # 1M spans
    finally:
        source.close()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = time.monotonic()
    whole = _report(["--clickhouse", f"chdb:{db}"], tmp, stdout=subprocess.DEVNULL)
    assert whole.wait(600) == 0, whole.stderr.read()
    full = time.monotonic() - started
    stopped = []
    for fraction in (0.3, 0.5, 0.7):
        proc = _report(["--clickhouse", f"chdb:{db}"], tmp, stdout=subprocess.DEVNULL)
        time.sleep(fraction * full)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        status = proc.wait(120)
        err = proc.stderr.read()
        if status == 0:  # it finished first
            continue
        assert (status, err) == (130, "lens report: interrupted\n"), (fraction, status, err)
        stopped.append(time.monotonic() - sent)
    assert len(stopped) >= 2, stopped
    assert max(stopped) < 0.5 * full, (stopped, full)  # at once, not at the end of the running query
