"""Spans record the thread that started them, so a report gives each thread its own lane."""

import threading

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

# Recording paths: run under each gate-and-recorder twin (tests/twins.py).
pytestmark = pytest.mark.usefixtures("twin")

from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from lens_report import TraceStore, build_report, read_spans, render_html  # noqa: E402


def test_spans_carry_thread_id_and_name_and_get_a_lane_per_thread(tmp_path):
    """Regression: the SDK records no thread identity, so the waterfall put a process's
    collector and worker threads in one lane."""
    SpanRegistry.register("lanes", ["work"])
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="work", exporter="file",
                                        file_dir=str(tmp_path), run_id="lanes", metrics_enabled=False))

    def work():
        with managed_span("work", "in.worker"):
            pass

    worker = threading.Thread(target=work, name="collector-thread")
    with managed_span("work", "in.main"):
        worker.start()
        worker.join()
    assert handle.shutdown()

    read = read_spans([str(tmp_path)])
    by_name = {span.name: span for span in read.spans}
    assert by_name["in.worker"].attributes["thread.name"] == "collector-thread"
    assert by_name["in.worker"].attributes["thread.id"] == worker.ident
    assert by_name["in.main"].attributes["thread.name"] == threading.current_thread().name
    with TraceStore() as store:
        store.load([str(tmp_path)])
        html = render_html(build_report(store), store)
    assert "rank 0 · collector-thread" in html
    assert f"rank 0 · {threading.current_thread().name}" in html
