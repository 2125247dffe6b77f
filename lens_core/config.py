"""LensConfig and LensConfig.from_env: strict parsing with errors that say what is allowed."""

from __future__ import annotations

import math
import os

from ._record import Record

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "EXPORTERS",
    "ExportRanks",
    "LensConfig",
    "MAX_RANK",
    "MILLISECOND_RANGES",
    "parse_bool",
    "parse_export_ranks",
    "parse_redact_allow",
]

#: The service name when neither LENS_SERVICE_NAME nor OTEL_SERVICE_NAME is set.
DEFAULT_SERVICE_NAME = "lens"
#: Exporter names a config may name (``auto``: OTLP if an endpoint is set, else file).
EXPORTERS = ("auto", "otlp", "console", "file", "none")
#: Allowed (min, max) of each millisecond setting. The maxima are far below what
#: ``threading`` and ``time`` accept (``threading.TIMEOUT_MAX`` is ~9.2e12 ms on Linux), so
#: no setting can overflow a wait: shutdown runs at process exit, where schedulers kill a
#: job within seconds to minutes (SLURM's KillWait, Kubernetes' grace period), so an hour
#: is generous; a metric interval beyond a day would export nothing while a job runs
#: (metrics are still flushed at shutdown).
MILLISECOND_RANGES = {
    "metric_export_interval_ms": (1, 86_400_000),
    "shutdown_timeout_ms": (1, 3_600_000),
}
#: The largest rank an export-ranks list may name: torch.distributed and MPI hold ranks in
#: a C int.
MAX_RANK = 2**31 - 1
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


class ExportRanks(Record):
    """Which ranks export: mode ``all`` / ``first`` / ``last`` / ``per_node`` / ``list`` / ``sample``."""

    _fields = __slots__ = ("mode", "ranks", "fraction")
    _defaults = {"mode": "all", "ranks": (), "fraction": 1.0}

    def exports(self, rank: int, world_size: int, local_rank: int = 0) -> bool:
        """Whether ``rank`` of ``world_size`` exports. ``sample`` is deterministic per rank
        (the same ranks export on every restart) and always includes rank 0."""
        if self.mode == "all":
            return True
        if self.mode == "first":
            return rank == 0
        if self.mode == "last":
            return rank == world_size - 1
        if self.mode == "per_node":
            return local_rank == 0
        if self.mode == "list":
            return rank in self.ranks
        # sample: rank r exports when floor(r * F) steps up at r, which picks an evenly
        # spread fraction F of the ranks (rank 0 always), the same ones on every restart.
        return math.floor(rank * self.fraction) != math.floor((rank - 1) * self.fraction)

    def __str__(self) -> str:
        if self.mode == "list":
            return ",".join(map(str, self.ranks))
        if self.mode == "sample":
            return f"sample:{self.fraction:g}"
        return self.mode


def parse_export_ranks(value, variable: str = "export_ranks") -> ExportRanks:
    """Parse ``all``, ``first``, ``last``, ``per_node``, ``0,8,16`` or ``sample:0.05``."""
    if isinstance(value, ExportRanks):
        return value
    allowed = ("all, first, last, per_node, a list of ranks like 0,8,16, or sample:FRACTION (0 < F <= 1); "
               f"ranks go from 0 to {MAX_RANK}")
    text = str(value).strip().lower()
    if text in ("all", "first", "last", "per_node"):
        return ExportRanks(text)
    if text.startswith("sample:"):
        try:
            fraction = float(text[len("sample:"):])
        except ValueError:
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise ValueError(f"{variable}={value!r}: the sample fraction must be in (0, 1]; allowed: {allowed}")
        return ExportRanks("sample", fraction=fraction)
    try:
        ranks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        ranks = ()
    if not ranks or ranks[0] < 0 or ranks[-1] > MAX_RANK:
        raise ValueError(f"{variable}={value!r}: allowed: {allowed}")
    return ExportRanks("list", ranks)


def _milliseconds(name: str, value, shown: str) -> int:
    """``value`` as an int within MILLISECOND_RANGES[name]; ValueError naming ``shown``."""
    low, high = MILLISECOND_RANGES[name]
    if isinstance(value, str):  # from the environment: plain ASCII digits, no sign or "_"
        text = value.strip()
        # (the length check keeps int() from its own error on thousands of digits)
        number = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
    else:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None or not low <= number <= high:
        raise ValueError(f"{shown}={value!r}: must be a whole number of milliseconds from {low} to {high}")
    return number


def parse_redact_allow(value, variable: str = "redact_allow") -> tuple:
    """Attribute keys never redacted by key, as a sorted tuple: a comma list
    (``"max_tokens, stop_tokens"``) or an iterable of str; blanks are skipped."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        keys = tuple(items)
    except TypeError:
        keys = None
    if keys is None or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{variable}={value!r}: must be a comma list or a sequence of attribute keys (str)")
    return tuple(sorted({k.strip() for k in keys if k.strip()}))


class LensConfig(Record):
    """Telemetry settings for one process (immutable; ``replace(**changes)`` copies).
    Building or validating one imports no OpenTelemetry.

    Fields and defaults: enabled=False, service_name="lens", span_groups="default",
    traces_enabled=True, metrics_enabled=True, logs_enabled=False, exporter="auto",
    file_dir="./lens-traces", export_ranks=all, run_id=None, user=None,
    metric_export_interval_ms=10000 (1 ms to 1 day), shutdown_timeout_ms=5000 (1 ms to 1 hour),
    redact_allow=() (attribute keys never redacted by key; see lens_core.redaction).
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
        "redact_allow": (),
    }
    _fields = __slots__ = tuple(_defaults)

    def _validate(self):
        object.__setattr__(self, "export_ranks", parse_export_ranks(self.export_ranks))
        if self.exporter not in EXPORTERS:
            raise ValueError(f"exporter={self.exporter!r}: allowed: {', '.join(EXPORTERS)}")
        for name in MILLISECOND_RANGES:
            value = getattr(self, name)
            if isinstance(value, str):  # only from_env parses text
                raise ValueError(f"{name}={value!r}: must be an int, not a str")
            _milliseconds(name, value, name)
        object.__setattr__(self, "redact_allow", parse_redact_allow(self.redact_allow))
        if not isinstance(self.service_name, str) or not self.service_name.strip():
            raise ValueError(f"service_name={self.service_name!r}: must be a non-empty string")

    @classmethod
    def from_env(cls, prefix: str = "LENS", fallback_prefix=None, environ=None) -> "LensConfig":
        """Read ``<PREFIX>_ENABLED``, ``_SERVICE_NAME``, ``_SPAN_GROUPS``, ``_TRACES_ENABLED``,
        ``_METRICS_ENABLED``, ``_LOGS_ENABLED``, ``_EXPORTER``, ``_FILE_DIR``, ``_EXPORT_RANKS``,
        ``_RUN_ID``, ``_USER``, ``_METRIC_EXPORT_INTERVAL_MS``, ``_SHUTDOWN_TIMEOUT_MS``,
        ``_REDACT_ALLOW`` (a comma list of attribute keys).

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
            ("run_id", "RUN_ID", "str"),
            ("user", "USER", "str"),
            ("metric_export_interval_ms", "METRIC_EXPORT_INTERVAL_MS", "ms"),
            ("shutdown_timeout_ms", "SHUTDOWN_TIMEOUT_MS", "ms"),
            ("redact_allow", "REDACT_ALLOW", "keys"),
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
            elif kind == "ranks":
                values[field] = parse_export_ranks(raw, var)
            elif kind == "ms":
                values[field] = _milliseconds(field, raw, var)
            elif kind == "keys":
                values[field] = parse_redact_allow(raw, var)
            else:
                values[field] = raw
        if "service_name" not in values and env.get("OTEL_SERVICE_NAME", "").strip():
            values["service_name"] = env["OTEL_SERVICE_NAME"].strip()
        return cls(**values)
