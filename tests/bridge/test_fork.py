"""Forking an exporting process: no deadlock, no span exported twice, and the child's
export report counts only the child's spans (see the otel_bridge.handle docstring)."""

import collections
import os
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")
# Fork handling differs between the recorder twins: each runs (tests/twins.py).
pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"), pytest.mark.usefixtures("twin")]

from trace_files import read_spans, run_script  # noqa: E402

# A short batch delay keeps the parent's worker exporting while a second thread keeps
# ending spans, so the fork lands in the middle of exports and queued spans.
_FORK_SCRIPT = textwrap.dedent("""
    import os, sys, threading
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1],
                                        run_id="r", span_groups="g"))
    stop = threading.Event()
    def busy():
        while not stop.is_set():
            with managed_span("g", "parent-busy"):
                pass
    worker = threading.Thread(target=busy)
    worker.start()
    for i in range(200):
        with managed_span("g", "parent-before", i=i):
            pass
    pid = os.fork()
    if pid == 0:
        for i in range(50):
            with managed_span("g", "child", i=i):
                pass
        ok = handle.shutdown(timeout_ms=5000)
        os._exit(0 if ok else 3)
    stop.set()
    worker.join()
    with managed_span("g", "parent-after"):
        pass
    _, status = os.waitpid(pid, 0)
    assert handle.shutdown(timeout_ms=5000)
    print(os.waitstatus_to_exitcode(status), pid)
""")


def test_a_forked_child_exports_only_its_own_spans_and_each_span_once(tmp_path):
    result = run_script(_FORK_SCRIPT, tmp_path, timeout=30, env={"OTEL_BSP_SCHEDULE_DELAY": "1"})  # a deadlock fails
    assert result.returncode == 0, result.stderr
    child_code, child_pid = result.stdout.split()
    assert child_code == "0"
    spans = read_spans(tmp_path)
    counts = collections.Counter(s["span_id"] for s in spans)
    assert [sid for sid, n in counts.items() if n > 1] == []
    by_file = collections.defaultdict(list)
    for span in spans:
        by_file["child" if f"-pid{child_pid}-" in span["file"] else "parent"].append(span["name"])
    assert sorted(set(by_file["child"])) == ["child"] and len(by_file["child"]) == 50
    assert by_file["parent"].count("parent-before") == 200
    assert by_file["parent"].count("parent-after") == 1


_COUNT_SCRIPT = textwrap.dedent("""
    import os
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry

    PARENT = os.getpid()

    class ParentOnlyExporter(SpanExporter):
        # succeeds in the parent, fails in any forked child
        def export(self, spans):
            return SpanExportResult.SUCCESS if os.getpid() == PARENT else SpanExportResult.FAILURE
        def shutdown(self):
            pass

    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g"),
                             span_exporter=ParentOnlyExporter())
    for i in range(5):
        with managed_span("g", "parent"):
            pass
    assert handle.force_flush(5000)
    pid = os.fork()
    if pid == 0:
        for i in range(2):
            with managed_span("g", "child"):
                pass
        os._exit(1 if handle.shutdown(timeout_ms=5000) else 0)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
    os._exit(0)
""")


def test_a_forked_childs_shutdown_reports_its_own_lost_spans():
    """Regression: the child inherited the parent's exported-span count, so a child whose
    exports all failed reported nothing lost (2 ended - 5 exported by the parent < 0)."""
    result = run_script(_COUNT_SCRIPT, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0", "the child's shutdown claimed every span was exported"
    assert "2 of 2 spans were not exported" in result.stderr


def test_building_the_file_exporter_leaves_nothing_to_import_at_export_time(tmp_path):
    """Regression: the OTLP/JSON encoder imported protobuf's json_format lazily on the
    batch worker thread; a fork landing mid-import left the child's first export blocked
    on the inherited module lock (its shutdown then timed out with every span lost)."""
    script = textwrap.dedent("""
        import sys
        from lens_core import LensConfig
        from otel_bridge import setup_telemetry
        setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1], run_id="r"))
        print("google.protobuf.json_format" in sys.modules)
    """)
    result = run_script(script, tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]
