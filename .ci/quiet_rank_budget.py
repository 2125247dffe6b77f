"""CI budget for a quiet rank: import otel_bridge and run setup_telemetry in fresh interpreters.

A quiet rank (telemetry on, ``export_ranks`` leaving this rank out) must pay almost nothing
to find that out: ``import otel_bridge`` plus ``setup_telemetry`` within ``--max-ms`` (best
of ``--runs`` fresh interpreters after one warm-up that writes bytecode caches; these
machines are shared and noisy, so the least disturbed run counts), and none of the
``--forbid`` modules loaded (the OpenTelemetry SDK, ``uuid``, ``platform``, ...).
Exit status 0 when within budget, 1 otherwise.
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


def _probe(env) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"the quiet-rank probe failed:\n{proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-ms", type=float, default=5.0, help="budget for import + setup (default 5)")
    parser.add_argument("--forbid", action="append", default=[], metavar="PREFIX",
                        help="a top-level module that must not be loaded (repeatable)")
    parser.add_argument("--runs", type=int, default=7, help="measured runs; the best one counts (default 7)")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up run writes .pyc files
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID"):
        env.pop(name, None)
    _probe(env)
    samples = [_probe(env) for _ in range(max(1, args.runs))]
    best = min(sample["ms"] for sample in samples)
    loaded = set().union(*(sample["modules"] for sample in samples))
    forbidden = sorted(m for m in loaded for p in args.forbid if m == p or m.startswith(p + "."))
    print(f"quiet rank (import otel_bridge + setup_telemetry): {best:.2f} ms "
          f"(best of {len(samples)}; budget {args.max_ms:g} ms)")
    if forbidden:
        print(f"FORBIDDEN modules loaded: {', '.join(forbidden)}")
    return 0 if best <= args.max_ms and not forbidden else 1


if __name__ == "__main__":
    sys.exit(main())
