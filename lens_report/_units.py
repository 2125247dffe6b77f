"""Units the report's modules share (the lowest floor of lens_report)."""

__all__ = ["NS_PER_S"]

NS_PER_S = 1_000_000_000
"""Nanoseconds in a second: span times are integer nanoseconds since the epoch."""
