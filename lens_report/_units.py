"""Units the report's modules share (the lowest floor of lens_report)."""

__all__ = ["NS_PER_S", "memory_bytes"]

NS_PER_S = 1_000_000_000
"""Nanoseconds in a second: span times are integer nanoseconds since the epoch."""


def memory_bytes(memory_limit: str) -> int:
    """``memory_limit`` (``512MB``, ``2GiB``, a plain number of bytes, ... as DuckDB reads it) in
    bytes. Raises ValueError, naming the text and the units allowed, for anything else (a report
    built on a misread limit would silently run with some other budget)."""
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
             "TIB": 2**40, "B": 1}
    text = memory_limit.strip().upper() if isinstance(memory_limit, str) else ""
    unit = next((u for u in sorted(units, key=len, reverse=True) if text.endswith(u)), None)
    try:
        value = float(text[: -len(unit)] if unit else text) * (units[unit] if unit else 1)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"memory limit {memory_limit!r} is not an amount of memory: expected a positive number "
                         "with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '512MB' or '2GiB'")
    return int(value)
