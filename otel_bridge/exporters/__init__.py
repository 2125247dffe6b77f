"""Span, metric and log exporters (otlp, console, file, none), built lazily so import is cheap."""

# Importing this package never imports the OpenTelemetry SDK. The exporter classes live
# in the submodules ``_file`` and ``_console``, which do import it; they are loaded only
# by the factory functions below, or on first access to a class name such as
# ``otel_bridge.exporters.FileSpanExporter`` (module ``__getattr__``). Those class names
# are deliberately not in ``__all__``, so ``import *`` stays cheap too.

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import IO, Any

from otel_bridge.sdk import upstream

__all__ = [
    "DEFAULT_FILE_DIR",
    "DEFAULT_OTLP_PROTOCOL",
    "EXPORTER_NAMES",
    "OTLP_PROTOCOLS",
    "build_log_exporter",
    "build_metric_exporter",
    "build_span_exporter",
    "console_log_exporter",
    "console_metric_exporter",
    "console_span_exporter",
    "file_log_exporter",
    "file_metric_exporter",
    "file_mode",
    "file_span_exporter",
    "otlp_log_exporter",
    "otlp_metric_exporter",
    "otlp_span_exporter",
    "resolve_exporter_name",
    "resolve_otlp_protocol",
    "set_file_mode",
]

#: Exporter names a configuration may ask for; ``auto`` resolves to ``otlp`` or ``file``.
EXPORTER_NAMES = ("auto", "otlp", "console", "file", "none")

#: OTLP protocols the OpenTelemetry Python SDK can send (it has no ``http/json`` exporter).
OTLP_PROTOCOLS = ("grpc", "http/protobuf")

#: The OTLP protocol when no ``OTEL_EXPORTER_OTLP[_<SIGNAL>]_PROTOCOL`` is set. This is the
#: OpenTelemetry specification's default; the Python SDK's own auto-configuration
#: defaults to ``grpc`` instead, so a gRPC collector needs the variable set to ``grpc``.
DEFAULT_OTLP_PROTOCOL = "http/protobuf"

#: Where the file exporters write when no directory is given.
DEFAULT_FILE_DIR = "./lens-traces"

_SIGNALS = ("traces", "metrics", "logs")

# (signal, protocol) -> (module, class) of the SDK's OTLP exporter.
_OTLP_CLASSES = {
    ("traces", "grpc"): ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "OTLPSpanExporter"),
    ("metrics", "grpc"): ("opentelemetry.exporter.otlp.proto.grpc.metric_exporter", "OTLPMetricExporter"),
    ("logs", "grpc"): (upstream.LOGS_MODULES["otlp.grpc"], "OTLPLogExporter"),
    ("traces", "http/protobuf"): ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "OTLPSpanExporter"),
    ("metrics", "http/protobuf"): ("opentelemetry.exporter.otlp.proto.http.metric_exporter", "OTLPMetricExporter"),
    ("logs", "http/protobuf"): (upstream.LOGS_MODULES["otlp.http"], "OTLPLogExporter"),
}

# Lazily loaded class names -> submodule defining them.
_LAZY_CLASSES = {
    "ConsoleLogExporter": "_console",
    "ConsoleMetricExporter": "_console",
    "ConsoleSpanExporter": "_console",
    "FileLogExporter": "_file",
    "FileMetricExporter": "_file",
    "FileSpanExporter": "_file",
}


def __getattr__(name: str) -> Any:
    """Load the exporter classes (and with them the OTel SDK) on first access."""
    if name in _LAZY_CLASSES:
        return getattr(_submodule(_LAZY_CLASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _submodule(name: str) -> Any:
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError as exc:
        raise ImportError(
            f"lens exporters need the OpenTelemetry SDK ({exc}); install 'lens-telemetry[otel]'"
        ) from exc


# -- selection ---------------------------------------------------------------------------


def resolve_exporter_name(
    name: str, environ: Mapping[str, str] = os.environ, *, signal: str = "traces"
) -> str:
    """Validate ``name`` (case-insensitive) and resolve ``auto``.

    ``auto`` is ``otlp`` when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or the signal's own
    ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` (``TRACES`` by default) is set and not
    empty, else ``file``. Returns one of ``otlp``, ``console``, ``file``, ``none``;
    raises ``ValueError`` listing :data:`EXPORTER_NAMES` for anything else.
    """
    _check_signal(signal)
    normalized = name.strip().lower() if isinstance(name, str) else name
    if normalized not in EXPORTER_NAMES:
        raise ValueError(f"unknown exporter {name!r}; allowed: {', '.join(EXPORTER_NAMES)}")
    if normalized != "auto":
        return normalized
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"):
        if environ.get(variable, "").strip():
            return "otlp"
    return "file"


def resolve_otlp_protocol(signal: str = "traces", environ: Mapping[str, str] = os.environ) -> str:
    """Return the OTLP protocol for ``signal`` (``traces``, ``metrics`` or ``logs``).

    Reads ``OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL``, then ``OTEL_EXPORTER_OTLP_PROTOCOL``,
    else :data:`DEFAULT_OTLP_PROTOCOL`. Raises ``ValueError`` naming the variable when
    its value is not one of :data:`OTLP_PROTOCOLS`.
    """
    _check_signal(signal)
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(variable, "").strip()
        if value:
            return _check_protocol(value, variable)
    return DEFAULT_OTLP_PROTOCOL


def _check_signal(signal: str) -> None:
    if signal not in _SIGNALS:
        raise ValueError(f"unknown signal {signal!r}; allowed: {', '.join(_SIGNALS)}")


def _check_protocol(value: str, source: str) -> str:
    protocol = value.strip().lower()
    if protocol in OTLP_PROTOCOLS:
        return protocol
    hint = " (the OpenTelemetry Python SDK has no http/json exporter)" if protocol == "http/json" else ""
    raise ValueError(f"{source}={value!r} is not a supported OTLP protocol{hint}; allowed: {', '.join(OTLP_PROTOCOLS)}")


# -- OTLP --------------------------------------------------------------------------------


def _otlp_exporter(signal: str, protocol: str | None, kwargs: dict[str, Any]) -> Any:
    protocol = resolve_otlp_protocol(signal) if protocol is None else _check_protocol(protocol, "protocol")
    module_name, class_name = _OTLP_CLASSES[(signal, protocol)]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        package = "opentelemetry-exporter-otlp-proto-" + ("grpc" if protocol == "grpc" else "http")
        raise ImportError(f"OTLP {protocol} export needs {package} ({exc}); install 'lens-telemetry[otel]'") from exc
    return getattr(module, class_name)(**kwargs)


def otlp_span_exporter(protocol: str | None = None, **kwargs: Any) -> Any:
    """Return the SDK's OTLP span exporter for ``protocol`` (default: from the environment).

    Endpoint, headers, timeout, compression and TLS come from the standard
    ``OTEL_EXPORTER_OTLP[_TRACES]_*`` variables, which the SDK exporter reads itself
    (for HTTP it appends ``/v1/traces`` to the generic endpoint and uses the per-signal
    one as is). ``kwargs`` go to the exporter's constructor and override them.
    """
    return _otlp_exporter("traces", protocol, kwargs)


def otlp_metric_exporter(protocol: str | None = None, **kwargs: Any) -> Any:
    """Return the SDK's OTLP metric exporter; like :func:`otlp_span_exporter`, for ``METRICS``."""
    return _otlp_exporter("metrics", protocol, kwargs)


def otlp_log_exporter(protocol: str | None = None, **kwargs: Any) -> Any:
    """Return the SDK's OTLP log exporter; like :func:`otlp_span_exporter`, for ``LOGS``."""
    return _otlp_exporter("logs", protocol, kwargs)


# -- file permissions ----------------------------------------------------------------

_file_mode = 0o600


def set_file_mode(mode: int) -> None:
    """Permission bits of the trace, metric and log files created from now on (directories
    get execute wherever read is given); ``LensConfig.file_mode``, applied by setup. Raises
    ValueError outside 0600..0666 or with execute or special bits (lens_core.config.parse_file_mode)."""
    global _file_mode
    from lens_core.config import parse_file_mode

    _file_mode = parse_file_mode(mode)


def file_mode() -> int:
    """The current file permission bits (default 0600: traces may hold prompts)."""
    return _file_mode


# -- file and console --------------------------------------------------------------------


def file_span_exporter(
    directory: str | os.PathLike[str] | None = None, run_id: str = "default", rank: int | str = 0
) -> Any:
    """Return a ``FileSpanExporter`` writing ``<directory>/<run_id>/traces-rank<rank>-pid<pid>-<tag>.jsonl``.

    Each export appends one OTLP/JSON ``ExportTraceServiceRequest`` line, the format
    of the OpenTelemetry Collector's file exporter. ``directory`` defaults to
    :data:`DEFAULT_FILE_DIR`.
    """
    return _submodule("_file").FileSpanExporter(directory or DEFAULT_FILE_DIR, run_id, rank)


def file_metric_exporter(
    directory: str | os.PathLike[str] | None = None, run_id: str = "default", rank: int | str = 0, **kwargs: Any
) -> Any:
    """Return a ``FileMetricExporter`` writing ``metrics-rank<rank>-pid<pid>-<tag>.jsonl`` lines.

    ``kwargs`` (``preferred_temporality``, ``preferred_aggregation``) go to the SDK's
    ``MetricExporter``.
    """
    return _submodule("_file").FileMetricExporter(directory or DEFAULT_FILE_DIR, run_id, rank, **kwargs)


def file_log_exporter(
    directory: str | os.PathLike[str] | None = None, run_id: str = "default", rank: int | str = 0
) -> Any:
    """Return a ``FileLogExporter`` writing ``logs-rank<rank>-pid<pid>-<tag>.jsonl`` lines."""
    return _submodule("_file").FileLogExporter(directory or DEFAULT_FILE_DIR, run_id, rank)


def console_span_exporter(stream: IO[str] | None = None) -> Any:
    """Return a ``ConsoleSpanExporter`` printing one JSON object per span (default ``sys.stdout``)."""
    return _submodule("_console").ConsoleSpanExporter(stream)


def console_metric_exporter(stream: IO[str] | None = None, **kwargs: Any) -> Any:
    """Return a ``ConsoleMetricExporter`` printing one JSON object per data point."""
    return _submodule("_console").ConsoleMetricExporter(stream, **kwargs)


def console_log_exporter(stream: IO[str] | None = None) -> Any:
    """Return a ``ConsoleLogExporter`` printing one JSON object per log record."""
    return _submodule("_console").ConsoleLogExporter(stream)


# -- build by name -----------------------------------------------------------------------


def _build(signal: str, name: str, file_dir: Any, run_id: str, rank: int | str, stream: Any) -> Any:
    resolved = resolve_exporter_name(name, signal=signal)
    if resolved == "none":
        return None
    if resolved == "otlp":
        return _otlp_exporter(signal, None, {})
    factories = {
        "traces": (file_span_exporter, console_span_exporter),
        "metrics": (file_metric_exporter, console_metric_exporter),
        "logs": (file_log_exporter, console_log_exporter),
    }
    file_factory, console_factory = factories[signal]
    if resolved == "file":
        return file_factory(file_dir, run_id, rank)
    return console_factory(stream)


def build_span_exporter(
    name: str,
    *,
    file_dir: str | os.PathLike[str] | None = None,
    run_id: str = "default",
    rank: int | str = 0,
    stream: IO[str] | None = None,
) -> Any:
    """Return the span exporter called ``name`` (see :data:`EXPORTER_NAMES`), or ``None`` for ``none``.

    ``auto`` is resolved by :func:`resolve_exporter_name` from ``os.environ``; ``otlp``
    picks its protocol with :func:`resolve_otlp_protocol`; ``file`` writes under
    ``file_dir`` (default :data:`DEFAULT_FILE_DIR`) / ``run_id``; ``console`` writes
    to ``stream`` (default ``sys.stdout``).
    """
    return _build("traces", name, file_dir, run_id, rank, stream)


def build_metric_exporter(
    name: str,
    *,
    file_dir: str | os.PathLike[str] | None = None,
    run_id: str = "default",
    rank: int | str = 0,
    stream: IO[str] | None = None,
) -> Any:
    """Return the metric exporter called ``name``, or ``None``; like :func:`build_span_exporter`.

    ``auto`` looks at ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``.
    """
    return _build("metrics", name, file_dir, run_id, rank, stream)


def build_log_exporter(
    name: str,
    *,
    file_dir: str | os.PathLike[str] | None = None,
    run_id: str = "default",
    rank: int | str = 0,
    stream: IO[str] | None = None,
) -> Any:
    """Return the log exporter called ``name``, or ``None``; like :func:`build_span_exporter`.

    ``auto`` looks at ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``.
    """
    return _build("logs", name, file_dir, run_id, rank, stream)
