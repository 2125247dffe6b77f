"""The compiled and pure gates answer alike: generated registries, specs and group spellings give
the same is_enabled answers, and managed_span / umbrella_span / trace_fn wrappers are on or off
together, in one process against the same published snapshot; both agree with the enabled set
lens_core.state resolved (an oracle that does not share the gates' lookup code)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording import RecordingBackend
from twins import count, gate_pair, require_pair, skip_in_pure_pass

import lens_core
from lens_core import state
from lens_core.registry import ALL, SpanRegistry, normalize_name

pytestmark = skip_in_pure_pass

FAST = settings(max_examples=300, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(FAST, max_examples=5000)

# Names whose case mapping is not one-to-one (dotted I, sharp s, the fi ligature, final
# sigma, titlecase digraphs) next to plain ones: lower() of a spelling must find what the
# registry normalised. A fixed pool: generating text per example made the test 10x slower.
_POOL = ["job", "step", "gen", "ckpt", "rollout", "İnit", "Straße", "ﬁle", "ΣΊΣ", "ǅungla", "a.b", "x/y", "g:1",
         "_", "per_step", "rl.train", "Job2", "İ", "ß", "ς"]
_UNKNOWN = ["nope", "", " ", "\t\n", "\u3000", "jobs", "jo b", "job,step", ",", "-", "--job", "all,", "ALL ",
            "\u00a0job", "JOB\x00", "ｊｏｂ", "i̇nit", "strasse"]
_SPACE = ["", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\u00a0", "\u2003", "\u3000"]
_CASES = [str.lower, str.upper, str.title, str.swapcase, str.casefold, str]
_INDEX = st.integers(0, 1 << 16)


def _valid(name):
    try:
        return normalize_name(name) != ALL
    except (TypeError, ValueError):
        return False

_INDICES = st.lists(_INDEX, max_size=5)


@st.composite
def registries(draw):
    """[(namespace, groups, presets, umbrellas)]: groups may be shared between namespaces."""
    out, known = [], []
    for i in range(draw(st.integers(1, 3))):
        groups = list(dict.fromkeys(_POOL[j % len(_POOL)] for j in draw(_INDICES)))
        if not groups:
            groups = [_POOL[i]]
        known += [normalize_name(g) for g in groups]
        presets = {}
        for j in draw(st.lists(_INDEX, max_size=2)):
            preset = f"preset{j % 4}"
            presets[preset] = [known[k % len(known)] for k in draw(_INDICES)] or [known[0]]
        umbrellas = [groups[j % len(groups)] for j in draw(st.lists(_INDEX, max_size=2))]
        out.append((f"ns{i}", groups, presets, umbrellas))
    return out


def _respell(draw, name):
    """``name`` in another case and padded with whitespace, as a user might type it."""
    pad = st.sampled_from(_SPACE)
    return draw(pad) + draw(st.sampled_from(_CASES))(name) + draw(pad)


class _Str(str):
    """A str subclass spelling (the gate keys its cache by the object it is given)."""


_NOT_STR = [None, 1, 1.5, b"job", ("job",), ["job"], {"job": 1}, object()]
_KINDS = ["group", "group", "group", "preset", "all", "unknown", "subclass", "minus", "not-str"]


@st.composite
def spellings(draw, world, text_only=False):
    """What a caller might pass as a group: registered names respelt, presets, ``all``,
    unknown names, blanks, str subclasses, and values that are not str at all."""
    groups = [g for _, gs, _, _ in world for g in gs]
    presets = [p for _, _, ps, _ in world for p in ps] or ["preset0"]
    kind = _KINDS[draw(_INDEX) % (len(_KINDS) - text_only)]
    pick = draw(_INDEX)
    if kind == "group":
        return _respell(draw, groups[pick % len(groups)])
    if kind == "preset":
        return _respell(draw, presets[pick % len(presets)])
    if kind == "all":
        return _respell(draw, "all")
    if kind == "unknown":
        return _UNKNOWN[pick % len(_UNKNOWN)]
    if kind == "subclass":
        return _Str(_respell(draw, groups[pick % len(groups)]))
    if kind == "minus":
        return "-" + _respell(draw, groups[pick % len(groups)])
    return _NOT_STR[pick % len(_NOT_STR)]


@st.composite
def specs(draw, world):
    """A comma list of respelt groups, presets, ``all``, ``-`` subtractions, unknown names and
    empty entries; or a pinned set (set_enabled_span_groups)."""
    entries = [draw(spellings(world, text_only=True)) for _ in range(draw(st.integers(0, 6)))]
    if draw(st.integers(0, 5)) == 0:
        return ("pinned", [e for e in entries if _valid(e)])
    return ("spec", draw(st.sampled_from([",", ", ", " ,"])).join(entries))


@st.composite
def worlds(draw):
    world = draw(registries())
    queries = [draw(spellings(world)) for _ in range(draw(st.integers(1, 12)))]
    return world, draw(specs(world)), draw(specs(world)), queries, draw(st.booleans())


def _outcome(call, *args):
    """(result, exception type) of a call: both twins must raise alike, too."""
    try:
        return call(*args), None
    except Exception as exc:  # noqa: BLE001 - the type is compared between twins
        return None, type(exc)


def _apply(world, how):
    kind, value = how
    if kind == "pinned":
        lens_core.set_enabled_span_groups(value)
    else:
        lens_core.set_span_group_spec(value)


def _answers(gate, backend, query, traced):
    """What ``gate`` says about ``query``: is_enabled, whether managed_span / umbrella_span
    hand out the null span, and how many spans one call of its trace_fn wrapper made."""
    enabled = _outcome(gate.is_enabled, query)
    managed = _outcome(lambda q: gate.managed_span(q, "n") is gate.null_span, query)
    umbrella = _outcome(lambda q: gate.umbrella_span(q, "n", None, k=1) is gate.null_span, query)
    # the other call shapes the compiled gate binds itself (keywords, a repeated parameter)
    shapes = (_outcome(lambda q: gate.managed_span(q, name="n") is gate.null_span, query),
              _outcome(lambda q: gate.managed_span(q, "n", tracer=None, a=1) is gate.null_span, query),
              _outcome(lambda q: gate.umbrella_span(q, "n", group="again"), query),
              _outcome(lambda q: gate.managed_span(group=q, name="n") is gate.null_span, query))
    before = len(backend.spans)
    called = _outcome(traced[0], 41) if traced[0] is not None else traced
    return enabled, managed, umbrella, called, len(backend.spans) - before, shapes


def _expected(query, enabled_set):
    if not isinstance(query, str):
        return None
    return query.strip().lower() in enabled_set


def _check(case):
    world, first, second, queries, with_backend = case
    pair = require_pair(gate_pair())
    SpanRegistry.clear()
    state._reset_for_tests()
    backend = RecordingBackend()
    if with_backend:
        lens_core.install_backend(backend)
    try:
        for ns, groups, presets, umbrellas in world:
            SpanRegistry.register(ns, groups, presets, umbrellas=umbrellas, allow_override=True)
        # One wrapper per query and gate, made before the first spec and called under both:
        # the compiled wrapper caches its group's id per snapshot.
        wrapped = {gate.impl: [_outcome(gate.wrap_function, lambda x: x + 1, q, "fn", None, False) for q in queries]
                   for gate in pair}
        assert [e for _, e in wrapped["cython"]] == [e for _, e in wrapped["python"]]
        for how in (first, second):
            _apply(world, how)
            enabled_set = lens_core.enabled_span_groups()
            for i, query in enumerate(queries):
                compiled, pure = (_answers(gate, backend, query, wrapped[gate.impl][i]) for gate in pair)
                assert compiled == pure, (query, how)
                expected = _expected(query, enabled_set)
                if expected is not None:
                    assert pure[0] == (expected, None), (query, how, sorted(enabled_set))
                    assert pure[1] == (not expected, None)
                    assert pure[3] == (42, None) and pure[4] == int(expected)
                    assert pure[5][2] == (None, TypeError)  # group given twice
                else:  # not a str: refused by every entry point
                    assert pure[0][1] is pure[1][1] is pure[3][1] is TypeError, query
        count("gate", len(queries) * 2)
    finally:
        lens_core.uninstall_backend()
        SpanRegistry.clear()
        state._reset_for_tests()


@FAST
@given(worlds())
def test_both_gates_answer_alike_for_generated_registries_specs_and_spellings(case):
    _check(case)


@pytest.mark.slow
@SLOW
@given(worlds())
def test_both_gates_answer_alike_many_cases(case):
    _check(case)


def test_both_gates_answer_alike_past_the_spelling_cache():
    """More distinct spellings than either gate caches (1024): the uncached path answers too."""
    pair = require_pair(gate_pair())
    lens_core.install_backend(RecordingBackend())
    SpanRegistry.register("ns", ["job", "step"])
    lens_core.set_span_group_spec("job")
    spellings = [" " * (i % 7) + ("JOB" if i % 2 else "Step") + "\t" * (i // 7) for i in range(1500)]
    for spelling in spellings:
        answers = [gate.is_enabled(spelling) for gate in pair]
        assert answers == [spelling.strip().lower() == "job"] * 2, spelling
    count("gate", len(spellings))


@pytest.mark.parametrize("group", [None, 1, b"job", ("job",)])
def test_both_gates_refuse_a_non_str_group_when_wrapping(group):
    """Regression: the compiled gate's wrapper for a non-str group ran the function while no
    group was on (it checks the group only when some group is on), where the pure gate's
    raised TypeError on every call; both now refuse it once, when wrapping."""
    for gate in require_pair(gate_pair()):
        with pytest.raises(TypeError, match="span group must be a str"):
            gate.wrap_function(lambda: None, group, "fn", None, False)
