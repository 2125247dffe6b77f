"""``--perfetto``: trace-event JSON with one process per rank, a track per thread, attributes as args."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from multirank import write_ddp_run
from trace_event_format import validate

from lens_report.cli import main

pytest.importorskip("opentelemetry.sdk")


def _export(tmp_path, *paths):
    out = tmp_path / "trace.json"
    assert main([*map(str, paths), "--perfetto", str(out)]) == 0
    return json.loads(out.read_text())


def test_the_export_is_valid_trace_event_json_with_a_process_per_rank(tmp_path, capsys):
    write_ddp_run(tmp_path, ranks=12)
    data = _export(tmp_path, tmp_path / "ddp")
    assert validate(data) == []
    events = data["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert list(names.values()) == [f"rank {n}" for n in range(12)]
    order = {e["pid"]: e["args"]["sort_index"] for e in events if e["name"] == "process_sort_index"}
    assert sorted(order, key=order.get) == list(names)
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == 12 * 13
    assert Counter(e["cat"] for e in spans) == {"unbucketed": 48, "overhead": 36, "productive": 36, "idle": 36}
    train = next(e for e in spans if e["name"] == "rl.grpo.policy_training" and names[e["pid"]] == "rank 2")
    assert train["args"]["rl.bucket"] == "productive" and train["args"]["rl.iteration"] == 1
    assert train["args"]["lens.group"] == "policy_update" and train["args"]["rank"] == "rank 2"
    assert train["dur"] == 7_000_000.0 and len(train["args"]["span_id"]) == 16
    assert "wrote" in capsys.readouterr().err


def test_spans_of_one_thread_that_overlap_without_nesting_get_their_own_track(tmp_path, otlp):
    path = otlp.write(tmp_path / "t.jsonl", otlp.request([
        otlp.span(1, "loop", 0, 10, thread_id=7, thread_name="main"),
        otlp.span(2, "coroutine.a", 1, 5, 1, thread_id=7, thread_name="main"),
        otlp.span(3, "coroutine.b", 3, 8, 1, thread_id=7, thread_name="main"),
        otlp.span(4, "other.thread", 2, 4, thread_id=8, thread_name="worker"),
    ], nv_dl_rank=0))
    data = _export(tmp_path, path)
    assert validate(data) == []
    threads = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    placed = {e["name"]: threads[e["tid"]] for e in data["traceEvents"] if e["ph"] == "X"}
    assert placed == {"loop": "7 main", "coroutine.a": "7 main", "coroutine.b": "7 main (2)",
                      "other.thread": "8 worker"}


def test_the_validator_catches_what_a_viewer_cannot_draw():
    good = {"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1}
    assert validate({"traceEvents": [good]}) == []
    assert validate({"traceEvents": [good, {**good, "ts": 5, "dur": 10}]}) == [
        "event 1 on pid 1 tid 1 overlaps event 0 without nesting"]
    assert validate({"traceEvents": [{**good, "dur": -1}, {**good, "ph": "Q"}, {"ph": "M", "name": "process_name",
                                                                                "pid": 1}]}) == [
        "event 0: a complete event needs a non-negative dur", "event 1: unknown phase 'Q'",
        "event 2: metadata process_name needs args.name"]
    assert validate({"events": []}) == ["the JSON object has no traceEvents array"]


def test_step_and_ranks_narrow_the_export_and_a_large_whole_run_comes_with_a_note(tmp_path, capsys, monkeypatch):
    """A 10M-span run exported whole is gigabytes no browser loads: --step and --ranks choose a part,
    as they do for the HTML waterfall; a whole export past PERFETTO_NOTE_SPANS says so on stderr."""
    from lens_report import cli

    write_ddp_run(tmp_path, ranks=12)
    out = tmp_path / "part.json"
    assert main([str(tmp_path / "ddp"), "--perfetto", str(out), "--step", "2", "--ranks", "1,3"]) == 0
    data = json.loads(out.read_text())
    assert validate(data) == []
    names = {e["pid"]: e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    # per rank: the job span (it spans every step), step 2's umbrella and its three leaves
    assert Counter(names[e["pid"]] for e in spans) == {"rank 1": 5, "rank 3": 5}
    assert {e["args"].get("rl.iteration") for e in spans} == {None, 2}
    assert "holds all" not in capsys.readouterr().err
    monkeypatch.setattr(cli, "PERFETTO_NOTE_SPANS", 100)
    assert main([str(tmp_path / "ddp"), "--perfetto", str(out)]) == 0
    assert "the Perfetto file holds all 156 spans of the run" in capsys.readouterr().err
