"""Import-time budget check: ``python -m lens_ci.importbudget MODULE --yardstick logging --max-ratio R``.

Runs ``python -X importtime -c "import MODULE"`` in fresh interpreters (after one warm-up
run that writes bytecode caches). The gate CI uses is a same-run ratio: each round imports
MODULE and the ``--yardstick`` module (a stdlib module such as ``logging``) in fresh
interpreters, alternating which goes first, and the median of the per-round ratios must be
at most ``--max-ratio`` (a loaded machine slows both sides of a round alike; an absolute
budget fails there when ``import logging`` alone takes 10-20 ms). ``--max-ms`` (the best
round's absolute time) is kept for a quiet machine of one's own. Exits 1 when the budget is
exceeded or a forbidden module was imported, listing the top offenders, and 2 (one line on
stderr) when the module does not exist.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

__all__ = ["ImportFailed", "ImportSample", "add_arguments", "main", "measure", "measure_ratio", "run"]

from lens_core.exitcodes import EXIT_FAILED as _EXIT_FAILED, EXIT_USAGE as _EXIT_USAGE


class ImportFailed(RuntimeError):
    """``import MODULE`` failed in the child interpreter; ``reason`` is its last error line and
    ``not_found`` is True when the module (or a parent package) does not exist."""

    def __init__(self, module: str, reason: str, not_found: bool):
        super().__init__(f"`import {module}` failed: {reason}")
        self.module = module
        self.reason = reason
        self.not_found = not_found


class ImportSample:
    """One ``-X importtime`` run: per-module (self_us, cumulative_us), in import order."""

    def __init__(self, rows):
        self.rows = rows  # list of (module, self_us, cumulative_us, depth)

    def cumulative_us(self, module: str) -> int:
        """Cumulative microseconds of ``module`` (0 if it was already imported)."""
        for name, _self, cumulative, _depth in self.rows:
            if name == module:
                return cumulative
        return 0

    def imported(self):
        """Every module name this run imported."""
        return [row[0] for row in self.rows]

    def subtree(self, module: str):
        """Rows for ``module`` and what it imported (importtime prints children first)."""
        for index, (name, _self, _cumulative, depth) in enumerate(self.rows):
            if name == module:
                start = index
                while start > 0 and self.rows[start - 1][3] > depth:
                    start -= 1
                return self.rows[start:index + 1]
        return []

    def top(self, module: str, n: int = 10):
        """The ``n`` modules under ``module`` with the largest self time."""
        return sorted(self.subtree(module), key=lambda row: row[1], reverse=True)[:n]


def _parse(stderr: str) -> ImportSample:
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line.split(":", 1)[1].split("|")
        if len(parts) != 3:
            continue
        self_us, cumulative_us, name = parts
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append((name.strip(), int(self_us), int(cumulative_us), depth))
    return ImportSample(rows)


def _run(module: str, python: str, env) -> ImportSample:
    proc = subprocess.run([python, "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("import time:")]
        reason = errors[-1].strip() if errors else f"exit status {proc.returncode}"
        parts = module.split(".")
        missing = {f"No module named '{'.'.join(parts[:i])}'" for i in range(1, len(parts) + 1)}
        raise ImportFailed(module, reason, any(reason.endswith(m) for m in missing))
    return _parse(proc.stderr)


def measure(module: str, runs: int = 7, python: str = sys.executable):
    """Best-of-``runs`` samples for ``import module`` (after one warm-up run)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up run writes .pyc files
    _run(module, python, env)
    samples = [_run(module, python, env) for _ in range(max(1, runs))]
    return min(samples, key=lambda s: s.cumulative_us(module))


def measure_ratio(module: str, yardstick: str, runs: int = 21, python: str = sys.executable):
    """(median ratio, per-round ratios, best sample of ``module``): ``import module`` over
    ``import yardstick`` in fresh interpreters, one pair per round, alternating which runs
    first (after one warm-up of each)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up runs write .pyc files
    _run(module, python, env)
    _run(yardstick, python, env)
    ratios, samples = [], []
    for round_ in range(max(1, runs)):
        if round_ % 2:
            base, sample = _run(yardstick, python, env), _run(module, python, env)
        else:
            sample, base = _run(module, python, env), _run(yardstick, python, env)
        ratios.append(sample.cumulative_us(module) / max(1, base.cumulative_us(yardstick)))
        samples.append(sample)
    ordered = sorted(ratios)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return median, ratios, min(samples, key=lambda s: s.cumulative_us(module))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``MODULE``, ``--yardstick``, ``--max-ratio``, ``--max-ms``, ``--forbid``, ``--runs``
    and ``--top`` to ``parser``."""
    parser.add_argument("module", help="module to import, e.g. lens_core")
    parser.add_argument("--yardstick", metavar="MODULE",
                        help="a module imported in the same rounds to compare with (e.g. logging)")
    parser.add_argument("--max-ratio", type=float,
                        help="budget: median over rounds of MODULE's import time / the yardstick's (needs --yardstick)")
    parser.add_argument("--max-ms", type=float,
                        help="budget for the best round's cumulative import time (absolute: a quiet machine only)")
    parser.add_argument("--forbid", action="append", default=[], metavar="PREFIX",
                        help="a top-level package that must not be imported (repeatable)")
    parser.add_argument("--runs", type=int, default=21, help="measured rounds (default 21)")
    parser.add_argument("--top", type=int, default=10, help="offenders to list on failure")


def run(args: argparse.Namespace, prog: str = "python -m lens_ci.importbudget") -> int:
    """Measure and judge for parsed arguments; the result goes to stdout, errors to stderr."""
    if args.max_ratio is None and args.max_ms is None:
        print(f"{prog}: give a budget: --yardstick MODULE --max-ratio R (or --max-ms N)", file=sys.stderr)
        return _EXIT_USAGE
    if (args.max_ratio is None) != (args.yardstick is None):
        print(f"{prog}: --max-ratio and --yardstick go together", file=sys.stderr)
        return _EXIT_USAGE
    ratio = None
    try:
        if args.yardstick is not None:
            ratio, ratios, sample = measure_ratio(args.module, args.yardstick, args.runs)
        else:
            sample = measure(args.module, args.runs)
    except ImportFailed as exc:
        # One line, not the child's traceback and -X importtime output: a module that does
        # not exist is a usage error, one that fails while importing fails the check.
        print(f"{prog}: cannot import {args.module!r}: {exc.reason}", file=sys.stderr)
        return _EXIT_USAGE if exc.not_found else _EXIT_FAILED
    took_ms = sample.cumulative_us(args.module) / 1000
    forbidden = sorted({m for m in sample.imported() for p in args.forbid if m == p or m.startswith(p + ".")})
    ok = not forbidden
    if ratio is not None:
        ok = ok and ratio <= args.max_ratio
        print(f"import {args.module} / import {args.yardstick}: {ratio:.2f}x (median of {len(ratios)} paired rounds, "
              f"{min(ratios):.2f}-{max(ratios):.2f}; budget {args.max_ratio:g}x); best {took_ms:.2f} ms")
    if args.max_ms is not None:
        ok = ok and took_ms <= args.max_ms
        print(f"import {args.module}: {took_ms:.2f} ms cumulative (best of {args.runs}; budget {args.max_ms:g} ms)")
    if forbidden:
        print(f"FORBIDDEN modules imported: {', '.join(forbidden)}")
    if not ok:
        print("top offenders (self time):")
        for name, self_us, cumulative_us, _ in sample.top(args.module, args.top):
            print(f"  {self_us / 1000:8.2f} ms self  {cumulative_us / 1000:8.2f} ms cumulative  {name}")
    return 0 if ok else _EXIT_FAILED


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    prog = "python -m lens_ci.importbudget"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), prog)


if __name__ == "__main__":
    sys.exit(main())
