"""LensConfig and LensConfig.from_env: strict parsing with errors that say what is allowed."""

from __future__ import annotations

import os

from ._record import Record
from .export_ranks import ExportRanks, parse_export_ranks

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from typing import Iterable, Mapping, Optional, Tuple, Union

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "DEVICE_TIMING",
    "EXPORTERS",
    "ExportRanks",
    "LensConfig",
    "NUMERIC_RANGES",
    "RECORDERS",
    "parse_bool",
    "parse_export_ranks",
    "parse_file_mode",
    "parse_redact_allow",
    "parse_spool_dir",
    "pure_python_requested",
]

#: The service name when neither LENS_SERVICE_NAME nor OTEL_SERVICE_NAME is set.
DEFAULT_SERVICE_NAME = "lens"
#: Exporter names a config may name (``auto``: OTLP if an endpoint is set, else file).
EXPORTERS = ("auto", "otlp", "console", "file", "none")
#: Span recorders: ``native`` (Lens's compact records) or ``sdk`` (OpenTelemetry SDK spans).
RECORDERS = ("native", "sdk")
#: Device timing of device-timed groups (docs/guide/gpu-timing.md): ``auto`` (on where the process
#: has initialised CUDA through torch), ``on`` (on where a CUDA device can be used), ``off``.
DEVICE_TIMING = ("auto", "on", "off")
#: Allowed (min, max, unit) of every numeric setting, checked by LensConfig and from_env.
#: The millisecond maxima stay far below what ``threading`` and ``time`` accept
#: (``threading.TIMEOUT_MAX`` is ~9.2e12 ms on Linux), so no setting can overflow a wait:
#: shutdown runs at process exit, where schedulers kill a job within seconds to minutes
#: (SLURM's KillWait, Kubernetes' grace period), so an hour is generous; a metric interval
#: beyond a day would export nothing while a job runs (metrics still flush at shutdown).
NUMERIC_RANGES = {
    "metric_export_interval_ms": (1, 86_400_000, "milliseconds"),
    "shutdown_timeout_ms": (1, 3_600_000, "milliseconds"),
    "max_open_spans": (1, 10_000_000, "spans"),
    "buffer_mb": (1, 65_536, "MB"),
    "spool_mb": (0, 1_048_576, "MB"),
    # The longest line the file exporter writes: `lens report` reads lines up to 16 MB
    # (DuckDB's object size), so no setting may write one it cannot read.
    "file_line_mb": (1, 16, "MB"),
    # Device events held at once by device-timed spans not yet resolved (two a span).
    "device_events": (4, 1_048_576, "events"),
}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_bool(value: str, variable: str = "value") -> bool:
    """Parse 1/0, true/false, yes/no, on/off (any case); raise ValueError naming ``variable``."""
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{variable}={value!r}: expected a boolean (one of {', '.join(_TRUE + _FALSE)})")


def pure_python_requested(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether ``LENS_PURE_PYTHON`` asks for the pure-Python twins (gate, recorder, encoders, the
    report's reader) instead of the compiled ones: unset or empty is no; anything but a boolean
    raises ValueError naming the variable. The one place the variable is read."""
    value = (os.environ if environ is None else environ).get("LENS_PURE_PYTHON", "")
    return bool(value.strip()) and parse_bool(value, "LENS_PURE_PYTHON")


def _bounded(name: str, value: object, shown: str) -> int:
    """``value`` as an int within NUMERIC_RANGES[name]; ValueError naming ``shown``."""
    low, high, unit = NUMERIC_RANGES[name]
    if isinstance(value, str):  # from the environment: plain ASCII digits, no sign or "_"
        text = value.strip()
        # (the length check keeps int() from its own error on thousands of digits)
        number = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
    else:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None or not low <= number <= high:
        raise ValueError(f"{shown}={value!r}: must be a whole number of {unit} from {low} to {high}")
    return number


def parse_redact_allow(value: object, variable: str = "redact_allow") -> Tuple[str, ...]:
    """Attribute keys never redacted by key, as a sorted tuple: a comma list
    (``"max_tokens, stop_tokens"``) or an iterable of str; blanks are skipped."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        keys = tuple(items)  # type: ignore[call-overload]
    except TypeError:
        keys = None
    if keys is None or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{variable}={value!r}: must be a comma list or a sequence of attribute keys (str)")
    return tuple(sorted({k.strip() for k in keys if k.strip()}))


def parse_file_mode(value: object, variable: str = "file_mode") -> int:
    """The permission bits of trace, metric and log files: an int or octal text (``"0640"``,
    ``"640"``, ``"0o640"``). The owner must read and write; group and others may get read
    and write; no execute, setuid, setgid or sticky bit. Directories get the same bits plus
    execute wherever read is given (0640 -> 0750)."""
    if isinstance(value, str):
        text = value.strip().lower()
        text = text[2:] if text.startswith("0o") else text
        number = int(text, 8) if text and len(text) <= 4 and all(c in "01234567" for c in text) else None
    else:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None or number & ~0o666 or number & 0o600 != 0o600:
        raise ValueError(f"{variable}={value!r}: must be octal file permissions with owner read and write and no "
                         "execute or special bits, from 0600 (the default) to 0666, e.g. 0640")
    return number


def parse_spool_dir(value: object, variable: str = "spool_dir") -> str:
    """The disk spool's base directory: an absolute path (every process of a run, and
    ``lens replay`` run from anywhere, must find the same one), without NUL bytes."""
    path = value.strip() if isinstance(value, str) else ""
    if not path or "\x00" in path or not os.path.isabs(path):
        raise ValueError(f"{variable}={value!r}: must be an absolute directory path, e.g. /var/tmp/lens-spool "
                         "(the processes of a run and `lens replay` must find the same directory)")
    return path


class LensConfig(Record):
    """Telemetry settings for one process (immutable; ``replace(**changes)`` copies).
    Building or validating one imports no OpenTelemetry.

    Fields and defaults: enabled=False, service_name="lens", span_groups="default",
    traces_enabled=True, metrics_enabled=True, logs_enabled=False, exporter="auto",
    file_dir="./lens-traces", export_ranks=all, run_id=None, user=None,
    metric_export_interval_ms=10000 (1 ms to 1 day), shutdown_timeout_ms=5000 (1 ms to
    1 hour), trace_ranks=all (which exporting ranks record traces; the others still export
    metrics and logs), recorder="native" (or LENS_RECORDER), max_open_spans=10000 (1 to
    10,000,000), buffer_mb=16 (1 to 65536), redact_allow=() (attribute keys never redacted
    by key; see lens_core.redaction), goodput_metrics=True (an exporting rank with traces and
    metrics exports its live goodput: otel_bridge.sdk.goodput), goodput_ratio=False (also its
    productive/wall ratio, opt-in: span-derived, it has no productive generation term on
    async runs; the seed leaves the rolled-up ratio to the monitor),
    spool_dir=None (``<tmp>/lens-spool-<uid>``: where
    encoded spans wait on disk while the collector is slow or down), spool_mb=256 (0 to
    1048576; 0 turns the spool off),
    file_mode=0o600 (trace/metric/log file permissions;
    directories 0700; see parse_file_mode), file_line_mb=8 (the longest line the file
    exporter writes, 1 to 16 MB), device_timing="auto" (``auto``, ``on`` or ``off``: device
    times for device-timed groups, see docs/guide/gpu-timing.md), device_events=4096 (the
    bounded event pool, 4 to 1,048,576), nvtx=False (an NVTX range mirrors every enabled span).
    """

    _defaults = {
        "enabled": False,
        "service_name": DEFAULT_SERVICE_NAME,
        "span_groups": "default",
        "traces_enabled": True,
        "metrics_enabled": True,
        "logs_enabled": False,
        "exporter": "auto",
        "file_dir": "./lens-traces",
        "export_ranks": ExportRanks(),
        "run_id": None,
        "user": None,
        "metric_export_interval_ms": 10_000,
        "shutdown_timeout_ms": 5_000,
        # New fields go last, so positional arguments keep working.
        "trace_ranks": ExportRanks(),
        # LENS_RECORDER picks the recorder of every config that does not name one, so a
        # job (or CI) switches recorders without code changes.
        "recorder": os.environ.get("LENS_RECORDER", "").strip().lower() or "native",
        "max_open_spans": 10_000,
        "buffer_mb": 16,
        "redact_allow": (),
        "goodput_metrics": True,
        "spool_dir": None,
        "spool_mb": 256,
        "file_mode": 0o600,
        "file_line_mb": 8,
        "goodput_ratio": False,
        "device_timing": "auto",
        "device_events": 4096,
        "nvtx": False,
    }
    _fields = __slots__ = tuple(_defaults)
    enabled: bool
    service_name: str
    span_groups: str
    traces_enabled: bool
    metrics_enabled: bool
    logs_enabled: bool
    exporter: str
    file_dir: str
    export_ranks: ExportRanks
    run_id: Optional[str]
    user: Optional[str]
    metric_export_interval_ms: int
    shutdown_timeout_ms: int
    trace_ranks: ExportRanks
    recorder: str
    max_open_spans: int
    buffer_mb: int
    redact_allow: Tuple[str, ...]
    goodput_metrics: bool
    spool_dir: Optional[str]
    spool_mb: int
    file_mode: int
    file_line_mb: int
    goodput_ratio: bool
    device_timing: str
    device_events: int
    nvtx: bool

    if TYPE_CHECKING:  # the signature Record.__init__ builds from _fields and _defaults

        def __init__(self, enabled: bool = False, service_name: str = DEFAULT_SERVICE_NAME,
                     span_groups: str = "default", traces_enabled: bool = True, metrics_enabled: bool = True,
                     logs_enabled: bool = False, exporter: str = "auto", file_dir: str = "./lens-traces",
                     export_ranks: Union[str, ExportRanks] = ExportRanks(), run_id: Optional[str] = None,
                     user: Optional[str] = None, metric_export_interval_ms: int = 10_000,
                     shutdown_timeout_ms: int = 5_000, trace_ranks: Union[str, ExportRanks] = ExportRanks(),
                     recorder: str = _defaults["recorder"],
                     max_open_spans: int = 10_000, buffer_mb: int = 16,
                     redact_allow: Union[str, Iterable[str]] = (), goodput_metrics: bool = True,
                     spool_dir: Optional[str] = None, spool_mb: int = 256,
                     file_mode: Union[int, str] = 0o600, file_line_mb: int = 8,
                     goodput_ratio: bool = False, device_timing: str = "auto", device_events: int = 4096,
                     nvtx: bool = False) -> None: ...

    def _validate(self) -> None:
        object.__setattr__(self, "export_ranks", parse_export_ranks(self.export_ranks))
        object.__setattr__(self, "trace_ranks", parse_export_ranks(self.trace_ranks, "trace_ranks"))
        if self.exporter not in EXPORTERS:
            raise ValueError(f"exporter={self.exporter!r}: allowed: {', '.join(EXPORTERS)}")
        for name in NUMERIC_RANGES:
            value = getattr(self, name)
            if isinstance(value, str):  # only from_env parses text
                raise ValueError(f"{name}={value!r}: must be an int, not a str")
            _bounded(name, value, name)
        if self.recorder not in RECORDERS:
            raise ValueError(f"recorder={self.recorder!r}: allowed: {', '.join(RECORDERS)}")
        if self.device_timing not in DEVICE_TIMING:
            raise ValueError(f"device_timing={self.device_timing!r}: allowed: {', '.join(DEVICE_TIMING)}")
        if not isinstance(self.nvtx, bool):
            raise ValueError(f"nvtx={self.nvtx!r}: must be a bool")
        object.__setattr__(self, "redact_allow", parse_redact_allow(self.redact_allow))
        if self.spool_dir is not None:
            object.__setattr__(self, "spool_dir", parse_spool_dir(self.spool_dir))
        object.__setattr__(self, "file_mode", parse_file_mode(self.file_mode))
        if not isinstance(self.service_name, str) or not self.service_name.strip():
            raise ValueError(f"service_name={self.service_name!r}: must be a non-empty string")

    @classmethod
    def from_env(cls, prefix: str = "LENS", fallback_prefix: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None) -> LensConfig:
        """Read ``<PREFIX>_ENABLED``, ``_SERVICE_NAME``, ``_SPAN_GROUPS``, ``_TRACES_ENABLED``,
        ``_METRICS_ENABLED``, ``_LOGS_ENABLED``, ``_EXPORTER``, ``_FILE_DIR``, ``_EXPORT_RANKS``,
        ``_TRACE_RANKS``, ``_RUN_ID``, ``_USER``, ``_METRIC_EXPORT_INTERVAL_MS``, ``_SHUTDOWN_TIMEOUT_MS``,
        ``_RECORDER``, ``_MAX_OPEN_SPANS``, ``_BUFFER_MB``, ``_REDACT_ALLOW`` (a comma list of
        attribute keys), ``_GOODPUT_METRICS``, ``_SPOOL_DIR``, ``_SPOOL_MB``, ``_FILE_MODE`` (octal, e.g. 0640), ``_FILE_LINE_MB``,
        ``_GOODPUT_RATIO``,
        ``_DEVICE_TIMING`` (auto, on, off), ``_DEVICE_EVENTS``, ``_NVTX``.

        ``<PREFIX>_KEY`` wins over ``<FALLBACK>_KEY``; an empty value means unset. The
        service name falls back to ``OTEL_SERVICE_NAME``. A bad value raises ValueError
        naming the variable, the value and what is allowed.
        """
        env = os.environ if environ is None else environ
        for p in (prefix, fallback_prefix):
            if p is not None and not (isinstance(p, str) and p.isascii() and p.isidentifier()):
                raise ValueError(f"prefix {p!r} must be an environment-variable name prefix like 'LENS'")

        def get(key: str):
            for p in (prefix, fallback_prefix):
                if p is None:
                    continue
                var = f"{p}_{key}"
                value = env.get(var)
                if value is not None and value.strip() != "":
                    return var, value.strip()
            return None, None

        values = {}
        for field, key, kind in (
            ("enabled", "ENABLED", "bool"),
            ("service_name", "SERVICE_NAME", "str"),
            ("span_groups", "SPAN_GROUPS", "str"),
            ("traces_enabled", "TRACES_ENABLED", "bool"),
            ("metrics_enabled", "METRICS_ENABLED", "bool"),
            ("logs_enabled", "LOGS_ENABLED", "bool"),
            ("exporter", "EXPORTER", "exporter"),
            ("file_dir", "FILE_DIR", "str"),
            ("export_ranks", "EXPORT_RANKS", "ranks"),
            ("trace_ranks", "TRACE_RANKS", "ranks"),
            ("run_id", "RUN_ID", "str"),
            ("user", "USER", "str"),
            ("metric_export_interval_ms", "METRIC_EXPORT_INTERVAL_MS", "number"),
            ("shutdown_timeout_ms", "SHUTDOWN_TIMEOUT_MS", "number"),
            ("recorder", "RECORDER", "recorder"),
            ("max_open_spans", "MAX_OPEN_SPANS", "number"),
            ("buffer_mb", "BUFFER_MB", "number"),
            ("redact_allow", "REDACT_ALLOW", "keys"),
            ("goodput_metrics", "GOODPUT_METRICS", "bool"),
            ("spool_dir", "SPOOL_DIR", "spool_dir"),
            ("spool_mb", "SPOOL_MB", "number"),
            ("file_mode", "FILE_MODE", "mode"),
            ("file_line_mb", "FILE_LINE_MB", "number"),
            ("goodput_ratio", "GOODPUT_RATIO", "bool"),
            ("device_timing", "DEVICE_TIMING", "device_timing"),
            ("device_events", "DEVICE_EVENTS", "number"),
            ("nvtx", "NVTX", "bool"),
        ):
            var, raw = get(key)
            if var is None:
                continue
            if kind == "bool":
                values[field] = parse_bool(raw, var)
            elif kind == "exporter":
                if raw.lower() not in EXPORTERS:
                    raise ValueError(f"{var}={raw!r}: allowed exporters: {', '.join(EXPORTERS)}")
                values[field] = raw.lower()
            elif kind == "recorder":
                if raw.lower() not in RECORDERS:
                    raise ValueError(f"{var}={raw!r}: allowed recorders: {', '.join(RECORDERS)}")
                values[field] = raw.lower()
            elif kind == "device_timing":
                if raw.lower() not in DEVICE_TIMING:
                    raise ValueError(f"{var}={raw!r}: allowed: {', '.join(DEVICE_TIMING)}")
                values[field] = raw.lower()
            elif kind == "number":
                values[field] = _bounded(field, raw, var)
            elif kind == "ranks":
                values[field] = parse_export_ranks(raw, var)
            elif kind == "keys":
                values[field] = parse_redact_allow(raw, var)
            elif kind == "mode":
                values[field] = parse_file_mode(raw, var)
            elif kind == "spool_dir":
                values[field] = parse_spool_dir(raw, var)
            else:
                values[field] = raw
        if "service_name" not in values and env.get("OTEL_SERVICE_NAME", "").strip():
            values["service_name"] = env["OTEL_SERVICE_NAME"].strip()
        return cls(**values)
