"""``lens demo``: a small instrumented GRPO loop on CPU, then the goodput report on its own trace.

Importing this package is cheap (torch and the OTel SDK load when the demo runs), so the
``lens`` command can offer the subcommand without paying for it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from otel_bridge._extras import install_command
from lens_core.exitcodes import EXIT_FAILED, EXIT_NO_DATA, EXIT_OK
from lens_report.cli import non_negative_int as _count

__all__ = ["DemoResult", "add_demo_arguments", "run_demo", "run_demo_cli"]


@dataclass
class DemoResult:
    """What a demo run produced: exit status, files, the report over them, run statistics."""

    exit_code: int
    out_dir: Path
    run_id: str
    exporter: str
    seconds: float
    trace_files: tuple = ()
    html_path: Path | None = None
    report: object = None  # lens_report.Report, when the trace was written to files
    spans: tuple = ()  # the spans the report read
    stats: object = None  # _loop.RunStats
    options: object = None  # _loop.DemoOptions
    messages: list = field(default_factory=list)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` options to ``parser``."""
    parser.add_argument("--steps", type=_positive, default=6, help="training steps (default 6)")
    parser.add_argument("--async", dest="async_mode", action="store_true",
                        help="async GRPO: a collector thread generates batches into a replay buffer")
    parser.add_argument("--span-groups", default=None, metavar="SPEC",
                        help="span-group spec (default: LENS_SPAN_GROUPS, else per_step; e.g. default, all, "
                             "per_step,-job)")
    parser.add_argument("--out", default="./lens-demo", metavar="DIR",
                        help="output directory for traces, checkpoints and report.html (default ./lens-demo)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--val-every", type=_count, default=3, metavar="N",
                        help="validate every N steps, 0 = never (default 3)")
    parser.add_argument("--checkpoint-every", type=_count, default=2, metavar="N",
                        help="checkpoint every N steps, 0 = never (default 2)")


def run_demo_cli(args: argparse.Namespace) -> int:
    """Run the demo for parsed ``lens demo`` arguments; prints progress and the report."""
    try:
        result = run_demo(steps=args.steps, async_mode=args.async_mode, span_groups=args.span_groups,
                          out=args.out, seed=args.seed, val_every=args.val_every,
                          checkpoint_every=args.checkpoint_every, stream=sys.stdout)
    except ImportError as exc:
        print(f"lens demo: needs torch and the OpenTelemetry SDK ({exc}); install them with "
              f"{install_command('torch', 'otel')}", file=sys.stderr)
        return EXIT_FAILED
    return result.exit_code


def _exporter_choice(environ) -> str:
    """``file`` unless LENS_EXPORTER names another exporter."""
    raw = environ.get("LENS_EXPORTER", "").strip().lower()
    return raw or "file"


def run_demo(*, steps: int = 6, async_mode: bool = False, span_groups: str | None = None,
             out: str | os.PathLike[str] = "./lens-demo", seed: int = 0, val_every: int = 3,
             checkpoint_every: int = 2, stream=None) -> DemoResult:
    """Set up telemetry, run the instrumented loop, shut telemetry down, report on the trace.

    Traces go to ``<out>/<run_id>/traces-*.jsonl`` (the file exporter) unless
    ``LENS_EXPORTER`` names another exporter, checkpoints to ``<out>/checkpoints``, the
    waterfall to ``<out>/report.html``. ``span_groups`` None: ``LENS_SPAN_GROUPS`` when set,
    else ``per_step``. The exit code is 0 when the report over the demo's own trace finds
    no invariant violation and no unreadable input.
    """
    import torch
    import torch._dynamo  # noqa: F401  the first optimizer imports it (~1 s); not model-build time

    import lens_core.catalogs.rl as rl_catalog
    from lens_core import semconv
    from lens_core.config import LensConfig

    from otel_bridge.handle import setup_telemetry
    from lens_cli.demo import _loop

    say = (lambda text: print(text, file=stream, flush=True)) if stream is not None else (lambda text: None)
    out_dir = Path(out)
    rl_catalog.register()  # idempotent; a registry cleared since import gets the catalog back
    config = LensConfig.from_env()
    if span_groups is None:  # the environment's spec (parsed by from_env), else the demo's own
        span_groups = config.span_groups if os.environ.get("LENS_SPAN_GROUPS", "").strip() else "per_step"
    config = config.replace(enabled=True, span_groups=span_groups, exporter=_exporter_choice(os.environ),
                            file_dir=str(out_dir))
    opts = _loop.DemoOptions(steps=steps, async_mode=async_mode, seed=seed, val_every=val_every,
                             checkpoint_every=checkpoint_every, checkpoint_dir=out_dir / "checkpoints")
    stats = _loop.RunStats()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: intra-op threads only contend with the collector's
    started = time.perf_counter()
    handle = setup_telemetry(config, rank=0, world_size=1, local_rank=0,
                             resource_attributes={semconv.RL_ALGORITHM: "grpo", semconv.RL_MODEL: "toy-mlp"})
    mode = "async" if async_mode else "sync"
    say(f"lens demo: {steps} GRPO steps ({mode}), span groups {span_groups!r}, run {handle.run_id}")
    try:
        workers = _loop.startup(opts)
        _loop.run_training(opts, workers, stats)
    finally:
        exported = handle.shutdown()
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    for row in stats.steps:
        say(f"  step {row['step']}: reward {row['reward']:.3f}  loss {row['loss']:+.4f}  "
            f"kl {row['kl']:.4f}  {row['seconds']:.3f} s")
    for step, score in stats.validations:
        say(f"  validation after step {step}: reward {score:.3f}")
    if async_mode:
        polls = ", ".join(map(str, stats.starved_polls)) or "none"
        say(f"  buffer starvation: {stats.starved_waits} wait(s), polls per wait: {polls}")
    say(f"lens demo: trained in {seconds:.2f} s" + ("" if exported else " (some spans were not exported)"))
    result = DemoResult(EXIT_OK, out_dir, handle.run_id, config.exporter, seconds, stats=stats, options=opts)
    if config.exporter != "file":
        say(f"lens demo: spans went to the {config.exporter!r} exporter (LENS_EXPORTER); "
            "no local files to report on")
        say(f"checkpoints: {opts.checkpoint_dir}")
        return result
    return _report(result, config, opts, say)


def _report(result: DemoResult, config, opts, say) -> DemoResult:
    from lens_report import TraceStore, build_report, render_html, render_text

    run_dir = result.out_dir / result.run_id
    result.trace_files = tuple(sorted(run_dir.glob("traces-*.jsonl")))
    if not result.trace_files:
        say(f"lens demo: no trace file was written under {run_dir} (span groups {config.span_groups!r})")
        result.exit_code = EXIT_NO_DATA
        return result
    with TraceStore(detail=True) as store:  # a small trace: keep every attribute for result.spans
        store.load_files([str(path) for path in result.trace_files])
        report = build_report(store)
        result.html_path = result.out_dir / "report.html"
        result.html_path.write_text(render_html(report, store), encoding="utf-8")
        result.report, result.spans = report, tuple(store.spans())
    say("")
    say(render_text(report).rstrip("\n"))
    say("")
    say("files:")
    for path in result.trace_files:
        say(f"  trace          {path}")
    for path in sorted(run_dir.glob("*.jsonl")):
        if path not in result.trace_files:
            say(f"  {path.name.split('-')[0]:<14} {path}")
    for path in result.stats.checkpoints:
        say(f"  checkpoint     {path}")
    say(f"  HTML waterfall {result.html_path}")
    if report.violations or report.problems:
        say(f"lens demo: the demo's own trace breaks the goodput invariants "
            f"({len(report.violations)} violations, {len(report.problems)} problems)")
        result.exit_code = EXIT_FAILED
    return result
