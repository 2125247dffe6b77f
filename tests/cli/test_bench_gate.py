"""bench/gate.py: ratios from one pytest-benchmark JSON, failing when out of bounds or missing."""

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("bench_gate", Path(__file__).parents[2] / "bench" / "gate.py")
gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gate)


def _json(tmp_path, mins, extra=None):
    benchmarks = [{"name": name, "stats": {"min": value}, "extra_info": (extra or {}).get(name, {})}
                  for name, value in mins.items()]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    return str(path)


GOOD = {
    "test_managed_span_disabled[cython]": 0.10, "test_managed_span_disabled[python]": 0.20,
    "test_reference_contextmanager_disabled": 1.2, "test_nullcontext": 0.25,
    "test_trace_fn_disabled[cython]": 0.045, "test_enabled_managed_span": 15.0,
    "test_enabled_span_with_a_new_text_attribute": 12.0,
}
GOOD_EXTRA = {
    "test_trace_fn_disabled[cython]": {"paired_bare_min_s": 0.030, "paired_reference_min_s": 0.130},
    "test_enabled_managed_span": {"paired_sdk_min_s": 16.0, "impl": "cython"},
    "test_enabled_span_with_a_new_text_attribute": {"paired_seen_min_s": 11.4},
}


def test_every_ratio_within_bounds_passes(tmp_path, capsys):
    assert gate.main([_json(tmp_path, GOOD, GOOD_EXTRA)]) == 0
    assert "bench-gate: 7 passed, 0 failed" in capsys.readouterr().out


def test_a_ratio_out_of_bounds_fails_and_says_which(tmp_path, capsys):
    slow = dict(GOOD, **{"test_trace_fn_disabled[cython]": 0.060})  # (0.060-0.030)/(0.130-0.030) = 0.3
    assert gate.main([_json(tmp_path, slow, GOOD_EXTRA)]) == 1
    out = capsys.readouterr().out
    assert "FAIL 0.300 <= 0.200  disabled trace_fn overhead" in out


def test_a_missing_benchmark_fails(tmp_path, capsys):
    partial = {k: v for k, v in GOOD.items() if k != "test_nullcontext"}
    assert gate.main([_json(tmp_path, partial, GOOD_EXTRA)]) == 1
    assert "missing: test_nullcontext" in capsys.readouterr().out
