"""Type stubs for the compiled live-goodput roll-up (lens_core._native._goodput); _goodput_py is its twin."""

from typing import Any, Callable, Iterable, List, Optional, Tuple

from typing_extensions import final

__all__ = ["GoodputRollup"]

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
