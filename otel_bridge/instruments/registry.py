"""Metric groups: declare instruments once, record them by key; recording never raises."""

from __future__ import annotations

import logging
import math
import numbers
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from otel_bridge.lifecycle import on_fork

__all__ = [
    "KINDS",
    "MetricSpec",
    "OBSERVABLE_KINDS",
    "SECONDS_BOUNDARIES",
    "record_metrics",
    "register_metric_group",
]

OBSERVABLE_KINDS = frozenset({"observable_gauge", "observable_counter", "observable_up_down_counter"})
"""Kinds whose values come from a callback at collection time."""
KINDS = frozenset({"gauge", "counter", "up_down_counter", "histogram"}) | OBSERVABLE_KINDS
"""Every instrument kind a MetricSpec may declare."""
SECONDS_BOUNDARIES = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
"""Histogram buckets for training phases measured in seconds (steps, rollouts)."""

_NON_NEGATIVE = frozenset({"counter", "histogram"})
_RECORD = {"gauge": "set", "counter": "add", "up_down_counter": "add", "histogram": "record"}
_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricSpec:
    """One instrument of a metric group, recorded under ``key``.

    ``attributes`` are added to every measurement of this key (two keys may share one
    histogram, told apart by them). ``boundaries`` are the histogram's advisory bucket
    boundaries. Observable kinds need ``callback``: called with no arguments at
    collection, it returns a number or an iterable of ``(number, attributes)`` pairs.
    """

    key: str
    name: str
    kind: str
    unit: str
    description: str
    callback: object = None
    attributes: Mapping | None = None
    boundaries: tuple | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: kind {self.kind!r} is not one of {sorted(KINDS)}")
        if (self.kind in OBSERVABLE_KINDS) != callable(self.callback):
            need = "needs a callable callback" if self.kind in OBSERVABLE_KINDS else "takes no callback"
            raise ValueError(f"metric {self.name!r}: kind {self.kind!r} {need}")
        if self.boundaries is not None and self.kind != "histogram":
            raise ValueError(f"metric {self.name!r}: only histograms take boundaries")
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes or {})))
        if self.boundaries is not None:
            object.__setattr__(self, "boundaries", tuple(self.boundaries))


_lock = threading.Lock()
_groups: dict = {}  # group -> {key: MetricSpec}
_cache = weakref.WeakKeyDictionary()  # meter -> {(group, key): (spec, instrument or None)}
_warned: set = set()
_warn_lock = threading.Lock()


def _reset_after_fork():
    # The parent's instruments belong to its meter providers, whose export threads did not
    # survive the fork; and a lock held by another thread at fork time would never be freed.
    global _lock, _cache, _warn_lock
    _lock = threading.Lock()
    _warn_lock = threading.Lock()
    _cache = weakref.WeakKeyDictionary()


on_fork("otel_bridge.instruments", after_in_child=_reset_after_fork)


def _warn_once(group, key, reason, detail=""):
    with _warn_lock:
        if (group, key, reason) in _warned:
            return
        _warned.add((group, key, reason))
    where = f"metric group {group!r}" if key is None else f"metric {group}.{key}"
    _logger.warning("lens: %s: %s%s; skipped", where, reason, detail)


def register_metric_group(group: str, specs) -> None:
    """Register (or replace) the metric group ``group``: an iterable of MetricSpec with unique keys."""
    if not isinstance(group, str):
        raise TypeError(f"metric group name must be a str, got {type(group).__name__}")
    specs = tuple(specs)
    for spec in specs:
        if not isinstance(spec, MetricSpec):
            raise TypeError(f"metric group {group!r}: expected MetricSpec, got {type(spec).__name__}")
    by_key = {spec.key: spec for spec in specs}
    if len(by_key) != len(specs):
        raise ValueError(f"metric group {group!r}: duplicate keys")
    with _lock:
        _groups[group] = by_key


def _number(value):
    """``value`` as a finite int or float, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, numbers.Real) and not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)  # numpy scalars, 0-d tensors
    except Exception:
        return None
    return number if math.isfinite(number) else None


def _observer(group, spec):
    from opentelemetry.metrics import Observation

    def callback(options):
        try:
            result = spec.callback()
            pairs = [(result, None)] if _number(result) is not None else list(result)
            observations = []
            for value, attributes in pairs:
                number = _number(value)
                if number is None:
                    _warn_once(group, spec.key, "callback returned a non-numeric value", f": {value!r}")
                    continue
                observations.append(Observation(number, {**(attributes or {}), **spec.attributes}))
            return observations
        except Exception as exc:
            _warn_once(group, spec.key, "callback failed", f": {exc!r}")
            return []

    return callback


def _create(meter, group, spec):
    if spec.kind in OBSERVABLE_KINDS:
        create = getattr(meter, f"create_{spec.kind}")
        return create(spec.name, callbacks=[_observer(group, spec)], unit=spec.unit,
                      description=spec.description)
    if spec.kind == "histogram" and spec.boundaries is not None:
        return meter.create_histogram(spec.name, spec.unit, spec.description,
                                      explicit_bucket_boundaries_advisory=spec.boundaries)
    return getattr(meter, f"create_{spec.kind}")(spec.name, spec.unit, spec.description)


def _instrument(meter, group, spec):
    """The instrument for ``spec`` on ``meter``, created on first use; None if that failed."""
    slot = (group, spec.key)
    per_meter = _cache.get(meter)
    cached = per_meter.get(slot) if per_meter is not None else None
    if cached is not None and cached[0] is spec:
        return cached[1]
    with _lock:
        per_meter = _cache.setdefault(meter, {})
        cached = per_meter.get(slot)
        if cached is None or cached[0] is not spec:  # new, or its group was re-registered
            try:
                instrument = _create(meter, group, spec)
            except Exception as exc:
                _warn_once(group, spec.key, "instrument creation failed", f": {exc!r}")
                instrument = None
            cached = per_meter[slot] = (spec, instrument)
    return cached[1]


def record_metrics(meter, group, values=None, *, attributes=None, **kw) -> None:
    """Record ``values`` (a dict by spec key, merged with ``kw``) on ``meter``'s instruments of
    ``group``, with ``attributes``; the group's observable instruments are created on the
    first call. Never raises: unknown groups or keys, non-finite or non-numeric values,
    negative counter or histogram values and failing instruments are warned about once per
    (group, key, reason) and skipped. ``meter=None`` does nothing."""
    if meter is None:
        return
    specs = _groups.get(group) if isinstance(group, str) else None
    if specs is None:
        _warn_once(str(group), None, "not registered", f" (registered: {sorted(_groups)})")
        return
    if values is not None and not isinstance(values, Mapping):
        _warn_once(group, None, "values must be a mapping", f", got {type(values).__name__}")
        return
    try:
        weakref.ref(meter)  # instruments are cached per meter, weakly
    except TypeError:
        _warn_once(group, None, "unusable meter", f": {type(meter).__name__} cannot be weakly referenced")
        return
    for spec in specs.values():
        if spec.kind in OBSERVABLE_KINDS:
            _instrument(meter, group, spec)
    for key, value in ({**values, **kw} if values else kw).items():
        spec = specs.get(key)
        if spec is None:
            _warn_once(group, key, "unknown key", f" (keys: {sorted(specs)})")
            continue
        if spec.kind in OBSERVABLE_KINDS:
            _warn_once(group, key, "is observable: its values come from its callback")
            continue
        number = _number(value)
        if number is None:
            _warn_once(group, key, "not a finite number", f": {value!r}")
            continue
        if number < 0 and spec.kind in _NON_NEGATIVE:
            _warn_once(group, key, f"negative value for a {spec.kind}", f": {number!r}")
            continue
        instrument = _instrument(meter, group, spec)
        if instrument is None:
            continue
        try:
            getattr(instrument, _RECORD[spec.kind])(number, {**(attributes or {}), **spec.attributes})
        except Exception as exc:
            _warn_once(group, key, "recording failed", f": {exc!r}")
