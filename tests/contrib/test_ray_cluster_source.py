"""ray_cluster_source before ray.init: predicted from the address ray.init is given, else RAY_ADDRESS,
without importing Ray (the real ray.init cases are in test_ray.py, marked engines)."""

import sys

import pytest

from contrib_helpers import run_python
from lens_core import semconv
from otel_bridge.contrib.ray import ray_cluster_source


@pytest.fixture
def no_ray_running(monkeypatch):
    """A clean RAY_ADDRESS; skipped where this process already has a Ray initialised (the answer
    would be what that ray.init did, which test_ray.py checks)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        pytest.skip("a Ray is initialised in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.mark.parametrize(("address", "reused", "expected"), [
    ("local", False, "started_local"),
    (" local ", True, "started_local"),  # ray.init boots a new cluster for "local" whatever ran before
    ("auto", False, "attached_external"),
    ("auto", True, "reused_local"),
    ("10.0.0.7:6379", False, "attached_external"),
    ("ray://head.example:10001", False, "attached_external"),
    ("127.0.0.1:6379", True, "reused_local"),
])
def test_the_address_ray_init_is_given_decides(no_ray_running, address, reused, expected):
    assert ray_cluster_source(address, reused=reused) == expected
    assert expected in semconv.RAY_CLUSTER_SOURCES


def test_ray_address_is_used_when_no_address_is_given(no_ray_running, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")
    assert ray_cluster_source() == "attached_external"
    assert ray_cluster_source(reused=True) == "reused_local"
    assert ray_cluster_source("local") == "started_local"  # the argument wins, as in ray.init


@pytest.mark.parametrize("address", [None, "", "  "])
def test_no_address_at_all_is_unknown_before_ray_init(no_ray_running, monkeypatch, address):
    """ray.init() without an address joins the last local cluster if one runs, else boots one:
    nothing to tell before the call."""
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert ray_cluster_source(address) is None


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="reused must be True or False"):
        ray_cluster_source("auto", reused="yes")
    with pytest.raises(TypeError, match=r"address must be a str .*6379"):
        ray_cluster_source(6379)


def test_deriving_it_never_imports_ray():
    """A quiet rank asking for the source must not pay for importing Ray."""
    proc = run_python(
        "import sys\n"
        "from otel_bridge.contrib.ray import ray_cluster_source\n"
        "print(ray_cluster_source(), ray_cluster_source('local'), ray_cluster_source(reused=True))\n"
        "print('ray' in sys.modules)\n",
        RAY_ADDRESS="head:6379")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["attached_external", "started_local", "reused_local", "False"]
