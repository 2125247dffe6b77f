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

import sys
import time

from lens_core import semconv
from lens_core._native import LARGE_VALUE, RECORD_BYTES
from lens_core.attributes import _sanitize_into, describe_exception, sanitize_attributes
from lens_core.carrier import TRACEPARENT, TRACESTATE, format_traceparent, parse_traceparent
from lens_core.redaction import redact_text

__all__ = [
    "LARGE_VALUE",
    "Limits",
    "OTel",
    "RECORD_BYTES",
    "SPAN_TYPES",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "THREAD_ATTRIBUTES",
    "add_event",
    "add_link",
    "add_span_type",
    "apply_limits",
    "ask_sampler",
    "attach_carrier",
    "attributes_extra",
    "bad_field",
    "bound_links",
    "carrier_of",
    "check_time",
    "describe_exception",
    "end_time",
    "events_extra",
    "exception_event",
    "foreign_exit",
    "int64",
    "links_of",
    "merge_attributes",
    "otel_context",
    "otel_fail",
    "parent_context",
    "parent_of",
    "parse_carrier",
    "record_size",
    "redact_name",
    "remote_span",
    "set_record_reader",
    "set_status",
    "span_context",
    "span_name",
    "value_extra",
]

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1



def value_extra(value) -> int:
    """What ``value`` adds to a record's size beyond RECORD_BYTES (long texts and bytes,
    and those inside a sequence)."""
    kind = type(value)
    if kind is str or kind is bytes or kind is bytearray:
        n = len(value)
        return n if n > LARGE_VALUE else 0
    if kind is tuple or kind is list:
        return sum(len(v) for v in value if type(v) in (str, bytes) and len(v) > LARGE_VALUE) + 8 * len(value)
    if kind is int or kind is float or kind is bool or value is None:
        return 0
    if isinstance(value, (str, bytes)):
        return len(value) if len(value) > LARGE_VALUE else 0
    return 0


def attributes_extra(attrs) -> int:
    """What an attribute mapping's values add to a record's size (value_extra of each)."""
    if not attrs:
        return 0
    extra = 0
    try:
        for value in attrs.values():
            kind = type(value)  # the common kinds inline: value_extra gives the same for them
            if kind is str:
                if len(value) > LARGE_VALUE:
                    extra += len(value)
            elif kind is not int and kind is not float and kind is not bool:
                extra += value_extra(value)
    except Exception:  # a mapping that will not be read here will not be encoded either
        return 0
    return extra


def events_extra(events) -> int:
    """What events (native ``(name, time, attrs)`` tuples or SDK Events) add to a record's size."""
    extra = 0
    for event in events or ():
        attrs = event[2] if type(event) is tuple and len(event) == 3 else getattr(event, "attributes", None)
        extra += 64 + attributes_extra(attrs)
    return extra


#: Readers of records of another origin, by the record's exact type (set_record_reader).
_READERS: dict = {}


def set_record_reader(record_type, reader) -> None:
    """Have record_size read a record of exactly ``record_type`` with ``reader`` (None
    removes it): ``reader(record)`` gives ``(attributes, event_attributes)``, the record's
    attribute dict and one attribute dict (or None) per event, the same values its public
    views hold; or None when the record is not stored as the reader assumes, and then
    record_size reads the public views, as it does for a type with no reader (a reader
    that raises, or gives anything else, is treated so too).

    lens_core never imports OpenTelemetry: otel_bridge's SDK recorder installs one for the
    SDK's spans (otel_bridge.sdk.upstream.sdk_span_reader). Their public views are slow to
    read: ``attributes`` is a MappingProxyType over the SDK's BoundedAttributes, a
    MutableMapping read through the Mapping ABC's ValuesView (one Python ``__getitem__`` a
    key, after a locked copy of its keys), and ``events`` a tuple copied, under a lock,
    out of a BoundedList: about 2-4 µs a span for record_size alone."""
    if reader is None:
        _READERS.pop(record_type, None)
    else:
        _READERS[record_type] = reader


def record_size(record) -> int:
    """Bytes a queued record (a native span or an SDK ReadableSpan) is budgeted at:
    RECORD_BYTES plus its long attribute and event values (64 bytes an event). The
    recorders compute it once, when a record is queued, and give the same bytes back when
    it is taken."""
    reader = _READERS.get(type(record)) if _READERS else None
    if reader is not None:
        try:
            values = reader(record)
            if values is not None:
                attrs, event_attrs = values
                if attrs is None or type(attrs) is dict:
                    size = RECORD_BYTES + attributes_extra(attrs)
                    for event in event_attrs:
                        if not (event is None or type(event) is dict):
                            break
                        size += 64 + attributes_extra(event)
                    else:
                        return size
        except Exception:  # a reader's bug must not fail the record: its public views are read
            pass
    attrs = getattr(record, "attrs", None)
    if attrs is None:
        attrs = getattr(record, "attributes", None)
    return RECORD_BYTES + attributes_extra(attrs) + events_extra(getattr(record, "events", None))

#: The span classes of the loaded recorders: a Lens span's ids are read from its fields, any
#: other span's from get_span_context(). A recorder loaded before this module is added at
#: this module's import (the compiled one loads it on first use), one loaded after adds its own.
SPAN_TYPES: tuple = ()


def add_span_type(cls) -> None:
    """Count ``cls`` (a recorder's Span class) among SPAN_TYPES (once)."""
    global SPAN_TYPES
    if cls not in SPAN_TYPES:
        SPAN_TYPES += (cls,)


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


# ---- the OpenTelemetry span limits ---------------------------------------------------------

#: Attributes the encoders add to a native span from its fields (thread.id, thread.name);
#: the SDK recorder sets them as attributes, so they count towards the span's limit there.
THREAD_ATTRIBUTES = 2


class Limits:
    """The OpenTelemetry span limits, as the SDK's ``SpanLimits`` reads them from
    OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, OTEL_ATTRIBUTE_COUNT_LIMIT, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT,
    OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_EVENT_COUNT_LIMIT, OTEL_SPAN_LINK_COUNT_LIMIT,
    OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT and OTEL_LINK_ATTRIBUTE_COUNT_LIMIT (128 each by default;
    value lengths unlimited). None means no limit. A recorder applies them as the SDK does:
    past a count the oldest attribute, event or link goes (counted in the span's
    dropped_*_count), and a text value (or a text item of a sequence) is cut to its length."""

    __slots__ = ("span_attributes", "span_value_length", "events", "links", "event_attributes",
                 "link_attributes", "value_length")

    def __init__(self, span_attributes=128, span_value_length=None, events=128, links=128, event_attributes=128,
                 link_attributes=128, value_length=None):
        self.span_attributes, self.span_value_length = span_attributes, span_value_length
        self.events, self.links = events, links
        self.event_attributes, self.link_attributes = event_attributes, link_attributes
        self.value_length = value_length

    @classmethod
    def of(cls, span_limits) -> "Limits":
        """From an SDK ``SpanLimits`` (what the TracerProvider applies to SDK spans)."""
        return cls(span_limits.max_span_attributes, span_limits.max_span_attribute_length, span_limits.max_events,
                   span_limits.max_links, span_limits.max_event_attributes, span_limits.max_link_attributes,
                   span_limits.max_attribute_length)

    def attrs_cap(self) -> int:
        """Entries a native span's attribute dict may hold (its thread attributes come from fields)."""
        return -1 if self.span_attributes is None else max(0, self.span_attributes - THREAD_ATTRIBUTES)


def _cut(value, length):
    if isinstance(value, str):
        return value[:length] if len(value) > length else value
    if isinstance(value, tuple) and any(isinstance(v, str) and len(v) > length for v in value):
        return tuple(v[:length] if isinstance(v, str) else v for v in value)
    return value


def _bound(attrs, count, length) -> int:
    # The SDK's BoundedAttributes, applied to a finished dict: the newest ``count`` entries
    # stay; text cut to ``length``. Returns how many entries were dropped.
    dropped = 0
    if count is not None and len(attrs) > count:
        dropped = len(attrs) - count
        for key in list(attrs)[:dropped]:
            del attrs[key]
    if length is not None:
        for key, value in list(attrs.items()):
            cut = _cut(value, length)
            if cut is not value:
                attrs[key] = cut
    return dropped


def apply_limits(rec, span) -> None:
    """Bound ``span``'s attributes, thread name and links to the recorder's limits, counting
    what went in ``dropped_attrs`` / ``dropped_links``; the recorders call it when a span
    ends with more attributes than allowed, with links, or whenever a value length limit
    is set."""
    limits = rec._limits
    if limits is None:
        return
    # (thread_name None: the thread attributes are entries of the dict already)
    cap = limits.attrs_cap() if span.thread_name is not None else (limits.span_attributes or 0)
    cap = None if limits.span_attributes is None else cap
    span.dropped_attrs += _bound(span.attrs, cap, limits.span_value_length)
    if limits.span_value_length is not None and isinstance(span.thread_name, str):
        span.thread_name = _cut(span.thread_name, limits.span_value_length)
    if span.links:  # links given at the start were not bounded yet
        for link in span.links:
            _bound(link[3], limits.link_attributes, limits.value_length)
        bound_links(rec, span)


def foreign_exit(span) -> None:
    """A with-block on ``span`` exited on a thread other than the one that entered it:
    warned about once (a RuntimeWarning, as for SDK spans); the span's context token is
    left for the entering thread to reset (the recorders do so the next time that thread
    looks for its current span)."""
    from lens_core.backend import _warn_foreign_exit

    _warn_foreign_exit(span.name)


def redact_name(name):
    """A span or event name with credential shapes redacted (redact_text); not a str: as given."""
    return redact_text(name) if type(name) is str else name


_THREAD_ID, _THREAD_NAME = semconv.THREAD_ID, semconv.THREAD_NAME


def merge_attributes(rec, span, attributes) -> None:
    attrs = span.attrs
    limits = rec._limits
    if limits is None:
        _sanitize_into(attrs, attributes)
        return
    # The SDK recorder's span holds its start attributes, then thread.id and thread.name,
    # then what is set later, a key set again moving to the end; past the count limit the
    # oldest goes. The same order here, so the same attributes survive: the thread
    # attributes become entries at the first later set (the encoders then take them from
    # the dict, not the span's fields), and a key set again is removed first.
    if span.thread_name is not None:
        if limits.span_attributes is not None:  # what the SDK's span dropped at its start
            span.dropped_attrs += _bound(attrs, limits.attrs_cap(), None)
        attrs[_THREAD_ID] = span.thread_id
        attrs[_THREAD_NAME] = span.thread_name
        span.thread_name = None
    for key in attributes:
        if key in attrs:
            del attrs[key]
    _sanitize_into(attrs, attributes)
    if limits.span_attributes is not None and len(attrs) > limits.span_attributes:
        span.dropped_attrs += _bound(attrs, limits.span_attributes, None)


def int64(value) -> int:
    """``value`` as the compiled recorder's 64-bit time fields take it: an int, a float or
    other number truncated (its ``__int__``), OverflowError outside int64, TypeError for what
    is not a number. The pure recorder converts so too (it kept a float end time, and its
    protobuf encoder then failed the whole export batch)."""
    if type(value) is not int:
        to_int = getattr(type(value), "__int__", None)
        if to_int is None:
            raise TypeError(f"a time in ns must be a number, got {type(value).__name__}: {value!r}")
        value = to_int(value)  # NaN: ValueError; an infinity: OverflowError
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"time {value} ns does not fit 64 bits")
    return value


# ---- values checked where they enter (both recorders): a bad one is dropped or replaced,
# counted in the recorder's fields_invalid (lens.fields.invalid) and warned about once; the
# span is kept and the caller never sees an exception (OpenTelemetry's API never raises).

_TIME_MAX = (1 << 63) - 1  # OTLP times are fixed64; the recorders keep them as int64


def bad_field(rec, what) -> None:
    """Count a bad value ``rec`` dropped or replaced; warn the first time."""
    rec.fields_invalid += 1
    from lens_core import _log

    _log.warn_once("lens-bad-field", f"lens: a span was given a bad value ({what}); it was dropped or "
                                     "replaced and the span kept (counted in lens.fields.invalid)")


def check_time(rec, value, what):
    """``value`` as a time in ns if it is one (an int, or a finite float truncated, with
    0 <= t < 2**63), else None (counted)."""
    if type(value) is int and 0 <= value <= _TIME_MAX:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _TIME_MAX:
        return int(value)
    if isinstance(value, float) and 0 <= value <= _TIME_MAX:  # NaN fails both comparisons
        return int(value)
    bad_field(rec, f"{what} {_short(value)}")
    return None


def end_time(rec, value) -> int:
    """An ``end(end_time=...)`` argument as ns; 0 (now) when it is not a valid time."""
    if value is None:
        return 0
    checked = check_time(rec, value, "end time")
    return checked if checked is not None else 0


def span_name(rec, name) -> str:
    """A span name as str (a non-str one converted, counted)."""
    if type(name) is str:
        return name
    if isinstance(name, str):
        return str.__str__(name)
    bad_field(rec, f"a span name of type {type(name).__name__}")
    if name is None:
        return "unnamed"
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "replace")
    try:
        return str(name)
    except Exception:
        return type(name).__name__


def _short(value) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def add_event(rec, span, name, attributes, timestamp) -> None:
    if timestamp is None or timestamp == 0:
        timestamp = time.time_ns()
    else:
        timestamp = check_time(rec, timestamp, "event time")
        if timestamp is None:
            return  # the event is dropped: a guessed time would misplace it
    clean = sanitize_attributes(attributes)
    limits = rec._limits
    if limits is not None:
        _bound(clean, limits.event_attributes, limits.value_length)
        if limits.events is not None and limits.events <= 0:
            span.dropped_events += 1
            return
    if span.events is None:
        span.events = []
    events = span.events
    events.append((redact_name(span_name(rec, name)), timestamp, clean))
    if limits is not None and limits.events is not None and len(events) > limits.events:
        del events[0]  # the SDK keeps the newest events
        span.dropped_events += 1


def add_link(rec, span, context, attributes) -> None:
    trace_id, span_id = context.trace_id, context.span_id
    if not (type(trace_id) is int and 0 < trace_id < 1 << 128 and type(span_id) is int and 0 < span_id < 1 << 64):
        bad_field(rec, f"a link to trace {_short(trace_id)} span {_short(span_id)}")
        return
    state = context.trace_state.to_header() if context.trace_state else None
    clean = sanitize_attributes(attributes)
    limits = rec._limits
    if limits is not None:
        _bound(clean, limits.link_attributes, limits.value_length)
    if span.links is None:
        span.links = []
    span.links.append((trace_id, span_id, state or None, clean, bool(context.is_remote)))
    bound_links(rec, span)


def bound_links(rec, span) -> None:
    """Keep the newest links within the link count limit, counting the rest."""
    limits = rec._limits
    links = span.links
    if limits is None or limits.links is None or not links or len(links) <= limits.links:
        return
    excess = len(links) - limits.links
    del links[:excess]
    span.dropped_links += excess


def set_status(rec, span, status, description) -> None:
    code = getattr(status, "status_code", status)
    value = getattr(code, "value", code)
    if description is None:
        description = getattr(status, "description", None)
    if not (type(value) is int and 0 <= value <= 2):
        bad_field(rec, f"status {_short(status)}")
        return
    if description is not None and not isinstance(description, str):
        bad_field(rec, f"a status description of type {type(description).__name__}")
        description = None  # dropped, as the SDK drops it
    if span.status_code == STATUS_OK or value == STATUS_UNSET:
        return
    span.status_code = value
    span.status_msg = redact_name(description) if value == STATUS_ERROR else None


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


for _name in ("lens_core._native._recorder", "lens_core._native._recorder_py"):
    _span_type = getattr(sys.modules.get(_name), "Span", None)
    if _span_type is not None:
        add_span_type(_span_type)
