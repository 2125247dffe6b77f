"""Type stubs for the report's compiled reader (lens_report._scan); without it the SQL reader reads every file.

It also writes the JSON report's (rank, step) rows (``seconds_rows``); without it ``json.dumps`` does."""

from typing import Any, Iterable, List, Optional, Tuple, Union

from typing_extensions import final

__all__ = ["ArrowSink", "ArrowBatch", "SpanScanner", "MORE", "DONE", "FALLBACK", "SPAN_COLUMNS", "RESOURCE_COLUMNS",
           "seconds_rows"]

MORE: int
DONE: int
FALLBACK: int
SPAN_COLUMNS: Tuple[str, ...]
RESOURCE_COLUMNS: Tuple[str, ...]

@final
class ArrowBatch:
    """Rows an ArrowSink handed over, scanned through the Arrow PyCapsule interface."""

    @property
    def rows(self) -> int: ...
    def __arrow_c_stream__(self, requested_schema: object = None) -> object: ...

@final
class ArrowSink:
    """The spans and resources the scanners read, as Arrow columns in memory, for one INSERT at a time."""

    spans: int
    @property
    def max_bytes(self) -> int: ...
    @property
    def span_fields(self) -> int: ...
    @property
    def resource_fields(self) -> int: ...
    def __init__(self, span_fields: Iterable[str], resource_fields: Iterable[str], max_bytes: int = ...) -> None: ...
    def mark(self) -> Tuple[int, int, int]: ...
    def rewind(self, mark: Tuple[int, int, int]) -> None: ...
    def take(self) -> Tuple[ArrowBatch, ArrowBatch]: ...
    def close(self) -> None: ...

@final
class SpanScanner:
    """Reads one plain OTLP/JSON trace file into an ArrowSink, a part at a time."""

    reason: Union[str, None]
    spans: int
    def __init__(self, path: Union[str, bytes], file_index: int, max_line: int,
                 span_fields: Iterable[Tuple[str, int]], resource_fields: Iterable[Tuple[str, int]]) -> None: ...
    def read(self, sink: ArrowSink, max_spans: int) -> int: ...
    def close(self) -> None: ...

def seconds_rows(iterations: Any, ranks: Any, labels: List[bytes], wall: Any, productive: Any, overhead: Any,
                 idle: Any, wasted: Any, busy: Any, start: int, stop: int, keep: Optional[bytes] = ...) -> bytes: ...
