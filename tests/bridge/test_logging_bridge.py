"""The logging bridge: one handler however often it is set up, trace ids on records."""

import logging

import pytest

pytest.importorskip("opentelemetry.sdk")

from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import setup_logging_bridge, setup_telemetry  # noqa: E402
from otel_bridge.logging_bridge import TraceIdFilter  # noqa: E402
from trace_files import read_logs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*LoggingHandler.*:DeprecationWarning")


def _bridged(logger):
    return [h for h in logger.handlers if getattr(h, "_lens_logging_bridge", False)]


def test_setting_up_the_bridge_twice_attaches_one_handler(tmp_path):
    setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), logs_enabled=True))
    first = setup_logging_bridge("lens.test.twice")
    assert setup_logging_bridge("lens.test.twice") is first
    logger = logging.getLogger("lens.test.twice")
    assert _bridged(logger) == [first]
    assert len([f for f in logger.filters if isinstance(f, TraceIdFilter)]) == 1


def test_exported_log_records_carry_the_current_trace_and_span_ids(tmp_path):
    SpanRegistry.register("t", ["g"])
    handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=str(tmp_path), run_id="r",
                                        span_groups="g", logs_enabled=True))
    setup_logging_bridge("lens.test.ids", level=logging.INFO)
    logger = logging.getLogger("lens.test.ids")
    with managed_span("g", "work") as span:
        logger.info("inside")
    logger.debug("below the level")
    handle.shutdown()
    (record,) = read_logs(tmp_path)
    ctx = span.get_span_context()
    assert record == {"body": "inside", "trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}


def test_without_a_logger_provider_only_the_trace_id_filter_is_attached():
    assert setup_logging_bridge("lens.test.quiet") is None
    logger = logging.getLogger("lens.test.quiet")
    assert _bridged(logger) == []
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    logger.addHandler(handler)
    try:
        logger.warning("no span")
    finally:
        logger.removeHandler(handler)
    assert (seen[0].otel_trace_id, seen[0].otel_span_id) == ("0", "0")
