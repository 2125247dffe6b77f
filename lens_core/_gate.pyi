"""Type stubs for the compiled gate (lens_core._gate); lens_core._gate_py has the same API.

mypy.stubtest checks this file against the compiled module in CI (.ci/run), with the
entries of tests/typing/stubtest_allowlist.txt; tests/core/test_gate.py checks that both
gate implementations have the same signatures.
"""

from types import TracebackType
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Type, TypeVar

from typing_extensions import final

from lens_core._native._recorder import Recorder
from lens_core.typing import SpanContextManager

__all__ = [
    "is_enabled",
    "managed_span",
    "null_span",
    "publish",
    "set_attribute_hooks",
    "set_factories",
    "set_native",
    "umbrella_span",
    "wrap_function",
]

_F = TypeVar("_F", bound=Callable[..., Any])

class _NullSpan:
    """The one shared do-nothing context manager a disabled group hands out."""

    def __enter__(self) -> None: ...
    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None: ...

null_span: _NullSpan

def set_factories(span_factory: Callable[..., ContextManager[Any]], call_factory: Callable[..., Any]) -> None: ...
def publish(ids: Mapping[str, int], bits: int, infos: Optional[Mapping[int, Tuple[str, bool, str, Optional[str]]]] = None) -> None: ...
def set_native(recorder: Optional[Recorder]) -> None: ...
def set_attribute_hooks(attrs_var: Any, bucket_var: Any, redact_cache: Dict[str, bool], sanitize_one: Callable[..., None],
                        slow_attributes: Callable[..., Dict[str, Any]], str_check: Optional[Callable[[str], str]] = None,
                        clean_texts: Optional[Set[str]] = None, shape_min: int = 0) -> None: ...
def is_enabled(group: str) -> bool: ...
def managed_span(group: str, name: str, tracer: Optional[Any] = None, **attrs: Any) -> SpanContextManager: ...
def umbrella_span(group: str, name: str, tracer: Optional[Any] = None, **attrs: Any) -> SpanContextManager: ...
def wrap_function(fn: _F, group: str, name: str, tracer: Optional[Any], umbrella: bool) -> _F: ...
