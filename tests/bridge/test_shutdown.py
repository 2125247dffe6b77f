"""TelemetryHandle flush and shutdown: idempotence, truncated open spans, the bounded
shutdown with an unreachable collector, the exit hook and SIGTERM handling."""

import logging
import os
import signal
import socket
import textwrap
import threading
import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from trace_files import read_spans, run_script  # noqa: E402


def _file_config(tmp_path, **changes):
    return LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="r",
                      span_groups="g", **changes)


def test_shutdown_is_idempotent_and_warns_nothing_when_all_was_exported(tmp_path, caplog):
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(_file_config(tmp_path))
    with managed_span("g", "one"):
        pass
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        assert handle.shutdown() is True
        assert handle.shutdown() is True
    assert [r for r in caplog.records if r.name == "lens_core"] == []
    assert [s["name"] for s in read_spans(tmp_path)] == ["one"]


def test_force_flush_writes_queued_spans_before_shutdown(tmp_path):
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(_file_config(tmp_path))
    with managed_span("g", "queued"):
        pass
    assert read_spans(tmp_path) == []  # still in the batch queue
    assert handle.force_flush(timeout_ms=5000) is True
    assert [s["name"] for s in read_spans(tmp_path)] == ["queued"]


def test_spans_open_at_shutdown_end_innermost_first_marked_truncated():
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none"), span_exporter=exporter)
    outer = handle.tracer.start_span("outer")
    with handle.tracer.start_as_current_span("done"):
        pass
    from opentelemetry import trace

    inner = handle.tracer.start_span("inner", context=trace.set_span_in_context(outer))
    handle.shutdown()
    finished = [s for s in exporter.get_finished_spans() if s.name != "lens.telemetry.loss"]
    spans = {s.name: s for s in finished}
    assert [s.name for s in finished] == ["done", "inner", "outer"]
    assert spans["inner"].attributes["lens.span.truncated"] is True
    assert spans["outer"].attributes["lens.span.truncated"] is True
    assert "lens.span.truncated" not in spans["done"].attributes
    assert spans["inner"].end_time <= spans["outer"].end_time
    assert not inner.is_recording() and not outer.is_recording()


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("spool", [True, False])
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_shutdown_returns_by_its_deadline_and_warns_once_when_the_collector_is_unreachable(
        monkeypatch, caplog, protocol, spool, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="otlp", span_groups="g", metrics_enabled=False,
                                        spool_dir=str(tmp_path / "spool"), spool_mb=256 if spool else 0))
    for i in range(10_000):
        with managed_span("g", "lost", i=i):
            pass
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        started = time.monotonic()
        assert handle.shutdown(timeout_ms=2000) is False
        elapsed = time.monotonic() - started
    assert elapsed < 3.0  # the one absolute bound: 2 s deadline, 3 s allowed
    warnings = [r for r in caplog.records if r.name == "lens_core" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    # with the spool nothing is lost: the spans wait on disk for the next process or `lens replay`
    wanted = "10000 of 10000 spans wait in the disk spool" if spool else "spans were not exported"
    assert wanted in warnings[0].getMessage()


def test_the_spool_closed_under_a_sender_step_at_shutdown_is_not_reported_as_an_error(monkeypatch, tmp_path):
    """Regression: shutdown closes the spool without waiting for a delivery or read under way;
    the sender thread's step then failed on the closed file (OSError: Bad file descriptor) and
    a second warning, "export thread: ... (exporting continues)", followed the shutdown's own
    (2 of 4 unreachable-collector shutdowns under LENS_RECORDER=sdk in one CI run)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="otlp", span_groups="g", metrics_enabled=False,
                                        spool_dir=str(tmp_path / "spool"), spool_mb=16))
    pipeline = handle.providers.pipeline
    try:
        def step_cut_short(tries):
            pipeline._sender_stopping = True  # close() began meanwhile and closed the spool
            raise OSError(9, "Bad file descriptor")

        monkeypatch.setattr(pipeline, "_send_one", step_cut_short)
        monkeypatch.setattr(pipeline, "_ensure_threads", lambda: None)
        pipeline._sender_stopping = False
        before = pipeline.last_error
        pipeline._send_loop()  # returns: the step failed because shutdown had begun
        assert pipeline.last_error == before
    finally:
        handle.shutdown(timeout_ms=500)


_EXIT_SCRIPT = textwrap.dedent("""
    import sys
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=sys.argv[1],
                                        run_id="r", span_groups="g"))
    for i in range(5):
        with managed_span("g", "at-exit", i=i):
            pass
""")


def test_spans_are_exported_at_interpreter_exit_without_an_explicit_shutdown(tmp_path):
    result = run_script(_EXIT_SCRIPT, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(s["attributes"]["i"] for s in read_spans(tmp_path)) == [0, 1, 2, 3, 4]


_SIGTERM_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry
    out, mode = Path(sys.argv[1]), sys.argv[2]
    if mode == "python-handler":
        signal.signal(signal.SIGTERM, lambda signum, frame: (out / "marker").write_text(str(signum)))
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(out),
                                        run_id="r", span_groups="g", shutdown_timeout_ms=5000))
    handle.install_signal_handlers()
    for i in range(3):
        with managed_span("g", "before-sigterm", i=i):
            pass
    os.kill(os.getpid(), signal.SIGTERM)
    # only the Python-handler case gets here; skip the exit hook so the flush seen is the handler's
    spans = list((out / "r").glob("traces-*.jsonl"))
    print("flushed" if spans and spans[0].read_text().count("before-sigterm") == 3 else "not flushed")
    sys.stdout.flush()
    os._exit(0)
""")


def test_sigterm_flushes_then_runs_the_previously_installed_python_handler(tmp_path):
    result = run_script(_SIGTERM_SCRIPT, tmp_path, "python-handler")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "flushed"
    assert (tmp_path / "marker").read_text() == str(int(signal.SIGTERM))
    assert len(read_spans(tmp_path)) == 3


def test_sigterm_with_the_default_handler_flushes_then_dies_of_sigterm(tmp_path):
    result = run_script(_SIGTERM_SCRIPT, tmp_path, "default")
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert sorted(s["attributes"]["i"] for s in read_spans(tmp_path)) == [0, 1, 2]


@pytest.mark.parametrize("quiet", ["disabled", "quiet rank"])
def test_a_second_shutdown_of_a_handle_that_is_not_exporting_crashes_no_thread(monkeypatch, quiet):
    """Regression: shutdown() called twice on a handle that exports nothing (telemetry off,
    a quiet rank) started a closing thread on the second call, which died with
    AttributeError ('NoneType' object has no attribute 'pipeline') while the call itself
    returned True."""
    crashed = []
    monkeypatch.setattr("threading.excepthook", lambda args: crashed.append(f"{args.exc_type.__name__}: "
                                                                            f"{args.exc_value}"))
    if quiet == "disabled":
        handle = setup_telemetry(LensConfig(enabled=False))
    else:
        handle = setup_telemetry(LensConfig(enabled=True, export_ranks="first"), rank=1, world_size=2)
    assert not handle.is_exporting
    assert handle.shutdown() is True
    assert handle.shutdown() is True
    for thread in threading.enumerate():
        if thread.name.startswith("lens-"):
            thread.join(5)
    assert crashed == []


_FORK_DURING_SHUTDOWN = textwrap.dedent("""
    import os, sys, threading, time
    from lens_core import LensConfig, managed_span
    from lens_core.registry import SpanRegistry
    from otel_bridge import setup_telemetry
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="otlp", span_groups="g", metrics_enabled=False,
                                        spool_mb=0, shutdown_timeout_ms=3000))
    for i in range(1000):
        with managed_span("g", "lost", i=i):
            pass
    started = time.monotonic()
    closing = threading.Thread(target=handle.shutdown)
    closing.start()
    while not handle.closed:
        time.sleep(0.001)
    time.sleep(0.05)  # the parent's closing thread is under way, waiting on the dead collector
    pid = os.fork()
    if pid == 0:
        began = time.monotonic()
        ok = handle.shutdown()
        print("child", ok, time.monotonic() - began, flush=True)
        os._exit(0)
    closing.join()
    os.waitpid(pid, 0)
    print("parent", time.monotonic() - started, flush=True)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_the_parents_shutdown_does_not_wait_out_the_parents_deadline():
    """Regression: a child forked while the parent's shutdown() was under way inherited that
    shutdown's state (its deadline, no result yet, the close claimed by a thread that stayed
    in the parent): the child's own shutdown() waited out the parent's deadline and reported
    "shutdown did not finish within 3000 ms" (4 s of a 3 s limit in the issue's runs)."""
    result = run_script(_FORK_DURING_SHUTDOWN, timeout=60, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    child_ok, child_s = lines["child"].split()
    assert child_ok == "True", result.stderr
    assert result.stderr.count("did not finish") == 1  # the parent's, not the child's
    assert float(child_s) < float(lines["parent"]) / 10
