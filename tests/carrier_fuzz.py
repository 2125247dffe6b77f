"""Fuzzed W3C carriers (seeded, and as hypothesis strategies) and an independent validity oracle."""

import random
import re

# The oracle: W3C trace-context level 1, written as one regular expression, separately
# from lens_core's parser. Only space and tab may pad the value; a version other than 00
# may carry more fields after the flags; version ff and all-zero ids are invalid.
_W3C = re.compile(r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*", re.S)
MAX_HEADER = 512

PADDING = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u3000", "\ufeff", "\x00"]
HEX = "0123456789abcdef"


def _remote(carrier):
    # (trace_id, span_id, flags) of a valid carrier, else None. A str subclass counts as
    # its characters, whatever its own methods do.
    try:
        value = carrier.get("traceparent")
    except Exception:
        return None
    if issubclass(type(value), str):
        value = str.__str__(value)
    if type(value) is not str or len(value) > MAX_HEADER:
        return None
    match = _W3C.fullmatch(value)
    if match is None:
        return None
    version, trace, span, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    trace_id, span_id = int(trace, 16), int(span, 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, int(flags, 16)


def expected_parent(carrier):
    """(trace_id, span_id) a carrier must parent a span on, or None when it holds no valid
    context (the span must then be parented on the current context)."""
    remote = _remote(carrier)
    return remote[:2] if remote else None


def remote_sampled(carrier) -> bool:
    """True when the carrier is valid and its sampled flag is set (an SDK with the default
    parent-based sampler records children of an unsampled remote parent not at all)."""
    remote = _remote(carrier)
    return bool(remote and remote[2] & 1)


def _hex(rng, n):
    return "".join(rng.choice(HEX) for _ in range(n))


def valid_header(rng):
    """A valid traceparent: random ids and flags, sometimes a future version with extra
    fields, sometimes padded with spaces and tabs."""
    version = rng.choice(["00"] * 4 + ["01", "cc", "fe"])
    header = f"{version}-{_hex(rng, 32)}-{_hex(rng, 16)}-{_hex(rng, 2)}"
    if version != "00" and rng.random() < 0.5:
        header += "-" + rng.choice(["x", "future-field", "", "a-b-c"])
    if rng.random() < 0.3:
        header = rng.choice(["", " ", "\t", " \t "]) + header + rng.choice(["", " ", "\t"])
    return header


def mutated_header(rng):
    """A near-valid traceparent with one defect (most of them make it invalid)."""
    header = valid_header(rng).strip(" \t")
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice(PADDING) + header
    if kind == 1:
        return header + rng.choice(PADDING)
    if kind == 2:
        return header.upper()
    if kind == 3:
        return f"00-{'0' * 32}-{_hex(rng, 16)}-01"
    if kind == 4:
        return f"00-{_hex(rng, 32)}-{'0' * 16}-01"
    if kind == 5:
        return "ff" + header[2:]
    if kind == 6:
        return "00" + header[2:55] + "-extra"
    if kind == 7:
        cut = rng.randrange(len(header))
        return header[:cut] + header[cut + 1:]
    if kind == 8:
        at = rng.randrange(len(header))
        return header[:at] + rng.choice("g-Z \x00é") + header[at + 1:]
    if kind == 9:
        return header + "-" + "a" * rng.choice([10, 600])
    if kind == 10:
        return header.replace("-", rng.choice(["_", "--", ""]), 1)
    return rng.choice(["", "-", "00", "garbage", "00-00-00-00", header[:20]])


class _GetRaises(dict):
    def get(self, key, default=None):
        raise RuntimeError("broken mapping")


class _GetNotCallable:
    get = 5


class _AnswersEverything:
    """A 'mapping' whose get() returns a valid header for any key."""

    def __init__(self, header):
        self.header = header

    def get(self, key, default=None):
        return self.header


def _junk(rng):
    return rng.choice([0, 1.5, True, None, b"00-ab", bytearray(b"x"), ["00-ab"], ("x",), {"a": 1}, object(),
                       "a=1", "\ud800", "x" * 9000, -1, 10**30])


def _raise(*args, **kwargs):
    raise RuntimeError("misbehaving str method")


# str subclasses whose own methods misbehave: each raises from, or lies in, the methods a
# parser might call (strip, split, __len__, __iter__, __getitem__, __eq__, __hash__, lower,
# encode, __contains__, __str__), or returns the wrong type from them.
_STR_METHODS = ["strip", "lstrip", "rstrip", "split", "__len__", "__iter__", "__getitem__", "__eq__", "__hash__",
                "lower", "upper", "encode", "__contains__", "__str__", "__format__", "startswith", "partition"]
_STR_ANSWERS = [_raise, lambda *a, **k: None, lambda *a, **k: 5, lambda *a, **k: -1, lambda *a, **k: ["x"],
                lambda *a, **k: "00-" + "1" * 32 + "-" + "1" * 16 + "-01"]


def misbehaving_str(rng, text):
    """``text`` as an instance of a fresh str subclass with one to three methods replaced by
    a misbehaving one."""
    overrides = {name: rng.choice(_STR_ANSWERS) for name in rng.sample(_STR_METHODS, rng.randint(1, 3))}
    return type("OddStr", (str,), overrides)(text)


class _PretendsStr:
    """Not a str, but says its __class__ is one (isinstance(x, str) is True)."""

    __class__ = str

    def __len__(self):
        raise RuntimeError("not a str")


def fuzzed_carrier(rng):
    """One carrier: valid, near-valid, of the wrong type, no mapping at all, or with header
    values of misbehaving str subclasses."""
    kind = rng.randrange(12)
    if kind >= 10:
        header = misbehaving_str(rng, valid_header(rng) if rng.random() < 0.6 else mutated_header(rng))
        carrier = {"traceparent": header if rng.random() < 0.9 else _PretendsStr()}
        if kind == 11:
            carrier["tracestate"] = misbehaving_str(rng, rng.choice(["a=1", "a=1,b=2", "k=" + "v" * 300]))
            carrier["baggage"] = misbehaving_str(rng, rng.choice(["k=v", "k=v;p", "a=1,b=2"]))
        return carrier
    if kind <= 1:
        carrier = {"traceparent": valid_header(rng)}
    elif kind <= 4:
        carrier = {"traceparent": mutated_header(rng)}
    elif kind == 5:
        carrier = {"traceparent": _junk(rng)}
    elif kind == 6:
        carrier = {rng.choice(["Traceparent", "traceparent ", "trace-parent", "x"]): valid_header(rng)}
    elif kind == 7:
        return rng.choice([valid_header(rng), b"{}", 0, 1.0, [valid_header(rng)], (), object(), _GetRaises(),
                           _GetNotCallable(), _AnswersEverything(valid_header(rng)),
                           _AnswersEverything(mutated_header(rng)), _AnswersEverything(0)])
    elif kind == 8:
        carrier = {"traceparent": valid_header(rng), "tracestate": _junk(rng), "baggage": _junk(rng)}
    else:
        carrier = {"traceparent": valid_header(rng),
                   "tracestate": rng.choice(["a=1", "a=1,b=2", "A=1", "a=1,a=2", "k=" + "v" * 300, "=", "a=\x7f"]),
                   "baggage": rng.choice(["k=v", "k=v;p", "%zz", "k=" + "v" * 9000, "", "a=1,=2"])}
    return carrier


def fuzzed_carriers(n, seed=9):
    """``n`` fuzzed carriers from a seeded generator (the same ones on every run)."""
    rng = random.Random(seed)
    return [fuzzed_carrier(rng) for _ in range(n)]


def carrier_strategy():
    """A hypothesis strategy over the same space, shrinking towards simple carriers."""
    from hypothesis import strategies as st

    header = st.one_of(
        st.randoms(use_true_random=False).map(valid_header),
        st.randoms(use_true_random=False).map(mutated_header),
        st.text(max_size=80),
        st.text(alphabet=HEX + "-" + "".join(PADDING) + "Ff", max_size=70),
    )
    value = st.one_of(header, st.integers(), st.floats(), st.binary(max_size=20), st.none(), st.lists(header, max_size=2))
    mapping = st.dictionaries(st.sampled_from(["traceparent", "tracestate", "baggage", "Traceparent", "x"]), value,
                              max_size=4)
    odd = st.randoms(use_true_random=False).map(lambda r: {"traceparent": misbehaving_str(r, valid_header(r))})
    return st.one_of(mapping, value, st.builds(_AnswersEverything, header), st.just(_GetRaises()),
                     st.just(_GetNotCallable()), odd)
