"""Type stubs for the compiled gate (lens_core._gate); lens_core._gate_py has the same API.

mypy.stubtest checks this file against the compiled module in CI (.ci/run), with the
entries of tests/typing/stubtest_allowlist.txt; tests/core/test_gate.py checks that both
gate implementations have the same signatures.
"""

from types import TracebackType
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Type, TypeVar

from typing_extensions import final

from lens_core.typing import SpanContextManager

__all__ = [
    "GoodputRollup",
    "KIND_INTERNAL",
    "RECORD_BYTES",
    "Recorder",
    "SAMPLE_ALWAYS_OFF",
    "SAMPLE_ALWAYS_ON",
    "SAMPLE_CUSTOM",
    "SAMPLE_PARENT_RATIO",
    "SAMPLE_RATIO",
    "Span",
    "encode_traces_json",
    "encode_traces_pb",
    "is_enabled",
    "make_record",
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
@final
class GoodputRollup:
    """Per-process roll-up of ended span records into buckets and steps (live goodput)."""

    max_pending: int
    evicted: int
    def __init__(self, step_search: Callable[[str], Any], max_pending: int = ...) -> None: ...
    @property
    def totals(self) -> List[int]: ...
    @property
    def bounds(self) -> Tuple[Optional[int], Optional[int]]: ...
    @property
    def pending(self) -> int: ...
    def feed(self, records: Iterable[Any], never: Any, skip_category: Any) -> List[Tuple[Any, int, Optional[List[int]]]]: ...


# ---- the native span recorder and OTLP encoders (twin: lens_core._recorder_py, _encode_py) ----

KIND_INTERNAL: int
RECORD_BYTES: int
SAMPLE_ALWAYS_ON: int
SAMPLE_ALWAYS_OFF: int
SAMPLE_RATIO: int
SAMPLE_PARENT_RATIO: int
SAMPLE_CUSTOM: int

_Event = Tuple[str, int, Dict[str, Any]]
_Link = Tuple[int, int, Optional[str], Dict[str, Any], bool]

@final
class Span:
    """A Lens span: OpenTelemetry's Span API while it runs, its own record once ended."""

    parent_remote: bool
    trace_state: Optional[str]
    sampled: bool
    flags: int
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attrs: Dict[str, Any]
    events: Optional[List[_Event]]
    links: Optional[List[_Link]]
    status_code: int
    status_msg: Optional[str]
    scope: int
    thread_id: int
    thread_name: Optional[str]
    dropped_attrs: int
    dropped_events: int
    dropped_links: int
    sdk_span: Any
    trace_id: int
    span_id: int
    parent_id: int
    def __init__(self, rec: Any, name: str, attrs: Optional[Dict[str, Any]], context: Any = None, kind: int = 1,
                 links: Optional[List[_Link]] = None, record_exception: bool = True) -> None: ...
    def __enter__(self) -> Span: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool: ...
    def get_span_context(self) -> Any: ...
    def is_recording(self) -> bool: ...
    def set_attribute(self, key: str, value: Any) -> None: ...
    def set_attributes(self, attributes: Mapping[str, Any]) -> None: ...
    def add_event(self, name: str, attributes: Optional[Mapping[str, Any]] = None, timestamp: Optional[int] = None) -> None: ...
    def add_link(self, context: Any, attributes: Optional[Mapping[str, Any]] = None) -> None: ...
    def update_name(self, name: str) -> None: ...
    def set_status(self, status: Any, description: Optional[str] = None) -> None: ...
    def record_exception(self, exception: BaseException, attributes: Optional[Mapping[str, Any]] = None,
                         timestamp: Optional[int] = None, escaped: bool = False) -> None: ...
    def end(self, end_time: Optional[int] = None) -> None: ...
    @property
    def context(self) -> Any: ...
    @property
    def parent(self) -> Any: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...
    @property
    def is_ended(self) -> bool: ...

def make_record(scope: int, name: str, kind: int, trace_id: int, span_id: int, parent_id: int, parent_remote: bool,
                trace_state: Optional[str], start_ns: int, end_ns: int, attrs: Dict[str, Any],
                events: Optional[List[_Event]], links: Optional[List[_Link]], status_code: int,
                status_msg: Optional[str], dropped: Tuple[int, int, int] = (0, 0, 0), sdk_span: Any = None) -> Span: ...

@final
class Recorder:
    """The process's span store and a lens_core SpanBackend."""

    name: str
    max_open: int
    buffer_bytes: int
    queue_limit: int
    open_count: int
    created: int
    ended: int
    dropped: int
    evicted: int
    evicted_ended: int
    truncated: int
    closed: bool
    _sampler: Any
    _otel: Any
    def __init__(self, *, max_open: int = 10000, buffer_bytes: int = 16777216) -> None: ...
    def bind_otel(self, *, contextvar: Any, context_type: Any, span_key: str, span_context_type: Any,
                  trace_flags_type: Any, trace_state_type: Any, non_recording_span_type: Any,
                  get_current: Callable[[], Any], attach: Callable[[Any], Any], detach: Callable[[Any], None],
                  format_exc: Callable[[BaseException, bool], Dict[str, Any]],
                  fail_span: Callable[[Any, BaseException], None]) -> None: ...
    def set_sampler(self, mode: int, ratio: float = 1.0, sampler: Any = None) -> None: ...
    @property
    def context_types(self) -> Tuple[type, ...]: ...
    def new_span(self, name: str, attrs: Dict[str, Any], context: Any = None, record_exception: bool = True) -> Span: ...
    def live(self, name: str, attributes: Dict[str, Any], tracer: Any = None, context: Any = None,
             record: bool = True) -> Any: ...
    def start(self, name: str, attributes: Dict[str, Any], tracer: Any = None, context: Any = None,
              links: Optional[Sequence[Any]] = None) -> Any: ...
    def use(self, span: Any) -> Any: ...
    def release(self, token: Any) -> None: ...
    def end(self, span: Any, exc: Optional[BaseException] = None) -> None: ...
    def set_attributes(self, span: Any, attributes: Mapping[str, Any]) -> None: ...
    def current_carrier(self) -> Dict[str, str]: ...
    def carrier_of(self, span: Any) -> Dict[str, str]: ...
    def attach_carrier(self, carrier: Mapping[str, Any]) -> Any: ...
    def add_record(self, record: Span) -> bool: ...
    def take(self, limit: int) -> List[Span]: ...
    def queued(self) -> int: ...
    def open_spans(self) -> List[Span]: ...
    def end_open_spans(self, reason: str = "shutdown") -> int: ...
    def close(self) -> None: ...

def encode_traces_pb(resource: bytes, scopes: Sequence[bytes], records: Iterable[Span]) -> bytes: ...
def encode_traces_json(resource: str, scopes: Sequence[str], records: Iterable[Span]) -> str: ...
