"""Spans over explicit epoch-second intervals, for phases measured before telemetry started."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping

from lens_core.carrier import canonical_carrier, is_valid_carrier
from lens_core.semconv import LENS_SPAN_CLAMPED
from lens_core.attributes import sanitize_attributes

__all__ = ["emit_span", "emit_spans_from_specs", "validate_span_spec"]

_logger = logging.getLogger(__name__)
_SPEC_KEYS = ("name", "start", "end", "attributes", "parent")
# OTLP carries times as unsigned 64-bit nanoseconds: 0 up to the year 2554. The upper bound
# also catches milliseconds passed as seconds (those land in the year 55000).
_MAX_SECONDS = (2**64 - 1) // 10**9


def _is_context(parent) -> bool:
    from opentelemetry.context import Context

    return isinstance(parent, Context)


def _time_problem(field, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{field} must be a number of seconds since the epoch, got {value!r}"
    try:
        valid = 0 <= value <= _MAX_SECONDS and (isinstance(value, int) or math.isfinite(value))
    except OverflowError:
        valid = False
    if not valid:
        return f"{field} must be finite seconds since the epoch (0 to {_MAX_SECONDS}), got {value!r}"
    return None


def _problems(name, start, end, attributes, parent) -> list:
    problems = []
    if not isinstance(name, str) or not name.strip():
        problems.append(f"name must be a non-empty string, got {name!r}")
    problems += filter(None, (_time_problem("start", start), _time_problem("end", end)))
    if attributes is not None and not (isinstance(attributes, Mapping)
                                       and all(isinstance(key, str) for key in attributes)):
        problems.append(f"attributes must be a mapping with string keys, got {attributes!r}")
    if parent is not None and not is_valid_carrier(parent) and not _is_context(parent):
        problems.append(f"parent must be a W3C carrier with a valid traceparent, got {parent!r}")
    return problems


def _nanoseconds(seconds) -> int:
    if isinstance(seconds, int):
        return seconds * 10**9
    whole = math.floor(seconds)
    # float(x - floor(x)) is exact; scaling only the fraction keeps every nanosecond
    return whole * 10**9 + round((seconds - whole) * 1e9)


def emit_span(name, start_s, end_s, *, tracer=None, parent=None, attributes=None):
    """Emit a finished span ``name`` from ``start_s`` to ``end_s`` (epoch seconds) and return it.

    ``parent`` is a W3C carrier dict or an OpenTelemetry Context; ``tracer`` defaults to
    the global provider's. Raises ``ValueError`` naming each bad argument before emitting
    anything. ``start_s > end_s`` is not an error: the span is clamped to zero length at
    ``start_s``, marked ``lens.span.clamped=true``, and a warning is logged.
    """
    problems = _problems(name, start_s, end_s, attributes, parent)
    if problems:
        raise ValueError(f"span {name!r}: " + "; ".join(problems))
    start_ns, end_ns = _nanoseconds(start_s), _nanoseconds(end_s)
    attrs = sanitize_attributes(attributes)
    if start_ns > end_ns:
        _logger.warning("lens: span %r starts after it ends (%r > %r); emitted with zero length",
                        name, start_s, end_s)
        end_ns = start_ns
        attrs[LENS_SPAN_CLAMPED] = True
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    if tracer is None:
        tracer = trace.get_tracer(__name__)
    # the propagator is given the canonical copy: a valid traceparent beside a tracestate it
    # cannot parse (not a str) must not raise here
    context = parent if parent is None or _is_context(parent) else extract(canonical_carrier(parent))
    span = tracer.start_span(name, context=context, start_time=start_ns, attributes=attrs)
    span.end(end_time=end_ns)
    return span


def validate_span_spec(spec) -> dict:
    """Check one span spec (``name``, ``start``, ``end``, optional ``attributes`` and ``parent``
    carrier) and return it with every key present; ``ValueError`` lists what is wrong."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"a span spec must be a mapping, got {type(spec).__name__}")
    problems = [f"unknown key {key!r}" for key in spec if key not in _SPEC_KEYS]
    problems += [f"missing {key!r}" for key in ("name", "start", "end") if key not in spec]
    normalized = {key: spec.get(key) for key in _SPEC_KEYS}
    if not problems:
        problems = _problems(**normalized)
    if problems:
        raise ValueError("; ".join(problems))
    return normalized


def emit_spans_from_specs(specs, tracer) -> int:
    """Validate every spec, then emit them all and return how many; if any is invalid,
    emit none and raise ``ValueError`` listing each bad spec by index."""
    normalized, errors = [], []
    for index, spec in enumerate(specs):
        try:
            normalized.append(validate_span_spec(spec))
        except ValueError as exc:
            errors.append(f"spec {index}: {exc}")
    if errors:
        raise ValueError(f"{len(errors)} invalid span spec(s), none emitted:\n  " + "\n  ".join(errors))
    for spec in normalized:
        emit_span(spec["name"], spec["start"], spec["end"], tracer=tracer,
                  parent=spec["parent"], attributes=spec["attributes"])
    return len(normalized)
