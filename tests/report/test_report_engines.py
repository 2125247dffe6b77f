"""Known answers on both engines: the report's known-answer tests run again with every report also read from otel_traces
in chdb, in each engine mode (at once, through the stamped sums, in parts, through the rollup, through a server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("chdb")

from report_helpers import ENGINES_ENV, ENGINES_LOG  # noqa: E402

KNOWN_ANSWERS = ("test_report_rollup.py", "test_report_multirank.py", "test_report_invariants.py",
                 "test_report_loss.py", "test_report_runs.py", "test_report_aggregates.py",
                 "test_report_vocabulary_rules.py", "test_report_render.py", "test_report_protobuf_json.py",
                 "test_report_device_clock.py")
"""The test modules whose reports are known answers (each ``report_of`` there compares both engines)."""


KNOWN_ANSWER_REPORTS = 63
"""How many known-answer reports each mode compares (two more inputs, which no exporter can store, are read from files
only): fewer means reports stopped reaching the engines."""

ROLLUP_KNOWN_ANSWERS = 20
"""How many known-answer reports at least go through the rollup (the rest read the spans, saying why)."""


RUNS = (("clickhouse", "clickhouse-stamped", "clickhouse-parts", "clickhouse-rollup"), ("clickhouse-http",))
"""The engine modes of :data:`report_helpers.ENGINES_ENV`, by run of the known-answer modules: a run compares all
its modes, the files' reports made once, not once a mode (a run a mode took 20 of the slow suite's 37 minutes).
The server's modes run apart: a process holds one chdb database, and the HTTP front's is its own."""


@pytest.fixture(scope="module")
def known_answers(tmp_path_factory) -> dict[str, list[str]]:
    """Run the known-answer modules with the modes of :data:`RUNS` (``clickhouse-http`` only where clickhouse-connect
    is installed): each ``report_of`` there also builds its report from otel_traces in each mode and asserts the JSON
    equal; fails when any differs or too few reports were compared. The lines each mode logged, by mode:
    ``compared`` (with what the engine says of it after ': ') or ``files only: WHY``."""
    import importlib.util

    here = Path(__file__).parent
    by_mode: dict[str, list[str]] = {}
    for modes in RUNS:
        if modes == ("clickhouse-http",) and importlib.util.find_spec("clickhouse_connect") is None:
            continue
        log = tmp_path_factory.mktemp("engines") / "engines.log"
        env = {**os.environ, ENGINES_ENV: ",".join(modes), ENGINES_LOG: str(log)}
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                 *(str(here / name) for name in KNOWN_ANSWERS)],
                                env=env, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        by_mode.update({mode: [] for mode in modes})
        for line in log.read_text().splitlines():
            mode, _, said = line.partition("|")
            by_mode[mode].append(said)
    for lines in by_mode.values():
        # every report with input the exporter can store is compared; the rest say why not
        assert sum(1 for line in lines if line.partition(":")[0] == "compared") >= KNOWN_ANSWER_REPORTS, lines
        assert all(line.partition(":")[0] == "compared" or line.startswith("files only: ") for line in lines), lines
    return by_mode


@pytest.mark.engines
def test_every_known_answer_report_is_the_same_from_files_and_from_otel_traces(known_answers):
    """Each report_of of the known-answer modules reads its spans from files and from the exporter's table in chdb and
    asserts the JSON reports equal; the run fails when any differs, and when too few reports were compared."""
    assert known_answers["clickhouse"]


@pytest.mark.engines
def test_every_known_answer_report_is_the_same_through_the_stamped_sums(known_answers):
    """The known answers again with the ClickHouse store's parts of one span (at most PARTS_AT_MOST), so every
    report takes the stamped sums (traces whose stamps give the walk's answer summed in ClickHouse, the others
    walked): equal to the files' JSON, and in enough reports some spans were summed, not walked (a check that
    walked everything would pass)."""
    lines = known_answers["clickhouse-stamped"]
    # 18 of the 48 reports have a trace their stamps answer; the rest are inputs built to break a rule
    assert sum(1 for line in lines if line.endswith("spans summed by their stamps")) >= 15, lines


@pytest.mark.engines
def test_every_known_answer_report_is_the_same_walked_in_parts_of_traces(known_answers):
    """The known answers again walked in parts of traces (a part of one span, at most PARTS_AT_MOST: each trace a
    part of its own where the run is small, many parts empty), each part's sums, violations and counts added up:
    equal to the files' JSON."""
    assert known_answers["clickhouse-parts"]


@pytest.mark.engines
def test_every_known_answer_report_through_the_rollup_has_the_figures_of_the_files(known_answers):
    """With ``LENS_REPORT_ENGINES=clickhouse-rollup`` each report_of also loads its spans into an otel_traces with the
    schema helper's columns and rollup view, reports through the rollup where it covers the run (else through the
    spans, saying why) and asserts the figures equal the files'. Enough must go through the rollup for that to
    mean something, and the rest must say why they did not."""
    lines = known_answers["clickhouse-rollup"]
    through = lines.count("compared: rollup")
    spans = [line for line in lines if line.startswith("compared: spans: ")]
    assert through >= ROLLUP_KNOWN_ANSWERS, (through, spans)
    assert all(line == "compared: rollup" or line.startswith(("compared: spans: ", "files only: "))
               for line in lines), lines


@pytest.mark.engines
def test_every_known_answer_report_is_the_same_from_files_and_through_the_server(known_answers):
    """In mode ``clickhouse-http`` each report_of loads its spans into otel_traces through the ClickHouse HTTP front
    (inserts as Arrow bodies), reads them back with the server client, and asserts the JSON equals the files'
    report."""
    pytest.importorskip("clickhouse_connect")
    assert known_answers["clickhouse-http"]
