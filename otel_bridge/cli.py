"""The ``lens`` command: demo, report, resolve, import-budget, emit-spans."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

__all__ = ["build_parser", "main"]


def _cmd_resolve(args) -> int:
    """Show what a span-group spec resolves to after importing the given modules."""
    from lens_core.registry import SpanRegistry, describe_registered

    for module in args.imports:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            print(f"lens resolve: cannot import {module!r}: {exc}", file=sys.stderr)
            return 2
    enabled, pending = SpanRegistry.resolve(args.spec)
    view = SpanRegistry.view()
    result = {
        "spec": args.spec,
        "enabled": sorted(enabled),
        "pending": sorted(pending),
        "buckets": {g: SpanRegistry.bucket_of(g) for g in sorted(enabled)},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"spec: {args.spec}")
        print(f"enabled ({len(enabled)}): {', '.join(sorted(enabled)) or '(none)'}")
        for group in sorted(enabled):
            bucket = SpanRegistry.bucket_of(group)
            print(f"  {group:<20} {bucket or 'umbrella (no bucket)'}")
        if pending:
            print(f"unknown (pending): {', '.join(sorted(pending))}")
        print(describe_registered(view))
    return 1 if (args.strict and pending) else 0


def _cmd_import_budget(args) -> int:
    """Delegate to lens_core.importbudget."""
    from lens_core import importbudget

    argv = [args.module, "--max-ms", str(args.max_ms), "--runs", str(args.runs)]
    for prefix in args.forbid:
        argv += ["--forbid", prefix]
    return importbudget.main(argv)


def _cmd_emit_spans(args) -> int:
    """Emit spans over explicit epoch-second intervals from a JSON file (all or nothing)."""
    from lens_core.config import LensConfig

    from . import setup_telemetry
    from .emit import emit_spans_from_specs

    try:
        with (sys.stdin if args.file == "-" else open(args.file)) as fh:
            specs = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"lens emit-spans: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    if isinstance(specs, dict):
        specs = [specs]
    # emitted spans go through the tracer directly: no span groups are involved
    config = LensConfig.from_env().replace(enabled=True, metrics_enabled=False, span_groups="")
    if args.exporter:
        config = config.replace(exporter=args.exporter)
    handle = setup_telemetry(config, rank=0, world_size=1, local_rank=0)
    try:
        count = emit_spans_from_specs(specs, handle.tracer)
    except ValueError as exc:
        print(f"lens emit-spans: nothing emitted: {exc}", file=sys.stderr)
        handle.shutdown()
        return 1
    ok = handle.shutdown()
    print(f"emitted {count} span(s)")
    return 0 if ok else 1


def _cmd_demo(args) -> int:
    from .demo import run_demo_cli

    return run_demo_cli(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``lens`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="lens", description="Lens telemetry tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    try:
        from .demo import add_demo_arguments
    except ImportError:  # the demo module is optional in a trimmed install
        add_demo_arguments = None
    if add_demo_arguments is not None:
        demo = sub.add_parser("demo", help="run a small instrumented GRPO loop and report on its trace")
        add_demo_arguments(demo)
        demo.set_defaults(func=_cmd_demo)

    from .report.cli import build_parser as build_report_parser

    build_report_parser(sub)

    resolve = sub.add_parser("resolve", help="show what a span-group spec enables")
    resolve.add_argument("spec", help="comma list of presets and groups, e.g. per_step,-job")
    resolve.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                         help="import MODULE first so its span groups are registered (repeatable)")
    resolve.add_argument("--json", action="store_true", help="print JSON")
    resolve.add_argument("--strict", action="store_true", help="exit 1 when an entry is unknown")
    resolve.set_defaults(func=_cmd_resolve)

    budget = sub.add_parser("import-budget", help="check a module's import time and forbidden imports")
    budget.add_argument("module")
    budget.add_argument("--max-ms", type=float, required=True)
    budget.add_argument("--forbid", action="append", default=[], metavar="PREFIX")
    budget.add_argument("--runs", type=int, default=7)
    budget.set_defaults(func=_cmd_import_budget)

    emit = sub.add_parser("emit-spans", help="emit spans over explicit intervals from a JSON file")
    emit.add_argument("file", help='JSON list of {"name", "start", "end", "attributes"?, "parent"?} or -')
    emit.add_argument("--exporter", choices=("otlp", "console", "file", "none"), help="override LENS_EXPORTER")
    emit.set_defaults(func=_cmd_emit_spans)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``lens`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
