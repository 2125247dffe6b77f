"""LensConfig: defaults, from_env precedence, strict parsing, export ranks, no OTel import."""

import subprocess
import sys
from pathlib import Path

import pytest

from lens_core.config import ExportRanks, LensConfig, parse_bool, parse_export_ranks


def from_env(prefix="LENS", fallback_prefix=None, **env):
    return LensConfig.from_env(prefix, fallback_prefix, environ=env)


# ---- defaults -----------------------------------------------------------------------------------


def test_defaults():
    config = LensConfig()
    assert (config.enabled, config.service_name, config.span_groups, config.exporter, str(config.export_ranks),
            config.file_dir, config.metric_export_interval_ms) == (
        False, "lens", "default", "auto", "all", "./lens-traces", 10_000)
    assert config.export_ranks == ExportRanks("all")


def test_from_env_with_nothing_set_is_the_default():
    assert from_env() == LensConfig()


def test_lens_config_is_reachable_from_the_package():
    import lens_core

    assert lens_core.LensConfig is LensConfig


# ---- precedence ---------------------------------------------------------------------------------


def test_prefixed_variables_are_read():
    config = from_env(LENS_ENABLED="1", LENS_SPAN_GROUPS="per_step,-job", LENS_EXPORTER="FILE",
                      LENS_FILE_DIR="/tmp/t", LENS_RUN_ID="r7", LENS_METRIC_EXPORT_INTERVAL_MS=" 250 ")
    assert (config.enabled, config.span_groups, config.exporter, config.file_dir, config.run_id,
            config.metric_export_interval_ms) == (True, "per_step,-job", "file", "/tmp/t", "r7", 250)


def test_prefix_variable_wins_over_the_fallback():
    config = from_env("RL", "LENS", RL_SERVICE_NAME="rl", LENS_SERVICE_NAME="lens-svc", LENS_ENABLED="yes")
    assert (config.service_name, config.enabled) == ("rl", True)


def test_empty_prefix_variable_falls_back():
    config = from_env("RL", "LENS", RL_EXPORTER="  ", LENS_EXPORTER="console")
    assert config.exporter == "console"


def test_empty_value_means_unset():
    assert from_env(LENS_ENABLED="", LENS_EXPORTER="", LENS_METRIC_EXPORT_INTERVAL_MS="") == LensConfig()


def test_otel_service_name_is_used_when_no_prefix_variable_is_set():
    assert from_env(OTEL_SERVICE_NAME=" trainer ").service_name == "trainer"
    assert from_env("RL", "LENS", OTEL_SERVICE_NAME="otel", LENS_SERVICE_NAME="lens").service_name == "lens"


def test_from_env_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("LENSTEST_SERVICE_NAME", "from-os")
    assert LensConfig.from_env("LENSTEST").service_name == "from-os"


def test_bad_prefix_is_rejected():
    with pytest.raises(ValueError, match="prefix 'LENS-X'"):
        from_env("LENS-X")


# ---- booleans -----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ("1", True), ("true", True), ("TRUE", True), ("Yes", True), ("on", True), ("ON", True),
    ("0", False), ("false", False), ("False", False), ("NO", False), ("off", False), (" Off ", False),
])
def test_boolean_spellings(raw, expected):
    assert from_env(LENS_ENABLED=raw, LENS_LOGS_ENABLED=raw).enabled is expected
    assert parse_bool(raw) is expected


def test_bad_boolean_names_the_variable_the_value_and_what_is_allowed():
    with pytest.raises(ValueError) as err:
        from_env("RL", "LENS", LENS_TRACES_ENABLED="maybe")
    assert str(err.value) == (
        "LENS_TRACES_ENABLED='maybe': expected a boolean (one of 1, true, yes, on, 0, false, no, off)")


# ---- bad values ---------------------------------------------------------------------------------


def test_bad_exporter_names_the_variable_the_value_and_what_is_allowed():
    with pytest.raises(ValueError) as err:
        from_env(LENS_EXPORTER="jaeger")
    assert str(err.value) == "LENS_EXPORTER='jaeger': allowed exporters: auto, otlp, console, file, none"


@pytest.mark.parametrize("raw", ["sample:2", "sample:0", "sample:x", "-1", "abc", "0,-3", "first,last"])
def test_bad_export_ranks_name_the_variable_the_value_and_what_is_allowed(raw):
    with pytest.raises(ValueError) as err:
        from_env(LENS_EXPORT_RANKS=raw)
    message = str(err.value)
    assert message.startswith(f"LENS_EXPORT_RANKS={raw!r}:")
    assert "allowed: all, first, last, per_node, a list of ranks like 0,8,16, or sample:FRACTION" in message


@pytest.mark.parametrize("raw", ["0", "-5", "x", "1.5", "+5", "1_000", "\uff15", "86400001", "9" * 5000])
def test_bad_milliseconds_name_the_variable_the_value_and_what_is_allowed(raw):
    with pytest.raises(ValueError) as err:
        from_env(LENS_METRIC_EXPORT_INTERVAL_MS=raw)
    assert str(err.value) == (
        f"LENS_METRIC_EXPORT_INTERVAL_MS={raw!r}: must be a whole number of milliseconds from 1 to 86400000")


@pytest.mark.parametrize("variable, field, high, unit", [
    ("LENS_SHUTDOWN_TIMEOUT_MS", "shutdown_timeout_ms", 3_600_000, "milliseconds"),
    ("LENS_METRIC_EXPORT_INTERVAL_MS", "metric_export_interval_ms", 86_400_000, "milliseconds"),
    ("LENS_MAX_OPEN_SPANS", "max_open_spans", 10_000_000, "spans"),
    ("LENS_BUFFER_MB", "buffer_mb", 65_536, "MB"),
])
def test_numbers_beyond_the_upper_bound_are_rejected_at_config_time(variable, field, high, unit):
    """Regression: LENS_SHUTDOWN_TIMEOUT_MS=99999999999999999999 was accepted, then shutdown()
    raised OverflowError into the caller (and the metric interval killed the metrics thread)."""
    huge = "99999999999999999999"
    with pytest.raises(ValueError) as err:
        from_env(**{variable: huge})
    assert str(err.value) == f"{variable}={huge!r}: must be a whole number of {unit} from 1 to {high}"
    with pytest.raises(ValueError, match=rf"^{field}=99999999999999999999: .* from 1 to {high}$"):
        LensConfig(**{field: int(huge)})
    assert getattr(from_env(**{variable: str(high)}), field) == high  # the bound itself is allowed
    with pytest.raises(ValueError):
        LensConfig(**{field: high + 1})
    for bad in ("0", "-1", "+5", "1_000", "\uff15", "1.5"):
        with pytest.raises(ValueError, match=rf"^{variable}="):
            from_env(**{variable: bad})


def test_every_numeric_setting_has_a_range_and_the_millisecond_ones_fit_threading():
    import threading

    from lens_core.config import NUMERIC_RANGES

    numeric = {f for f, v in LensConfig()._defaults.items() if type(v) is int} - {"file_mode"}  # octal bits
    assert set(NUMERIC_RANGES) == numeric == {"metric_export_interval_ms", "shutdown_timeout_ms",
                                              "max_open_spans", "buffer_mb", "spool_mb", "file_line_mb", "device_events"}
    for name, (low, high, unit) in NUMERIC_RANGES.items():
        assert (0 if name == "spool_mb" else 1) <= low < high  # spool_mb=0 turns the spool off
        if unit == "milliseconds":
            assert high / 1000 < threading.TIMEOUT_MAX, name


def test_the_largest_allowed_shutdown_timeout_does_not_overflow_a_real_wait():
    """The bound is usable end to end: a thread join with the largest timeout returns."""
    import threading

    from lens_core.config import NUMERIC_RANGES

    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join(NUMERIC_RANGES["shutdown_timeout_ms"][1] / 1000)  # OverflowError if too large
    assert not thread.is_alive()


def test_export_ranks_beyond_a_c_int_are_rejected():
    from lens_core.export_ranks import MAX_RANK

    assert parse_export_ranks(f"0,{MAX_RANK}").ranks == (0, MAX_RANK)
    with pytest.raises(ValueError, match=rf"^LENS_EXPORT_RANKS='0,{MAX_RANK + 1}': ranks go from 0 to {MAX_RANK}; "
                                         "allowed: all, first"):
        from_env(LENS_EXPORT_RANKS=f"0,{MAX_RANK + 1}")


def test_redact_allow_is_read_as_a_sorted_comma_list():
    config = from_env(LENS_REDACT_ALLOW=" stop_tokens, max_tokens,,stop_tokens ")
    assert config.redact_allow == ("max_tokens", "stop_tokens")
    assert LensConfig(redact_allow=["b", "a "]).redact_allow == ("a", "b")
    assert LensConfig().redact_allow == ()
    with pytest.raises(ValueError, match=r"redact_allow=\[1\]: must be a comma list or a sequence of attribute keys"):
        LensConfig(redact_allow=[1])
    with pytest.raises(ValueError, match=r"redact_allow=5: must be"):
        LensConfig(redact_allow=5)


def test_bad_value_in_the_fallback_names_the_fallback_variable():
    with pytest.raises(ValueError, match=r"^LENS_SHUTDOWN_TIMEOUT_MS='0':"):
        from_env("RL", "LENS", LENS_SHUTDOWN_TIMEOUT_MS="0")


@pytest.mark.parametrize("kwargs, match", [
    ({"exporter": "zipkin"}, r"exporter='zipkin': allowed: auto, otlp, console, file, none"),
    ({"metric_export_interval_ms": 0}, r"metric_export_interval_ms=0: must be a whole number of milliseconds "
                                       r"from 1 to 86400000"),
    ({"shutdown_timeout_ms": True}, r"shutdown_timeout_ms=True: must be a whole number of milliseconds"),
    ({"shutdown_timeout_ms": 5000.0}, r"shutdown_timeout_ms=5000.0: must be a whole number of milliseconds"),
    ({"shutdown_timeout_ms": "5000"}, r"shutdown_timeout_ms='5000': must be an int, not a str"),
    ({"service_name": " "}, r"service_name=' ': must be a non-empty string"),
    ({"export_ranks": "sample:1.5"}, r"export_ranks='sample:1.5': the sample fraction must be in \(0, 1\]"),
])
def test_constructor_validates_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LensConfig(**kwargs)


def test_replace_returns_a_validated_copy():
    config = LensConfig().replace(enabled=True, export_ranks="first")
    assert (config.enabled, config.export_ranks) == (True, ExportRanks("first"))
    with pytest.raises(ValueError):
        config.replace(exporter="bad")


# ---- export ranks -------------------------------------------------------------------------------


def exporting(spec, world_size, local_ranks=None):
    ranks = parse_export_ranks(spec)
    local_ranks = local_ranks or [0] * world_size
    return [r for r in range(world_size) if ranks.exports(r, world_size, local_ranks[r])]


def test_export_ranks_all():
    assert exporting("all", 4) == [0, 1, 2, 3]


def test_export_ranks_first_and_last():
    assert exporting("FIRST", 8) == [0]
    assert exporting("last", 8) == [7]


def test_export_ranks_per_node_uses_the_local_rank():
    assert exporting("per_node", 8, local_ranks=[0, 1, 2, 3] * 2) == [0, 4]


def test_export_ranks_list():
    assert exporting(" 16, 0,8 ", 24) == [0, 8, 16]
    assert str(parse_export_ranks("16,0,8")) == "0,8,16"


def test_export_ranks_sample_includes_rank_0_and_about_the_fraction():
    chosen = exporting("sample:0.25", 64)
    assert chosen[0] == 0
    assert len(chosen) == 16
    assert exporting("sample:0.25", 64) == chosen  # deterministic across restarts
    assert str(parse_export_ranks("sample:0.25")) == "sample:0.25"


def test_export_ranks_small_sample_still_exports_rank_0():
    assert exporting("sample:0.001", 8) == [0]


def test_export_ranks_from_env():
    assert from_env(LENS_EXPORT_RANKS="0,8").export_ranks == ExportRanks("list", (0, 8))


# ---- import hygiene -----------------------------------------------------------------------------


def test_building_and_validating_a_config_imports_no_opentelemetry():
    code = (
        "import sys\n"
        "from lens_core.config import LensConfig\n"
        "c = LensConfig.from_env(environ={'LENS_ENABLED': '1', 'LENS_EXPORTER': 'otlp',"
        " 'LENS_EXPORT_RANKS': 'sample:0.5'})\n"
        "assert c.enabled and c.exporter == 'otlp'\n"
        "try:\n"
        "    LensConfig.from_env(environ={'LENS_EXPORTER': 'bad'})\n"
        "except ValueError:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.6, 0.7, 0.9])
def test_export_ranks_sample_exports_the_asked_fraction_at_any_size(fraction):
    """Regression: sample:F kept every round(1/F)-th rank, so sample:0.7 exported on 100%."""
    chosen = exporting(f"sample:{fraction}", 1000)
    assert 0 in chosen
    assert abs(len(chosen) - 1000 * fraction) <= 1


def test_goodput_metrics_is_on_by_default_and_read_from_the_environment():
    assert LensConfig().goodput_metrics is True
    assert from_env(LENS_GOODPUT_METRICS="0").goodput_metrics is False
    with pytest.raises(ValueError, match="LENS_GOODPUT_METRICS"):
        from_env(LENS_GOODPUT_METRICS="maybe")


@pytest.mark.parametrize("raw, mode", [("0600", 0o600), ("640", 0o640), ("0o660", 0o660), ("0666", 0o666)])
def test_lens_file_mode_takes_octal_permissions_that_keep_the_owner_reading_and_writing(raw, mode):
    assert LensConfig.from_env(environ={"LENS_FILE_MODE": raw}).file_mode == mode
    assert LensConfig(file_mode=raw).file_mode == mode


@pytest.mark.parametrize("raw", ["0755", "0400", "0200", "4600", "1666", "rw-r--r--", "9", "", "0o", 0o700, True])
def test_lens_file_mode_refuses_execute_special_bits_and_an_owner_without_read_write(raw):
    with pytest.raises(ValueError, match="file permissions"):
        LensConfig(file_mode=raw)


def test_a_config_survives_copy_deepcopy_and_pickle():
    """Regression: LensConfig could not be pickled or copied (its immutable __setattr__
    refused the default slot-by-slot restore)."""
    import copy
    import pickle

    config = LensConfig(enabled=True, export_ranks="0,3", redact_allow="a,b", file_mode="0640")
    for clone in (copy.copy(config), copy.deepcopy(config), pickle.loads(pickle.dumps(config)),
                  pickle.loads(pickle.dumps(config, protocol=0))):
        assert clone == config and type(clone.export_ranks) is type(config.export_ranks)
