"""The file exporter against the disk and a shared directory, in real processes (issue #18, items 5
and 8): lines the report can read, symlinks refused, private modes, a directory deleted or replaced
mid-run, processes with the same pid in two pid namespaces. A figure per case."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trace_files import final_losses, read_spans

from .figures import record_figure
from .processes import child_environ, program, start

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


def _run(case, out, recorder, timeout=300, **env):
    proc = start("files.py", case, LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="files",
                 LENS_RECORDER=recorder, **env)
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1]), stderr


def _report(out):
    """`python -m lens_report <out>`: (exit status, its first line)."""
    done = subprocess.run([sys.executable, "-m", "lens_report", str(out)], capture_output=True, text=True,
                          timeout=300, env=child_environ())
    return done.returncode, (done.stdout or done.stderr).splitlines()[0]


def test_a_10_mb_attribute_and_a_50_mb_batch_become_lines_the_report_reads(tmp_path, recorder):
    """Regression: a batch with a 10 MB attribute became one 44 MB line, and `lens report`
    read 0 of its 101 spans (DuckDB's object size limit), exit 3."""
    out = tmp_path / "out"
    # 50 MB from a tight loop through the default 16 MB byte-bounded buffer drops spans
    # (counted) whenever the export thread lags, as the SDK recorder's does: this case is about
    # the lines written, so its buffer holds the whole batch.
    seen, _ = _run("big", out, recorder, LENS_BUFFER_MB="128")
    lengths = [len(line) for path in out.rglob("traces-*.jsonl") for line in path.read_bytes().split(b"\n") if line]
    spans = {s["name"] + str(s["attributes"].get("i", "")): s for s in read_spans(out)}
    huge = spans["huge"]["attributes"]
    status, first = _report(out)
    record_figure(f"10 MB attribute, 100 x 400 KB ({recorder})", lines=len(lengths),
                  longest_line_mb=round(max(lengths) / 2**20, 2), spans_read=len(spans),
                  huge_value_kept_chars=len(huge["payload"]), report_exit=status)
    assert seen["shutdown"] is True and len(spans) == 101
    assert max(lengths) <= 8 << 20 and len(lengths) > 1  # the default LENS_FILE_LINE_MB, split
    assert huge["payload"] == "x" * (1 << 20) and huge["note"] == "kept"  # cut to the 1 MiB cap, marked
    assert huge["lens.truncated_keys"] == {"values": [{"stringValue": "payload"}]}
    assert all(len(s["attributes"]["payload"]) == 400_006 for k, s in spans.items() if k.startswith("wide"))
    assert status == 0 and first.startswith("lens report: 101 spans"), first


def test_otel_attribute_value_length_limit_is_the_cap_when_set(tmp_path, recorder):
    out = tmp_path / "out"
    _run("big", out, recorder, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=1000)
    spans = {s["name"]: s for s in read_spans(out)}
    assert spans["huge"]["attributes"]["payload"] == "x" * 1000
    assert spans["wide"]["attributes"]["payload"].startswith("0000") and len(spans["wide"]["attributes"]["payload"]) == 1000


def test_a_symlink_planted_at_the_next_trace_file_is_refused_and_counted(tmp_path, recorder):
    """Regression: the trace file was opened O_APPEND|O_CREAT without O_NOFOLLOW, so a
    symlink planted at its path in a shared LENS_FILE_DIR was followed and appended to."""
    out = tmp_path / "out"
    seen, stderr = _run("symlink", out, recorder)
    planted = Path(seen["path"]).with_name(Path(seen["path"]).name.replace("-2.jsonl", ".jsonl"))
    assert planted.is_symlink()
    planted.unlink()  # so the reader below does not follow it either
    spans = [s for s in read_spans(out) if s["name"] == "after-symlink"]
    (losses,) = final_losses(out).values()
    record_figure(f"symlink planted at the trace file ({recorder})", refused=seen["refused"],
                  victim_changed=seen["victim"] != "do not touch\n", spans_written_elsewhere=len(spans),
                  reported_lost=losses["lens.spans.failed"] + losses["lens.spans.dropped"])
    assert seen["victim"] == "do not touch\n" and seen["refused"] == 1
    assert len(spans) == 200 and seen["path"].endswith("-2.jsonl") and "refusing to write" in stderr


def test_files_are_private_by_default_and_lens_file_mode_widens_them(tmp_path, recorder):
    """Regression: trace files were 0644 (dirs 0755) with no setting, though they may hold prompts."""
    out = tmp_path / "out"
    seen, _ = _run("plain", out, recorder)
    path = Path(seen["path"])
    modes = {"file": stat.S_IMODE(path.stat().st_mode), "dir": stat.S_IMODE(path.parent.stat().st_mode)}
    wide = tmp_path / "wide"
    seen, _ = _run("plain", wide, recorder, LENS_FILE_MODE="0640")
    wide_path = Path(seen["path"])
    widened = {"file": stat.S_IMODE(wide_path.stat().st_mode), "dir": stat.S_IMODE(wide_path.parent.stat().st_mode)}
    record_figure(f"file modes ({recorder})", default=f"{modes['file']:o}/{modes['dir']:o}",
                  lens_file_mode_0640=f"{widened['file']:o}/{widened['dir']:o}")
    assert modes == {"file": 0o600, "dir": 0o700}
    assert widened == {"file": 0o640, "dir": 0o750}
    bad = start("files.py", "plain", LENS_EXPORTER="file", LENS_FILE_DIR=tmp_path / "bad", LENS_FILE_MODE="0755")
    _, stderr = bad.communicate(timeout=60)
    assert bad.returncode != 0 and "LENS_FILE_MODE='0755'" in stderr


def test_a_run_directory_deleted_or_replaced_mid_run_is_noticed_and_its_loss_counted(tmp_path, recorder):
    """Regression: a trace directory deleted mid-run lost every later span while counting
    it exported."""
    out = tmp_path / "out"
    seen, stderr = _run("deleted", out, recorder)
    names = [s["name"] for s in read_spans(out)]
    (losses,) = final_losses(out).values()
    readable = len(names)
    record_figure(f"run directory deleted, then replaced ({recorder})", created=losses["lens.spans.created"],
                  reopened=seen["reopened"], readable=readable, reported_failed=losses["lens.spans.failed"])
    assert seen["shutdown"] is False  # a loss happened, and shutdown says so
    assert names.count("after-replace") == 100 and seen["reopened"] == 2
    # what the deletion took (the first 300, and the 200 in the replaced directory) is counted
    assert losses["lens.spans.failed"] == seen["lost_spans"] == 500
    assert losses["lens.spans.created"] - losses["lens.spans.failed"] == readable


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare --pid (root or user namespaces)")
def test_processes_with_the_same_pid_in_two_pid_namespaces_write_separate_files(tmp_path, recorder):
    """Regression: two processes with the same pid in different pid namespaces (containers
    on one host) shared one file and one service.instance.id, so one loss record hid the other's."""
    out = tmp_path / "out"
    env = child_environ(LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="files", LENS_RECORDER=recorder)
    procs = [subprocess.Popen(["unshare", "--pid", "--fork", sys.executable, program("files.py"), "plain"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    seen = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr[-3000:]
        seen.append(json.loads(stdout.strip().splitlines()[-1]))
    instances = {s["resource"]["service.instance.id"] for s in read_spans(out)}
    files = sorted(p.name for p in out.rglob("traces-*.jsonl"))
    record_figure(f"same pid in two pid namespaces ({recorder})", pids=sorted({s["pid"] for s in seen}),
                  files=len(files), instance_ids=len(instances), loss_records=len(final_losses(out)))
    assert [s["pid"] for s in seen] == [1, 1]
    assert len(files) == 2 and len(instances) == 2 and len(final_losses(out)) == 2
    assert len(read_spans(out)) == 20
