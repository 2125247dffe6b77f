"""pytest plugin: the ``lens_overhead`` fixture times your instrumented code with its span groups off and on.

Enable it in a ``conftest.py`` with ``pytest_plugins = ["lens_ci.pytest_plugin"]`` (or
run ``pytest -p lens_ci.pytest_plugin``), then::

    def test_train_step_costs_nothing_when_off(lens_overhead):
        result = lens_overhead(mylib.train_step, batch, groups="mylib_default")
        assert not result.exceeds(0.02), result   # off adds at most 2 % to the call

The fixture runs the call in paired rounds, each timing the bare function, the call with its
groups off (a backend installed, so the gate is live as on an exporting rank) and with them
on (a real OpenTelemetry SDK provider whose exporter only counts). Each round gives one
paired ratio, off over bare, measured seconds apart under the same load; ``exceeds(limit)``
is true only when a confidence interval for the median of those ratios lies wholly above
the limit, so a busy CI machine does not fail a library whose overhead is within it (the
point estimate ``disabled_overhead``, from each side's least disturbed round, failed 3 of 10
runs on a loaded 2-core machine). Ratios, never absolute times, are what a shared CI
machine can gate on.
Nothing here is imported until a test asks for the fixture.
"""

from __future__ import annotations

import time

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

__all__ = ["Overhead", "OverheadMeter", "lens_overhead"]

# A group kept on while the measured ones are off, so the gate does the lookup an exporting
# rank does (with every group off, the compiled gate answers before looking the group up).
_PROBE = "lens_overhead_probe"
_MODES = ("bare", "off", "on")


class Overhead:
    """Per-call times (the minimum over paired rounds) and the ratios made from them."""

    __slots__ = ("bare_s", "off_s", "on_s", "calls", "rounds", "spans_per_call", "paired_off")

    def __init__(self, bare_s: Optional[float], off_s: float, on_s: float, calls: int, rounds: int,
                 spans_per_call: float, paired_off: Optional[List[float]] = None) -> None:
        self.bare_s = bare_s
        self.off_s = off_s
        self.on_s = on_s
        self.calls = calls
        self.rounds = rounds
        self.spans_per_call = spans_per_call
        #: per round, ``off / bare - 1`` timed in the same round (empty without a baseline)
        self.paired_off = list(paired_off or [])

    def disabled_overhead_bounds(self, confidence: float = 0.99) -> Optional[Tuple[float, float]]:
        """A ``confidence`` interval for the median per-round disabled overhead (``off / bare
        - 1`` of each round), distribution-free (order statistics of the paired rounds);
        None without a baseline or with too few rounds for that confidence."""
        return _median_bounds(self.paired_off, confidence)

    def exceeds(self, limit: float, confidence: float = 0.99) -> bool:
        """True when the disabled overhead is above ``limit`` with ``confidence``: the whole
        interval of :meth:`disabled_overhead_bounds` lies above it. Noise on a busy machine
        widens the interval instead of failing the check. Raises ValueError without a
        baseline or with too few rounds to say (ask for more ``rounds``)."""
        bounds = self.disabled_overhead_bounds(confidence)
        if bounds is None:
            raise ValueError(f"cannot bound the disabled overhead at confidence {confidence:g}: "
                             f"{len(self.paired_off)} paired rounds" + ("" if self.paired_off else
                                                                     " (no baseline to pair with)"))
        return bounds[0] > limit

    @property
    def disabled_overhead(self) -> Optional[float]:
        """What the instrumentation adds to a call when its groups are off, as a fraction of
        the bare call: ``(off - bare) / bare`` (None without a bare baseline)."""
        if self.bare_s is None:
            return None
        return (self.off_s - self.bare_s) / self.bare_s

    @property
    def enabled_overhead(self) -> Optional[float]:
        """The same with the groups on: ``(on - bare) / bare`` (None without a baseline)."""
        if self.bare_s is None:
            return None
        return (self.on_s - self.bare_s) / self.bare_s

    @property
    def off_to_on(self) -> float:
        """``off / on``: the share of the traced call's time that remains when off."""
        return self.off_s / self.on_s

    def as_dict(self) -> Dict[str, Any]:
        """The times and ratios as a dict (what the fixture records in the test's user_properties)."""
        return {"bare_s": self.bare_s, "off_s": self.off_s, "on_s": self.on_s, "calls": self.calls,
                "rounds": self.rounds, "spans_per_call": self.spans_per_call,
                "disabled_overhead": self.disabled_overhead, "enabled_overhead": self.enabled_overhead,
                "disabled_overhead_bounds": self.disabled_overhead_bounds(), "off_to_on": self.off_to_on}

    def __repr__(self) -> str:
        def us(seconds: Optional[float]) -> str:
            return "-" if seconds is None else f"{seconds * 1e6:.3f} us"

        overhead = self.disabled_overhead
        shown = "-" if overhead is None else f"{overhead:+.2%}"
        bounds = self.disabled_overhead_bounds()
        if bounds is not None:
            shown += f", median {bounds[0]:+.2%}..{bounds[1]:+.2%} at 99 %"
        return (f"<lens overhead: bare {us(self.bare_s)}, off {us(self.off_s)} ({shown}), on {us(self.on_s)} "
                f"({self.spans_per_call:g} spans/call); {self.calls} calls x {self.rounds} rounds>")


class OverheadMeter:
    """What ``lens_overhead`` hands a test: call it to measure; it restores lens_core's
    backend, span-group selection and registry afterwards."""

    def __init__(self) -> None:
        self.results: List[Overhead] = []

    def __call__(self, fn: Callable[..., Any], *args: Any, groups: str = "all",
                 baseline: Optional[Callable[..., Any]] = None, rounds: int = 30, min_time: float = 0.002,
                 **kwargs: Any) -> Overhead:
        """Time ``fn(*args, **kwargs)`` bare, with ``groups`` (a span-group spec) off and on.

        ``baseline`` is the uninstrumented call to compare with (default: ``fn.__wrapped__``
        for a ``trace_fn``-decorated function; without one only ``off_to_on`` is given).
        Each timing repeats the call until it takes ``min_time`` seconds; the result keeps
        each side's fastest of ``rounds`` paired rounds. The groups must be registered.
        """
        if rounds < 1 or min_time <= 0:
            raise ValueError(f"rounds must be >= 1 and min_time > 0, got rounds={rounds!r}, min_time={min_time!r}")
        if baseline is None:
            baseline = getattr(fn, "__wrapped__", None)
        from lens_core.registry import SpanRegistry

        enabled = SpanRegistry.validate(groups)  # raises for a typo, naming what is registered
        with _LensState() as lens:
            exporter = lens.install_sdk_backend()
            modes = {"off": lambda: fn(*args, **kwargs), "on": lambda: fn(*args, **kwargs)}
            if baseline is not None:
                modes["bare"] = lambda: baseline(*args, **kwargs)
            switch = {"bare": lambda: lens.pin(()), "off": lambda: lens.pin(()), "on": lambda: lens.pin(enabled)}
            calls = _calibrate(modes["off"], switch["off"], min_time)
            best = {mode: float("inf") for mode in modes}
            paired: List[float] = []
            on_calls = 0
            exporter.count = 0
            for round_ in range(rounds):
                order = [m for m in _MODES if m in modes]
                order = order[round_ % len(order):] + order[:round_ % len(order)]  # no side always goes first
                this_round = {}
                for mode in order:
                    switch[mode]()
                    call = modes[mode]
                    started = time.perf_counter()
                    for _ in range(calls):
                        call()
                    this_round[mode] = (time.perf_counter() - started) / calls
                    best[mode] = min(best[mode], this_round[mode])
                    on_calls += calls if mode == "on" else 0
                if "bare" in this_round:
                    paired.append(this_round["off"] / this_round["bare"] - 1)
            spans_per_call = exporter.count / on_calls
        result = Overhead(best.get("bare"), best["off"], best["on"], calls, rounds, spans_per_call, paired)
        self.results.append(result)
        return result


def _median_bounds(values: List[float], confidence: float) -> Optional[Tuple[float, float]]:
    """The distribution-free ``confidence`` interval for the median of ``values``: the k-th
    smallest and k-th largest, for the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2."""
    from math import comb

    n = len(values)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    tail = (1 - confidence) / 2
    k, below = 0, 0.0
    while k < n and below + comb(n, k) / 2 ** n <= tail:
        below += comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return None  # too few rounds for that confidence
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def _calibrate(call: Callable[[], Any], prepare: Callable[[], None], min_time: float) -> int:
    """How many calls one timing needs to last ``min_time`` (doubling from one)."""
    prepare()
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            call()
        if time.perf_counter() - started >= min_time or calls >= 1 << 24:
            return calls
        calls *= 2


class _LensState:
    """Saves lens_core's backend and span-group selection on entry, restores them on exit."""

    def __enter__(self) -> _LensState:
        from lens_core import installed_backend, set_span_group_spec, span_group_diagnostics
        from lens_core.registry import SpanRegistry

        self._backend = installed_backend()
        self._diagnostics = span_group_diagnostics()
        self._provider: Any = None
        # Register the probe under an empty spec, so no "registered after setup" warning fires.
        set_span_group_spec("")
        self._probe = _PROBE not in SpanRegistry.namespaces()
        if self._probe:
            SpanRegistry.register(_PROBE, [_PROBE])
        return self

    def install_sdk_backend(self) -> Any:
        """Install an OTel span backend whose exporter only counts; returns the exporter."""
        from lens_core import install_backend

        from otel_bridge._extras import missing_otel
        from otel_bridge.sdk.providers import build_counting_backend

        try:
            backend, self._provider, exporter = build_counting_backend()
        except ModuleNotFoundError as exc:
            missing = missing_otel(exc, "lens_overhead (the groups-on side)")
            if missing is None:
                raise
            raise missing from exc
        install_backend(backend)
        return exporter

    def pin(self, groups: Any) -> None:
        from lens_core import set_enabled_span_groups

        set_enabled_span_groups({_PROBE, *groups})

    def __exit__(self, *exc_info: object) -> None:
        from lens_core import install_backend, set_enabled_span_groups, set_span_group_spec, uninstall_backend
        from lens_core.registry import SpanRegistry

        set_span_group_spec("")
        if self._probe:
            SpanRegistry.unregister(_PROBE)
        if self._backend is not None:
            install_backend(self._backend)
        else:
            uninstall_backend()
        pinned, spec = self._diagnostics["pinned"], self._diagnostics["spec"]
        if pinned is not None:
            set_enabled_span_groups(pinned)
        else:
            set_span_group_spec(spec or "")
        if self._provider is not None:
            self._provider.shutdown()


@pytest.fixture
def lens_overhead(request: pytest.FixtureRequest) -> Iterator[OverheadMeter]:
    """Measure instrumented code with its span groups off and on (see the module docstring);
    each result is also recorded in the test's ``user_properties`` (JUnit XML)."""
    meter = OverheadMeter()
    yield meter
    for index, result in enumerate(meter.results):
        request.node.user_properties.append((f"lens_overhead[{index}]", result.as_dict()))
