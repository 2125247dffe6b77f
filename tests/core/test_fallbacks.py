"""lens_core.fallbacks mirrors the real primitives' signatures."""

import ast
import inspect

import lens_core
from lens_core import fallbacks


def _shape(fn):
    """Parameter names, kinds and defaults (annotations are not part of the contract)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_every_fallback_has_the_signature_of_the_real_primitive():
    for name in fallbacks.__all__:
        assert _shape(getattr(fallbacks, name)) == _shape(getattr(lens_core, name)), name


def test_fallback_primitives_do_nothing_and_let_the_body_run():
    ran = []
    with fallbacks.managed_span("g", "n", k=1) as span:
        ran.append(span)

    @fallbacks.trace_fn("g")
    def f(x):
        return x + 1

    assert ran == [None] and f(1) == 2
    assert fallbacks.current_trace_carrier() == {} and not fallbacks.is_span_group_enabled("g")


def test_fallbacks_module_has_no_imports_so_it_can_be_copied():
    tree = ast.parse(inspect.getsource(fallbacks))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
