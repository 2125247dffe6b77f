"""Which ranks export: ExportRanks selectors and the registry of named export strategies."""

from __future__ import annotations

import _thread
import math

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it would cost the import budget
    from typing import Callable, Tuple

    Strategy = Callable[[int, int, int], bool]

from ._record import Record

__all__ = [
    "BUILTIN_STRATEGIES",
    "ExportRanks",
    "export_decision",
    "export_strategies",
    "get_export_strategy",
    "parse_export_ranks",
    "register_export_strategy",
    "unregister_export_strategy",
]


def _all(rank: int, world_size: int, local_rank: int) -> bool:
    """Every rank exports."""
    return True


def _first(rank: int, world_size: int, local_rank: int) -> bool:
    """Rank 0 exports."""
    return rank == 0


def _last(rank: int, world_size: int, local_rank: int) -> bool:
    """The last rank (``world_size - 1``) exports."""
    return rank == world_size - 1


def _per_node(rank: int, world_size: int, local_rank: int) -> bool:
    """Local rank 0 of every node exports."""
    return local_rank == 0


# Plain strategies by name: the built-ins first; users add theirs with register_export_strategy.
_strategies: dict[str, Strategy] = {"all": _all, "first": _first, "last": _last, "per_node": _per_node}
#: Strategy names lens defines; ``list`` and ``sample`` take an argument (``0,8,16``, ``sample:F``).
BUILTIN_STRATEGIES = ("all", "first", "last", "list", "per_node", "sample")
_lock = _thread.allocate_lock()


def _allowed() -> str:
    custom = sorted(set(_strategies) - set(BUILTIN_STRATEGIES))
    registered = ", ".join(custom) if custom else "none registered"
    return ("all, first, last, per_node, a list of ranks like 0,8,16, or sample:FRACTION (0 < F <= 1), "
            f"or a registered strategy ({registered})")


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"an export strategy name must be a str, got {type(name).__name__}: {name!r}")
    norm = name.strip().lower()
    # The name must read back from LENS_EXPORT_RANKS: no ',' or ':' (list and sample syntax).
    if not (norm and norm.isascii() and norm[0].isalpha() and all(c.isalnum() or c in "_.-" for c in norm)):
        raise ValueError(f"export strategy name {name!r}: use letters, digits, '_', '.' or '-', "
                         "starting with a letter")
    return norm


def register_export_strategy(name: str, strategy: Strategy, *, replace: bool = False) -> None:
    """Register ``strategy``, a callable ``(rank, world_size, local_rank) -> bool``, under
    ``name`` (case-insensitive), so ``LENS_EXPORT_RANKS=name`` selects it. The built-in
    names (:data:`BUILTIN_STRATEGIES`) cannot be taken; registering a name again needs
    ``replace=True``. Register before building the config that names it."""
    norm = _check_name(name)
    if not callable(strategy):
        raise TypeError(f"export strategy {norm!r} must be callable as (rank, world_size, local_rank) -> bool, "
                        f"got {type(strategy).__name__}")
    with _lock:
        if norm in BUILTIN_STRATEGIES:
            raise ValueError(f"{norm!r} is a built-in export strategy and cannot be replaced; "
                             f"built-ins: {', '.join(BUILTIN_STRATEGIES)}")
        if norm in _strategies and not replace:
            raise ValueError(f"export strategy {norm!r} is already registered; pass replace=True to replace it")
        _strategies[norm] = strategy


def unregister_export_strategy(name: str) -> None:
    """Remove the strategy registered as ``name``; built-ins cannot be removed."""
    norm = _check_name(name)
    with _lock:
        if norm in BUILTIN_STRATEGIES:
            raise ValueError(f"{norm!r} is a built-in export strategy and cannot be unregistered")
        if _strategies.pop(norm, None) is None:
            raise ValueError(f"no export strategy named {norm!r}; allowed: {_allowed()}")


def export_strategies() -> Tuple[str, ...]:
    """Every strategy name ``LENS_EXPORT_RANKS`` accepts, built-ins included, sorted."""
    return tuple(sorted(set(_strategies) | set(BUILTIN_STRATEGIES)))


def get_export_strategy(spec: str) -> Strategy:
    """The strategy ``spec`` names, as a callable ``(rank, world_size, local_rank) -> bool``:
    a registered name gives the callable registered under it; ``0,8,16`` and
    ``sample:0.05`` give their built-in selector. Raises ValueError listing what is
    allowed for anything else."""
    selector = parse_export_ranks(spec, "export strategy")
    return _strategies[selector.mode] if selector.mode in _strategies else selector.exports


def _call(name: str, strategy: Strategy, rank: int, world_size: int, local_rank: int) -> bool:
    try:
        decision = strategy(rank, world_size, local_rank)
    except Exception as exc:
        raise RuntimeError(f"export strategy {name!r} failed for rank {rank} of {world_size} "
                           f"(local rank {local_rank}): {type(exc).__name__}: {exc}") from exc
    if decision is not True and decision is not False:
        raise TypeError(f"export strategy {name!r} must return True or False, got "
                        f"{type(decision).__name__}: {decision!r} (rank {rank} of {world_size})")
    return decision


def export_decision(strategy, rank: int, world_size: int, local_rank: int = 0) -> bool:
    """Whether ``rank`` exports under ``strategy``: an :class:`ExportRanks`, a spec string
    (``first``, ``sample:0.1``, a registered name) or a callable
    ``(rank, world_size, local_rank) -> bool``. A callable that raises or returns
    anything but a bool raises an error naming it."""
    if isinstance(strategy, str):
        strategy = parse_export_ranks(strategy, "export strategy")
    if isinstance(strategy, ExportRanks):
        return strategy.exports(rank, world_size, local_rank)
    if not callable(strategy):
        raise TypeError("an export strategy is a spec string, an ExportRanks or a callable "
                        f"(rank, world_size, local_rank) -> bool; got {type(strategy).__name__}")
    return _call(getattr(strategy, "__qualname__", repr(strategy)), strategy, rank, world_size, local_rank)


class ExportRanks(Record):
    """Which ranks export: ``mode`` is ``list`` (``ranks``), ``sample`` (``fraction``) or the
    name of a registered strategy (``all``, ``first``, ``last``, ``per_node`` or your own)."""

    mode: str
    ranks: Tuple[int, ...]
    fraction: float
    _fields = __slots__ = ("mode", "ranks", "fraction")
    _defaults = {"mode": "all", "ranks": (), "fraction": 1.0}

    if TYPE_CHECKING:  # the signature Record.__init__ builds from _fields and _defaults

        def __init__(self, mode: str = "all", ranks: Tuple[int, ...] = (), fraction: float = 1.0) -> None: ...

    def exports(self, rank: int, world_size: int, local_rank: int = 0) -> bool:
        """Whether ``rank`` of ``world_size`` exports. ``sample`` is deterministic per rank
        (the same ranks export on every restart) and always includes rank 0. A registered
        strategy is called; it must return a bool."""
        if self.mode == "list":
            return rank in self.ranks
        if self.mode == "sample":
            # rank r exports when floor(r * F) steps up at r, which picks an evenly spread
            # fraction F of the ranks (rank 0 always), the same ones on every restart.
            return math.floor(rank * self.fraction) != math.floor((rank - 1) * self.fraction)
        strategy = _strategies.get(self.mode)
        if strategy is None:
            raise ValueError(f"export strategy {self.mode!r} is not registered (was it unregistered?); "
                             f"allowed: {_allowed()}")
        return _call(self.mode, strategy, rank, world_size, local_rank)

    def outside(self, world_size: int) -> Tuple[int, ...]:
        """The listed ranks that do not exist in a world of ``world_size`` (``list`` only)."""
        return tuple(r for r in self.ranks if r >= world_size) if self.mode == "list" else ()

    def __str__(self) -> str:
        if self.mode == "list":
            return ",".join(map(str, self.ranks))
        if self.mode == "sample":
            return f"sample:{self.fraction:g}"
        return self.mode


def parse_export_ranks(value, variable: str = "export_ranks") -> ExportRanks:
    """Parse ``all``, ``first``, ``last``, ``per_node``, ``0,8,16``, ``sample:0.05`` or the
    name of a registered strategy; raise ValueError naming ``variable`` and what is allowed."""
    if isinstance(value, ExportRanks):
        return value
    text = str(value).strip().lower()
    if text in _strategies:
        return ExportRanks(text)
    if text.startswith("sample:"):
        try:
            fraction = float(text[len("sample:"):])
        except ValueError:
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise ValueError(f"{variable}={value!r}: the sample fraction must be in (0, 1]; allowed: {_allowed()}")
        return ExportRanks("sample", fraction=fraction)
    try:
        ranks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 0:
        raise ValueError(f"{variable}={value!r}: allowed: {_allowed()}")
    return ExportRanks("list", ranks)
