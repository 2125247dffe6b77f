"""Lens's own benchmark gate: ``lens bench-gate`` over bench/checks.txt.

    python -m pytest bench --benchmark-json=bench.json && python bench/gate.py bench.json

The checks live in bench/checks.txt; the gate itself ships as ``lens bench-gate``
(lens_ci.benchgate), which any project's CI can run with its own checks.
"""

import sys
from pathlib import Path

from lens_ci import benchgate

CHECKS = Path(__file__).with_name("checks.txt")


def main(argv=None):
    """``python bench/gate.py BENCH_JSON``: the shipped gate with Lens's checks file."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return benchgate.main([*argv, "--checks", str(CHECKS)])


if __name__ == "__main__":
    sys.exit(main())
