"""The ``lens report`` command: per-rank goodput tables, stragglers, invariant checks, HTML and Perfetto views."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lens_core.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE
from ._units import memory_bytes
from .model import DEFAULT_MEMORY_LIMIT, DEFAULT_STEP_PATTERN, ReportPath

if TYPE_CHECKING:
    from .store import Store

__all__ = ["MAX_COUNT", "MAX_SET", "OneLineParser", "PERFETTO_NOTE_SPANS", "SelectionError", "add_arguments",
           "build_parser", "build_schema_parser", "choose", "int_set", "main", "memory_size", "non_negative_int", "run",
           "run_schema"]

MAX_COUNT = 1_000_000
"""The largest ``--top`` and ``--max-violations`` (a larger one is a usage error, not an engine failure)."""

MAX_SET = 1_000_000
"""The most numbers one ``--step`` or ``--ranks`` list may name (``0-99999999999`` is a usage error)."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2 (no usage block)."""

    def error(self, message: str) -> Any:  # argparse's signature; it never returns
        """Print ``<prog>: <message> (see <prog> --help)`` and exit 2."""
        from .render_text import terminal_safe

        self.exit(EXIT_USAGE, terminal_safe(f"{self.prog}: {message} (see {self.prog} --help)") + "\n")

_DESCRIPTION = (
    "Read OTLP-JSON trace files (one ExportTraceServiceRequest per line, as lens's file exporter and "
    "the Collector's file exporter write them; .gz and .zst allowed; directories are searched for "
    "*.jsonl and *.json) and report goodput per rank and step, the stragglers and what they cost, "
    "unreadable input, lost telemetry and broken goodput invariants, for one run. Needs DuckDB: "
    "pip install 'lens-telemetry[report]'."
)


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regular expression {text!r}: {exc}") from None


def _positive_spans(text: str) -> int:
    """argparse type: a positive number of spans (``1000000`` or ``1_000_000``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a positive number of spans, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive number of spans, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer from 0 to :data:`MAX_COUNT`, with a clear error otherwise."""
    try:
        value = int(text) if len(text) < 30 else -1
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {MAX_COUNT:,}, got {text[:40]!r}")
    return value


PERFETTO_NOTE_SPANS = 2_000_000
"""Past this many spans, a ``--perfetto`` file of the whole run comes with a note on choosing a part."""

_MEMORY_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B)\s*", re.IGNORECASE)


def memory_size(text: str) -> str:
    """argparse type: an amount of memory as DuckDB reads it, e.g. ``512MB`` or ``2GiB`` (at least 256 MB: reading
    the longest line the file exporter writes, 16 MiB, takes about 190 MB)."""
    match = _MEMORY_SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected an amount like 512MB or 2GB (units KB, MB, GB, TB, KiB..TiB), "
                                         f"got {text!r}")
    unit = match[2].upper()
    if memory_bytes(f"{match[1]}{unit}") < 256e6:
        raise argparse.ArgumentTypeError(f"the report engine needs at least 256MB, got {text!r}")
    return f"{match[1]}{unit.replace('I', 'i')}"


def int_set(text: str) -> frozenset[int]:
    """argparse type: a comma list of non-negative integers and ranges, e.g. ``0-7,12``."""
    values: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low) if len(low) < 19 else -1
            last = (int(high) if len(high) < 19 else -2) if dash else first
        except ValueError:
            first, last = -1, -2
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(
                f"expected non-negative integers and ranges like '0-7,12', got {text[:60]!r}")
        if last - first + 1 + len(values) > MAX_SET:
            raise argparse.ArgumentTypeError(f"at most {MAX_SET:,} numbers in one list, got {text[:60]!r}")
        values.update(range(first, last + 1))
    return frozenset(values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` arguments (``PATH...``, ``--run``, ``--json``, ``--html``, ...) to ``parser``."""
    from .rollup import DEFAULT_MAX_VIOLATIONS, DEFAULT_TOP_N

    parser.add_argument("paths", nargs="*", metavar="PATH", help="trace file or directory")
    parser.add_argument("--clickhouse", metavar="URL",
                        help="read spans from the Collector's ClickHouse table instead of files: a server "
                             "(http://user:password@host:8123) or chdb:DIR (an embedded chdb database)")
    parser.add_argument("--table", default="otel_traces", metavar="[DB.]NAME",
                        help="the span table with --clickhouse (default otel_traces)")
    parser.add_argument("--work-tables", choices=("memory", "disk"), default="memory",
                        help="with --clickhouse: keep the rollup's working tables in ClickHouse's memory (default; "
                             "~400 bytes a span) or on its disk, compressed (tens of bytes a span, ~2x the CPU)")
    parser.add_argument("--part-spans", type=_positive_spans, default=None, metavar="N",
                        help="with --clickhouse: walk at most N spans at once (default 1,000,000: ~1 GB of ClickHouse "
                             "memory); a larger run sums the traces its stamps answer where they lie and walks the "
                             "others in parts of whole traces, and a run with device times is walked in parts, "
                             "each twice (the --html page and --perfetto read the spans they draw where they lie)")
    parser.add_argument("--from-spans", action="store_true",
                        help="with --clickhouse: read the spans even where the schema helper's rollup table "
                             "(TABLE_lens_steps) covers the run (by default its rows give the figures then, and the "
                             "report's path line says which was read and why)")
    parser.add_argument("--run", metavar="ID", help="the run to report when the input holds several")
    parser.add_argument("--attempt", type=non_negative_int, metavar="N",
                        help="the launch of the run to report when its run id was launched more than once "
                             "(1 = the first; a restart or a reused LENS_RUN_ID)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML page to OUT")
    parser.add_argument("--perfetto", metavar="OUT",
                        help="also write a trace-event JSON file to OUT (opens in ui.perfetto.dev and chrome://tracing)")
    parser.add_argument("--step", type=int_set, action="append", metavar="N",
                        help="steps the HTML waterfall draws and the Perfetto file holds, e.g. 7 or 3-5 (repeatable; "
                             "default: the waterfall draws the slowest step, or the whole run when it is small; "
                             "the Perfetto file holds every step)")
    parser.add_argument("--ranks", type=int_set, metavar="LIST",
                        help="ranks the HTML waterfall draws and the Perfetto file holds, e.g. 0-7,12 (default: the "
                             "waterfall draws up to 16, the stragglers first; the Perfetto file holds every rank)")
    parser.add_argument("--steps", action="store_true",
                        help="the text lists every step (step time over ranks, the busiest rank, the wait for it); "
                             "by default the slowest steps and the distribution of step time")
    parser.add_argument("--top", type=non_negative_int, default=DEFAULT_TOP_N, metavar="N",
                        help="span names (and stragglers) to list")
    parser.add_argument("--max-violations", type=non_negative_int, default=DEFAULT_MAX_VIOLATIONS, metavar="N",
                        help="violations to list (all are counted)")
    parser.add_argument(
        "--step-pattern",
        type=_regex,
        default=re.compile(DEFAULT_STEP_PATTERN),
        metavar="REGEX",
        help=f"regex (searched) naming step umbrella spans; default {DEFAULT_STEP_PATTERN!r}",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when any goodput invariant is violated")
    parser.add_argument("--memory-limit", type=memory_size, default=DEFAULT_MEMORY_LIMIT, metavar="SIZE",
                        help=f"memory budget of the whole report: the engine spills to disk past its share, and "
                             "takes more only when a statement cannot run within it, saying so (default "
                             f"{DEFAULT_MEMORY_LIMIT}: 185-230 MiB peak RSS at 1M-10M spans; files are "
                             "read by one statement, two when all are small; each further 256MB reads with one more, "
                             "up to the cores)")


def build_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The ``report`` argument parser, with ``func=run`` as its default.

    Given the object ``ArgumentParser.add_subparsers()`` returns, adds a ``report`` subcommand
    to it; without one, returns a standalone parser whose program name is ``lens report``.
    """
    if subparsers is None:
        parser = OneLineParser(prog="lens report", description=_DESCRIPTION)
    else:
        parser = subparsers.add_parser("report", help="goodput report from trace files", description=_DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


class _Progress:
    """Progress lines on stderr, only when stderr is a terminal (never in a pipe or a log)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.on = stream.isatty()
        self.started = time.monotonic()

    def files(self, done: int, total: int) -> None:
        if self.on:
            self.stream.write(f"\rlens report: read {done}/{total} files ({time.monotonic() - self.started:.0f} s)")
            self.stream.flush()

    def say(self, text: str) -> None:
        if self.on:
            self.stream.write(f"\rlens report: {text} ({time.monotonic() - self.started:.0f} s)\x1b[K\n")
            self.stream.flush()


def _error(text: str) -> None:
    from .render_text import terminal_safe

    print(terminal_safe(f"lens report: {text}"), file=sys.stderr)


class SelectionError(ValueError):
    """``--step`` or ``--ranks`` names nothing the run holds; the message says what it holds."""


def choose(report: Any, steps: frozenset[int] | None, ranks: frozenset[int] | None
           ) -> tuple[frozenset[int] | None, frozenset[str] | None, list[str]]:
    """(the steps asked for, the rank labels asked for, notes on numbers not in the run).

    Raises :class:`SelectionError` naming the steps or ranks the run holds when ``steps`` or
    ``ranks`` matches none of them."""
    from .render_text import number_ranges

    notes = []
    if steps is not None:
        held = {step.iteration for step in report.steps}
        if not held & steps:
            raise SelectionError(f"--step {number_ranges(steps)[:80]} matches no step of run "
                                 f"{report.run_id or '(no run id)'!r}; its steps: {number_ranges(held) or 'none'}")
        if steps - held:
            notes.append(f"no step {number_ranges(steps - held)[:80]} in the run; drawing steps {number_ranges(held & steps)}")
    labels = None
    if ranks is not None:
        numbered = {int(label[5:]): label for label in report.rank_steps.rank_labels or [r.rank for r in report.ranks]
                    if label.startswith("rank ") and label[5:].isdigit()}
        found = ranks & numbered.keys()
        if not found:
            raise SelectionError(f"--ranks {number_ranges(ranks)[:80]} matches no rank of run "
                                 f"{report.run_id or '(no run id)'!r}; its ranks: {number_ranges(numbered) or 'none'}")
        if ranks - found:
            notes.append(f"no rank {number_ranges(ranks - found)[:80]} in the run; showing ranks {number_ranges(found)}")
        labels = frozenset(numbered[r] for r in found)
    return steps, labels, notes


def run(args: argparse.Namespace) -> int:
    """Run ``lens report`` for parsed arguments; data on stdout, one-line errors on stderr; the exit status."""
    from .discovery import find_trace_files
    from .engine import MissingEngine, require_duckdb
    from .store import TraceStore

    if bool(args.paths) == bool(args.clickhouse):
        _error("give trace files or directories, or --clickhouse URL (not both)")
        return EXIT_USAGE
    if args.clickhouse:  # ClickHouse computes that report: DuckDB is not loaded (~45 ms)
        return _run_clickhouse(args)
    try:
        duckdb = require_duckdb()
    except MissingEngine as exc:
        _error(str(exc))
        return EXIT_FAILED
    files, missing = find_trace_files(args.paths)
    if missing:  # a mistyped path among good ones is an error, not a smaller report
        for problem in missing:
            _error(f"{problem.file}: {problem.message}")
        return EXIT_USAGE
    from .interrupts import interrupt_guard

    progress = _Progress(sys.stderr)
    try:
        with interrupt_guard("lens report") as directory, TraceStore(
                detail=bool(args.perfetto), progress=progress.files, memory_limit=args.memory_limit,
                temp_dir=directory) as store:
            store.load_files(files)
            if store.read_limit_raised:  # the report still holds: said, not an error
                _error(f"note: reading these files needed more memory than --memory-limit {args.memory_limit} "
                       f"gives; they were read again with {store.read_limit / 1e6:,.0f} MB for the engine "
                       "(DuckDB's JSON reader holds ~115 MB for files of a few MB, read in 8 MB pieces past that, "
                       "more with --perfetto)")
            progress.say(f"read {store.span_count()} spans")
            try:
                return _report(store, args, progress)
            finally:
                if store.rollup_limit_raised:
                    held = (f" while the report held {store.rollup_held / 1e6:,.0f} MB of figures beside it"
                            if store.rollup_held else "")
                    _error(f"note: the rollup needed more memory than --memory-limit {args.memory_limit} gives; "
                           f"its engine ran with up to {store.rollup_limit / 1e6:,.0f} MB{held}")
    except duckdb.Error as exc:  # e.g. out of disk for the database: one line, no traceback
        _error(f"the report engine failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
        return EXIT_FAILED


def _run_clickhouse(args: argparse.Namespace) -> int:
    """``lens report --clickhouse URL``: the spans of ``--table`` read through ClickHouse, then the same report."""
    from .clickhouse import ClickHouseStore, check_table_name, display_url, failure_text, open_source

    progress = _Progress(sys.stderr)
    url = display_url(args.clickhouse)
    try:
        check_table_name(args.table)  # a malformed name is said before any connection
        source = open_source(args.clickhouse)
    except (ImportError, ValueError) as exc:
        _error(str(exc))
        return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_FAILED
    except Exception as exc:  # a server that cannot be reached or refuses the user: one line, no password
        _error(f"cannot connect to {url}: {failure_text(exc)}")
        return EXIT_USAGE
    try:
        reason = _rollup_reason(args)
        if reason is None:  # the rollup table, where it covers the run: a report of its rows, or why not
            from .clickhouse_rollup import rollup_report
            from .rollup import RunChoiceError

            try:
                taken = rollup_report(source, args.table, run=args.run, attempt=args.attempt,
                                      step_pattern=args.step_pattern.pattern)
            except RunChoiceError as exc:
                return _run_choice(exc, args)
            except ValueError as exc:
                _error(str(exc))
                return EXIT_USAGE
            except source.errors as exc:  # e.g. no right to read system.tables: the spans still answer
                taken = f"reading the rollup failed ({failure_text(exc)}): reading the spans"
            if not isinstance(taken, str):
                progress.say(str(taken.path))
                return _output(taken, None, args)
            reason = taken
        from .clickhouse import DEFAULT_PART_SPANS

        part_spans = args.part_spans or DEFAULT_PART_SPANS
        with ClickHouseStore(source, args.table, detail=bool(args.perfetto), memory_limit=args.memory_limit,
                             run=args.run, work_tables=args.work_tables, part_spans=part_spans) as store:
            try:
                store.load_table()
            except ValueError as exc:
                _error(str(exc))
                return EXIT_USAGE
            progress.say(f"read {store.span_count()} spans from {args.table}")
            return _report(store, args, progress,
                           path=lambda: ReportPath("spans", f"{reason}; {store.walk_summary()}", parts=store.parts_walked))
    except source.errors as exc:  # a query ClickHouse refused, a connection lost: one line
        _error(f"ClickHouse at {url} failed: {failure_text(exc)}")
        return EXIT_USAGE
    finally:
        source.close()


def _rollup_reason(args: argparse.Namespace) -> str | None:
    """Why ``lens report --clickhouse`` reads the spans without looking at the rollup table (None: it looks)."""
    asked = [flag for flag, value in (("--from-spans", args.from_spans), ("--html", args.html),
                                      ("--perfetto", args.perfetto)) if value]
    if not asked:
        return None
    return f"{asked[0]}: reading the spans" if asked[0] == "--from-spans" else f"{asked[0]} draws the spans"


def _run_choice(exc: Any, args: argparse.Namespace) -> int:
    """Print the runs (and attempts) the input holds for a :class:`~lens_report.rollup.RunChoiceError`; 2."""
    from .render_text import render_runs

    if args.json:
        attempts = {"attempts": [a.to_json() for a in exc.attempts]} if hasattr(exc, "attempts") else {}
        print(json.dumps({"runs": [info.to_json() for info in exc.runs], **attempts}, indent=2))
    else:
        sys.stdout.write(render_runs(exc.runs))
    _error(str(exc))
    return EXIT_USAGE


def _report(store: Store, args: argparse.Namespace, progress: _Progress, path: Any = None) -> int:
    from .rollup import RunChoiceError, build_report

    if store.span_count() == 0:
        if len(store.problems) == 1:  # e.g. one file, one line too long to read: one line says it all
            _error(f"no spans read: {store.problems[0]}")
            return EXIT_NO_DATA
        _error(f"no spans read from {' '.join(map(str, args.paths)) or args.table}")
        from .render_text import terminal_safe

        for problem in store.problems:
            print(terminal_safe(f"  {problem}"), file=sys.stderr)
        return EXIT_NO_DATA
    try:
        report = build_report(store, run=args.run, step_pattern=args.step_pattern, top_n=args.top,
                              max_violations=args.max_violations, attempt=args.attempt)
    except RunChoiceError as exc:
        return _run_choice(exc, args)
    progress.say("rolled up")
    if path is not None and report.path is None:  # the spans path's reason (the rollup's, where it was looked at)
        report = dataclasses.replace(report, path=path() if callable(path) else path)
    return _output(report, store, args)


def _output(report: Any, store: Store | None, args: argparse.Namespace) -> int:
    """Print (and write) ``report`` as the arguments ask; ``store`` holds its spans (None: a report of the rollup,
    which draws nothing: --html and --perfetto read the spans)."""
    from .render_text import render_text
    try:
        steps, ranks, notes = choose(report, frozenset().union(*args.step) if args.step else None, args.ranks)
    except SelectionError as exc:
        _error(str(exc))
        return EXIT_USAGE
    for note in notes:
        _error(note)
    if args.html and store is not None and not _write(args.html, lambda out: _html(store, report, args, out)):
        return EXIT_USAGE
    if args.perfetto and store is not None and not _write(args.perfetto, lambda out: _perfetto(store, report, args, out)):
        return EXIT_USAGE
    if args.json:
        # a big run's rank × step rows print compactly; a small report stays readable
        report.write_json(sys.stdout, top=args.top, ranks=ranks, indent=None if report.multi_rank else 2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(report, top=args.top, ranks=ranks, steps=steps, every_step=args.steps))
    return EXIT_FAILED if args.strict and report.violation_count else EXIT_OK


def _html(store: Store, report: Any, args: argparse.Namespace, out: TextIO) -> None:
    from .render_html import render_html

    steps = frozenset().union(*args.step) if args.step else None
    out.write(render_html(report, store, steps=steps, ranks=args.ranks, top=args.top, rerun=_rerun(args)))


def _rerun(args: argparse.Namespace) -> str:
    """The command line that made this page, without --step/--ranks (the page adds them): a click on
    what the page does not carry says it. A ClickHouse URL is shown with its password masked."""
    import shlex

    if args.clickhouse:
        from .clickhouse import display_url

        words = ["--clickhouse", display_url(args.clickhouse), "--table", args.table]
    else:
        words = [str(p) for p in args.paths]
    words += [*(["--run", args.run] if args.run else []), *(["--attempt", str(args.attempt)] if args.attempt else []),
              "--html", args.html]
    return "lens report " + " ".join(shlex.quote(w) for w in words)


def _perfetto(store: Store, report: Any, args: argparse.Namespace, out: TextIO) -> None:
    from .perfetto import write_trace_events

    steps = frozenset().union(*args.step) if args.step else None
    count = write_trace_events(store, report, out, steps=steps, ranks=args.ranks)
    if count > PERFETTO_NOTE_SPANS and steps is None and args.ranks is None:
        _error(f"the Perfetto file holds all {count:,} spans of the run; a browser loads a file this large slowly "
               "or not at all: --step and --ranks choose a part")


def _write(path: str, write: Any) -> bool:
    try:
        with open(path, "w", encoding="utf-8") as out:
            write(out)
    except OSError as exc:
        _error(f"cannot write {path}: {exc.strerror or exc}")
        return False
    _error(f"wrote {path} ({Path(path).stat().st_size / 1e6:.1f} MB)")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) as ``lens report`` arguments and run the report."""
    from lens_core.interrupts import interrupts_watched

    from .interrupts import quiet_broken_pipe

    try:
        with interrupts_watched("lens report"):  # Ctrl-C: one line, status 130, no database left
            return quiet_broken_pipe(lambda: run(build_parser().parse_args(argv)))
    except KeyboardInterrupt:  # where no watch could start (SIGINT was ignored, then restored)
        _error("interrupted")
        return EXIT_INTERRUPTED


def build_schema_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``clickhouse-schema`` to the ``lens`` command's subparsers (the report's door for it)."""
    schema = sub.add_parser("clickhouse-schema", help="DDL that lets lens report scan columns of otel_traces",
                            description="Print the DDL a team adds to the Collector's ClickHouse span table "
                            "(otel_traces) so lens report scans columns, not attribute maps.")
    schema.add_argument("--table", default="otel_traces", metavar="[DB.]NAME",
                        help="the exporter's span table (default otel_traces)")
    schema.add_argument("--no-rollup", action="store_true",
                        help="only the materialized columns, not the per-(run, rank, step) rollup and its view")
    schema.add_argument("--backfill", action="store_true",
                        help="also print the statements that fill the columns and the rollup for rows already in "
                             "the table (run them once, right after the view is created)")
    schema.add_argument("--exporter-table", action="store_true",
                        help="first print the exporter's own CREATE TABLE (for a table made by hand or in chdb)")
    schema.set_defaults(func=run_schema)
    return schema


def run_schema(args: argparse.Namespace) -> int:
    """``lens clickhouse-schema``: print the DDL; the exit status (2 for a bad table name)."""
    from .clickhouse import otel_traces_ddl, schema_sql

    try:
        text = (otel_traces_ddl(args.table) + ";\n" if args.exporter_table else "") + \
            schema_sql(args.table, rollup=not args.no_rollup, backfill=args.backfill)
    except ValueError as exc:
        print(f"lens clickhouse-schema: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_OK
