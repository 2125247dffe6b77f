"""An in-memory span backend for tests: the core is tested without OpenTelemetry."""

import itertools
import threading
import time
from contextvars import ContextVar

from lens_core.backend import SpanBackend
from lens_core.carrier import format_traceparent, parse_traceparent


# What lens stamps on every gated span for the report; tests of attributes see the rest
# in ``attributes`` and these in ``stamps`` (tests/core/test_spans.py checks them).
STAMPS = ("lens.group", "lens.umbrella")


class RecordedSpan:
    """One span as the recording backend saw it."""

    def __init__(self, name, attributes, trace_id, span_id, parent_id, tracer, links):
        self.name = name
        self.attributes = {k: v for k, v in attributes.items() if k not in STAMPS}
        self.stamps = {k: attributes[k] for k in STAMPS if k in attributes}
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.tracer = tracer
        self.links = links
        self.start_ns = time.monotonic_ns()
        self.end_ns = None
        self.error = None
        self.thread = threading.get_ident()

    @property
    def ended(self):
        return self.end_ns is not None

    def set_attributes(self, attrs):
        self.attributes.update(attrs)

    def __repr__(self):
        return f"<RecordedSpan {self.name} {self.attributes}>"


class _Remote:
    """A remote parent taken from a carrier."""

    def __init__(self, trace_id, span_id):
        self.trace_id = trace_id
        self.span_id = span_id


_current = ContextVar("recording_current", default=None)


class RecordingBackend(SpanBackend):
    """Records spans; parentage follows the current span (a ContextVar), like OTel."""

    name = "recording"

    def __init__(self):
        self.spans = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, name, attributes, tracer=None, context=None, links=None):
        parent = _current.get() if context is None else self._context(context)
        with self._lock:
            span_id = next(self._ids)
        trace_id = parent.trace_id if parent is not None else (0xABC << 64) + span_id
        span = RecordedSpan(name, attributes, trace_id, span_id,
                            parent.span_id if parent is not None else None, tracer, links)
        with self._lock:
            self.spans.append(span)
        return span

    @staticmethod
    def _context(context):
        if isinstance(context, (RecordedSpan, _Remote)):
            return context
        parsed = parse_traceparent(context.get("traceparent"))
        return _Remote(parsed.trace_id, parsed.span_id) if parsed else None

    def use(self, span):
        return _current.set(span)

    def release(self, token):
        _current.reset(token)

    def end(self, span, exc=None):
        if exc is not None:
            span.error = exc
        span.end_ns = time.monotonic_ns()

    def set_attributes(self, span, attributes):
        span.set_attributes(attributes)

    def current_carrier(self):
        span = _current.get()
        return self.carrier_of(span) if span is not None else {}

    def carrier_of(self, span):
        return {"traceparent": format_traceparent(span.trace_id, span.span_id)}

    def attach_carrier(self, carrier):
        parsed = parse_traceparent(carrier.get("traceparent"))
        if parsed is None:
            return None
        return _current.set(_Remote(parsed.trace_id, parsed.span_id))

    # helpers for assertions
    def named(self, name):
        found = [s for s in self.spans if s.name == name]
        assert found, f"no span named {name!r}; have {[s.name for s in self.spans]}"
        return found[0] if len(found) == 1 else found

    def names(self):
        return [s.name for s in self.spans]
