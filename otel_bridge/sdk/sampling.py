"""RankSampler: an OpenTelemetry trace sampler that records spans on selected ranks only.

Importing this module loads the OpenTelemetry SDK; ``build_providers`` imports it only
on an exporting rank whose ``trace_ranks`` is not ``all``.
"""

from __future__ import annotations

from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import get_current_span

from lens_core.export_ranks import export_decision, parse_export_ranks

from otel_bridge.sdk import upstream

__all__ = ["RankSampler"]


class RankSampler(Sampler):
    """Drops every span on ranks that ``ranks`` leaves out; on the selected ranks, the
    ``delegate`` decides (by default the sampler ``OTEL_TRACES_SAMPLER`` /
    ``OTEL_TRACES_SAMPLER_ARG`` name, ``parentbased_always_on`` when unset).

    ``ranks`` is what ``LENS_EXPORT_RANKS`` takes (``first``, ``0,8,16``, ``sample:0.1``,
    a registered strategy's name) or a callable ``(rank, world_size, local_rank) -> bool``.
    The decision is made once, here, so it is deterministic per rank: ``sample:F`` records
    the same ranks on every restart, rank 0 always. ``selected`` (this rank's decision)
    and ``delegate`` are plain attributes, so a recorder can decide without calling
    :meth:`should_sample` per span.
    """

    def __init__(self, ranks, rank: int, world_size: int, local_rank: int = 0, delegate: Sampler | None = None):
        if isinstance(ranks, str):
            ranks = parse_export_ranks(ranks, "trace_ranks")
        self.ranks = ranks
        self.rank = rank
        #: Whether this rank records spans (then ``delegate`` decides each one).
        self.selected = export_decision(ranks, rank, world_size, local_rank)
        #: The sampler that decides on a selected rank. The SDK's own reading of
        #: OTEL_TRACES_SAMPLER is what a TracerProvider given no sampler would use.
        self.delegate = delegate if delegate is not None else upstream.sampler_from_env()

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:
        """The delegate's result on a selected rank (attributes passed through); DROP with
        no attributes (the parent's trace state kept) on a rank left out."""
        if self.selected:
            return self.delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        parent = get_current_span(parent_context).get_span_context()
        return SamplingResult(Decision.DROP, None, parent.trace_state if parent.is_valid else None)

    def get_description(self) -> str:
        """``RankSampler{ranks=...,rank=...,selected=...,delegate=<its description>}``."""
        ranks = getattr(self.ranks, "__qualname__", None) or str(self.ranks)
        return (f"RankSampler{{ranks={ranks},rank={self.rank},selected={str(self.selected).lower()},"
                f"delegate={self.delegate.get_description()}}}")

    def __repr__(self) -> str:
        return f"<{self.get_description()}>"
