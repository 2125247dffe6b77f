"""py.typed is a promise: a typed user program checks clean under mypy --strict and pyright strict,
mistakes in it are caught, the stubs match the compiled gate, and typing costs nothing at run time."""

import ast
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MARK = re.compile(r"  # expect-error: ")


def _mypy(*args, cwd=HERE):
    pytest.importorskip("mypy", reason="needs mypy: pip install 'lens-telemetry[typing]'")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
                           str(HERE / "mypy.ini"), *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: mypy itself failed
    return proc


def _pyright(*args, cwd=HERE):
    if shutil.which("pyright") is None:
        pytest.skip("pyright is not installed (pip install 'lens-telemetry[typing]')")
    proc = subprocess.run(["pyright", "--outputjson", *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    report = json.loads(proc.stdout)
    return [(Path(d["file"]).name, d["range"]["start"]["line"] + 1, d["message"])
            for d in report["generalDiagnostics"] if d["severity"] == "error"]


def _mypy_errors(proc):
    return [(Path(m[1]).name, int(m[2]), m[3])
            for m in re.finditer(r"^([^:\n]+):(\d+): error: (.*)$", proc.stdout, re.M)]


def test_the_user_program_type_checks_clean_under_mypy_strict():
    proc = _mypy("user_program.py")
    assert proc.returncode == 0, proc.stdout


def test_the_user_program_type_checks_clean_under_pyright_strict():
    assert _pyright("-p", str(HERE / "pyrightconfig.json"), str(HERE / "user_program.py")) == []


def _expected_lines(path):
    return {number for number, line in enumerate(path.read_text().splitlines(), 1) if MARK.search(line)}


def test_mypy_catches_every_mistake_and_nothing_else():
    expected = _expected_lines(HERE / "mistakes.py")
    found = {line for name, line, _ in _mypy_errors(_mypy("mistakes.py"))}
    assert len(expected) >= 14 and found == expected


def test_pyright_catches_every_mistake_and_nothing_else():
    expected = _expected_lines(HERE / "mistakes.py")
    found = {line for _, line, _ in _pyright("-p", str(HERE / "pyrightconfig.json"), str(HERE / "mistakes.py"))}
    assert found == expected


def test_the_user_program_runs_and_exports_its_spans(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_", "PYTHON"))}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, str(HERE / "user_program.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = {span["name"] for path in tmp_path.rglob("traces-*.jsonl") for line in path.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]}
    assert {"typedlib.raw_otel", "Trainer.run", "typedlib.step", "Trainer.step", "typedlib.fetch",
            "typedlib.checkpointing", "typedlib.finalize", "typedlib.loss"} <= names


def test_a_copy_of_the_fallbacks_checks_clean_in_a_strictly_typed_library(tmp_path):
    """The optional-import pattern of docs/guide/instrumenting.md, as written there, type-checks with the
    copied file under both checkers."""
    from doc_pages import marked

    (pattern,) = marked(REPO / "docs" / "guide" / "instrumenting.md", "tested by tests/typing/test_typing.py")
    package = tmp_path / "mylib"
    package.mkdir()
    shutil.copy(REPO / "lens_core" / "fallbacks.py", package / "_lens_fallbacks.py")
    (package / "py.typed").write_text("")
    (package / "__init__.py").write_text(
        '"""A strictly typed library for which lens is optional."""\n'
        "from __future__ import annotations\n\n"
        + pattern.text + "\n"
        # NeMo Lens's names since our pin, from their fallbacks when lens is not installed (no
        # ignore needed: the fallbacks' types are the real ones)
        "try:\n"
        "    from lens_core import enabled_span_groups, pending_span_groups\n"
        "    from otel_bridge.resources import encode_resource_attributes\n"
        "except ImportError:  # lens is optional for mylib\n"
        "    from ._lens_fallbacks import enabled_span_groups, encode_resource_attributes, pending_span_groups\n\n"
        'SpanRegistry.register("mylib", ["work"])\n\n\n'
        '@trace_fn("work")\n'
        "def double(x: int) -> int:\n"
        '    with managed_span("work", "mylib.double") as span:\n'
        "        if span is not None:\n"
        '            span.set_attribute("x", x)\n'
        "        return 2 * x\n\n\n"
        "def wait() -> tuple[int, dict[str, str]]:\n"
        '    idle = IdleWait("idle/x")\n'
        "    idle.starved()\n"
        "    return idle.done(), current_trace_carrier()\n\n\n"
        "def groups(spec: str) -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:\n"
        "    enabled, pending = SpanRegistry.resolve(spec)\n"
        "    return enabled, pending, enabled_span_groups(), pending_span_groups()\n\n\n"
        "def child_resource(inherited: str | None) -> str:\n"
        '    return encode_resource_attributes({"nv.dl.rank": 3}, inherited=inherited)\n')
    proc = _mypy("-p", "mylib", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "strict", "extraPaths": [str(REPO)]}))
    assert _pyright("-p", str(tmp_path / "pyrightconfig.json"), str(package), cwd=tmp_path) == []


COMPILED_MODULES = ("lens_core._gate", "lens_core._native._recorder", "lens_core._native._encode", "lens_core._native._goodput",
                    "lens_report._scan")  # as .ci/run names them (the allowlist's entries must all be used)


def test_the_compiled_modules_match_their_stubs():
    """The .pyi files of the gate, the native wing and the report's reader against the compiled modules (stubtest)."""
    pytest.importorskip("lens_core._gate",
                        reason="compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
    pytest.importorskip("mypy.stubtest", reason="needs mypy: pip install 'lens-telemetry[typing]'")
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", *COMPILED_MODULES, "--allowlist",
                           str(HERE / "stubtest_allowlist.txt")], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _record_classes():
    from lens_core import config, registry

    return [registry.GroupInfo, config.ExportRanks, config.LensConfig]


@pytest.mark.parametrize("record", _record_classes(), ids=lambda cls: cls.__name__)
def test_record_fields_are_declared_as_annotations_for_checkers(record):
    assert tuple(record.__annotations__) == record._fields


@pytest.mark.parametrize("record", [c for c in _record_classes() if c._defaults], ids=lambda cls: cls.__name__)
def test_the_checkers_init_signature_matches_the_records_fields_and_defaults(record):
    """The typed __init__ (under TYPE_CHECKING, so it costs nothing) must list the fields in
    order with the defaults Record.__init__ really uses."""
    source = ast.parse(inspect.getsource(record))
    [init] = [n for n in ast.walk(source) if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    params = init.args.args[1:]
    assert [p.arg for p in params] == list(record._fields)
    namespace = {**vars(sys.modules[record.__module__]), **vars(record)}  # a default may read _defaults
    defaults = [eval(ast.unparse(d), namespace) for d in init.args.defaults]  # noqa: S307 - our own source
    assert dict(zip(record._fields[len(params) - len(defaults):], defaults)) == record._defaults


def test_typing_costs_nothing_at_run_time():
    """Importing lens_core and otel_bridge loads no typing module of Lens's and no typing at all."""
    code = ("import sys\n"
            "import lens_core, otel_bridge\n"
            "print(sorted(m for m in ('typing', 'lens_core.typing', 'typing_extensions') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
