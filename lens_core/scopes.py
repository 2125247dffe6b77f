"""Execution-context scopes (ContextVars): stamped attributes, iteration, bucket, per-prompt.

Scopes reach nested calls and coroutines started inside them; they do not reach raw
threads or other processes (a thread starts with an empty context).
"""

from __future__ import annotations

from contextvars import ContextVar

from . import semconv
from .registry import Bucket

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from types import TracebackType
    from typing import Any, Dict, Literal, Optional, Type

__all__ = [
    "bucket_scope",
    "current_bucket_override",
    "current_scope_attributes",
    "in_per_prompt_scope",
    "iteration_scope",
    "per_prompt_scope",
    "span_attributes",
]

_ATTRS = ContextVar("lens_scope_attributes", default=None)  # dict or None
_BUCKET = ContextVar("lens_bucket_override", default=None)  # bucket name or None
_PER_PROMPT = ContextVar("lens_per_prompt", default=False)


class _Scope:
    """Set a ContextVar for the block and restore it after (usable as a context manager)."""

    __slots__ = ("_var", "_value", "_token")

    def __init__(self, var: ContextVar[Any], value: object) -> None:
        self._var = var
        self._value = value
        self._token = None

    def __enter__(self) -> None:
        self._token = self._var.set(self._value)
        return None

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        self._var.reset(self._token)
        return False


class span_attributes(_Scope):
    """Stamp ``attrs`` on every span started inside (inner scopes override outer ones; an
    attribute the call site passes wins over both). The outer scope is read on entry."""

    __slots__ = ()

    def __init__(self, **attrs: object) -> None:
        from lens_core.attributes import sanitize_attributes  # sanitised once here, not on every span

        super().__init__(_ATTRS, sanitize_attributes(attrs))

    def __enter__(self) -> None:
        outer = _ATTRS.get()
        self._token = _ATTRS.set({**outer, **self._value} if outer else dict(self._value))
        return None


def iteration_scope(iteration: int) -> span_attributes:
    """``span_attributes(rl.iteration=iteration)``: every span of the step carries it."""
    return span_attributes(**{semconv.RL_ITERATION: iteration})


def bucket_scope(bucket: str) -> _Scope:
    """Reclassify leaf spans opened inside as ``bucket`` (umbrellas stay unbucketed, an
    explicit ``rl.bucket=`` wins, efficiency spans keep their category's bucket)."""
    if bucket not in Bucket.ALL:
        raise ValueError(f"bucket_scope({bucket!r}): allowed buckets are {', '.join(Bucket.ALL)}")
    return _Scope(_BUCKET, bucket)


def per_prompt_scope() -> _Scope:
    """Mark a region whose spans are emitted once per prompt (see in_per_prompt_scope)."""
    return _Scope(_PER_PROMPT, True)


def in_per_prompt_scope() -> bool:
    """True inside per_prompt_scope(): a shared client can gate on ``per_prompt`` here."""
    return _PER_PROMPT.get()


def current_scope_attributes() -> Optional[Dict[str, Any]]:
    """The attributes the enclosing span_attributes scopes stamp (a dict), or None."""
    return _ATTRS.get()


def current_bucket_override() -> Optional[str]:
    """The bucket the enclosing bucket_scope imposes on leaf spans, or None."""
    return _BUCKET.get()
