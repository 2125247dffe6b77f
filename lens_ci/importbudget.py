"""Import-time budget check: ``python -m lens_ci.importbudget MODULE --yardstick dataclasses --max-ratio R``.

The gate CI uses is a same-run ratio: each round runs ``python -c "import MODULE"`` and
``python -c "import YARDSTICK"`` (a stdlib module such as ``dataclasses``) in fresh
interpreters, alternating the order, and each child reports the CPU time (user + system, every
thread) from the line before its import to its last exit handler: unmarshalling, extension
loading, module code, threads it starts and what it does at exit, but not the interpreter's
start-up, which every child pays alike and which on a shared machine varies by more than a
small import costs. ``MODULE / YARDSTICK`` (medians of the rounds) must be at most
``--max-ratio`` (a loaded machine slows both sides of a round alike). ``--max-ms`` (the best
``-X importtime`` cumulative time, absolute) is kept for a quiet machine of one's own. Bytecode
caches are written by a warm-up run first. Exits 1 when the budget is exceeded or a forbidden
module was imported, listing the top offenders, and 2 (one line on stderr) when the module
does not exist.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys

__all__ = ["ImportFailed", "ImportSample", "add_arguments", "cpu_ratio", "main", "measure", "measure_ratio",
           "process_seconds", "run"]

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


# Put before the timed code: the child's CPU time from here to its last exit handler (registered
# first, so run last) goes to the parent down the pipe whose descriptor is {fd}.
_CLOCK = ("import atexit as _lens_atexit, os as _lens_os, time as _lens_time\n"
          "_lens_atexit.register(lambda: _lens_os.write({fd}, b'%d' % (_lens_time.process_time_ns() - _lens_began)))\n"
          "_lens_began = _lens_time.process_time_ns()\n")


def process_seconds(code: str, python: str = sys.executable, env=None) -> float:
    """CPU seconds (user + system, every thread) of ``code`` run by ``python -c`` in a fresh
    interpreter, from the line before it to the interpreter's last exit handler (start-up
    excluded); RuntimeError with its last error line when it fails or reports no time."""
    read, write = os.pipe()
    try:
        proc = subprocess.Popen([python, "-c", _CLOCK.format(fd=write) + code], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, pass_fds=(write,))
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as clock:
        error = proc.stderr.read()  # the child writes the clock once, at exit: a few bytes, never blocking
        reported = clock.read()
    proc.stderr.close()
    proc.wait()
    if proc.returncode != 0 or not reported.isdigit():
        lines = [line for line in error.decode(errors="replace").splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {proc.returncode}" if proc.returncode else "it reported no time"
        raise RuntimeError(f"`python -c {code!r}` failed: {last}")
    return int(reported) / 1e9


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def cpu_ratio(code: str, yardstick_code: str, runs: int = 31, python: str = sys.executable, env=None):
    """(ratio, medians): the median CPU time of ``code`` over that of ``yardstick_code``
    (:func:`process_seconds`), from ``runs`` rounds of the two in fresh interpreters, the order
    alternating, after one warm-up round. ``medians`` holds the two in seconds, keyed ``probe``
    and ``yardstick``; the ratio is inf when the yardstick measured no time at all (a gate that
    divided by a floor instead would pass any budget)."""
    codes = {"probe": code, "yardstick": yardstick_code}
    for text in codes.values():  # warm-up: bytecode caches, and a failure reported before timing
        process_seconds(text, python, env)
    times = {name: [] for name in codes}
    order = list(codes)
    for round_ in range(max(1, runs)):
        for name in (order if round_ % 2 == 0 else order[::-1]):
            times[name].append(process_seconds(codes[name], python, env))
    medians = {name: _median(values) for name, values in times.items()}
    if medians["yardstick"] <= 0:
        return math.inf, medians
    return medians["probe"] / medians["yardstick"], medians


def measure_ratio(module: str, yardstick: str, runs: int = 31, python: str = sys.executable):
    """(ratio, medians, best ``-X importtime`` sample of ``module``): the CPU time ``import
    module`` costs over what ``import yardstick`` costs (:func:`cpu_ratio`)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up runs write .pyc files
    sample = min((_run(module, python, env) for _ in range(3)), key=lambda s: s.cumulative_us(module))
    ratio, medians = cpu_ratio(f"import {module}", f"import {yardstick}", runs, python, env)
    return ratio, medians, sample


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``MODULE``, ``--yardstick``, ``--max-ratio``, ``--max-ms``, ``--forbid``, ``--runs``
    and ``--top`` to ``parser``."""
    parser.add_argument("module", help="module to import, e.g. lens_core")
    parser.add_argument("--yardstick", metavar="MODULE",
                        help="a module imported in the same rounds to compare with (e.g. dataclasses)")
    parser.add_argument("--max-ratio", type=float,
                        help="budget: the CPU time `import MODULE` costs over what the yardstick's import "
                             "costs (medians of alternated rounds in fresh interpreters; needs --yardstick)")
    parser.add_argument("--max-ms", type=float,
                        help="budget for the best round's cumulative import time (absolute: a quiet machine only)")
    parser.add_argument("--forbid", action="append", default=[], metavar="PREFIX",
                        help="a top-level package that must not be imported (repeatable)")
    parser.add_argument("--runs", type=int, default=31, help="measured rounds (default 31)")
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
            ratio, medians, sample = measure_ratio(args.module, args.yardstick, args.runs)
        else:
            sample = measure(args.module, args.runs)
    except ImportFailed as exc:
        # One line, not the child's traceback and -X importtime output: a module that does
        # not exist is a usage error, one that fails while importing fails the check.
        print(f"{prog}: cannot import {args.module!r}: {exc.reason}", file=sys.stderr)
        return _EXIT_USAGE if exc.not_found else _EXIT_FAILED
    except RuntimeError as exc:  # a timed process failed after the -X importtime runs worked
        print(f"{prog}: {exc}", file=sys.stderr)
        return _EXIT_FAILED
    took_ms = sample.cumulative_us(args.module) / 1000
    forbidden = sorted({m for m in sample.imported() for p in args.forbid if m == p or m.startswith(p + ".")})
    ok = not forbidden
    if ratio is not None:
        ok = ok and ratio <= args.max_ratio
        if ratio == math.inf:
            print(f"import {args.yardstick} measured no CPU time: no ratio")
        print(f"import {args.module} / import {args.yardstick}: {ratio:.2f}x of the CPU time each import costs "
              f"(medians of {args.runs} alternated rounds in fresh interpreters: {medians['probe'] * 1e3:.2f} ms "
              f"and {medians['yardstick'] * 1e3:.2f} ms; budget {args.max_ratio:g}x)")
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
