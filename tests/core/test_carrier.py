"""W3C traceparent parsing/formatting, current_trace_carrier and remote_trace_context."""

import threading

import pytest

import lens_core
from lens_core import SpanRegistry, remote_trace_context
from lens_core.carrier import TraceParent, format_traceparent, is_valid_carrier, parse_traceparent

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"


def enable():
    SpanRegistry.register("lib", ["step"])
    lens_core.set_span_group_spec("step")


# ---- parse_traceparent --------------------------------------------------------------------------


def test_valid_traceparent_is_parsed():
    parsed = parse_traceparent(VALID)
    assert parsed == (int(TRACE, 16), int(SPAN, 16), 1, 0)
    assert (parsed.trace_id, parsed.span_id, parsed.flags, parsed.version, parsed.sampled) == (
        int(TRACE, 16), int(SPAN, 16), 1, 0, True)


def test_unsampled_flag_is_parsed():
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-00").sampled is False


def test_surrounding_whitespace_is_accepted():
    assert parse_traceparent(f"  {VALID} \t") == parse_traceparent(VALID)


def test_uppercase_hex_is_rejected_as_w3c_requires():
    """Regression: uppercase ids were accepted, unlike W3C and OpenTelemetry's own parser."""
    assert parse_traceparent(VALID.upper()) is None


@pytest.mark.parametrize("value", [
    f"00-{'0' * 32}-{SPAN}-01",
    f"00-{TRACE}-{'0' * 16}-01",
], ids=["zero-trace-id", "zero-span-id"])
def test_all_zero_ids_are_rejected(value):
    assert parse_traceparent(value) is None


def test_version_ff_is_rejected():
    assert parse_traceparent(f"ff-{TRACE}-{SPAN}-01") is None


def test_version_00_with_extra_fields_is_rejected():
    assert parse_traceparent(f"{VALID}-extra") is None


def test_future_version_with_extra_fields_is_accepted():
    assert parse_traceparent(f"cc-{TRACE}-{SPAN}-01-what-the-future-holds") == TraceParent(
        int(TRACE, 16), int(SPAN, 16), 1, 0xCC)


@pytest.mark.parametrize("value", [
    f"0-{TRACE}-{SPAN}-01",
    f"00-{TRACE[:-1]}-{SPAN}-01",
    f"00-{TRACE}0-{SPAN}-01",
    f"00-{TRACE}-{SPAN[:-1]}-01",
    f"00-{TRACE}-{SPAN}-1",
    f"00-{TRACE}-{SPAN}",
    "",
], ids=["short-version", "short-trace", "long-trace", "short-span", "short-flags", "three-fields", "empty"])
def test_wrong_field_lengths_are_rejected(value):
    assert parse_traceparent(value) is None


@pytest.mark.parametrize("value", [
    f"00-{TRACE[:-1]}g-{SPAN}-01",
    f"00-{TRACE}-{SPAN[:-1]}z-01",
    f"0x-{TRACE}-{SPAN}-01",
    f"00-{TRACE}-{SPAN}-0+",
], ids=["trace", "span", "version", "flags"])
def test_non_hex_fields_are_rejected(value):
    assert parse_traceparent(value) is None


def test_too_long_header_is_rejected():
    assert parse_traceparent(f"cc-{TRACE}-{SPAN}-01-" + "a" * 600) is None


@pytest.mark.parametrize("value", [None, 42, b"00-" + TRACE.encode(), [VALID]])
def test_non_str_is_rejected(value):
    assert parse_traceparent(value) is None


# ---- format_traceparent -------------------------------------------------------------------------


def test_format_traceparent_round_trips():
    assert format_traceparent(int(TRACE, 16), int(SPAN, 16)) == VALID
    assert format_traceparent(1, 2, 0) == f"00-{1:032x}-{2:016x}-00"
    assert parse_traceparent(format_traceparent(7, 9, 3)) == (7, 9, 3, 0)


@pytest.mark.parametrize("args", [(0, 1), (1, 0), (1 << 128, 1), (1, 1 << 64), (1, 1, 256), (1, 1, -1)])
def test_format_traceparent_rejects_out_of_range_values(args):
    with pytest.raises(ValueError, match="invalid trace context"):
        format_traceparent(*args)


def test_is_valid_carrier_needs_a_mapping_with_a_valid_traceparent():
    assert is_valid_carrier({"traceparent": VALID}) is True
    assert [is_valid_carrier(c) for c in ({}, None, {"traceparent": "junk"}, VALID)] == [False] * 4


# ---- current_trace_carrier ----------------------------------------------------------------------


def test_current_trace_carrier_is_empty_without_a_backend():
    assert lens_core.current_trace_carrier() == {}


def test_current_trace_carrier_is_empty_when_no_span_is_current(recorder):
    assert lens_core.current_trace_carrier() == {}


def test_current_trace_carrier_names_the_current_span(recorder):
    enable()
    with lens_core.managed_span("step", "s") as span:
        carrier = lens_core.current_trace_carrier()
    assert carrier == {"traceparent": format_traceparent(span.trace_id, span.span_id)}
    assert parse_traceparent(carrier["traceparent"]).span_id == span.span_id


# ---- remote_trace_context -----------------------------------------------------------------------


@pytest.mark.parametrize("carrier", [{}, None, {"traceparent": "garbage"}, {"traceparent": f"ff-{TRACE}-{SPAN}-01"}],
                         ids=["empty", "None", "malformed", "version-ff"])
def test_remote_trace_context_without_a_usable_carrier_is_a_no_op(carrier, recorder):
    enable()
    with remote_trace_context(carrier) as entered:
        assert entered is None
        assert lens_core.current_trace_carrier() == {}
        with lens_core.managed_span("step", "s") as span:
            pass
    assert span.parent_id is None


def test_remote_trace_context_without_a_backend_is_a_no_op():
    with remote_trace_context({"traceparent": VALID}):
        assert lens_core.current_trace_carrier() == {}


def test_remote_trace_context_parents_spans_opened_inside(recorder):
    enable()
    with remote_trace_context({"traceparent": VALID}):
        with lens_core.managed_span("step", "child") as child:
            pass
        with lens_core.span_cm("sibling") as sibling:
            pass
    with lens_core.managed_span("step", "after") as after:
        pass
    assert (child.trace_id, child.parent_id) == (int(TRACE, 16), int(SPAN, 16))
    assert (sibling.trace_id, sibling.parent_id) == (int(TRACE, 16), int(SPAN, 16))
    assert after.parent_id is None


def test_remote_trace_context_is_detached_after_an_exception(recorder):
    with pytest.raises(RuntimeError):
        with remote_trace_context({"traceparent": VALID}):
            raise RuntimeError
    assert lens_core.current_trace_carrier() == {}


def test_remote_trace_context_is_per_thread(recorder):
    enable()
    parents = {}

    def opens_a_span(key, carrier=None):
        if carrier is None:
            with lens_core.managed_span("step", key) as span:
                parents[key] = span.parent_id
        else:
            with remote_trace_context(carrier), lens_core.managed_span("step", key) as span:
                parents[key] = span.parent_id

    with remote_trace_context({"traceparent": VALID}):
        threads = [
            threading.Thread(target=opens_a_span, args=("inherits-nothing",)),
            threading.Thread(target=opens_a_span, args=("attaches-itself", {"traceparent": VALID})),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
    assert parents == {"inherits-nothing": None, "attaches-itself": int(SPAN, 16)}


# ---- strictness and malformed carriers (issue #9, item 11) ----------------------------------------


@pytest.mark.parametrize("pad", ["\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u3000", "\r\n"],
                         ids=repr)
def test_padding_other_than_space_and_tab_is_rejected(pad):
    """Regression: str.strip() let \\n, \\x85 and \\u3000 (and any Unicode space) pad a
    traceparent; W3C allows only optional whitespace, which is space and tab."""
    assert parse_traceparent(pad + VALID) is None
    assert parse_traceparent(VALID + pad) is None
    assert parse_traceparent(f" \t{VALID}\t ") is not None


def test_canonical_carrier_keeps_a_valid_context_in_version_00_form():
    from lens_core.carrier import canonical_carrier

    future = f"cc-{TRACE}-{SPAN}-01-what-the-future-holds"
    assert canonical_carrier({"traceparent": f" {future}\t", "other": "dropped"}) == {"traceparent": VALID}
    assert canonical_carrier({"traceparent": VALID, "tracestate": " a=1 ,, b@c=x y", "baggage": "k=v;p, q = 2"}) == {
        "traceparent": VALID, "tracestate": "a=1,b@c=x y", "baggage": "k=v;p,q = 2"}


@pytest.mark.parametrize("baggage", [0, "k", "=v", "k=v w", "k=\"v\"", "k=v," * 181, "k=" + "v" * 9000, "k=\u00e9"],
                         ids=repr)
def test_canonical_carrier_drops_a_malformed_baggage(baggage):
    from lens_core.carrier import canonical_carrier

    assert canonical_carrier({"traceparent": VALID, "baggage": baggage}) == {"traceparent": VALID}


@pytest.mark.parametrize("tracestate", [0, b"a=1", ["a=1"], "A=1", "a=1,a=2", "a", "=1", "a=1 =2",
                                        ",".join(f"k{i}=v" for i in range(33)), "a=" + "v" * 600, "a=\u00e9"],
                         ids=repr)
def test_canonical_carrier_drops_a_malformed_tracestate_and_keeps_the_traceparent(tracestate):
    from lens_core.carrier import canonical_carrier

    assert canonical_carrier({"traceparent": VALID, "tracestate": tracestate}) == {"traceparent": VALID}


def test_canonical_carrier_keeps_a_tracestate_of_32_members_and_empty_members():
    from lens_core.carrier import canonical_carrier

    state = ",".join(f"k{i}=v" for i in range(32))
    assert canonical_carrier({"traceparent": VALID, "tracestate": state + ", ,"})["tracestate"] == state


class _GetRaises(dict):
    def get(self, key, default=None):
        raise RuntimeError("broken mapping")


class _GetIsNotCallable:
    get = 5


MALFORMED = [
    {"traceparent": 0}, {"traceparent": b"00-" + TRACE.encode()}, {"traceparent": [VALID]},
    {"traceparent": VALID + "\n"}, {"traceparent": "\u3000" + VALID}, {"traceparent": VALID.upper()},
    "junk", VALID, 0, 1.5, [VALID], b"{}", object(), _GetRaises(traceparent=VALID), _GetIsNotCallable(),
]
MALFORMED_IDS = ["int", "bytes", "list", "newline", "ideographic-space", "upper", "str", "bare-header", "zero",
                 "float", "list-carrier", "bytes-carrier", "object", "get-raises", "get-not-callable"]


@pytest.mark.parametrize("carrier", MALFORMED, ids=MALFORMED_IDS)
def test_is_valid_carrier_never_raises(carrier):
    assert is_valid_carrier(carrier) is False


@pytest.mark.parametrize("carrier", MALFORMED, ids=MALFORMED_IDS)
def test_span_cm_ignores_a_malformed_carrier_and_parents_on_the_current_span(carrier, recorder):
    """Regression: span_cm(context={"traceparent": 0}) raised TypeError (from OTel's
    extract) where remote_trace_context ignores a malformed carrier; 3,300 of 20,000
    fuzzed carriers raised."""
    from lens_core.carrier import ignored_carrier_count

    before = ignored_carrier_count()
    with lens_core.span_cm("outer") as outer:
        with lens_core.span_cm("child", context=carrier) as child:
            pass
    assert (child.trace_id, child.parent_id) == (outer.trace_id, outer.span_id)
    assert ignored_carrier_count() == before + 1


@pytest.mark.parametrize("carrier", MALFORMED, ids=MALFORMED_IDS)
def test_remote_trace_context_and_deferred_child_span_ignore_a_malformed_carrier(carrier, recorder):
    """Regression: deferred_child_span(..., carrier="junk") raised ValueError from
    dict("junk") at the call site, before the work ran."""
    enable()
    with lens_core.span_cm("outer") as outer:
        with remote_trace_context(carrier):
            with lens_core.managed_span("step", "in-remote") as in_remote:
                pass
        with lens_core.deferred_child_span("step", "deferred", carrier, iteration=1) as deferred:
            pass
    assert in_remote.parent_id == outer.span_id and deferred.parent_id == outer.span_id


def test_a_malformed_carrier_is_warned_about_once_per_entry_point(recorder, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="lens_core")
    for _ in range(3):
        with lens_core.span_cm("s", context={"traceparent": 0}):
            pass
        with remote_trace_context("junk"):
            pass
    messages = [r.getMessage() for r in caplog.records if "malformed trace carrier" in r.getMessage()]
    assert len(messages) == 2
    assert messages[0].startswith("span_cm: ignored a malformed trace carrier (a dict without a valid W3C "
                                  "traceparent)")
    assert messages[1].startswith("remote_trace_context: ignored a malformed trace carrier (a str")


@pytest.mark.parametrize("carrier", [None, {}, {"tracestate": "a=1"}, {"traceparent": None}],
                         ids=["None", "empty", "no-traceparent", "traceparent-None"])
def test_an_empty_carrier_means_no_remote_parent_and_is_not_counted(carrier, recorder):
    from lens_core.carrier import ignored_carrier_count

    before = ignored_carrier_count()
    with lens_core.span_cm("outer") as outer:
        with lens_core.span_cm("child", context=carrier) as child:
            pass
    assert child.parent_id == outer.span_id
    assert ignored_carrier_count() == before


def test_span_cm_passes_the_backends_own_context_objects_through(recorder):
    with lens_core.span_cm("remote-parent") as parent:
        pass
    with lens_core.span_cm("child", context=parent) as child:
        pass
    assert child.parent_id == parent.span_id


def test_the_pp_carrier_stores_a_malformed_carrier_as_empty():
    lens_core.set_pp_trace_carrier({"traceparent": 0})
    assert lens_core.get_pp_trace_carrier() == {}
    lens_core.set_pp_trace_carrier("junk")
    assert lens_core.get_pp_trace_carrier() == {}
