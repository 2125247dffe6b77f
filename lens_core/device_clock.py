"""Which clock a bucketed leaf is counted on: the one definition live goodput and the report share.

The rule (docs/guide/gpu-timing.md says it for users):

1. **A leaf with device times is counted on its device interval.** A bucketed leaf that carries
   ``lens.device.start_time_unix_nano`` and ``lens.device.end_time_unix_nano`` (ints, or strings
   of digits as ClickHouse stores them, with ``0 < start <= end``) counts ``end - start`` in its
   bucket, not its host duration: on a GPU a host span ends when its kernels are queued, and the
   device interval is when they ran.
2. **Time the host spent blocked while the device ran device-timed productive work is not
   overhead.** A host-only leaf in the ``overhead`` bucket counts its host duration less the time
   within it covered by the device intervals of the rank's device-timed ``productive`` leaves
   (their union, clipped to the leaf's host interval). That is the ``loss.item()`` that waited
   for the backward pass: the wait was the device working.
3. **Everything else is as without device times**: a rank (and a step) with no device-timed
   leaf reads exactly as before; umbrellas, steps and the rank's wall time stay on the host clock.

Live goodput (``GoodputRollup``, both twins) applies rule 2 with the device-timed productive
intervals it has seen before the overhead leaf ended (end order), the newest ``BUSY_LIMIT``.
"""

from __future__ import annotations

from lens_core import semconv

__all__ = ["BUSY_LIMIT", "DeviceBusy", "covered_ns", "device_interval"]

BUSY_LIMIT = 256
"""Device-timed productive intervals live goodput keeps for rule 2 (the newest)."""

_START, _END = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME
_BUCKET_PRODUCTIVE, _BUCKET_OVERHEAD = 0, 1  # GoodputRollup's slots


def _ns(value):
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    return None


def device_interval(attrs):
    """``(start, end)`` of a span's device times (rule 1), or None when it has none usable."""
    if not attrs:
        return None
    start, end = _ns(attrs.get(_START)), _ns(attrs.get(_END))
    if start is None or end is None or start <= 0 or end < start:
        return None
    return start, end


def covered_ns(start, end, intervals) -> int:
    """Nanoseconds of ``[start, end)`` inside the union of ``intervals`` (rule 2)."""
    pieces = sorted((max(s, start), min(e, end)) for s, e in intervals if s < end and e > start)
    covered = 0
    reach = start
    for s, e in pieces:
        if e <= reach:
            continue
        covered += e - max(s, reach)
        reach = e
    return covered


class DeviceBusy:
    """Live goodput's side of the rule: the device-timed productive intervals seen so far
    (newest ``BUSY_LIMIT``), and what a counted leaf counts. Both GoodputRollup twins call
    ``counted`` for a counted leaf that has device times, or is overhead while ``intervals``
    holds any."""

    __slots__ = ("intervals",)

    def __init__(self):
        self.intervals = []

    def counted(self, attrs, start, end, slot):
        """The nanoseconds a counted leaf in bucket ``slot`` counts (rules 1 and 2)."""
        interval = device_interval(attrs)
        if interval is not None:
            if slot == _BUCKET_PRODUCTIVE:
                intervals = self.intervals
                intervals.append(interval)
                if len(intervals) > BUSY_LIMIT:
                    del intervals[0]
            return interval[1] - interval[0]
        if slot == _BUCKET_OVERHEAD and self.intervals:
            return end - start - covered_ns(start, end, self.intervals)
        return end - start
