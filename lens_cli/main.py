"""The ``lens`` command: demo, report, resolve, import-budget, emit-spans, bench-gate, replay.

Conventions every subcommand keeps: stdout carries only the command's data (a JSON stream
stays parseable), notes and errors go to stderr, an error is one line naming the command
(no traceback), and the exit status comes from lens_core.exitcodes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is imported by checkers only
    from typing import List, Optional, Sequence

from lens_core.interrupts import interrupts_watched, program_name, quiet_broken_pipe, watch_interrupts
from lens_core.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE

__all__ = ["build_parser", "console_main", "main"]

_RESOLVE_OPTIONS = ("-h", "--help", "--import", "--json", "--strict")


def _error(command: str, message: str, status: int) -> int:
    print(f"lens {command}: {message}", file=sys.stderr)
    return status


def _import_failure(exc: BaseException, module: str) -> int:
    """EXIT_USAGE when ``module`` itself (or a parent package) does not exist, else
    EXIT_FAILED: the module exists and failed while importing."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    parts = module.split(".")
    return EXIT_USAGE if missing in {".".join(parts[:i]) for i in range(1, len(parts) + 1)} else EXIT_FAILED


def _cmd_resolve(args: argparse.Namespace) -> int:
    """Show what a span-group spec resolves to after importing the given modules."""
    from lens_core.registry import SpanRegistry, describe_registered

    for module in args.imports:
        try:
            importlib.import_module(module)
        except Exception as exc:  # a user module may raise anything while importing
            return _error("resolve", f"cannot import {module!r}: {type(exc).__name__}: {exc}",
                          _import_failure(exc, module))
    spec = ",".join(args.spec + args.spec_entries)
    enabled, pending = SpanRegistry.resolve(spec)
    view = SpanRegistry.view()
    if not view.groups:
        return _error("resolve", "no span groups are registered: pass --import MODULE for each library "
                      "that declares them", EXIT_NO_DATA)
    result = {
        "spec": spec,
        "enabled": sorted(enabled),
        "pending": sorted(pending),
        "buckets": {g: SpanRegistry.bucket_of(g) for g in sorted(enabled)},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"spec: {spec}")
        print(f"enabled ({len(enabled)}): {', '.join(sorted(enabled)) or '(none)'}")
        for group in sorted(enabled):
            bucket = SpanRegistry.bucket_of(group)
            print(f"  {group:<20} {bucket or 'umbrella (no bucket)'}")
        if pending:
            print(f"unknown (pending): {', '.join(sorted(pending))}")
        print(describe_registered(view))
    if args.strict and pending:
        return _error("resolve", f"unknown span-group spec entries: {', '.join(sorted(pending))}", EXIT_FAILED)
    return EXIT_OK


def _cmd_import_budget(args: argparse.Namespace) -> int:
    """Delegate to lens_ci.importbudget."""
    from lens_ci import importbudget

    return importbudget.run(args, prog="lens import-budget")


def _cmd_bench_gate(args: argparse.Namespace) -> int:
    """Delegate to lens_ci.benchgate."""
    from lens_ci import benchgate

    return benchgate.run(args)


def _cmd_emit_spans(args: argparse.Namespace) -> int:
    """Emit spans over explicit epoch-second intervals from a JSON file (all or nothing)."""
    from lens_core.config import LensConfig

    from otel_bridge import setup_telemetry
    from otel_bridge._extras import MissingExtraError
    from otel_bridge.emit import emit_spans_from_specs

    try:
        with (sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")) as fh:
            text = fh.read()
    except OSError as exc:
        return _error("emit-spans", f"cannot read {args.file}: {exc.strerror or exc}", EXIT_USAGE)
    try:
        specs = json.loads(text)
    except ValueError as exc:
        return _error("emit-spans", f"{args.file} is not JSON: {exc}", EXIT_FAILED)
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, list):
        return _error("emit-spans", f"{args.file} must hold a span spec or a list of them, "
                      f"not a JSON {type(specs).__name__}", EXIT_FAILED)
    if not specs:
        return _error("emit-spans", f"{args.file} holds no span specs; nothing emitted", EXIT_NO_DATA)
    try:
        # emitted spans go through the tracer directly: no span groups are involved
        config = LensConfig.from_env().replace(enabled=True, metrics_enabled=False, span_groups="")
        if args.exporter:
            config = config.replace(exporter=args.exporter)
        handle = setup_telemetry(config, rank=0, world_size=1, local_rank=0)
    except ValueError as exc:  # a bad LENS_* / OTEL_* setting
        return _error("emit-spans", str(exc), EXIT_USAGE)
    except MissingExtraError as exc:
        return _error("emit-spans", str(exc), EXIT_FAILED)
    try:
        count = emit_spans_from_specs(specs, handle.tracer)
    except ValueError as exc:
        handle.shutdown()
        return _error("emit-spans", f"nothing emitted: {exc}", EXIT_FAILED)
    if not handle.shutdown():
        return _error("emit-spans", f"{count} span(s) emitted, but not all were exported", EXIT_FAILED)
    print(f"lens emit-spans: emitted {count} span(s)", file=sys.stderr)  # a note: stdout may be the spans
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from lens_cli.demo import run_demo_cli

    return run_demo_cli(args)


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: List[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the lens-telemetry version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:
        from otel_bridge.sdk.providers import lens_version

        print(f"lens {lens_version()}")
        parser.exit(EXIT_OK)


def _cmd_replay(args: argparse.Namespace) -> int:
    """Send the spans ended processes left in the disk spool to the OTLP collector."""
    import os

    try:
        from otel_bridge import exporters
        from otel_bridge.sdk.spool import SpoolError, default_spool_dir, replay
        from otel_bridge.sdk.sinks import OtlpSink, split_traces_request
    except ImportError as exc:
        return _error("replay", f"needs the OpenTelemetry SDK and OTLP exporters ({exc}); "
                      "install 'lens-telemetry[otel]'", EXIT_USAGE)
    from lens_core import _impl

    from lens_core.config import LensConfig, parse_spool_dir

    try:  # LENS_SPOOL_DIR is read where every LENS_* variable is: LensConfig.from_env
        directory = (parse_spool_dir(os.path.abspath(args.spool_dir) if args.spool_dir.strip() else "", "--spool-dir")
                     if args.spool_dir is not None
                     else LensConfig.from_env().spool_dir or default_spool_dir())
    except ValueError as exc:
        return _error("replay", str(exc), EXIT_USAGE)
    if not os.path.isdir(directory):
        return _error("replay", f"no spool directory {directory}", EXIT_NO_DATA)
    sink = None
    try:
        protocol = exporters.resolve_otlp_protocol("traces")
        sink = OtlpSink(lambda: exporters.otlp_span_exporter(protocol), _impl.recorder().encode_traces_pb)
        sink.exporter  # a bad OTEL_EXPORTER_OTLP_* setting fails here, with its own message

        def deliver(payload, spans):
            return (*sink.deliver(payload, spans), sink.last_status)

        done = replay(directory, deliver, run_id=args.run_id, drop_rejected=args.drop_rejected,
                      split=split_traces_request)
    except SpoolError as exc:
        return _error("replay", f"{exc.strerror}; nothing was sent", EXIT_USAGE)
    except ValueError as exc:
        return _error("replay", str(exc), EXIT_USAGE)
    finally:
        if sink is not None:
            try:
                sink.shutdown(0)
            except Exception:
                pass
    print(json.dumps({"delivered": done.delivered, "undelivered": done.undelivered, "dropped": done.dropped,
                      "damaged": done.damaged, "refused": len(done.refused)}))
    status = EXIT_OK
    if done.refused:
        where, why = next(iter(done.refused.items()))
        status = _error("replay", f"{len(done.refused)} spool files or directories are not this user's alone "
                        f"(e.g. {where}: {why}); their spans were not sent and they are left as they are",
                        EXIT_FAILED)
    if done.dropped:
        print(f"lens replay: {done.dropped} spooled spans the collector rejected ({done.error}) were deleted "
              "(--drop-rejected)", file=sys.stderr)
    if done.damaged:
        status = _error("replay", f"{done.damaged} spool records were damaged on disk (their checksum failed) "
                        "and could not be sent; the intact ones were", EXIT_FAILED)
    if done.undelivered:
        return _error("replay", f"{done.undelivered} spooled spans were not delivered ({done.error}); they stay "
                      f"spooled in {directory} (run `lens replay` again, or add --drop-rejected to delete "
                      "the ones the collector rejects)", EXIT_FAILED)
    if not done.delivered and not done.dropped and not done.damaged and not done.refused:
        print(f"lens replay: nothing spooled under {directory}", file=sys.stderr)
        return EXIT_NO_DATA
    return status


def build_parser() -> argparse.ArgumentParser:
    """The ``lens`` argument parser with every subcommand."""
    from lens_report.cli import OneLineParser

    # every subcommand's parser is of the same class: a bad argument is one line and status 2
    parser = OneLineParser(prog="lens", description="Lens telemetry tools")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    try:
        from lens_cli.demo import add_demo_arguments
    except ImportError:  # the demo module is optional in a trimmed install
        add_demo_arguments = None
    if add_demo_arguments is not None:
        demo = sub.add_parser("demo", help="run a small instrumented GRPO loop and report on its trace")
        add_demo_arguments(demo)
        demo.set_defaults(func=_cmd_demo)

    from lens_report.cli import build_parser as build_report_parser, build_schema_parser

    build_report_parser(sub)
    build_schema_parser(sub)

    resolve = sub.add_parser("resolve", help="show what a span-group spec enables",
                             description="Show what a span-group spec enables. Entries may be separate "
                             "arguments; a '-group' entry subtracts (lens resolve per_step -job).")
    resolve.add_argument("spec", nargs="*", metavar="SPEC",
                         help="comma list of presets and groups, e.g. per_step,-job")
    resolve.add_argument("--spec-entry", dest="spec_entries", action="append", default=[],
                         help=argparse.SUPPRESS)  # what main() turns a '-group' argument into
    resolve.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                         help="import MODULE first so its span groups are registered (repeatable)")
    resolve.add_argument("--json", action="store_true", help="print JSON")
    resolve.add_argument("--strict", action="store_true", help="exit 1 when an entry is unknown")
    resolve.set_defaults(func=_cmd_resolve)

    from lens_ci import importbudget

    budget = sub.add_parser("import-budget", help="check a module's import time and forbidden imports")
    importbudget.add_arguments(budget)
    budget.set_defaults(func=_cmd_import_budget)

    emit = sub.add_parser("emit-spans", help="emit spans over explicit intervals from a JSON file")
    emit.add_argument("file", help='JSON list of {"name", "start", "end", "attributes"?, "parent"?} or -')
    emit.add_argument("--exporter", choices=("otlp", "console", "file", "none"), help="override LENS_EXPORTER")
    emit.set_defaults(func=_cmd_emit_spans)

    replay = sub.add_parser("replay", help="send spans left in the disk spool to the OTLP collector",
                            description="Send the spans that ended processes left in the disk spool "
                            "(LENS_SPOOL_DIR) to the collector named by OTEL_EXPORTER_OTLP_*; prints "
                            "delivered/undelivered/dropped/damaged as JSON. A span leaves the spool only "
                            "when the collector took it (or with --drop-rejected).")
    replay.add_argument("--spool-dir", help="the spool directory (default: LENS_SPOOL_DIR, else <tmp>/lens-spool-<uid>)")
    replay.add_argument("--run-id", help="only this run's spool (default: every run's)")
    replay.add_argument("--drop-rejected", action="store_true",
                        help="delete spooled spans the collector rejects (HTTP 4xx) instead of keeping them")
    replay.set_defaults(func=_cmd_replay)

    from lens_ci import benchgate

    gate = sub.add_parser("bench-gate", help="ratio checks over pytest-benchmark JSON (for CI)",
                          description=benchgate.__doc__.split("\n\n")[0])
    benchgate.add_arguments(gate)
    gate.set_defaults(func=_cmd_bench_gate)
    return parser


def _spec_entries(argv: List[str]) -> List[str]:
    """argparse reads ``-job,per_step`` as an unknown option. After ``resolve``, an argument
    starting with one '-' that is not one of its options is a spec entry: pass it on as
    ``--spec-entry=...`` (``--`` still ends option parsing as usual)."""
    command = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), None)
    if command is None or argv[command] != "resolve":
        return argv
    out = argv[:command + 1]
    rest = iter(argv[command + 1:])
    for arg in rest:
        if arg == "--":
            out.append(arg)
            out.extend(rest)
            break
        out.append(arg)
        if arg == "--import":  # its value is a module name, never a spec entry
            value = next(rest, None)
            if value is not None:
                out.append(value)
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1 and arg not in _RESOLVE_OPTIONS:
            out[-1] = f"--spec-entry={arg}"
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``lens`` command for ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Ctrl-C anywhere is ``lens <command>: interrupted`` on stderr and status 130 (watched here
    for the call unless :func:`console_main` watches already); a reader that closes stdout
    early (``lens resolve --json | head -1``) ends it quietly.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = program_name(arguments)
    try:
        with interrupts_watched(command):
            return quiet_broken_pipe(lambda: _run(arguments))
    except KeyboardInterrupt:  # where no watch could start (SIGINT was ignored, then restored)
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def console_main() -> int:
    """The ``lens`` console script. It watches Ctrl-C before any command's modules import (the
    report engine, the OpenTelemetry SDK: a few hundred ms on a loaded machine), for the rest of
    the process, so a Ctrl-C in the command's exit hooks is one line and status 130 too.

    Once the command has returned, each having shut its telemetry down itself, Ctrl-C is
    ignored: what is left is the interpreter's teardown (a second after torch), during which
    Python puts SIGINT back to its default action and a Ctrl-C would kill the process without
    a word; the command's status stands instead. What no code of Lens can cover is the
    interpreter's start before this function runs (site, the console script's imports, the
    lens_cli and lens_core packages): a Ctrl-C then ends the process Python's way.
    """
    arguments = sys.argv[1:]
    watching = watch_interrupts(program_name(arguments))
    try:
        return main(arguments)
    finally:  # --help and --version end in SystemExit: their teardown too
        if watching:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(arguments: List[str]) -> int:
    args = build_parser().parse_args(_spec_entries(arguments))
    if args.command == "resolve" and not (args.spec or args.spec_entries):
        return _error("resolve", "a span-group spec is required (e.g. lens resolve per_step,-job)", EXIT_USAGE)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(console_main())
