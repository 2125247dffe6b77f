"""Span values as OTLP needs them: a bad one is replaced or dropped, and counted."""

from __future__ import annotations

import time

__all__ = ["ValueFixer"]

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def _is_int(value) -> bool:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


class ValueFixer:
    """Checks a span's values as OTLP needs them; a bad one is replaced or dropped and
    counted (``fixed``; ``first`` says what the first one was). Used where SDK spans become
    records, and on a native record the encoder refused."""

    __slots__ = ("fixed", "first")

    def __init__(self):
        self.fixed = 0
        self.first = None

    def _bad(self, what):
        self.fixed += 1
        if self.first is None:
            self.first = what

    def text(self, value, what="a text"):
        if value is None or type(value) is str:
            return value
        if isinstance(value, str):
            return str.__str__(value)
        self._bad(f"{what} of type {type(value).__name__}")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).decode("utf-8", "replace")
        try:
            return str(value)
        except Exception:
            return repr(type(value))

    def description(self, value):
        """A status description: a str, else dropped (as the SDK drops it)."""
        if value is None or isinstance(value, str):
            return self.text(value)
        self._bad(f"a status description of type {type(value).__name__}")
        return None

    def name(self, value):
        return self.text(value, "a span name") if value is not None else self._unnamed()

    def _unnamed(self):
        self._bad("a span name of None")
        return "unnamed"

    def kind(self, value):
        if _is_int(value) and 1 <= value <= 5:
            return value
        self._bad(f"span kind {value!r}")
        return 1

    def status_code(self, value):
        if _is_int(value) and 0 <= value <= 2:
            return value
        self._bad(f"status code {value!r}")
        return 0

    def count(self, value):
        if _is_int(value) and 0 <= value < 1 << 31:
            return value
        self._bad(f"a dropped count {value!r}")
        return 0

    def time(self, value):
        """``value`` if a valid OTLP time (int ns, 0 <= t <= int64 max), else None."""
        return value if _is_int(value) and 0 <= value <= _I64_MAX else None

    def times(self, start, end):
        good_start, good_end = self.time(start), self.time(end)
        if good_start is None:
            self._bad(f"start time {start!r}")
            good_start = good_end if good_end is not None else time.time_ns()
        if good_end is None:
            self._bad(f"end time {end!r}")
            good_end = good_start
        return good_start, good_end

    def events(self, events, fallback_ns):
        if not events:
            return events
        kept = []
        for event in events:
            try:
                name, timestamp, attrs = event
            except Exception:
                self._bad("an event that is not (name, time, attributes)")
                continue
            if self.time(timestamp) is None:
                self._bad(f"event time {timestamp!r}")
                continue  # the event is dropped: a guessed time would misplace it
            kept.append((self.text(name, "an event name") or "", timestamp,
                         attrs if isinstance(attrs, dict) else {}))
        return kept or None

    def links(self, links):
        if not links:
            return links
        kept = []
        for link in links:
            try:
                trace_id, span_id, state, attrs, remote = link
            except Exception:
                self._bad("a link that is not a span context")
                continue
            if not (_is_int(trace_id) and 0 < trace_id < 1 << 128 and _is_int(span_id) and 0 < span_id < _U64):
                self._bad(f"a link to trace {trace_id!r} span {span_id!r}")
                continue
            kept.append((trace_id, span_id, state if type(state) is str else None,
                         attrs if isinstance(attrs, dict) else {}, bool(remote)))
        return kept or None

    def record(self, r):
        """Fix a record in place (a native one the encoder refused)."""
        r.name = self.name(r.name)
        r.start_ns, r.end_ns = self.times(r.start_ns, r.end_ns)
        r.events = self.events(r.events, r.start_ns)
        r.links = self.links(r.links)
        r.status_msg = self.description(r.status_msg) if r.status_code == 2 else None
        if r.trace_state is not None and type(r.trace_state) is not str:
            self._bad("a trace state that is not a str")
            r.trace_state = None
        if r.thread_name is not None and type(r.thread_name) is not str:
            r.thread_name = self.text(r.thread_name, "a thread name")
        if not isinstance(r.attrs, dict):
            self._bad("attributes that are not a dict")
            r.attrs = {}
        elif any(type(k) is not str for k in r.attrs):
            self._bad("an attribute key that is not a str")
            r.attrs = {self.text(k): v for k, v in r.attrs.items()}
