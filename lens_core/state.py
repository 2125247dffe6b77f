"""Which span groups are on: the retained spec or pinned set, diagnostics, and the gate push."""

from __future__ import annotations

import _thread

from . import _impl, _lifecycle, _log
from .backend import REQUIRED_METHODS
from .registry import ALL, SpanRegistry, describe_registered, normalize_name

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time (import budget)
    from typing import Any, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Union

    from .backend import SpanBackend

__all__ = [
    "enabled_span_groups",
    "get_pp_trace_carrier",
    "install_backend",
    "installed_backend",
    "is_span_group_enabled",
    "pending_span_groups",
    "set_enabled_span_groups",
    "set_pp_trace_carrier",
    "set_span_group_spec",
    "span_group_diagnostics",
    "uninstall_backend",
]

# Writers take _lock; readers go through the gate's snapshot and never lock. Lock order:
# this lock may be held while reading a registry view (lock-free), and the registry never
# calls back into here while holding its own lock, so the two locks never nest.
_lock = _thread.RLock()
_spec = None  # the retained spec string, or None
_pinned = None  # an explicit frozenset of group names, or None
_configured: frozenset = frozenset()  # what the spec/pin resolves to, backend or not
_pending: frozenset = frozenset()
_backend = None
_seen_namespaces: frozenset = frozenset()
_pp_trace_carrier: dict = {}

is_span_group_enabled: Callable[[str], bool] = _impl.gate.is_enabled


def _warn_once(message: str) -> None:
    _log.warn_once(message, message)


def _apply(registry_changed_ns=None) -> None:
    """Re-resolve and push a new gate snapshot. Caller holds _lock."""
    global _configured, _pending, _seen_namespaces
    view = SpanRegistry.view()
    if _pinned is not None:
        everything = ALL in _pinned
        _configured = frozenset(g for g in view.groups if everything or g in _pinned)
        _pending = frozenset(g for g in _pinned if g not in view.groups and g != ALL)
    elif _spec is not None:
        _configured, _pending = SpanRegistry.resolve(_spec, view)
        if registry_changed_ns is None:  # a new spec: say what did not resolve
            _report_spec(view)
    else:
        _configured, _pending = frozenset(), frozenset()
    if registry_changed_ns and (_spec or _pinned):
        if registry_changed_ns not in _seen_namespaces:
            _warn_once(
                f"span-group namespace {registry_changed_ns!r} registered after span groups were "
                f"configured; its groups were resolved late (now enabled: "
                f"{', '.join(sorted(_configured)) or 'none'})"
            )
    _seen_namespaces = frozenset(view.namespaces)
    effective = _configured if _backend is not None else frozenset()
    bits = 0
    for group in effective:
        bits |= 1 << view.ids[group]
    infos = {info.id: (info.name, info.umbrella, info.bucket_key, info.bucket) for info in view.groups.values()}
    _impl.publish(view.ids, bits, infos)


def _report_spec(view) -> None:
    if not _spec.strip():
        return  # an empty spec turns every group off on purpose: nothing to warn about
    if not view.groups:
        _warn_once(
            f"span-group spec {_spec!r} was set but no span groups are registered; nothing is "
            "enabled until a library registers its groups (import it before or after setup)"
        )
    elif _pending and not _configured:
        _warn_once(
            f"span-group spec {_spec!r} resolved to no groups: unknown entries "
            f"{', '.join(sorted(_pending))}. {describe_registered(view)}"
        )
    elif _pending:
        _warn_once(
            f"span-group spec {_spec!r}: unknown entries {', '.join(sorted(_pending))} are kept "
            f"pending until a library registers them. {describe_registered(view)}"
        )
    elif not _configured:
        _warn_once(f"span-group spec {_spec!r} resolved to no groups; every span group is off")


def _on_registry_change(namespace) -> None:
    with _lock:
        _apply(namespace or "")


SpanRegistry.add_listener(_on_registry_change)


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork; the child gets a fresh one.
    global _lock
    _lock = _thread.RLock()


_lifecycle.on_fork("lens_core.state", after_in_child=_after_fork_in_child)


def set_span_group_spec(spec: Union[str, Iterable[str], None]) -> FrozenSet[str]:
    """Retain ``spec`` (presets/groups, comma list) and enable what it resolves to, now and
    after every later registration. Returns the enabled set. Never raises for unknown names."""
    global _spec, _pinned
    if spec is not None and not isinstance(spec, str):
        spec = ",".join(spec)
    with _lock:
        _spec, _pinned = (spec or ""), None
        _apply()
        return _configured


def set_enabled_span_groups(groups: Union[str, Iterable[str]]) -> FrozenSet[str]:
    """Pin an explicit set of group names (drops any retained spec); ``all`` pins every
    group, present and future. Unregistered names stay pending until registered. Returns
    the enabled set."""
    global _spec, _pinned
    pinned = frozenset(normalize_name(g, "group name") for g in ([groups] if isinstance(groups, str) else groups))
    with _lock:
        _spec, _pinned = None, pinned
        _apply()
        return _configured


def enabled_span_groups() -> FrozenSet[str]:
    """The groups that are on now: empty while no span backend is installed."""
    return _configured if _backend is not None else frozenset()


def pending_span_groups() -> FrozenSet[str]:
    """Spec entries or pinned names that matched nothing registered (yet)."""
    return _pending


def installed_backend() -> Optional[SpanBackend]:
    """The installed span backend, or None (then every group is off)."""
    return _backend


def install_backend(backend: SpanBackend) -> None:
    """Install ``backend``: enabled span groups start producing spans through it."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(backend, m, None))]
    if missing:
        raise TypeError(f"{backend!r} is not a SpanBackend: missing {', '.join(missing)}")
    _set_backend(backend)


def uninstall_backend() -> None:
    """Remove the installed backend: every span group is off again."""
    _set_backend(None)


def _set_backend(backend) -> None:
    """Install (or with None, remove) the span backend."""
    global _backend
    with _lock:
        _backend = backend
        _impl.set_native(backend)
        _apply()


def span_group_diagnostics() -> Dict[str, Any]:
    """A snapshot for tools: spec, pinned set, configured/enabled/pending groups, backend."""
    with _lock:
        return {
            "spec": _spec,
            "pinned": sorted(_pinned) if _pinned is not None else None,
            "configured": sorted(_configured),
            "enabled": sorted(enabled_span_groups()),
            "pending": sorted(_pending),
            "backend": getattr(_backend, "name", type(_backend).__name__) if _backend else None,
            "implementation": _impl.IMPLEMENTATION,
        }


def _reset_for_tests() -> None:
    global _spec, _pinned, _backend, _pp_trace_carrier
    with _lock:
        _spec, _pinned, _backend, _pp_trace_carrier = None, None, None, {}
        _log._reset_for_tests()
        _apply()


def set_pp_trace_carrier(carrier: Optional[Mapping[str, str]]) -> None:
    """Store the pipeline-parallel trace carrier (set at setup, read from any thread) as a
    canonical copy; a malformed one is stored as ``{}`` (counted and warned about once,
    see lens_core.carrier)."""
    global _pp_trace_carrier
    from .carrier import usable_carrier

    _pp_trace_carrier = usable_carrier(carrier, "set_pp_trace_carrier")


def get_pp_trace_carrier() -> Dict[str, str]:
    """The pipeline-parallel trace carrier, or ``{}``."""
    return dict(_pp_trace_carrier)
