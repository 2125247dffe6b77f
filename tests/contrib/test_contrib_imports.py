"""The cross-process helper modules import without their frameworks or OpenTelemetry, and keep a sorted __all__."""

import importlib

import pytest

from contrib_helpers import run_python

MODULES = ["otel_bridge.distributed", "otel_bridge.contrib.ray", "otel_bridge.contrib.fastapi",
           "otel_bridge.contrib.aiohttp"]
HEAVY = ("opentelemetry", "torch", "ray", "fastapi", "aiohttp", "starlette", "uvicorn")


def test_importing_the_helpers_loads_no_framework_and_no_opentelemetry():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + f"loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
            + "assert not loaded, loaded\n")
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr


def test_the_helpers_import_with_every_framework_missing():
    code = ("import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in HEAVY[1:])
            + "".join(f"import {m}\n" for m in MODULES))
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_every_public_name_has_a_docstring(name):
    module = importlib.import_module(name)
    assert module.__doc__ and "\n" not in module.__doc__.strip()
    assert module.__all__ == sorted(module.__all__)
    for public in module.__all__:
        value = getattr(module, public)
        if callable(value):
            assert value.__doc__, f"{name}.{public} has no docstring"
