"""Loss records (lens.telemetry.loss) are kept out of the spans and shown per process and rank."""

from __future__ import annotations

import json

from report_helpers import html_of, report_of

from lens_report.cli import main


def _loss(otlp, n, start_s, created, dropped, failed=0, unended=0, truncated=0):
    return otlp.span(n, "lens.telemetry.loss", start_s, start_s, trace=f"{n:032x}",
                     lens_spans_created=created, lens_spans_dropped=dropped, lens_spans_failed=failed,
                     lens_spans_unended=unended, lens_spans_truncated=truncated)


def _files(tmp_path, otlp):
    rank7 = otlp.request([otlp.span(1, "rl.grpo.step", 0, 10, iteration=1),
                          otlp.span(2, "rl.grpo.policy_training", 0, 5, 1, bucket="productive", iteration=1),
                          _loss(otlp, 3, 5, 1_000, 120_000),
                          _loss(otlp, 4, 20, 700_000, 600_640, truncated=12)],
                         service_instance_id="job-rank7", nemo_run_id="job", nv_dl_rank=7)
    rank2 = otlp.request([otlp.span(5, "rl.grpo.step", 0, 10, iteration=1, trace="ab" * 16),
                          _loss(otlp, 6, 9, 10, 0)],
                         service_instance_id="job-rank2", nemo_run_id="job", nv_dl_rank=2)
    return otlp.write(tmp_path / "t.jsonl", rank7, rank2)


def test_loss_records_are_not_spans_and_the_newest_record_per_process_wins(tmp_path, otlp):
    report = report_of(_files(tmp_path, otlp))
    assert report.span_count == 3
    assert "lens.telemetry.loss" not in {t.name for t in report.top_spans}
    assert [str(row) for row in report.loss] == [
        "rank 2 lost 0 spans: dropped 0, failed 0, unended 0; 0 truncated",
        "rank 7 lost 600,640 spans: dropped 600,640, failed 0, unended 0; 12 truncated"]
    assert report.run.wall_ns == 20 * 1_000_000_000  # two ranks of 10 s: the zero-length records add nothing


def test_text_json_and_html_show_what_each_rank_lost(tmp_path, otlp, capsys):
    path = _files(tmp_path, otlp)
    assert main([str(path)]) == 0
    text = capsys.readouterr().out
    assert "telemetry loss: 600,640 spans lost in 1 of 2 processes that wrote a loss record" in text
    assert "  rank 7 lost 600,640 spans: dropped 600,640, failed 0, unended 0; 12 truncated" in text
    assert main([str(path), "--json"]) == 0
    loss = json.loads(capsys.readouterr().out)["telemetry_loss"]
    assert loss["lost"] == 600_640
    assert loss["processes"][1] == {"rank": "rank 7", "process": "job-rank7", "created": 700_000, "lost": 600_640,
                                    "dropped": 600_640, "failed": 0, "unended": 0, "truncated": 12}
    page = html_of(path)
    assert "<td>rank 7</td><td>job-rank7</td><td>600,640</td><td>600,640</td><td>0</td><td>0</td><td>12</td>" in page


def test_processes_lens_set_up_without_a_final_loss_record_are_named(tmp_path, otlp, capsys):
    """A rank killed (or left through os._exit) writes no final loss record: what it held is
    counted nowhere, so the report names it, in text, JSON and HTML. Processes that shut down
    (final record), and processes Lens did not set up (no telemetry.distro.name lens), are not named."""
    lens = {"telemetry_distro_name": "lens", "nemo_run_id": "job"}
    final = _loss(otlp, 3, 9, 2, 0)
    final["attributes"].append({"key": "lens.telemetry.final", "value": {"boolValue": True}})
    done = otlp.request([otlp.span(1, "rl.grpo.step", 0, 10, iteration=1), final],
                        service_instance_id="job-rank0", nv_dl_rank=0, **lens)
    killed = otlp.request([otlp.span(4, "rl.grpo.step", 0, 10, iteration=1, trace="ab" * 16),
                           otlp.span(5, "work", 1, 2, 4, trace="ab" * 16)],
                          service_instance_id="job-rank1", nv_dl_rank=1, **lens)
    dropped_then_killed = otlp.request([otlp.span(6, "rl.grpo.step", 0, 10, iteration=1, trace="cd" * 16),
                                        _loss(otlp, 7, 5, 100, 40)],
                                       service_instance_id="job-rank2", nv_dl_rank=2, **lens)
    other = otlp.request([otlp.span(8, "rl.grpo.step", 0, 10, iteration=1, trace="ef" * 16)],
                         service_instance_id="job-rank3", nv_dl_rank=3, nemo_run_id="job")
    path = otlp.write(tmp_path / "t.jsonl", done, killed, dropped_then_killed, other)
    report = report_of(path)
    assert [str(u) for u in report.unfinished] == [
        "rank 1 (job-rank1): 2 spans read, no final loss record",
        "rank 2 (job-rank2): 1 spans read, no final loss record"]
    assert main([str(path)]) == 0
    text = capsys.readouterr().out
    assert "telemetry never shut down in 2 processes (killed, os._exit, or still running)" in text
    assert "  rank 1 (job-rank1): 2 spans read, no final loss record" in text
    assert main([str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["telemetry_loss"]["unfinished"] == [
        {"rank": "rank 1", "process": "job-rank1", "spans": 2}, {"rank": "rank 2", "process": "job-rank2", "spans": 1}]
    assert "<tr><td>rank 1</td><td>job-rank1</td><td>2</td></tr>" in html_of(path)
