"""What both span recorders share: the rare paths (events, links, status, exceptions,
carriers, custom samplers, OpenTelemetry's context types), written once.

Each function takes the recorder (``rec``) and a span of either implementation; it reads
and writes only the span fields both declare (``attrs``, ``events``, ``links``,
``status_code``, ``status_msg``, ids and flags as Python ints), and the recorder's
``_otel`` (an ``OTel``) and ``_sampler``. The compiled recorder
(lens_core._native._recorder) calls them for what it does not compile; the pure one
(_recorder_py) binds them as its methods.
"""

from __future__ import annotations

import time

from lens_core.attributes import _sanitize_into, describe_exception, sanitize_attributes
from lens_core.carrier import TRACEPARENT, TRACESTATE, format_traceparent, parse_traceparent

__all__ = [
    "OTel",
    "RECORD_BYTES",
    "SPAN_TYPES",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "add_event",
    "add_link",
    "ask_sampler",
    "attach_carrier",
    "carrier_of",
    "describe_exception",
    "exception_event",
    "links_of",
    "merge_attributes",
    "otel_context",
    "otel_fail",
    "parent_context",
    "parent_of",
    "parse_carrier",
    "remote_span",
    "set_status",
    "span_context",
]

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2

#: Bytes one queued record is budgeted at (a measured Span with a few attributes); the
#: queue holds at most ``buffer_bytes // RECORD_BYTES`` records before it drops.
RECORD_BYTES = 512

#: The span classes of the loaded recorders (each adds its own at import): a Lens span's ids
#: are read from its fields, any other span's from get_span_context().
SPAN_TYPES: tuple = ()


def carrier_of(rec, span) -> dict:
    """``span``'s context as W3C headers."""
    if isinstance(span, SPAN_TYPES):
        trace_id, span_id, flags, state = span.trace_id, span.span_id, span.flags, span.trace_state
    else:
        ctx = span.get_span_context()
        trace_id, span_id, flags = ctx.trace_id, ctx.span_id, int(ctx.trace_flags)
        state = ctx.trace_state.to_header() if ctx.trace_state else None
    carrier = {"traceparent": format_traceparent(trace_id, span_id, flags)}
    if state:
        carrier["tracestate"] = state
    return carrier


def attach_carrier(rec, carrier):
    """Make the carrier's remote context current; None when it is unusable."""
    remote = parse_carrier(carrier)
    if remote is None:
        return None
    otel = rec._otel
    return otel.attach(otel.set_span(otel.get_current(), remote_span(rec, *remote)))


def parent_of(rec, context):
    """(trace_id, span_id, sampled, remote, trace_state) of the parent, or None."""
    otel = rec._otel
    if context is None:
        parent = otel.get_current().get(otel.span_key)
    elif isinstance(context, otel.context_type):
        parent = context.get(otel.span_key)
    elif hasattr(context, "get_span_context"):  # a span (ours or OpenTelemetry's)
        parent = context
    else:  # a W3C carrier
        remote = parse_carrier(context)
        if remote is None:  # a malformed carrier is ignored, as remote_trace_context does
            parent = otel.get_current().get(otel.span_key)
        else:
            trace_id, span_id, flags, state = remote
            return trace_id, span_id, flags, True, state
    if parent is None:
        return None
    if isinstance(parent, SPAN_TYPES):
        return parent.trace_id, parent.span_id, parent.flags, False, parent.trace_state
    ctx = parent.get_span_context()
    if ctx is None or not ctx.is_valid:
        return None
    state = ctx.trace_state.to_header() if ctx.trace_state else None
    return ctx.trace_id, ctx.span_id, int(ctx.trace_flags), ctx.is_remote, state or None


def otel_context(rec, context):
    # For a user-given tracer: a carrier becomes a Context holding its remote span.
    if context is None or isinstance(context, rec._otel.context_type):
        return context
    remote = parse_carrier(context)
    if remote is None:
        return None
    otel = rec._otel
    return otel.set_span(otel.context_type(), remote_span(rec, *remote))


def remote_span(rec, trace_id, span_id, flags, state):
    otel = rec._otel
    trace_state = otel.trace_state_type.from_header([state]) if state else None
    ctx = otel.span_context_type(trace_id, span_id, True, otel.trace_flags_type(flags), trace_state)
    return otel.non_recording_span_type(ctx)


def parent_context(rec, span):
    otel = rec._otel
    return otel.span_context_type(span.trace_id, span.parent_id, span.parent_remote,
                                  otel.trace_flags_type(span.flags))


def span_context(rec, span):
    otel = rec._otel
    state = otel.trace_state_type.from_header([span.trace_state]) if span.trace_state else None
    return otel.span_context_type(span.trace_id, span.span_id, False, otel.trace_flags_type(span.flags), state)


def ask_sampler(rec, trace_id, span, parent_sampled) -> bool:
    otel = rec._otel
    parent_ctx = None
    if parent_sampled is not None:
        ctx = otel.span_context_type(trace_id, span.parent_id, span.parent_remote,
                                     otel.trace_flags_type(int(parent_sampled)))
        parent_ctx = otel.set_span(otel.context_type(), otel.non_recording_span_type(ctx))
    try:
        result = rec._sampler.should_sample(parent_ctx, trace_id, span.name, None, span.attrs, None)
    except Exception:  # a broken sampler must not break the job: keep the span
        return True
    if result.attributes:
        span.attrs.update(result.attributes)
    if result.trace_state is not None:
        span.trace_state = result.trace_state.to_header() or None
    return result.decision.is_sampled()


def merge_attributes(rec, span, attributes) -> None:
    _sanitize_into(span.attrs, attributes)


def add_event(rec, span, name, attributes, timestamp) -> None:
    if span.events is None:
        span.events = []
    span.events.append((str(name), timestamp or time.time_ns(), sanitize_attributes(attributes)))


def add_link(rec, span, context, attributes) -> None:
    state = context.trace_state.to_header() if context.trace_state else None
    if span.links is None:
        span.links = []
    span.links.append((context.trace_id, context.span_id, state or None, sanitize_attributes(attributes),
                       bool(context.is_remote)))


def set_status(rec, span, status, description) -> None:
    code = getattr(status, "status_code", status)
    value = getattr(code, "value", code)
    if description is None:
        description = getattr(status, "description", None)
    if span.status_code == STATUS_OK or value == STATUS_UNSET:
        return
    span.status_code = value
    span.status_msg = description if value == STATUS_ERROR else None


def exception_event(rec, span, exc, attributes, timestamp, escaped) -> None:
    attrs = rec._otel.format_exc(exc, escaped)
    if attributes:
        attrs.update(attributes)
    add_event(rec, span, "exception", attrs, timestamp)


class OTel:
    """OpenTelemetry's context names, bound at run time."""

    __slots__ = ("contextvar", "context_type", "span_key", "span_context_type", "trace_flags_type",
                 "trace_state_type", "non_recording_span_type", "get_current", "attach", "detach", "format_exc",
                 "fail_span")

    def __init__(self, contextvar, context_type, span_key, span_context_type, trace_flags_type, trace_state_type,
                 non_recording_span_type, get_current, attach, detach, format_exc, fail_span):
        self.contextvar = contextvar
        self.context_type = context_type
        self.span_key = span_key
        self.span_context_type = span_context_type
        self.trace_flags_type = trace_flags_type
        self.trace_state_type = trace_state_type
        self.non_recording_span_type = non_recording_span_type
        self.format_exc = format_exc
        self.fail_span = fail_span  # (OTel span, exception): record it with ERROR status
        if contextvar is not None:  # set and reset the ContextVar directly: fewer calls per span
            self.get_current = contextvar.get
            self.attach = contextvar.set
            self.detach = contextvar.reset
        else:
            self.get_current, self.attach, self.detach = get_current, attach, detach

    def set_span(self, context, span):
        values = dict(context)
        values[self.span_key] = span
        return self.context_type(values)


def otel_fail(otel, span, exc) -> None:
    """Record ``exc`` on an OpenTelemetry span (one a user-given tracer made)."""
    try:
        otel.fail_span(span, exc)
    except Exception:  # recording must never replace the user's exception
        pass


def links_of(links):
    if not links:
        return None
    out = []
    for link in links:
        ctx = getattr(link, "context", link)
        state = ctx.trace_state.to_header() if ctx.trace_state else None
        out.append((ctx.trace_id, ctx.span_id, state or None, dict(getattr(link, "attributes", None) or {}),
                    bool(ctx.is_remote)))
    return out


def parse_carrier(carrier):
    """(trace_id, span_id, flags, tracestate) from a W3C carrier, or None if malformed."""
    get = getattr(carrier, "get", None)
    if get is None:
        return None
    try:
        parsed = parse_traceparent(get(TRACEPARENT))
        state = get(TRACESTATE)
    except Exception:  # a mapping whose get() raises is as unusable as a malformed one
        return None
    if parsed is None:
        return None
    if not isinstance(state, str) or not state.strip() or len(state) > 512:
        state = None
    return parsed.trace_id, parsed.span_id, parsed.flags, state
