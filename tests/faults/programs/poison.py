"""4,000 spans, one of them poisoned by CASE (a bad name, timestamp, status, link, end time); prints
shutdown's result. Every other span must be exported and the loss, if any, counted."""

import sys

from common import setup, span

case = sys.argv[1]
handle = setup()


def poison():
    from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, StatusCode, TraceFlags

    tracer = handle.tracer
    if case == "name-none":
        with span("g", None):
            pass
    elif case == "name-int":
        with span("g", 12345):
            pass
    elif case == "name-bytes":
        with span("g", b"\xff\xfe"):
            pass
    elif case.startswith("event-"):
        timestamp = {"event-negative": -1, "event-huge": 2**70, "event-str": "now"}[case]
        with span("g", "poisoned") as s:
            s.add_event("e", timestamp=timestamp)
    elif case in ("end-time-str", "end-time-huge"):
        with span("g", "poisoned") as s:
            s.end(end_time="x" if case == "end-time-str" else 2**70)
    elif case == "status-code-bad":
        with span("g", "poisoned") as s:
            s.set_status(7, "seven")
    elif case == "status-int-description":
        with span("g", "poisoned") as s:
            s.set_status(StatusCode.ERROR, 12345)
    elif case == "update-name-int":
        with span("g", "poisoned") as s:
            s.update_name(42)
    elif case == "link-huge-trace-id":
        bad = SpanContext(2**130, 1, False, TraceFlags(1))
        with span("g", "poisoned") as s:
            s.add_link(bad)
    elif case == "raw-link-huge-trace-id":
        bad = NonRecordingSpan(SpanContext(2**130, 1, False, TraceFlags(1))).get_span_context()
        tracer.start_span("poisoned", links=[Link(bad)]).end()
    elif case == "raw-end-time-str":
        tracer.start_span("poisoned").end(end_time="x")
    elif case == "raw-event-str":
        s = tracer.start_span("poisoned")
        s.add_event("e", timestamp="now")
        s.end()
    elif case == "raw-start-time-negative":
        tracer.start_span("poisoned", start_time=-5).end()
    else:
        raise SystemExit(f"unknown case {case}")


for i in range(4000):
    if i == 2000:
        poison()
    else:
        with span("g", "good"):
            pass
print(handle.shutdown(timeout_ms=30_000), flush=True)
