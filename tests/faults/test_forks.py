"""Forks, with real processes: a forked child never exports or counts its parent's spans (open
Lens spans, open raw OpenTelemetry spans, queued spans), under both recorders."""

import pytest

from trace_files import final_losses, read_spans

from .figures import record_figure
from .processes import start

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


@pytest.mark.parametrize("child_spans", [0, 10])
def test_a_forked_child_never_exports_or_counts_the_parents_spans(tmp_path, recorder, child_spans):
    """Regression: a child that shut down exported, marked truncated, the spans its parent had
    open at the fork (a raw OTel span under both recorders, every span under LENS_RECORDER=sdk),
    with a loss record counting 502 spans it never made (500 "never ended")."""
    out = tmp_path / "out"
    proc = start("fork_open.py", child_spans, LENS_EXPORTER="file", LENS_FILE_DIR=out, LENS_RUN_ID="fork",
                 LENS_RECORDER=recorder)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.split() == ["0", "True"], stderr[-3000:]
    by_pid = {}
    for s in read_spans(out):
        by_pid.setdefault(s["resource"]["process.pid"], []).append(s["name"])
    losses = {attrs["lens.spans.created"]: attrs for attrs in final_losses(out).values()}
    parent_pid = next(pid for pid, names in by_pid.items() if "parent.open" in names)
    child_names = [n for pid, names in by_pid.items() if pid != parent_pid for n in names]
    record_figure(f"fork with spans open, child makes {child_spans} ({recorder})",
                  child_exported=len(child_names), parents_spans_in_child=sum(n.startswith("parent.") for n in child_names))
    assert child_names == ["child"] * child_spans
    assert sorted(losses) == ([child_spans] if child_spans else []) + [502]
    assert all(v["lens.spans.unended"] == 0 and v["lens.spans.truncated"] == 0 for v in losses.values())


def test_a_subprocess_started_after_shutdown_keeps_its_descriptors(tmp_path, unused_port):
    """Regression: after a shutdown that left spans in the spool, every process forked from the
    rank closed the descriptor numbers the closed spool had held, whatever they named by then: a
    subprocess with a preexec_fn (whose child runs fork hooks before the exec) lost its stdout
    and failed with EBADF (Ray's ``ray.init`` starting its monitor, in CI). A child forked after
    the shutdown also came back with an open pipeline and a new spool."""
    proc = start("subprocess_after_shutdown.py", LENS_EXPORTER="otlp", LENS_RUN_ID="after-shutdown",
                 OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{unused_port}",
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", LENS_SPOOL_DIR=tmp_path / "spool")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout.splitlines() == ["numbers reused True", "subprocess ok 0", "child closed=True spool=None"], stderr[-3000:]
