"""The bench gate: read pytest-benchmark JSON and fail when a same-run ratio is out of bounds.

    python -m pytest bench --benchmark-json=bench.json && python bench/gate.py bench.json

Ratios use each benchmark's minimum time (the least disturbed round on a shared, noisy
machine); both sides of a ratio come from the same run, so no absolute time is asserted.
"""

import json
import sys

# (label, numerator names, denominator names, bound, how): ratio = num / den, or for
# "overhead" (num - base) / (den - base), where base is the third name list.
CHECKS = [
    ("disabled managed_span, compiled / @contextmanager reference",
     ["test_managed_span_disabled[cython]"], ["test_reference_contextmanager_disabled"], 1 / 8, None),
    ("disabled managed_span, pure Python / @contextmanager reference",
     ["test_managed_span_disabled[python]"], ["test_reference_contextmanager_disabled"], 1 / 3, None),
    ("disabled managed_span, compiled / contextlib.nullcontext()",
     ["test_managed_span_disabled[cython]"], ["test_nullcontext"], 1.0, None),
    ("disabled managed_span, pure Python / contextlib.nullcontext()",
     ["test_managed_span_disabled[python]"], ["test_nullcontext"], 1.0, None),
    ("disabled trace_fn overhead over a bare call, compiled / reference decorator's (paired rounds)",
     ["test_trace_fn_disabled[cython]"], ["test_trace_fn_disabled[cython]:paired_reference_min_s"], 1 / 5,
     ["test_trace_fn_disabled[cython]:paired_bare_min_s"]),
    ("enabled managed_span / SDK start_as_current_span (same provider, null exporter, paired rounds)",
     ["test_enabled_managed_span"], ["test_enabled_managed_span:paired_sdk_min_s"], 1.0, None),
    ("enabled span with a text never seen / with a text seen before (credential scan, paired rounds)",
     ["test_enabled_span_with_a_new_text_attribute"],
     ["test_enabled_span_with_a_new_text_attribute:paired_seen_min_s"], 1.15, None),
]


def _mins(path):
    with open(path) as fh:
        data = json.load(fh)
    mins = {}
    for bench in data["benchmarks"]:
        mins[bench["name"]] = bench["stats"]["min"]
        for key, value in bench.get("extra_info", {}).items():
            if key.endswith("_min_s"):  # a paired side measured inside the same rounds
                mins[f"{bench['name']}:{key}"] = value
    return mins


def evaluate(mins):
    """Rows of (label, ratio or None, bound, ok); a check whose benchmarks are missing fails."""
    rows = []
    for label, num, den, bound, base in CHECKS:
        names = num + den + (base or [])
        missing = [n for n in names if n not in mins]
        if missing:
            rows.append((label, None, bound, False, f"missing: {', '.join(missing)}"))
            continue
        top, bottom = mins[num[0]], mins[den[0]]
        if base:
            top, bottom = top - mins[base[0]], bottom - mins[base[0]]
        ratio = top / bottom if bottom > 0 else float("inf")
        rows.append((label, ratio, bound, ratio <= bound, ""))
    return rows


def main(argv=None):
    """Print every ratio with its bound; exit 1 if any is out of bounds or missing."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python bench/gate.py BENCHMARK_JSON", file=sys.stderr)
        return 2
    rows = evaluate(_mins(argv[0]))
    for label, ratio, bound, ok, note in rows:
        shown = f"{ratio:.3f}" if ratio is not None else "  -  "
        print(f"{'ok  ' if ok else 'FAIL'} {shown} <= {bound:.3f}  {label} {note}".rstrip())
    failed = [r for r in rows if not r[3]]
    print(f"bench-gate: {len(rows) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
