"""Record: a small immutable value class (dataclasses would cost the import budget)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from typing import Any, ClassVar, Dict, Tuple, TypeVar

    _R = TypeVar("_R", bound="Record")

__all__ = ["Record"]


class Record:
    """Fields in ``_fields`` (in order), optional ``_defaults``; built from positional or
    keyword arguments; immutable, comparable, hashable; ``replace(**changes)`` copies.
    Subclasses declare ``__slots__ = _fields`` and may override ``_validate``; they declare
    each field as a class annotation too, so type checkers see it (``enabled: bool``)."""

    __slots__ = ()
    _fields: ClassVar[Tuple[str, ...]] = ()
    _defaults: ClassVar[Dict[str, Any]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self).__name__
        if len(args) > len(self._fields):
            raise TypeError(f"{cls}() takes at most {len(self._fields)} positional arguments ({len(args)} given)")
        values = dict(zip(self._fields, args))
        for key, value in kwargs.items():
            if key not in self._fields:
                raise TypeError(f"{cls}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls}() got multiple values for argument {key!r}")
            values[key] = value
        for name in self._fields:
            if name not in values:
                if name not in self._defaults:
                    raise TypeError(f"{cls}() missing required argument {name!r}")
                values[name] = self._defaults[name]
            object.__setattr__(self, name, values[name])
        self._validate()

    def _validate(self) -> None:
        """Check (and normalise with object.__setattr__) the fields; raise ValueError."""

    def replace(self: _R, **changes: Any) -> _R:
        """A copy with ``changes`` applied (the record itself is immutable)."""
        return type(self)(**{**{f: getattr(self, f) for f in self._fields}, **changes})

    def __reduce__(self) -> Tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through the constructor (validated, like any
        # other record), by keyword: __setattr__ refuses the default slot-by-slot restore.
        return (_rebuild, (type(self), {f: getattr(self, f) for f in self._fields}))

    def __copy__(self: _R) -> _R:
        return self  # immutable: a copy may be the record itself

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use replace()")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in self._fields))

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


def _rebuild(cls: Any, fields: Dict[str, Any]) -> Any:
    """A record of ``cls`` from its fields (Record.__reduce__'s constructor)."""
    return cls(**fields)
