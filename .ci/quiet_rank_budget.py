"""CI budget for a quiet rank: import otel_bridge and run setup_telemetry, against a yardstick, in fresh interpreters.

A quiet rank (telemetry on, ``export_ranks`` leaving this rank out) must pay almost nothing
to find that out: ``import otel_bridge`` plus ``setup_telemetry`` within ``--max-ratio``
times the same process's ``import logging`` (the yardstick: each round runs the probe and
the yardstick in fresh interpreters, alternating which goes first, and the median of the
per-round ratios counts: a loaded machine slows both sides of a round alike, so the gate
holds where an absolute budget fails), and none of the ``--forbid`` modules loaded (the
OpenTelemetry SDK, ``uuid``, ``platform``, ...). ``--max-ms`` (best round, absolute) is for
a quiet machine of one's own. Exit status 0 when within budget, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# What a quiet rank runs; prints the wall time of the import plus setup, and every module loaded.
_PROBE = """
import json, sys, time
start = time.perf_counter()
import otel_bridge
from lens_core import LensConfig
handle = otel_bridge.setup_telemetry(LensConfig(enabled=True, export_ranks="first"), rank=1, world_size=8)
took = time.perf_counter() - start
assert not handle.is_exporting, handle
print(json.dumps({"ms": took * 1000, "modules": sorted(sys.modules)}))
"""

# The yardstick, timed the same way in the same kind of fresh interpreter.
_YARDSTICK = """
import json, sys, time
start = time.perf_counter()
import %s
took = time.perf_counter() - start
print(json.dumps({"ms": took * 1000, "modules": []}))
"""


def _probe(env, code=_PROBE) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"the quiet-rank probe failed:\n{proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yardstick", default="logging", metavar="MODULE",
                        help="the module whose import the probe is compared with (default logging)")
    parser.add_argument("--max-ratio", type=float,
                        help="budget: median over rounds of (import otel_bridge + setup) / import YARDSTICK")
    parser.add_argument("--max-ms", type=float, help="budget for the best round, absolute (a quiet machine only)")
    parser.add_argument("--forbid", action="append", default=[], metavar="PREFIX",
                        help="a top-level module that must not be loaded (repeatable)")
    parser.add_argument("--runs", type=int, default=21, help="measured rounds (default 21)")
    args = parser.parse_args(argv)
    if args.max_ratio is None and args.max_ms is None:
        parser.error("give a budget: --max-ratio R (against --yardstick) or --max-ms N")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up runs write .pyc files
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID"):
        env.pop(name, None)
    yardstick = _YARDSTICK % args.yardstick
    _probe(env)
    _probe(env, yardstick)
    samples, ratios = [], []
    for round_ in range(max(1, args.runs)):
        if round_ % 2:
            base, sample = _probe(env, yardstick), _probe(env)
        else:
            sample, base = _probe(env), _probe(env, yardstick)
        samples.append(sample)
        ratios.append(sample["ms"] / max(base["ms"], 1e-3))
    best = min(sample["ms"] for sample in samples)
    ratio = _median(ratios)
    loaded = set().union(*(sample["modules"] for sample in samples))
    forbidden = sorted(m for m in loaded for p in args.forbid if m == p or m.startswith(p + "."))
    ok = not forbidden
    if args.max_ratio is not None:
        ok = ok and ratio <= args.max_ratio
        print(f"quiet rank (import otel_bridge + setup_telemetry) / import {args.yardstick}: {ratio:.2f}x "
              f"(median of {len(ratios)} paired rounds, {min(ratios):.2f}-{max(ratios):.2f}; "
              f"budget {args.max_ratio:g}x); best {best:.2f} ms")
    if args.max_ms is not None:
        ok = ok and best <= args.max_ms
        print(f"quiet rank (import otel_bridge + setup_telemetry): {best:.2f} ms "
              f"(best of {len(samples)}; budget {args.max_ms:g} ms)")
    if forbidden:
        print(f"FORBIDDEN modules loaded: {', '.join(forbidden)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
