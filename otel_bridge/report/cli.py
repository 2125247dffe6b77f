"""The ``lens report`` command: goodput tables, invariant checks and an HTML waterfall from trace files."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from .model import DEFAULT_STEP_PATTERN
from .reader import read_spans
from .render_html import render_html
from .render_text import render_text
from .rollup import DEFAULT_TOP_N, build_report

__all__ = ["EXIT_NO_SPANS", "EXIT_OK", "EXIT_VIOLATIONS", "add_arguments", "build_parser", "main",
           "non_negative_int", "run"]

EXIT_OK = 0
"""Exit status of a report that was produced (violations included, unless ``--strict``)."""

EXIT_VIOLATIONS = 1
"""Exit status with ``--strict`` when any invariant is violated."""

EXIT_NO_SPANS = 2
"""Exit status when no span could be read at all (or the HTML file cannot be written)."""

_DESCRIPTION = (
    "Read OTLP-JSON trace files (one ExportTraceServiceRequest per line, .gz allowed; directories "
    "are searched for *.jsonl, *.json and their .gz) and report goodput buckets per step and for "
    "the run, the top spans, unreadable input and broken goodput invariants."
)


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regular expression {text!r}: {exc}") from None


def non_negative_int(text: str) -> int:
    """argparse type: a non-negative integer, with a clear error otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` arguments (``PATH...``, ``--json``, ``--html``, ``--top``, ...) to ``parser``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace file or directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML waterfall to OUT")
    parser.add_argument(
        "--top", type=non_negative_int, default=DEFAULT_TOP_N, metavar="N", help="span names to list by total time"
    )
    parser.add_argument(
        "--step-pattern",
        type=_regex,
        default=re.compile(DEFAULT_STEP_PATTERN),
        metavar="REGEX",
        help=f"regex (searched) naming step umbrella spans; default {DEFAULT_STEP_PATTERN!r}",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when any goodput invariant is violated")


def build_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The ``report`` argument parser, with ``func=run`` as its default.

    Given the object ``ArgumentParser.add_subparsers()`` returns, adds a ``report`` subcommand
    to it; without one, returns a standalone parser whose program name is ``lens report``.
    """
    if subparsers is None:
        parser = argparse.ArgumentParser(prog="lens report", description=_DESCRIPTION)
    else:
        parser = subparsers.add_parser("report", help="goodput report from trace files", description=_DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``lens report`` for parsed arguments; prints to stdout and stderr and returns the exit status."""
    read = read_spans(args.paths)
    if not read.spans:
        print(f"lens report: no spans read from {' '.join(map(str, args.paths))}", file=sys.stderr)
        for problem in read.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_NO_SPANS
    report = build_report(read, step_pattern=args.step_pattern, top_n=args.top)
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(render_html(report, read.spans))
        except OSError as exc:
            print(f"lens report: cannot write {args.html}: {exc}", file=sys.stderr)
            return EXIT_NO_SPANS
        print(f"lens report: wrote {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        sys.stdout.write(render_text(report))
    return EXIT_VIOLATIONS if args.strict and report.violations else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) as ``lens report`` arguments and run the report."""
    return run(build_parser().parse_args(argv))
