"""The logging bridge: attached by config, one handler however often it is set up, trace ids
and ``extra`` fields on exported records, and the console left as it was."""

import logging
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from lens_core import LensConfig, managed_span  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from otel_bridge import setup_logging_bridge, setup_telemetry  # noqa: E402
from otel_bridge.logging_bridge import TraceIdFilter  # noqa: E402
from trace_files import read_logs, run_script  # noqa: E402

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
    assert (record["body"], record["trace_id"], record["span_id"]) == (
        "inside", f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")


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


# -- attached by config ------------------------------------------------------------------------


def _config(tmp_path, **env):
    return LensConfig.from_env(environ={"LENS_ENABLED": "1", "LENS_LOGS_ENABLED": "1", "LENS_EXPORTER": "file",
                                        "LENS_FILE_DIR": str(tmp_path), "LENS_RUN_ID": "r", **env})


def test_lens_logs_enabled_alone_exports_python_logging(tmp_path):
    """Regression: LENS_LOGS_ENABLED=1 built a LoggerProvider but attached no handler, so
    nothing was written until the program also called setup_logging_bridge()."""
    handle = setup_telemetry(_config(tmp_path))
    logging.getLogger("app.trainer").warning("step %d done", 3)
    handle.shutdown()
    assert [(r["body"], r["severity"]) for r in read_logs(tmp_path)] == [("step 3 done", "WARN")]


def test_the_bridge_exports_what_logging_lets_through_and_changes_no_level(tmp_path):
    root = logging.getLogger()
    before = root.level
    handle = setup_telemetry(_config(tmp_path))
    assert root.level == before
    logger = logging.getLogger("app.levels")
    logger.setLevel(logging.INFO)
    logger.info("info passes the logger's level")
    logger.debug("debug does not")
    handle.shutdown()
    assert [r["body"] for r in read_logs(tmp_path)] == ["info passes the logger's level"]


def test_an_explicit_level_lowers_the_logger_level_and_gates_the_export(tmp_path):
    handle = setup_telemetry(_config(tmp_path, LENS_LOGS_ENABLED="0"))
    assert handle.providers.logger_provider is None
    handle.shutdown()
    handle = setup_telemetry(_config(tmp_path), _allow_reinit=True)
    logger = logging.getLogger("app.explicit")
    logger.setLevel(logging.WARNING)
    setup_logging_bridge("app.explicit", level=logging.INFO)
    assert logger.level == logging.INFO
    logger.info("exported once, though it passes two bridges")
    handle.shutdown()
    assert [r["body"] for r in read_logs(tmp_path)] == ["exported once, though it passes two bridges"]


def test_extra_fields_are_exported_as_attributes(otlp_receiver, monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
    handle = setup_telemetry(_config(tmp_path, LENS_EXPORTER="auto"))
    try:
        raise ValueError("bad batch")
    except ValueError:
        logging.getLogger("app.extras").error("step failed", exc_info=True, extra={
            "step": 3, "loss": 0.5, "ok": False, "tags": ["a", "b"], "where": tmp_path,
            "api_key": "sk-123", "nothing": None})
    handle.shutdown()
    (log,) = otlp_receiver.wait_for_logs(1)
    attrs = log.attributes
    assert (log.body, log.severity_text) == ("step failed", "ERROR")
    assert {k: attrs[k] for k in ("step", "loss", "ok", "tags", "where", "api_key")} == {
        "step": 3, "loss": 0.5, "ok": False, "tags": ["a", "b"], "where": str(tmp_path), "api_key": "[REDACTED]"}
    assert attrs["exception.type"] == "ValueError" and "bad batch" in attrs["exception.stacktrace"]
    assert attrs["code.function.name"] == "test_extra_fields_are_exported_as_attributes"
    assert attrs["thread.name"] == "MainThread"
    assert not {"nothing", "otel_trace_id", "otel_span_id", "_lens_log_exported"} & set(attrs)


def test_shutdown_detaches_the_bridge_and_a_new_setup_exports_to_its_own_provider(tmp_path):
    """Regression: a bridge handler outlived its setup, so after a shutdown and a new setup
    records went to the closed provider (setting the bridge up again returned the stale one)."""
    first = setup_telemetry(_config(tmp_path / "a"))
    logging.getLogger("app.lifecycle").warning("one")
    first.shutdown()
    assert [h for h in logging.getLogger().handlers if getattr(h, "_lens_logging_bridge", False)] == []
    second = setup_telemetry(_config(tmp_path / "b"))
    logging.getLogger("app.lifecycle").warning("two")
    second.shutdown()
    assert [r["body"] for r in read_logs(tmp_path / "a")] == ["one"]
    assert [r["body"] for r in read_logs(tmp_path / "b")] == ["two"]


def test_a_bridge_left_from_a_replaced_provider_is_swapped_out(tmp_path):
    from opentelemetry.sdk._logs import LoggerProvider

    stale = setup_logging_bridge("app.swap", logger_provider=LoggerProvider())
    handle = setup_telemetry(_config(tmp_path))
    fresh = setup_logging_bridge("app.swap")
    assert fresh is not stale and fresh.logger_provider is handle.providers.logger_provider
    assert _bridged(logging.getLogger("app.swap")) == [fresh]


# -- the console -------------------------------------------------------------------------------

_CONSOLE_SCRIPT = textwrap.dedent("""
    import logging, sys
    from lens_core import LensConfig, SpanRegistry, set_span_group_spec
    from otel_bridge import setup_telemetry
    mode, file_dir = sys.argv[1], sys.argv[2]
    if mode == "user-handler":
        logging.basicConfig(format="USER %(name)s %(message)s")
    SpanRegistry.register("app", ["g"])
    config = LensConfig(enabled=mode != "off", logs_enabled=True, exporter="file", file_dir=file_dir, run_id="r",
                        span_groups="g")
    handle = setup_telemetry(config)
    if mode == "basic-config-after":
        logging.basicConfig(level=logging.INFO, format="LATE %(message)s")
    log = logging.getLogger("app")
    log.info("an info")
    log.warning("a warning")
    logging.getLogger("opentelemetry.sdk.test").warning("an sdk warning")
    set_span_group_spec("no_such_group")  # lens warns about the unknown group
    handle.shutdown()
""")


def _console(mode, tmp_path):
    result = run_script(_CONSOLE_SCRIPT, mode, tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stderr.splitlines()


def test_the_bridge_leaves_the_console_as_python_logging_would_print_it(tmp_path):
    """Regression: with the bridge on the root logger, Python's last-resort handler no
    longer ran, so warnings (lens's own included) stopped reaching the console and landed
    only in the log file."""
    without = _console("off", tmp_path / "off")
    with_bridge = _console("on", tmp_path / "on")
    assert with_bridge == without
    assert "a warning" in with_bridge and "an sdk warning" in with_bridge
    assert any("no_such_group" in line for line in with_bridge)
    exported = [r["body"] for r in read_logs(tmp_path / "on")]
    assert "a warning" in exported and any("no_such_group" in body for body in exported)
    assert "an sdk warning" not in exported and "an info" not in exported


def test_the_users_console_handler_keeps_printing_each_record_once(tmp_path):
    lines = _console("user-handler", tmp_path)
    assert lines.count("USER app a warning") == 1 and "a warning" not in lines
    assert "an info" not in " ".join(lines)


def test_basic_config_after_setup_still_configures_the_console(tmp_path):
    lines = _console("basic-config-after", tmp_path)
    assert "LATE an info" in lines and "LATE a warning" in lines
    assert [r["body"] for r in read_logs(tmp_path) if r["body"].startswith("an")] == ["an info"]
