"""Attribute names are spelled only in lens_core/semconv.py; everything else uses its constants."""

import ast
import pathlib
import re

import lens_core.semconv
import otel_bridge.semconv

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("lens_core", "otel_bridge")
ATTRIBUTE_NAME = re.compile(r"^(nv\.dl|nv\.gpu|slurm|k8s|rl|gen_ai|nemo|lens)\.[a-z0-9_.]+$")

# (path relative to the repository root, literal): literals that look like attribute names
# but are not. Every entry needs a comment saying what the literal really is.
# fallbacks.py is copied into other packages alone, so it cannot import semconv; its default
# bucket_key is checked against the real one by tests/core/test_fallbacks.py.
ALLOWED = frozenset({("lens_core/fallbacks.py", "rl.bucket")})

# Span-name catalogs: their literals are span names (rl.<algo>.<phase>), which look like
# attribute names but are the one place span names are spelled.
SPAN_NAME_CATALOGS = frozenset({"lens_core/catalogs/rl.py"})


def _docstring_nodes(tree):
    """The Constant nodes that are module, class or function docstrings."""
    owners = [tree] + [n for n in ast.walk(tree)
                       if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    for owner in owners:
        body = owner.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            yield body[0].value


def _logger_name_nodes(tree):
    """String arguments of ``getLogger(...)`` calls: logger names, not attributes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "getLogger":
                yield from (arg for arg in node.args if isinstance(arg, ast.Constant))


# lens span APIs -> index of their span-name argument (span names follow rl.<algo>.<phase>
# and look like attribute names, but they are not attributes).
_SPAN_NAME_ARGUMENT = {"managed_span": 1, "umbrella_span": 1, "trace_fn": 1, "umbrella_trace_fn": 1,
                       "deferred_child_span": 1, "span_cm": 0}


def _span_name_nodes(tree):
    """String literals passed as the span name of a lens span API call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            index = _SPAN_NAME_ARGUMENT.get(name)
            if index is None:
                continue
            if len(node.args) > index:
                yield node.args[index]
            yield from (kw.value for kw in node.keywords if kw.arg == "name")


def _hardcoded_attribute_names():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "semconv.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            skip = ({id(n) for n in _docstring_nodes(tree)} | {id(n) for n in _logger_name_nodes(tree)}
                    | {id(n) for n in _span_name_nodes(tree)})
            relative = path.relative_to(ROOT).as_posix()
            if relative in SPAN_NAME_CATALOGS:
                continue
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and id(node) not in skip and ATTRIBUTE_NAME.match(node.value)
                        and (relative, node.value) not in ALLOWED):
                    yield f"{relative}:{node.lineno}: {node.value!r}"


def test_no_module_spells_an_attribute_name_outside_semconv():
    found = list(_hardcoded_attribute_names())
    assert not found, (
        "attribute names spelled outside lens_core/semconv.py; add a constant there and import "
        "it from lens_core.semconv (or otel_bridge.semconv):\n  " + "\n  ".join(found)
    )


def test_the_scanner_flags_a_literal_but_not_docstrings_or_logger_names(tmp_path, monkeypatch):
    package = tmp_path / "lens_core"
    package.mkdir()
    (tmp_path / "otel_bridge").mkdir()
    (package / "bad.py").write_text(
        '"""Sets rl.iteration."""\nimport logging\n'
        'log = logging.getLogger("lens.bad")\nKEY = "rl.iteration"\n'
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert list(_hardcoded_attribute_names()) == ["lens_core/bad.py:4: 'rl.iteration'"]


def test_the_scanner_skips_span_names_but_not_attributes_passed_to_the_same_call(tmp_path, monkeypatch):
    """Span names passed to lens span APIs (rl.grpo.step) were reported as hard-coded attribute names."""
    package = tmp_path / "otel_bridge"
    package.mkdir()
    (tmp_path / "lens_core").mkdir()
    (package / "spans.py").write_text(
        'with managed_span("step", "rl.grpo.step", **{"rl.weight_version": 1}):\n    pass\n'
        'f = trace_fn("generation", name="rl.vllm.generate")\n'
        'g = lens_core.span_cm("rl.custom.span")\n'
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert list(_hardcoded_attribute_names()) == ["otel_bridge/spans.py:1: 'rl.weight_version'"]


def test_otel_bridge_semconv_re_exports_every_constant():
    assert otel_bridge.semconv.__all__ == lens_core.semconv.__all__
    for name in lens_core.semconv.__all__:
        assert getattr(otel_bridge.semconv, name) == getattr(lens_core.semconv, name)


def test_semconv_all_is_sorted_complete_and_its_names_unique():
    module = lens_core.semconv
    constants = {name for name in vars(module) if name.isupper()}
    assert module.__all__ == sorted(module.__all__)
    assert set(module.__all__) == constants
    values = [getattr(module, name) for name in module.__all__]
    assert len(set(values)) == len(values)

