"""Trace context across torch.distributed ranks (a tensor broadcast) and spans linked to remote spans."""

from __future__ import annotations

import json

from lens_core import current_trace_carrier, get_pp_trace_carrier, installed_backend
from lens_core.carrier import is_valid_carrier, usable_carrier
from lens_core.scopes import current_scope_attributes
from lens_core.attributes import sanitize_attributes

__all__ = ["MAX_CARRIER_BYTES", "broadcast_trace_context", "create_linked_span"]

MAX_CARRIER_BYTES = 4096
"""Largest encoded carrier broadcast_trace_context sends; a larger one is sent as empty."""


# ---- broadcast ----------------------------------------------------------------------------


def _encode(carrier) -> bytes:
    """Compact UTF-8 JSON of a valid str -> str carrier; ``b""`` for anything unusable."""
    try:
        if not is_valid_carrier(carrier):
            return b""
        items = dict(carrier.items())
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in items.items()):
            return b""
        data = json.dumps(items, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except Exception:  # a mapping whose items() fails, unencodable text: send nothing
        return b""
    return data if len(data) <= MAX_CARRIER_BYTES else b""


def _decode(data: bytes) -> dict:
    try:
        decoded = json.loads(data.decode("utf-8"))
    except ValueError:  # covers UnicodeDecodeError and JSONDecodeError
        return {}
    if not isinstance(decoded, dict) or not is_valid_carrier(decoded):
        return {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in decoded.items()):
        return {}
    return decoded


def _device(dist, torch, group):
    # NCCL moves only CUDA tensors; every other backend (gloo, mpi, "cpu:gloo,cuda:nccl")
    # takes CPU tensors.
    backend = str(dist.get_backend(group)).lower()
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_trace_context(src_rank: int = 0, group=None, carrier=None) -> dict | None:
    """Send ``src_rank``'s trace carrier to every rank of ``group``; a collective.

    Every rank of the group must call it. On ``src_rank`` (a global rank, as in
    ``torch.distributed.broadcast``) the carrier is ``carrier`` or, by default,
    ``lens_core.current_trace_carrier()``; every rank, the source included, returns the
    same dict, ready for ``lens_core.remote_trace_context``. The carrier travels as
    UTF-8 JSON in a uint8 tensor (its length first, as one int64), never pickled: CPU
    tensors for gloo, tensors on ``torch.cuda.current_device()`` for nccl. A carrier
    that is empty, malformed or over ``MAX_CARRIER_BYTES`` encoded is sent as length 0
    and every rank returns ``{}``; so does a payload that fails to decode.

    Returns None, touching no network, when torch is not installed, torch.distributed
    is not initialised, or this rank is not in ``group``.

    Example::

        with lens_core.managed_span("job", "train.step"):
            carrier = broadcast_trace_context()          # on every rank
        with lens_core.remote_trace_context(carrier):
            ...                                          # spans join rank 0's trace
    """
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    if dist.get_rank(group) < 0:  # not a member: the broadcast would be a no-op
        return None
    is_source = dist.get_rank() == src_rank
    device = _device(dist, torch, group)

    payload = b""
    if is_source:
        payload = _encode(current_trace_carrier() if carrier is None else carrier)
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    dist.broadcast(length, src=src_rank, group=group)
    size = int(length.item())
    if size <= 0:
        return {}
    if is_source:
        buffer = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    else:
        buffer = torch.empty(size, dtype=torch.uint8, device=device)
    dist.broadcast(buffer, src=src_rank, group=group)
    if size > MAX_CARRIER_BYTES:  # never sent by this code; someone else's protocol
        return {}
    return _decode(bytes(buffer.cpu().tolist()))


# ---- linked spans -------------------------------------------------------------------------


def _span_context(remote_carrier, remote_context):
    """The remote SpanContext to link to, or None when there is no valid one."""
    from opentelemetry import trace

    if remote_context is not None:
        if isinstance(remote_context, trace.SpanContext):
            span_context = remote_context
        elif isinstance(remote_context, trace.Span):
            span_context = remote_context.get_span_context()
        else:  # an opentelemetry Context, e.g. from otel_bridge.extract_context
            span_context = trace.get_current_span(remote_context).get_span_context()
    else:
        if remote_carrier is None:
            remote_carrier = get_pp_trace_carrier()
        remote_carrier = usable_carrier(remote_carrier, "create_linked_span")
        if not remote_carrier:
            return None
        from opentelemetry import propagate

        span_context = trace.get_current_span(propagate.extract(remote_carrier)).get_span_context()
    return span_context if span_context.is_valid else None


class _LinkedSpan:
    """Start a span with links, make it current for the block, end it on exit."""

    __slots__ = ("_backend", "_name", "_attrs", "_tracer", "_links", "_span", "_token")

    def __init__(self, backend, name, attrs, tracer, links):
        self._backend = backend
        self._name = name
        self._attrs = attrs
        self._tracer = tracer
        self._links = links
        self._span = self._token = None

    def __enter__(self):
        backend = self._backend
        self._span = backend.start(self._name, self._attrs, self._tracer, None, self._links)
        self._token = backend.use(self._span)
        return self._span

    def __exit__(self, exc_type, exc, tb):
        try:
            self._backend.release(self._token)
        finally:
            self._backend.end(self._span, None if isinstance(exc, GeneratorExit) else exc)
        return False


class _Off:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return False


_OFF = _Off()


def create_linked_span(name: str, remote_carrier=None, remote_context=None, tracer=None, **attrs):
    """A context manager for a span LINKED to a remote span, not parented on it.

    The span's parent is whatever is current here; the link points at the span in
    ``remote_context`` (an OpenTelemetry ``Context``, ``SpanContext`` or ``Span``) or, if
    that is None, in ``remote_carrier`` (a W3C carrier dict), which defaults to the
    pipeline-parallel carrier (``lens_core.get_pp_trace_carrier()``). Use it where one
    unit of work follows another without being part of it, such as a pipeline stage
    after the previous stage's send. With no valid remote span the span has no link.
    Ungated like ``span_cm``: it yields the span, or None when no backend is installed.

    Example::

        # stage 0, once the schedule's root span is open
        lens_core.set_pp_trace_carrier(lens_core.current_trace_carrier())
        # stage k (the carrier reached it through broadcast_trace_context)
        lens_core.set_pp_trace_carrier(carrier)
        with create_linked_span("pp.stage.forward", stage=k):
            ...
    """
    backend = installed_backend()
    if backend is None:
        return _OFF
    span_context = _span_context(remote_carrier, remote_context)
    links = None
    if span_context is not None:
        from opentelemetry.trace import Link

        links = [Link(span_context)]
    scope = current_scope_attributes()
    merged = dict(scope) if scope else {}
    merged.update(attrs)
    return _LinkedSpan(backend, name, sanitize_attributes(merged), tracer, links)
