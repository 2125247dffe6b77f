"""@trace_fn decides what it wraps without importing `inspect`, and a small consumer library stays cheap to import."""

import functools
import inspect
import os
import subprocess
import sys
import textwrap

import pytest

from lens_core.spans import _function_kind


def _inspect_kind(fn):
    if inspect.iscoroutinefunction(fn):
        return "coroutine"
    if inspect.isasyncgenfunction(fn):
        return "async_generator"
    if inspect.isgeneratorfunction(fn):
        return "generator"
    return "function"


def plain():
    return 1


async def coro():
    return 1


async def agen():
    yield 1


def gen():
    yield 1


class Holder:
    async def method(self):
        return 1

    def gen_method(self):
        yield 1


CALLABLES = [plain, coro, agen, gen, Holder().method, Holder().gen_method, Holder.method,
             functools.partial(coro), functools.partial(gen, ), len, Holder, lambda: 1,
             functools.partial(functools.partial(agen))]


@pytest.mark.parametrize("fn", CALLABLES, ids=lambda fn: repr(fn)[:40])
def test_function_kind_agrees_with_inspect(fn):
    assert _function_kind(fn) == _inspect_kind(fn)


@pytest.mark.skipif(not hasattr(inspect, "markcoroutinefunction"), reason="Python < 3.12")
def test_a_function_marked_as_a_coroutine_function_is_one():
    assert _function_kind(inspect.markcoroutinefunction(lambda: None)) == "coroutine"


CONSUMER = textwrap.dedent('''
    """A consumer library: five decorated functions, as a library module would have them."""
    from lens_core import trace_fn, umbrella_trace_fn

    @umbrella_trace_fn("job", "lib.job")
    def job():
        return 1

    @trace_fn("step", "lib.step")
    def step():
        return 2

    @trace_fn("gen", "lib.generate")
    async def generate():
        return 3

    @trace_fn("gen", "lib.stream")
    def stream():
        yield 4

    @trace_fn("gen", "lib.astream")
    async def astream():
        yield 5
''')


def test_decorating_imports_no_inspect(tmp_path, monkeypatch):
    """Regression: applying @trace_fn imported `inspect` (13-15 ms), failing a consumer's import budget."""
    (tmp_path / "consumer_lib.py").write_text(CONSUMER)
    code = "import sys, consumer_lib; print('inspect' in sys.modules, 'opentelemetry' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_a_five_function_consumer_imports_within_twice_lens_core(tmp_path, monkeypatch):
    """lens_ci.importbudget: a library decorating five functions costs at most 2x what lens_core loads
    for them (``lens_core.spans``, with the gate: ``import lens_core`` alone loads its names lazily)."""
    from lens_ci.importbudget import measure

    (tmp_path / "consumer_lib.py").write_text(CONSUMER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    # both figures from the same interpreter run (the best of 5): lens_core's import nests inside
    # consumer_lib's, so the ratio is what the five decorations cost on top, free of machine noise
    sample = measure("consumer_lib", runs=5)
    consumer, core = sample.cumulative_us("consumer_lib"), sample.cumulative_us("lens_core.spans")
    assert core > 0 and "inspect" not in sample.imported()
    assert consumer <= 2 * core, f"consumer_lib {consumer} us > 2 x lens_core.spans {core} us"
