"""Type stubs for the report's compiled reader (lens_report._scan); without it the SQL reader reads every file."""

from os import PathLike
from typing import Iterable, Tuple, Union

from typing_extensions import final

__all__ = ["CsvSink", "SpanScanner", "MORE", "DONE", "FALLBACK"]

MORE: int
DONE: int
FALLBACK: int

@final
class CsvSink:
    """Two CSV files (spans, resources) the scanners write to, for one INSERT at a time."""

    spans: int
    @property
    def spans_path(self) -> str: ...
    @property
    def resources_path(self) -> str: ...
    def __init__(self, spans_path: Union[str, PathLike[str]], resources_path: Union[str, PathLike[str]]) -> None: ...
    def flush(self) -> None: ...
    def mark(self) -> Tuple[int, int, int]: ...
    def rewind(self, mark: Tuple[int, int, int]) -> None: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...

@final
class SpanScanner:
    """Reads one plain OTLP/JSON trace file into a CsvSink, a part at a time."""

    reason: Union[str, None]
    spans: int
    def __init__(self, path: Union[str, bytes], file_index: int, max_line: int,
                 span_fields: Iterable[Tuple[str, int]], resource_fields: Iterable[Tuple[str, int]]) -> None: ...
    def read(self, sink: CsvSink, max_spans: int) -> int: ...
    def close(self) -> None: ...
