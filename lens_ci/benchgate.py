"""``lens bench-gate``: ratio checks over pytest-benchmark JSON, for any project's CI (stdlib only).

A check is ``SIDE / SIDE OP BOUND``, where a side is a benchmark name or an overhead
``(NAME - NAME)`` and OP is ``<=``, ``<``, ``>=`` or ``>``::

    test_fast / test_reference <= 0.2
    (test_traced - test_bare) / (test_wrapper - test_bare) <= 0.25
    test_enabled / test_enabled:paired_sdk_min_s <= 1.0

``NAME`` is a benchmark's ``name`` in the JSON (``test_x[param]`` as pytest-benchmark writes
it; quote it as ``"..."`` when it holds spaces, operators or quotes) and stands for its
minimum time: on a shared, noisy machine the least disturbed round is the honest one, and
both sides come from the same run, so no absolute time is ever asserted. ``NAME:KEY`` reads
the number ``KEY`` from the benchmark's ``extra_info`` (a paired side timed inside the same
rounds), else its ``stats`` (``median``, ``mean``, ...).

When a ``KEY`` holds a list (one time per round, timed alternately with the benchmark's own
rounds), the check pairs rounds: every operand is read round by round (a bare ``NAME`` as
its ``stats.data``), the ratio is computed for each round and the gate takes the median.
Two sides timed in the same round see the same machine load, so on a busy machine this is
steadier than a ratio of two minimums, which rests on two lucky rounds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import Dict, List, Optional, Sequence, Tuple

from lens_core.exitcodes import EXIT_FAILED, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE

__all__ = ["Check", "CheckError", "Outcome", "evaluate", "load_benchmarks", "main", "parse_check",
           "read_checks_file"]

_OPERATORS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
              ">=": lambda a, b: a >= b, ">": lambda a, b: a > b}
# A bare name: a Python-ish identifier, then any [...] parameter ids (anything but ']'),
# then an optional :key. Quoted names ("...") can hold anything else.
_BARE = re.compile(r"([A-Za-z_][\w.]*(?:\[[^\]]*\])*)(?::([A-Za-z_][\w.]*))?")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(?::([A-Za-z_][\w.]*))?')
_NUMBER = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?:\s*/\s*[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)?")


class CheckError(ValueError):
    """A check expression or checks file that cannot be parsed; the message points at the spot."""


class Check:
    """One parsed check: ``(num - num_base) / (den - den_base) OP bound`` (bases optional).

    Each operand is ``(benchmark name, key or None)``; ``text`` is the check as given,
    ``ratio_text`` its left side, and ``label`` an optional description shown with the result.
    """

    __slots__ = ("text", "ratio_text", "num", "num_base", "den", "den_base", "op", "bound", "label")

    def __init__(self, text: str, ratio_text: str, num: Tuple[str, Optional[str]], num_base: Optional[Tuple[str, Optional[str]]],
                 den: Tuple[str, Optional[str]], den_base: Optional[Tuple[str, Optional[str]]], op: str,
                 bound: float, label: str = "") -> None:
        self.text = text
        self.ratio_text = ratio_text  # the expression left of the operator, for result lines
        self.num, self.num_base, self.den, self.den_base = num, num_base, den, den_base
        self.op = op
        self.bound = bound
        self.label = label

    def operands(self) -> List[Tuple[str, Optional[str]]]:
        """Every (name, key) the check reads, in order."""
        return [o for o in (self.num, self.num_base, self.den, self.den_base) if o is not None]

    def __repr__(self) -> str:
        return f"Check({self.text!r})"


class Outcome:
    """A check's result: the ratio (None when it could not be computed), pass/fail and why."""

    __slots__ = ("check", "ratio", "ok", "note")

    def __init__(self, check: Check, ratio: Optional[float], ok: bool, note: str = "") -> None:
        self.check = check
        self.ratio = ratio
        self.ok = ok
        self.note = note

    def line(self) -> str:
        """``ok   0.093 <= 0.125  label (expression)`` or ``FAIL ...  missing: name``."""
        shown = f"{self.ratio:.3f}" if self.ratio is not None else "  -  "
        what = f"{self.check.label} ({self.check.ratio_text})" if self.check.label else self.check.ratio_text
        text = f"{'ok  ' if self.ok else 'FAIL'} {shown} {self.check.op} {self.check.bound:.3f}  {what}"
        return f"{text}  {self.note}" if self.note else text


class _Tokens:
    """A cursor over one check expression, with errors that point at the column."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def error(self, expected: str) -> CheckError:
        found = repr(self.text[self.pos:self.pos + 12]) if self.pos < len(self.text) else "the end"
        return CheckError(f"check {self.text!r}: expected {expected} at column {self.pos + 1}, found {found}. "
                          "Form: NAME / NAME <= BOUND, or (NAME - NAME) / (NAME - NAME) <= BOUND; "
                          "operators <=, <, >=, >")

    def take(self, literal: str) -> bool:
        self.skip()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, what: str) -> None:
        if not self.take(literal):
            raise self.error(what)

    def name(self) -> Tuple[str, Optional[str]]:
        self.skip()
        quoted = _QUOTED.match(self.text, self.pos)
        if quoted:
            self.pos = quoted.end()
            return re.sub(r"\\(.)", r"\1", quoted.group(1)), quoted.group(2)
        bare = _BARE.match(self.text, self.pos)
        if not bare:
            raise self.error("a benchmark name")
        self.pos = bare.end()
        return bare.group(1), bare.group(2)

    def side(self) -> Tuple[Tuple[str, Optional[str]], Optional[Tuple[str, Optional[str]]]]:
        if self.take("("):
            value = self.name()
            self.expect("-", "'-' (an overhead is (NAME - BASE))")
            base = self.name()
            self.expect(")", "')'")
            return value, base
        return self.name(), None


def parse_check(text: str, label: str = "") -> Check:
    """Parse one check expression; raise CheckError naming the column and the allowed form."""
    if not isinstance(text, str) or not text.strip():
        raise CheckError("a check must be a non-empty expression like 'test_a / test_b <= 0.2'")
    tokens = _Tokens(text.strip())
    num, num_base = tokens.side()
    tokens.expect("/", "'/'")
    den, den_base = tokens.side()
    tokens.skip()
    op = next((o for o in ("<=", ">=", "<", ">") if tokens.text.startswith(o, tokens.pos)), None)
    if op is None:
        raise tokens.error("a comparison (<=, <, >=, >)")
    ratio_text = tokens.text[:tokens.pos].strip()
    tokens.pos += len(op)
    tokens.skip()
    number = _NUMBER.match(tokens.text, tokens.pos)
    if not number:
        raise tokens.error("a number bound (e.g. 0.2 or 1/8)")
    tokens.pos = number.end()
    tokens.skip()
    if tokens.pos != len(tokens.text):
        raise tokens.error("the end of the check")
    top, _, bottom = number.group(0).partition("/")
    if bottom and float(bottom) == 0:
        raise CheckError(f"check {tokens.text!r}: the bound {number.group(0)!r} divides by zero")
    bound = float(top) / float(bottom) if bottom else float(top)
    return Check(tokens.text, ratio_text, num, num_base, den, den_base, op, bound, label)


def read_checks_file(path: str) -> List[Check]:
    """Checks from a file: one per line; ``#`` starts a comment, and the text after a ``#``
    on a check's line is its label. Raises CheckError naming the file and line."""
    checks = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            expression, _, label = line.partition("#")
            if not expression.strip():
                continue
            try:
                checks.append(parse_check(expression, label.strip()))
            except CheckError as exc:
                raise CheckError(f"{path}:{lineno}: {exc}") from None
    return checks


def load_benchmarks(path: str) -> Dict[str, dict]:
    """Benchmark name -> its JSON entry, from a ``--benchmark-json`` file. Raises OSError
    when unreadable and ValueError when it is not pytest-benchmark JSON."""
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except ValueError as exc:
            raise ValueError(f"{path} is not JSON ({exc})") from None
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benchmarks, list):
        raise ValueError(f"{path} is not pytest-benchmark JSON (no 'benchmarks' list; write it with "
                         "pytest --benchmark-json=FILE)")
    return {b["name"]: b for b in benchmarks if isinstance(b, dict) and isinstance(b.get("name"), str)}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _value(benchmarks: Dict[str, dict], operand: Tuple[str, Optional[str]], rounds: bool = False):
    """The operand's number, or with ``rounds`` its per-round times (a list); None if absent."""
    name, key = operand
    entry = benchmarks.get(name)
    if entry is None:
        return None
    stats = entry.get("stats") or {}
    if key is None:
        value = stats.get("data") if rounds else stats.get("min")
    else:
        value = (entry.get("extra_info") or {}).get(key, stats.get(key))
    if isinstance(value, list):
        return [float(v) for v in value] if rounds and value and all(_number(v) for v in value) else None
    return float(value) if _number(value) and not rounds else None


def _per_round(benchmarks: Dict[str, dict], check: Check) -> bool:
    """True when the check names a per-round list (a KEY holding one time per round)."""
    return any(key is not None and isinstance(((benchmarks.get(name) or {}).get("extra_info") or {}).get(key), list)
               for name, key in check.operands())


def _sides(check: Check, lookup) -> Tuple[float, float]:
    top = lookup[check.num] - (lookup[check.num_base] if check.num_base else 0.0)
    bottom = lookup[check.den] - (lookup[check.den_base] if check.den_base else 0.0)
    return top, bottom


def evaluate(checks: Sequence[Check], benchmarks: Dict[str, dict]) -> List[Outcome]:
    """Compute each check; a check whose benchmark (or key) is missing fails and says which.
    A check over per-round lists is the median of its rounds' ratios (see the module's doc)."""
    outcomes = []
    for check in checks:
        rounds = _per_round(benchmarks, check)
        values = [_value(benchmarks, o, rounds) for o in check.operands()]
        missing = [o for o, v in zip(check.operands(), values) if v is None]
        if missing:
            shown = ", ".join(name if key is None else f"{name}:{key}" for name, key in missing)
            what = "per-round times missing" if rounds else "missing"
            outcomes.append(Outcome(check, None, False, f"{what}: {shown}"))
            continue
        if not rounds:
            top, bottom = _sides(check, dict(zip(check.operands(), values)))
            if bottom <= 0:
                outcomes.append(Outcome(check, None, False, f"the denominator is {bottom:.3g} s (not positive)"))
            else:
                outcomes.append(Outcome(check, top / bottom, _OPERATORS[check.op](top / bottom, check.bound)))
            continue
        lengths = sorted({len(v) for v in values})
        if len(lengths) != 1:
            outcomes.append(Outcome(check, None, False, f"the operands hold different numbers of rounds "
                                                        f"({', '.join(map(str, lengths))}); they cannot be paired"))
            continue
        sides = [_sides(check, dict(zip(check.operands(), row))) for row in zip(*values)]
        usable = [top / bottom for top, bottom in sides if bottom > 0]
        if len(usable) * 2 <= len(sides):
            outcomes.append(Outcome(check, None, False, f"the denominator is not positive in {len(sides) - len(usable)} "
                                                        f"of {len(sides)} rounds"))
            continue
        import statistics  # here: 3 ms of import a gate without per-round checks does not need

        ratio = statistics.median(usable)
        outcomes.append(Outcome(check, ratio, _OPERATORS[check.op](ratio, check.bound),
                                f"median of {len(usable)} paired rounds"))
    return outcomes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``BENCH_JSON``, ``--check`` and ``--checks`` to ``parser``."""
    parser.add_argument("json", metavar="BENCH_JSON", help="pytest --benchmark-json output")
    parser.add_argument("--check", dest="checks", action="append", default=[], metavar="EXPR",
                        help='a ratio check, e.g. "test_a / test_b <= 0.2" (repeatable)')
    parser.add_argument("--checks", dest="checks_files", action="append", default=[], metavar="FILE",
                        help="a file of checks, one per line, '# label' after each (repeatable)")


def _fail(prog: str, message: str, status: int) -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace, prog: str = "lens bench-gate") -> int:
    """Run the gate for parsed arguments: one line per check on stdout, errors on stderr."""
    try:
        checks = [parse_check(text) for text in args.checks]
        for path in args.checks_files:
            checks += read_checks_file(path)
    except CheckError as exc:
        return _fail(prog, str(exc), EXIT_USAGE)
    except OSError as exc:
        return _fail(prog, f"cannot read checks file: {exc}", EXIT_USAGE)
    if not checks:
        return _fail(prog, "no checks given: pass --check EXPR or --checks FILE", EXIT_USAGE)
    try:
        benchmarks = load_benchmarks(args.json)
    except OSError as exc:
        return _fail(prog, f"cannot read {args.json}: {exc.strerror or exc}", EXIT_USAGE)
    except ValueError as exc:
        return _fail(prog, str(exc), EXIT_NO_DATA)
    if not benchmarks:
        return _fail(prog, f"{args.json} holds no benchmarks", EXIT_NO_DATA)
    outcomes = evaluate(checks, benchmarks)
    for outcome in outcomes:
        print(outcome.line())
    failed = sum(not o.ok for o in outcomes)
    print(f"bench-gate: {len(outcomes) - failed} passed, {failed} failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lens_ci.benchgate`` (the same as ``lens bench-gate``)."""
    parser = argparse.ArgumentParser(prog="lens bench-gate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
