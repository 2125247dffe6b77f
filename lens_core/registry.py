"""SpanRegistry: the process-global table of span groups, presets and buckets that libraries declare."""

from __future__ import annotations

import _thread

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it would cost the import budget
    from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Union

from . import _lifecycle, _log, semconv
from ._record import Record

__all__ = ["ALL", "Bucket", "GroupInfo", "SpanRegistry", "describe_registered", "normalize_name"]

#: The preset every registry has: every registered group.
ALL = "all"


class Bucket:
    """Goodput buckets: what a second of wall clock spent in a leaf span counts as."""

    PRODUCTIVE = "productive"
    OVERHEAD = "overhead"
    IDLE = "idle"
    WASTED = "wasted"
    ALL = (PRODUCTIVE, OVERHEAD, IDLE, WASTED)
    #: What a leaf group with no declared bucket counts as (never silently dropped).
    DEFAULT = OVERHEAD


def normalize_name(name: object, what: str = "name") -> str:
    """Strip and lower-case a group, preset or namespace name; reject empty and non-str."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__}: {name!r}")
    norm = name.strip().lower()
    if not norm:
        raise ValueError(f"{what} must not be empty (got {name!r})")
    if "," in norm or norm.startswith("-"):
        raise ValueError(f"{what} {name!r} may not contain ',' or start with '-' (spec syntax)")
    return norm


class GroupInfo(Record):
    """How a group's spans are classified: a bucketed leaf, or an umbrella (bucket None).

    ``declared`` is True when an owner declared the bucket or umbrella explicitly;
    ``device_timed`` when an owner declared its spans device-timed (docs/guide/gpu-timing.md).
    """

    _fields = __slots__ = ("name", "id", "owners", "umbrella", "bucket", "bucket_key", "declared", "device_timed")
    name: str
    id: int
    owners: Tuple[str, ...]
    umbrella: bool
    bucket: Optional[str]
    bucket_key: str
    declared: bool
    device_timed: bool


class _Namespace(Record):
    _fields = __slots__ = ("name", "groups", "presets", "buckets", "umbrellas", "bucket_key", "device_timed")


class _View(Record):
    """An immutable snapshot of the registry; replaced whole on every change (its dicts
    are never mutated after publication)."""

    # device_timed: the device-timed group names (what lens_core._device reads per span)
    _fields = __slots__ = ("namespaces", "groups", "presets", "ids", "version", "device_timed")


_EMPTY_VIEW = _View({}, {}, {ALL: frozenset()}, {}, 0, frozenset())


# Which declaration of a shared group wins (lowest first): see SpanRegistry.register.
_RANK = {None: 0, Bucket.WASTED: 1, Bucket.IDLE: 2, Bucket.OVERHEAD: 3, Bucket.PRODUCTIVE: 4}


def _precedence(declaration) -> Tuple[int, str]:
    namespace, _umbrella, bucket, _key = declaration
    return _RANK[bucket], namespace


def _classification(declaration) -> tuple:
    # What a declaration stamps: an umbrella stamps nothing, whatever its bucket_key.
    _namespace, umbrella, bucket, key = declaration
    return ("umbrella",) if umbrella else ("bucket", bucket, key)


def _describe(declaration) -> str:
    namespace, umbrella, bucket, key = declaration
    if umbrella:
        return f"{namespace!r} declares it an umbrella"
    keyed = "" if key == semconv.RL_BUCKET else f" under {key!r}"
    return f"{namespace!r} declares it bucket {bucket!r}{keyed}"


def _conflict_message(group: str, winner, declarations) -> str:
    return (
        f"span group {group!r} is declared differently by the namespaces that share it: "
        f"{'; '.join(_describe(d) for d in sorted(declarations))}. Using {winner[0]!r}'s declaration: "
        "an umbrella wins (never bucketed, so never counted twice), then the bucket claiming the "
        "least goodput (wasted, idle, overhead, productive), then the namespace name; import order "
        "never decides. Declare the group the same way in every namespace to silence this."
    )


def _split_spec(spec: Union[str, Iterable[str], None]) -> List[str]:
    if spec is None:
        return []
    if isinstance(spec, str):
        parts = spec.split(",")
    else:
        parts = list(spec)
    out = []
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"span-group spec entries must be str, got {type(part).__name__}: {part!r}")
        part = part.strip().lower()
        if part:
            out.append(part)
    return out


class SpanRegistry:
    """Process-global, thread-safe registry of span groups (use the class, not instances).

    Writers hold ``_lock`` and publish a new immutable view; readers take no lock. Lock
    order: the registry lock is never held while lens_core.state's lock is taken (change
    listeners run after it is released), and state reads views without the registry lock,
    so the two locks never nest.
    """

    _lock = _thread.RLock()
    _view = _EMPTY_VIEW
    _next_id = 0
    _listeners: list = []

    # ---- writers -------------------------------------------------------------------

    @classmethod
    def register(
        cls,
        namespace: str,
        groups: Iterable[str],
        presets: Optional[Mapping[str, Iterable[str]]] = None,
        *,
        buckets: Optional[Mapping[str, str]] = None,
        umbrellas: Optional[Iterable[str]] = None,
        allow_override: bool = False,
        bucket_key: str = semconv.RL_BUCKET,
        device_timed: Optional[Iterable[str]] = None,
    ) -> None:
        """Declare ``namespace``'s span groups, presets, buckets and umbrellas.

        ``device_timed`` names leaf groups whose spans also carry when the device reached their
        start and end (``LENS_DEVICE_TIMING``; see docs/guide/gpu-timing.md). A group is
        device-timed when any owner declares it so; an umbrella cannot be.

        A group another namespace owns needs ``allow_override=True`` (both then own it).
        Re-registering a namespace needs ``allow_override=True`` and replaces it whole.
        Preset members may name groups registered earlier by other namespaces.

        When owners of a shared group declare it differently (umbrella or bucket), one
        warning names every declaration, and the one that claims the least goodput wins,
        whatever the import order: an umbrella (never bucketed, so its time is never
        counted twice), then ``wasted``, ``idle``, ``overhead``, ``productive``; between
        equal buckets under different ``bucket_key``s, the namespace whose name sorts
        first. An explicit declaration beats an owner that declared nothing.
        """
        ns = normalize_name(namespace, "namespace")
        if isinstance(groups, str):
            groups = [groups]
        group_names = tuple(dict.fromkeys(normalize_name(g, "group name") for g in groups))
        if ALL in group_names:
            raise ValueError(f"namespace {ns!r}: {ALL!r} is reserved (it means every group)")
        if not isinstance(bucket_key, str) or not bucket_key.strip():
            raise ValueError(f"namespace {ns!r}: bucket_key must be a non-empty str")
        umbrella_set = frozenset(normalize_name(g, "umbrella group") for g in (umbrellas or ()))
        bucket_map = {}
        for group, bucket in (buckets or {}).items():
            group = normalize_name(group, "bucketed group")
            if bucket not in Bucket.ALL:
                raise ValueError(
                    f"namespace {ns!r}: group {group!r} has bucket {bucket!r}; "
                    f"allowed buckets: {', '.join(Bucket.ALL)}"
                )
            bucket_map[group] = bucket
        for label, names in (("umbrellas", umbrella_set), ("buckets", bucket_map)):
            stray = sorted(set(names) - set(group_names))
            if stray:
                raise ValueError(
                    f"namespace {ns!r}: {label} name groups it does not register: {', '.join(stray)}"
                )
        device_set = frozenset(normalize_name(g, "device-timed group")
                               for g in ([device_timed] if isinstance(device_timed, str) else device_timed or ()))
        stray = sorted(device_set - set(group_names))
        if stray:
            raise ValueError(f"namespace {ns!r}: device_timed names groups it does not register: {', '.join(stray)}")
        both = sorted(umbrella_set & device_set)
        if both:
            raise ValueError(f"namespace {ns!r}: umbrella groups cannot be device-timed (only leaves are): "
                             f"{', '.join(both)}")
        both = sorted(umbrella_set & set(bucket_map))
        if both:
            raise ValueError(f"namespace {ns!r}: groups cannot be both umbrella and bucketed: {', '.join(both)}")

        with cls._lock:
            view = cls._view
            if ns in view.namespaces and not allow_override:
                raise ValueError(
                    f"namespace {ns!r} is already registered; pass allow_override=True to replace it"
                )
            others = {n: s for n, s in view.namespaces.items() if n != ns}
            owned_elsewhere = {g: n for n, s in others.items() for g in s.groups}
            if not allow_override:
                clash = sorted(g for g in group_names if g in owned_elsewhere)
                if clash:
                    owners = ", ".join(f"{g} (owned by {owned_elsewhere[g]!r})" for g in clash)
                    raise ValueError(
                        f"namespace {ns!r} registers groups another namespace owns: {owners}; "
                        "pass allow_override=True to share them"
                    )
            known = set(owned_elsewhere) | set(group_names)
            preset_map = {}
            for preset, members in (presets or {}).items():
                preset = normalize_name(preset, "preset name")
                if preset == ALL:
                    raise ValueError(f"namespace {ns!r}: preset {ALL!r} is built in and cannot be declared")
                if isinstance(members, str):
                    members = [members]
                member_set = frozenset(normalize_name(m, f"member of preset {preset!r}") for m in members)
                unknown = sorted(member_set - known)
                if unknown:
                    raise ValueError(
                        f"namespace {ns!r}: preset {preset!r} names unknown groups: {', '.join(unknown)}. "
                        "Register them in this call, or import the library that registers them first. "
                        f"Registered groups: {', '.join(sorted(known)) or '(none)'}"
                    )
                preset_map[preset] = member_set
            others[ns] = _Namespace(ns, group_names, preset_map, bucket_map, umbrella_set, bucket_key.strip(),
                                    device_set)
            conflicts = cls._publish(others)
        for message in conflicts:  # outside the lock: logging may take its own locks
            _log.warn_once(message, message)
        cls._notify(ns)

    @classmethod
    def unregister(cls, namespace: str) -> bool:
        """Remove ``namespace``; groups other namespaces share stay. True if it was there."""
        ns = normalize_name(namespace, "namespace")
        with cls._lock:
            if ns not in cls._view.namespaces:
                return False
            cls._publish({n: s for n, s in cls._view.namespaces.items() if n != ns})
        cls._notify(None)
        return True

    @classmethod
    def clear(cls) -> None:
        """Forget every namespace and group id (for tests)."""
        with cls._lock:
            cls._next_id = 0
            cls._view = _View({}, {}, {ALL: frozenset()}, {}, cls._view.version + 1, frozenset())
        cls._notify(None)

    @classmethod
    def _publish(cls, namespaces: Mapping[str, _Namespace]) -> List[str]:
        # Called with the lock held: derive groups, ids and presets, then swap the view.
        # Returns a warning per shared group whose owners declare it differently.
        ids = dict(cls._view.ids)  # ids are stable: a group keeps its id if re-registered
        owners: dict = {}
        declared: dict = {}  # group -> [(namespace, umbrella, bucket, bucket_key)], explicit only
        for ns in namespaces.values():  # insertion order = registration order
            for g in ns.groups:
                if g not in ids:
                    ids[g] = cls._next_id
                    cls._next_id += 1
                owners[g] = owners.get(g, ()) + (ns.name,)
                if g in ns.umbrellas or g in ns.buckets:
                    umbrella = g in ns.umbrellas
                    declared.setdefault(g, []).append(
                        (ns.name, umbrella, None if umbrella else ns.buckets[g], ns.bucket_key))
        device = frozenset(g for ns in namespaces.values() for g in ns.device_timed)
        groups = {}
        conflicts = []
        for g, who in owners.items():
            decls = declared.get(g)
            if not decls:  # nobody declared it: a default leaf, under the first owner's key by name
                key = namespaces[min(who)].bucket_key
                groups[g] = GroupInfo(g, ids[g], who, False, Bucket.DEFAULT, key, False, g in device)
                continue
            _ns, umbrella, bucket, key = win = min(decls, key=_precedence)
            groups[g] = GroupInfo(g, ids[g], who, umbrella, bucket, key, True, g in device and not umbrella)
            if len({_classification(d) for d in decls}) > 1:
                conflicts.append(_conflict_message(g, win, decls))
        presets = {}
        for ns in namespaces.values():
            for p, members in ns.presets.items():
                presets[p] = presets.get(p, frozenset()) | (members & groups.keys())
        presets[ALL] = frozenset(groups)
        device = frozenset(g for g, info in groups.items() if info.device_timed)
        cls._view = _View(dict(namespaces), groups, presets, ids, cls._view.version + 1, device)
        return conflicts

    @classmethod
    def add_listener(cls, listener: Callable[[Optional[str]], None]) -> None:
        """Call ``listener(namespace_or_None)`` after every change (outside the lock)."""
        with cls._lock:
            if listener not in cls._listeners:
                cls._listeners.append(listener)

    @classmethod
    def _notify(cls, namespace: Optional[str]) -> None:
        for listener in list(cls._listeners):
            listener(namespace)

    # ---- readers (lock-free: they read one immutable view) ------------------------------

    @classmethod
    def view(cls) -> _View:
        """The current immutable snapshot (internal; used by lens_core.state)."""
        return cls._view

    @classmethod
    def groups(cls) -> FrozenSet[str]:
        """Every registered group name."""
        return frozenset(cls._view.groups)

    @classmethod
    def presets(cls) -> Dict[str, FrozenSet[str]]:
        """Preset name -> groups, unioned across namespaces, including ``all``."""
        return dict(cls._view.presets)

    @classmethod
    def namespaces(cls) -> Dict[str, FrozenSet[str]]:
        """Namespace -> the groups it registered."""
        return {n: frozenset(s.groups) for n, s in cls._view.namespaces.items()}

    @classmethod
    def group_info(cls, group: str) -> Optional[GroupInfo]:
        """Classification of ``group`` (any spelling), or None if unregistered."""
        return cls._view.groups.get(group.strip().lower() if isinstance(group, str) else group)

    @classmethod
    def bucket_of(cls, group: str) -> Optional[str]:
        """The bucket a leaf group's spans carry; None for umbrellas and unregistered groups."""
        info = cls.group_info(group)
        return info.bucket if info else None

    @classmethod
    def device_timed_groups(cls) -> FrozenSet[str]:
        """The registered groups declared device-timed (``register(..., device_timed=...)``)."""
        return cls._view.device_timed

    @classmethod
    def is_umbrella(cls, group: str) -> bool:
        """True when ``group`` is a registered umbrella (never bucketed)."""
        info = cls.group_info(group)
        return bool(info and info.umbrella)

    @classmethod
    def resolve(cls, spec: Union[str, Iterable[str], None],
                view: Optional[_View] = None) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        """Resolve a spec to ``(enabled groups, pending entries)``; never raises for unknowns.

        Entries are presets or group names, unioned; entries starting with ``-`` are
        removed after the union. Unknown entries are returned in ``pending``.
        """
        view = view or cls._view
        add, remove, pending = set(), set(), set()
        for entry in _split_spec(spec):
            negate = entry.startswith("-")
            name = entry[1:].strip() if negate else entry
            members = set(view.presets.get(name, ()))
            if name in view.groups:
                members.add(name)
            if not members and name not in view.presets:
                pending.add(entry)
                continue
            (remove if negate else add).update(members)
        return frozenset(add - remove), frozenset(pending)

    @classmethod
    def validate(cls, spec: Union[str, Iterable[str], None]) -> FrozenSet[str]:
        """Strict resolve for tools: raise ValueError listing unknown entries and valid names."""
        enabled, pending = cls.resolve(spec)
        if pending:
            raise ValueError(
                f"unknown span-group spec entries: {', '.join(sorted(pending))}. {describe_registered(cls._view)}"
            )
        return enabled


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork; the child gets a fresh one.
    SpanRegistry._lock = _thread.RLock()


_lifecycle.on_fork("lens_core.registry", after_in_child=_after_fork_in_child)


def describe_registered(view: _View) -> str:
    """One sentence naming what is registered: presets, groups, namespaces."""
    if not view.groups:
        return "No span groups are registered (import the libraries that declare them first)."
    return (
        f"Presets: {', '.join(sorted(view.presets))}. "
        f"Groups: {', '.join(sorted(view.groups))}. "
        f"Namespaces: {', '.join(sorted(view.namespaces))}."
    )
