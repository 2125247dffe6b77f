"""Fuzzed carriers through every lens_core entry point: nothing raises, no invalid context is adopted."""

import pytest
from hypothesis import HealthCheck, given, settings

import lens_core
from carrier_fuzz import carrier_strategy, expected_parent, fuzzed_carriers, misbehaving_str, mutated_header, valid_header
from lens_core import SpanRegistry, remote_trace_context
from lens_core.carrier import canonical_carrier, is_valid_carrier, parse_traceparent

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _parents(carrier):
    """(expected, [parent of the span each entry point opened]) with an outer span current."""
    with lens_core.span_cm("outer") as outer:
        with lens_core.span_cm("span_cm", context=carrier) as by_span_cm:
            pass
        with remote_trace_context(carrier):
            with lens_core.managed_span("g", "remote") as by_remote:
                pass
        with lens_core.deferred_child_span("g", "deferred", carrier) as by_deferred:
            pass
    remote = expected_parent(carrier)
    expected = remote if remote is not None else (outer.trace_id, outer.span_id)
    return expected, [(s.trace_id, s.parent_id) for s in (by_span_cm, by_remote, by_deferred)]


@pytest.fixture
def on(recorder):
    SpanRegistry.register("lib", ["g"])
    lens_core.set_span_group_spec("g")
    return recorder


@FUZZ
@given(carrier=carrier_strategy())
def test_fuzzed_carriers_parent_exactly_as_the_w3c_oracle_says(on, carrier):
    expected, parents = _parents(carrier)
    assert parents == [expected] * 3


@FUZZ
@given(carrier=carrier_strategy())
def test_the_carrier_helpers_agree_with_the_oracle_and_never_raise(carrier):
    remote = expected_parent(carrier)
    assert is_valid_carrier(carrier) is (remote is not None)
    canonical = canonical_carrier(carrier)
    assert (canonical != {}) is (remote is not None)
    if remote is not None:
        assert parse_traceparent(canonical["traceparent"])[:2] == remote
        assert canonical == canonical_carrier(canonical)  # canonical is a fixed point


def test_two_thousand_seeded_carriers_adopt_no_invalid_context(on):
    carriers = fuzzed_carriers(2000)
    outcomes = [_parents(c) for c in carriers]
    wrong = [c for c, (expected, parents) in zip(carriers, outcomes) if parents != [expected] * 3]
    valid = sum(expected_parent(c) is not None for c in carriers)
    assert wrong == [] and 300 < valid < 1500  # both kinds are well represented


def _misbehaving_headers(count):
    import random

    rng = random.Random(18)
    raised = wrong = 0
    for _ in range(count):
        text = valid_header(rng) if rng.random() < 0.6 else mutated_header(rng)
        carrier = {"traceparent": misbehaving_str(rng, text),
                   "tracestate": misbehaving_str(rng, "a=1,b=2"), "baggage": misbehaving_str(rng, "k=v")}
        try:
            with lens_core.span_cm("odd", context=carrier) as span:
                pass
            remote = expected_parent({"traceparent": text})
            wrong += remote is not None and (span.trace_id, span.parent_id) != remote
        except Exception:
            raised += 1
    return raised, wrong


def test_two_thousand_misbehaving_str_subclass_headers_never_raise(on):
    """Regression: span_cm raised on a str subclass whose strip/split/__len__ misbehave
    (2,129 of 20,000 fuzzed). A subclass now counts as its characters."""
    assert _misbehaving_headers(2_000) == (0, 0)


@pytest.mark.slow
def test_twenty_thousand_misbehaving_str_subclass_headers_never_raise(on):
    """The same over 20,000 (about 5 s a gate: the slow suite)."""
    assert _misbehaving_headers(20_000) == (0, 0)
