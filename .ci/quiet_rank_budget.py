"""CI budget for a quiet rank: import otel_bridge and run setup_telemetry, against a yardstick, in fresh interpreters.

A quiet rank (telemetry on, ``export_ranks`` leaving this rank out) must pay almost nothing
to find that out: the CPU time ``import otel_bridge`` plus ``setup_telemetry`` cost in a fresh
interpreter, to its last exit handler (median of alternated rounds), within ``--max-ratio``
times what ``import YARDSTICK`` costs (``dataclasses``; a loaded machine slows both sides of a
round alike, so the gate holds where an absolute budget fails: lens_ci.importbudget.cpu_ratio),
and none of the ``--forbid`` modules loaded (the OpenTelemetry SDK, ``uuid``, ``platform``,
...). ``--max-ms`` (the median CPU milliseconds of the quiet setup, absolute) is for a quiet
machine of one's own. Exit status 0 when within budget, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the checkout's lens_ci

from lens_ci.importbudget import cpu_ratio  # noqa: E402

# What a quiet rank runs, and nothing else: timed from its first line to the last exit handler.
_PROBE = """
import otel_bridge
from lens_core import LensConfig
handle = otel_bridge.setup_telemetry(LensConfig(enabled=True, export_ranks="first"), rank=1, world_size=8)
assert not handle.is_exporting, handle
"""

# The same, then every module it loaded (a separate run: the listing is not timed).
_MODULES = _PROBE + """
import sys
print("\\n".join(sorted(sys.modules)))
"""


def _modules(env) -> set:
    proc = subprocess.run([sys.executable, "-c", _MODULES], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"the quiet-rank probe failed:\n{proc.stderr.strip()[-2000:]}")
    return set(proc.stdout.split())


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yardstick", default="dataclasses", metavar="MODULE",
                        help="the module whose import the probe is compared with (default dataclasses)")
    parser.add_argument("--max-ratio", type=float,
                        help="budget: the CPU time the quiet setup costs over what `import YARDSTICK` "
                             "costs (medians of alternated rounds in fresh interpreters)")
    parser.add_argument("--max-ms", type=float,
                        help="budget: the CPU milliseconds the quiet setup costs (absolute: "
                             "a quiet machine only)")
    parser.add_argument("--forbid", action="append", default=[], metavar="PREFIX",
                        help="a top-level module that must not be loaded (repeatable)")
    parser.add_argument("--runs", type=int, default=31, help="measured rounds (default 31)")
    args = parser.parse_args(argv)
    if args.max_ratio is None and args.max_ms is None:
        parser.error("give a budget: --max-ratio R (against --yardstick) or --max-ms N")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up runs write .pyc files
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID"):
        env.pop(name, None)
    loaded = _modules(env)
    try:
        ratio, medians = cpu_ratio(_PROBE, f"import {args.yardstick}", args.runs, env=env)
    except RuntimeError as exc:
        raise SystemExit(f"the quiet-rank probe failed: {exc}")
    probe_ms = medians["probe"] * 1e3
    forbidden = sorted(m for m in loaded for p in args.forbid if m == p or m.startswith(p + "."))
    ok = not forbidden
    what = "quiet rank (import otel_bridge + setup_telemetry)"
    if args.max_ratio is not None:
        ok = ok and ratio <= args.max_ratio
        print(f"{what} / import {args.yardstick}: {ratio:.2f}x of the CPU time each costs (medians of "
              f"{args.runs} alternated rounds in fresh interpreters: {probe_ms:.2f} ms and "
              f"{medians['yardstick'] * 1e3:.2f} ms; budget {args.max_ratio:g}x)")
    if args.max_ms is not None:
        ok = ok and probe_ms <= args.max_ms
        print(f"{what}: {probe_ms:.2f} ms CPU (median of {args.runs}; budget {args.max_ms:g} ms)")
    if forbidden:
        print(f"FORBIDDEN modules loaded: {', '.join(forbidden)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
