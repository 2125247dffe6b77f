"""lens_ci.pytest_plugin: a library's own test suite measures its instrumented function off and on."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

REPO = Path(__file__).resolve().parents[2]

# A small library as a user would write it: groups registered at import, a trace_fn
# function and a function with an inline span.
LIBRARY = textwrap.dedent('''
    from lens_core import SpanRegistry, managed_span, trace_fn

    SpanRegistry.register("mylib", ["work", "inner"], {"default": ["work", "inner"]},
                          buckets={"work": "productive", "inner": "overhead"})

    def _crunch(n):
        return sum(i * i for i in range(n))

    @trace_fn("work")
    def step(n):
        return _crunch(n)

    def step_inline(n):
        with managed_span("inner", "mylib.inner", n=n):
            return _crunch(n)
''')

USER_TESTS = textwrap.dedent('''
    import json
    import lens_core
    import mylib

    pytest_plugins = ["lens_ci.pytest_plugin"]

    def test_traced_function(lens_overhead):
        lens_core.set_span_group_spec("mylib_leftover")   # state the fixture must restore
        result = lens_overhead(mylib.step, 50, groups="default", rounds=5)
        print("\\nRESULT", json.dumps(result.as_dict()))
        assert lens_core.installed_backend() is None
        assert lens_core.span_group_diagnostics()["spec"] == "mylib_leftover"
        assert "lens_overhead_probe" not in lens_core.SpanRegistry.namespaces()

    def test_inline_span_with_an_explicit_baseline(lens_overhead):
        result = lens_overhead(mylib.step_inline, 50, groups="inner", baseline=mylib._crunch, rounds=5)
        print("\\nRESULT", json.dumps(result.as_dict()))

    def test_a_typo_in_the_groups_is_an_error(lens_overhead):
        try:
            lens_overhead(mylib.step, 1, groups="wrok", rounds=1)
        except ValueError as exc:
            print("\\nERROR", json.dumps(str(exc)))
''')


def run_user_suite(tmp_path):
    (tmp_path / "mylib.py").write_text(LIBRARY)
    (tmp_path / "test_mylib_overhead.py").write_text(USER_TESTS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "--junitxml", str(tmp_path / "junit.xml"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    errors = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("ERROR ")]
    return results, errors, (tmp_path / "junit.xml").read_text()


@pytest.fixture(scope="module")
def user_suite(tmp_path_factory):
    return run_user_suite(tmp_path_factory.mktemp("user_suite"))


def test_the_plugin_times_a_trace_fn_function_bare_off_and_on(user_suite):
    traced = user_suite[0][0]
    assert traced["spans_per_call"] == 1.0  # the on side really traced every call
    assert 0 < traced["bare_s"] and 0 < traced["off_s"] < traced["on_s"]
    assert traced["disabled_overhead"] == pytest.approx((traced["off_s"] - traced["bare_s"]) / traced["bare_s"])
    assert traced["off_to_on"] == pytest.approx(traced["off_s"] / traced["on_s"]) and traced["off_to_on"] < 1


def test_the_plugin_takes_an_explicit_baseline_for_inline_spans(user_suite):
    inline = user_suite[0][1]
    assert inline["spans_per_call"] == 1.0 and inline["bare_s"] > 0
    assert inline["enabled_overhead"] > inline["disabled_overhead"]


def test_the_plugin_rejects_unknown_groups_naming_what_is_registered(user_suite):
    [message] = user_suite[1]
    assert "unknown span-group spec entries: wrok" in message and "Groups: inner, work" in message


def test_the_plugin_records_each_result_in_the_junit_report(user_suite):
    junit = user_suite[2]
    assert junit.count('name="lens_overhead[0]"') == 2 and "disabled_overhead" in junit


def test_the_median_interval_is_the_order_statistics_the_binomial_gives():
    """30 rounds at 99 %: P(Binomial(30, 1/2) <= 7) = 0.0026 <= 0.005 < P(<= 8) = 0.0081, so the
    interval runs from the 8th smallest to the 8th largest; 5 rounds are too few to say."""
    from lens_ci.pytest_plugin import _median_bounds

    assert _median_bounds([float(v) for v in reversed(range(30))], 0.99) == (7.0, 22.0)
    assert _median_bounds([0.0] * 5, 0.99) is None


def test_exceeds_only_when_the_whole_interval_is_above_the_limit():
    """A noisy 1 % overhead (rounds from -3 % to +5 %) does not exceed 2 %; a steady 10 % does;
    without a baseline there is nothing to pair, which is an error, not a pass."""
    from lens_ci.pytest_plugin import Overhead

    noisy = [0.01 + 0.04 * ((i * 7) % 11 - 5) / 5 for i in range(30)]
    assert not Overhead(1.0, 1.01, 2.0, 10, 30, 1.0, noisy).exceeds(0.02)
    assert Overhead(1.0, 1.1, 2.0, 10, 30, 1.0, [0.1 + 0.001 * i for i in range(30)]).exceeds(0.02)
    with pytest.raises(ValueError, match="no baseline"):
        Overhead(None, 1.0, 2.0, 10, 30, 1.0).exceeds(0.02)
