"""Units the report's modules share (the lowest floor of lens_report)."""

__all__ = ["NS_PER_S", "memory_bytes"]

NS_PER_S = 1_000_000_000
"""Nanoseconds in a second: span times are integer nanoseconds since the epoch."""


def memory_bytes(memory_limit: str) -> int:
    """``memory_limit`` (``512MB``, ``2GiB``, ... as DuckDB reads it) in bytes; 1 GB when it cannot be read."""
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
             "TIB": 2**40, "B": 1}
    text = memory_limit.strip().upper()
    unit = next((u for u in sorted(units, key=len, reverse=True) if text.endswith(u)), None)
    try:
        return int(float(text[: -len(unit)]) * units[unit] if unit else float(text))
    except ValueError:
        return 10**9
