"""Parent and child links between spans, rebuilt by id across files and processes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .model import Span

__all__ = ["SpanTree"]


class SpanTree:
    """Spans indexed by ``(trace_id, span_id)``; a span whose parent is not in the input is a root.

    Walks are guarded against parent cycles in malformed input: each span is visited once.
    """

    def __init__(self, spans: Iterable[Span]) -> None:
        self.spans: dict[tuple[str, str], Span] = {span.key: span for span in spans}
        self.children: dict[tuple[str, str], list[Span]] = {}
        self.orphans: list[Span] = []
        for span in self.spans.values():
            parent_key = span.parent_key
            if parent_key is None:
                continue
            if parent_key in self.spans:
                self.children.setdefault(parent_key, []).append(span)
            else:
                self.orphans.append(span)

    def parent(self, span: Span) -> Span | None:
        """The parent span, or ``None`` for a root or an orphan."""
        parent_key = span.parent_key
        return None if parent_key is None else self.spans.get(parent_key)

    def ancestors(self, span: Span) -> Iterator[Span]:
        """Parent, grandparent, ... up to the root."""
        seen = {span.key}
        parent = self.parent(span)
        while parent is not None and parent.key not in seen:
            seen.add(parent.key)
            yield parent
            parent = self.parent(parent)

    def descendants(self, span: Span) -> Iterator[Span]:
        """Every span below this one, in any process, depth first."""
        seen = {span.key}
        stack = list(self.children.get(span.key, ()))
        while stack:
            child = stack.pop()
            if child.key in seen:
                continue
            seen.add(child.key)
            yield child
            stack.extend(self.children.get(child.key, ()))
