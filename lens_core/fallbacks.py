"""Canonical no-ops with the same signatures as lens_core's primitives.

For libraries that instrument with lens but must run where it is not installed::

    try:
        from lens_core import managed_span, trace_fn
    except ImportError:
        from mylib._lens_fallbacks import managed_span, trace_fn  # a copy of this file

This module imports nothing from the rest of lens_core, so it can be copied as is. A test
checks that every signature matches the real primitive.
"""

__all__ = [
    "bucket_scope",
    "current_trace_carrier",
    "get_pp_trace_carrier",
    "in_per_prompt_scope",
    "is_span_group_enabled",
    "iteration_scope",
    "managed_span",
    "per_prompt_scope",
    "remote_trace_context",
    "safe_set_span_attributes",
    "set_pp_trace_carrier",
    "span_attributes",
    "span_cm",
    "trace_fn",
    "umbrella_span",
    "umbrella_trace_fn",
]


class _Null:
    """A do-nothing context manager whose ``__enter__`` yields None."""

    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return False


_NULL = _Null()


def _identity(fn):
    return fn


def managed_span(group, name, tracer=None, **attrs):
    """No-op managed_span: the body runs, ``None`` is yielded."""
    return _NULL


def umbrella_span(group, name, tracer=None, **attrs):
    """No-op umbrella_span."""
    return _NULL


def span_cm(name, tracer=None, record_exception=True, context=None, **attrs):
    """No-op span_cm."""
    return _NULL


def trace_fn(group, name=None, tracer=None):
    """No-op trace_fn: returns the function unchanged."""
    return _identity


def umbrella_trace_fn(group, name=None, tracer=None):
    """No-op umbrella_trace_fn."""
    return _identity


def is_span_group_enabled(group):
    """Always False without lens."""
    return False


def safe_set_span_attributes(span, attrs, redact_keys=None):
    """No-op."""


def current_trace_carrier():
    """Always ``{}`` without lens."""
    return {}


def remote_trace_context(carrier):
    """No-op context manager."""
    return _NULL


def set_pp_trace_carrier(carrier):
    """No-op."""


def get_pp_trace_carrier():
    """Always ``{}`` without lens."""
    return {}


def span_attributes(**attrs):
    """No-op scope."""
    return _NULL


def iteration_scope(iteration):
    """No-op scope."""
    return _NULL


def bucket_scope(bucket):
    """No-op scope."""
    return _NULL


def per_prompt_scope():
    """No-op scope."""
    return _NULL


def in_per_prompt_scope():
    """Always False without lens."""
    return False
