"""lens_core.fallbacks: the real primitives' signatures, and a library instrumented as docs/guide/instrumenting.md shows runs on it alone."""

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lens_core
from lens_core import _impl, fallbacks

REPO = Path(__file__).resolve().parents[2]

# What a library following docs/guide/instrumenting.md uses; each must have a fallback.
LIBRARY_NAMES = {
    "Bucket", "IdleWait", "SpanRegistry", "bucket_scope", "current_trace_carrier", "deferred_child_span",
    "efficiency_span", "in_per_prompt_scope", "is_span_group_enabled", "iteration_scope", "managed_span",
    "per_prompt_scope", "remote_trace_context", "safe_set_span_attributes", "span_attributes", "span_cm",
    "start_efficiency_span", "trace_fn", "umbrella_span", "umbrella_trace_fn",
    # NeMo Lens's open work since our pin (issue 41): the state readers and the resource encoder
    "enabled_span_groups", "pending_span_groups", "encode_resource_attributes",
}
# Fallbacks whose real one lives outside lens_core (the bridge's stdlib resource helpers).
ELSEWHERE = {"encode_resource_attributes": "otel_bridge.resources"}


def _shape(fn):
    """Parameter names, kinds and defaults (annotations are checked by the typing tests)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _real(name):
    if name in ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(ELSEWHERE[name]), name)
    return getattr(lens_core, name, None) or getattr(lens_core.efficiency, name)


def test_every_name_a_readme_library_uses_has_a_fallback():
    """Regression (issue 41): SpanRegistry.resolve / clear, enabled_span_groups,
    pending_span_groups and encode_resource_attributes had no fallback."""
    assert LIBRARY_NAMES <= set(fallbacks.__all__)
    assert all(_real(name) is not None for name in fallbacks.__all__)
    assert {"resolve", "clear"} <= set(vars(fallbacks.SpanRegistry))


@pytest.mark.parametrize("name", [n for n in fallbacks.__all__ if not inspect.isclass(getattr(fallbacks, n))])
def test_every_fallback_function_has_the_signature_of_the_real_one(name, gate_implementation):
    # managed_span, umbrella_span and is_span_group_enabled come from the gate in use
    assert _shape(getattr(fallbacks, name)) == _shape(_real(name))


@pytest.mark.parametrize("name", [n for n in fallbacks.__all__ if inspect.isclass(getattr(fallbacks, n))])
def test_every_fallback_class_has_the_real_ones_constants_and_method_signatures(name):
    fake, real = getattr(fallbacks, name), _real(name)
    members = [m for m, value in vars(fake).items() if (not m.startswith("_") or m == "__init__")
               and not inspect.ismemberdescriptor(value)]  # slots are instance fields
    assert members
    for member in members:
        fake_attr, real_attr = getattr(fake, member), getattr(real, member)
        if callable(fake_attr):
            assert _shape(fake_attr) == _shape(real_attr), f"{name}.{member}"
        else:
            assert fake_attr == real_attr, f"{name}.{member}"


def test_the_compiled_gates_text_signatures_match_the_fallbacks():
    """The compiled gate's C-level functions carry text signatures (__text_signature__), so
    inspect.signature compares them with the fallbacks instead of failing or seeing (*args)."""
    gate = pytest.importorskip("lens_core._gate",
                               reason="compiled gate not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
    assert gate.managed_span.__text_signature__ == "(group, name, tracer=None, **attrs)"
    for public, attr in _impl.GATE_EXPORTS.items():
        assert _shape(getattr(gate, attr)) == _shape(getattr(fallbacks, public)), public


def test_fallback_primitives_do_nothing_and_let_the_body_run():
    ran = []
    with fallbacks.managed_span("g", "n", k=1) as span:
        ran.append(span)

    @fallbacks.trace_fn("g")
    def f(x):
        return x + 1

    assert ran == [None] and f(1) == 2
    assert fallbacks.current_trace_carrier() == {} and not fallbacks.is_span_group_enabled("g")
    wait = fallbacks.IdleWait("idle/x")
    wait.starved()
    wait.starved()
    assert wait.done() == 2 and wait.done() == 0
    assert fallbacks.enabled_span_groups() == frozenset() == fallbacks.pending_span_groups()
    # as lens answers before anything is registered: nothing enabled, every entry pending
    assert fallbacks.SpanRegistry.resolve(" Per_Step, -job ,") == (frozenset(), frozenset({"per_step", "-job"}))
    assert fallbacks.SpanRegistry.resolve(None) == (frozenset(), frozenset())
    assert fallbacks.SpanRegistry.resolve(["A", " "]) == (frozenset(), frozenset({"a"}))
    assert fallbacks.SpanRegistry.clear() is None
    assert fallbacks.encode_resource_attributes({"nv.dl.rank": 3}, inherited="a=1") == "a=1"
    assert fallbacks.encode_resource_attributes({"nv.dl.rank": 3}) == ""


def test_fallbacks_import_nothing_at_run_time_so_the_file_can_be_copied():
    tree = ast.parse(inspect.getsource(fallbacks))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in imports] == ["from __future__ import annotations"]
    guarded = [n for n in tree.body if isinstance(n, ast.If)]
    assert [ast.unparse(n.test) for n in guarded] == ["TYPE_CHECKING"]
    nested = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              and not any(n is m or n in ast.walk(m) for m in guarded + imports)]
    assert nested == []


# ---- a library that follows docs/guide/instrumenting.md, run with only the fallbacks -----------

LIBRARY = textwrap.dedent('''
    """A library instrumented as Lens's guide shows; lens is optional for it."""

    import asyncio
    import threading

    try:
        from lens_core import (Bucket, IdleWait, SpanRegistry, bucket_scope, current_trace_carrier,
                               deferred_child_span, efficiency_span, in_per_prompt_scope, is_span_group_enabled,
                               iteration_scope, managed_span, per_prompt_scope, remote_trace_context,
                               safe_set_span_attributes, span_attributes, span_cm, start_efficiency_span,
                               trace_fn, umbrella_span, umbrella_trace_fn)
        LENS = True
    except ImportError:
        from ._lens_fallbacks import (Bucket, IdleWait, SpanRegistry, bucket_scope, current_trace_carrier,
                                      deferred_child_span, efficiency_span, in_per_prompt_scope,
                                      is_span_group_enabled, iteration_scope, managed_span, per_prompt_scope,
                                      remote_trace_context, safe_set_span_attributes, span_attributes, span_cm,
                                      start_efficiency_span, trace_fn, umbrella_span, umbrella_trace_fn)
        LENS = False

    SpanRegistry.register(
        "mylib",
        ["job", "step", "forward", "optimizer", "checkpoint", "io", "efficiency"],
        presets={"default": ["job", "checkpoint"], "per_step": ["job", "step", "forward", "optimizer"]},
        buckets={"forward": Bucket.PRODUCTIVE, "optimizer": Bucket.PRODUCTIVE, "checkpoint": Bucket.OVERHEAD},
        umbrellas=["job", "step"],
    )


    @trace_fn("forward")
    def forward(batch, scale=1.0):
        return sum(batch) * scale


    @trace_fn("io")
    async def fetch(n):
        await asyncio.sleep(0)
        return n * 2


    @trace_fn("io")
    def batches(n):
        for i in range(n):
            yield [i, i + 1]


    @trace_fn("io")
    async def stream(n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i


    class Optimizer:
        def __init__(self, lr):
            self.lr = lr

        @trace_fn("optimizer")
        def step(self, grad):
            return -self.lr * grad

        @staticmethod
        @trace_fn("io")
        def load(name):
            return name.upper()

        @trace_fn("io")
        @classmethod
        def create(cls, lr):
            return cls(lr)


    def checkpoint(step):
        with managed_span("checkpoint", "mylib.checkpointing", step=step):
            carrier = current_trace_carrier()
        done = []

        def finalize():
            with deferred_child_span("checkpoint", "mylib.finalize", carrier, iteration=step) as span:
                done.append(span)
            with remote_trace_context(carrier):
                done.append("reattached")

        thread = threading.Thread(target=finalize)
        thread.start()
        thread.join()
        return done


    def wait_for(ready_after):
        wait = IdleWait("idle/buffer_starvation")
        polls = 0
        while polls < ready_after:
            wait.starved()
            polls += 1
        idle = start_efficiency_span("idle/refit_bubble")
        idle.poll(2)
        idle.end()
        with efficiency_span("idle/refit_event_wait") as span:
            assert span is None or LENS
        return wait.done()


    async def serve():
        total = await fetch(2)
        async for item in stream(3):
            total += item
        return total


    @umbrella_trace_fn("job")
    def train(steps):
        out = {"losses": [], "polls": [], "finalized": [], "enabled": is_span_group_enabled("forward")}
        opt = Optimizer.create(0.5)
        for step in range(1, steps + 1):
            with iteration_scope(step), umbrella_span("step", "mylib.step", step=step) as span:
                safe_set_span_attributes(span, {"mylib.step": step})
                with managed_span("forward", "mylib.forward", rows=2) as fwd:
                    safe_set_span_attributes(fwd, {"mylib.rows": 2})
                    loss = forward([1.0, 2.0], scale=step)
                with bucket_scope(Bucket.OVERHEAD), span_attributes(phase="validation"):
                    loss += forward([0.5])
                with per_prompt_scope():
                    in_per_prompt_scope()
                out["losses"].append(loss + opt.step(loss))
                out["polls"].append(wait_for(step))
                out["finalized"].append(checkpoint(step))
        with span_cm("mylib.server", context=current_trace_carrier()) as server:
            out["server"] = server
        out["batches"] = [b for b in batches(2)]
        out["load"] = Optimizer.load("ckpt")
        out["served"] = asyncio.run(serve())
        return out
''')

# Runs the library in a fresh interpreter; with NO_LENS set, lens_core and otel_bridge cannot
# be imported at all (a meta-path finder refuses them), as where lens is not installed.
RUNNER = textwrap.dedent('''
    import json, os, sys

    class NoLens:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("lens_core", "otel_bridge"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    if os.environ.get("NO_LENS"):
        sys.meta_path.insert(0, NoLens())
    import mylib
    result = mylib.train(3)
    result["lens"] = mylib.LENS
    result["lens_modules"] = sorted(m for m in sys.modules if m.startswith(("lens_core", "otel_bridge")))
    print(json.dumps(result))
''')


def _run_library(tmp_path, with_lens):
    package = tmp_path / "mylib"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(LIBRARY)
    shutil.copy(inspect.getsourcefile(fallbacks), package / "_lens_fallbacks.py")  # the file alone
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "PYTHON"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO)])
    if not with_lens:
        env["NO_LENS"] = "1"
    proc = subprocess.run([sys.executable, "-c", RUNNER], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_readme_library_runs_with_only_the_fallbacks_copied_in(tmp_path):
    result = _run_library(tmp_path, with_lens=False)
    assert result["lens"] is False and result["lens_modules"] == []
    assert result["losses"] == [3.5 - 1.75, 6.5 - 3.25, 9.5 - 4.75]
    assert result["polls"] == [1, 2, 3]  # IdleWait still counts each wait's polls
    assert result["finalized"] == [[None, "reattached"]] * 3
    assert (result["server"], result["batches"], result["load"], result["served"]) == (
        None, [[0, 1], [1, 2]], "CKPT", 7)


def test_the_same_library_gives_the_same_results_with_lens(tmp_path):
    without = _run_library(tmp_path, with_lens=False)
    with_lens = _run_library(tmp_path, with_lens=True)
    assert with_lens["lens"] is True and "lens_core" in with_lens["lens_modules"]
    for key in ("lens", "lens_modules"):
        without.pop(key), with_lens.pop(key)
    assert with_lens == without
