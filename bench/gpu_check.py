"""Device timing on a real GPU, measured: goodput host-only vs device-timed against CUDA-event truth,
the per-span cost on the application thread, and the step time over telemetry off.

    python bench/gpu_check.py [--width 8192] [--layers 8] [--batch 8192] [--steps 30]

The workload is the issue's (38): bf16 Linear layers; per step a data copy and a logging call
(``loss.item()``) as overhead leaves, forward, backward and the optimizer step as productive leaves,
under a ``step`` umbrella. Three runs in one process: telemetry off, per_step host-only
(LENS_DEVICE_TIMING=off), per_step device-timed. CUDA events recorded on the same boundaries as the
spans give the truth: the share of each step the GPU spent in forward, backward and the optimizer.
Needs CUDA; prints one table (nothing is written outside a temporary directory).
"""

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lens_core  # noqa: E402
from lens_core import Bucket, LensConfig, SpanRegistry, device_clock, iteration_scope, managed_span  # noqa: E402
from lens_core import semconv, umbrella_span  # noqa: E402

PRODUCTIVE = ("train.forward", "train.backward", "train.optimizer")
LEAVES = ("train.data",) + PRODUCTIVE + ("train.log",)

SpanRegistry.register("gpucheck", ["step", "data", "forward", "backward", "optimizer", "log"],
                      presets={"per_step": ["step", "data", "forward", "backward", "optimizer", "log"]},
                      buckets={"data": Bucket.OVERHEAD, "forward": Bucket.PRODUCTIVE, "backward": Bucket.PRODUCTIVE,
                               "optimizer": Bucket.PRODUCTIVE, "log": Bucket.OVERHEAD},
                      umbrellas=["step"], device_timed=["data", "forward", "backward", "optimizer"])


def _workload(args):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(args.width, args.width, bias=False) for _ in range(args.layers)]
    model = torch.nn.Sequential(*layers).to("cuda", torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    host_batch = torch.randn(args.batch, args.width, dtype=torch.bfloat16).pin_memory()
    return model, optimizer, host_batch


def _run(args, model, optimizer, host_batch, truth):
    """args.steps steps; returns each step's wall (s, synchronised by the logging call)."""
    walls = []
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    for step in range(1, args.steps + 1):
        marks = {name: (ev(), ev()) for name in LEAVES}
        step_marks = (ev(), ev())
        started = time.perf_counter()
        with iteration_scope(step), umbrella_span("step", "train.step"):
            step_marks[0].record()
            with managed_span("data", "train.data"):
                marks["train.data"][0].record()
                batch = host_batch.to("cuda", non_blocking=True)
                marks["train.data"][1].record()
            with managed_span("forward", "train.forward"):
                marks["train.forward"][0].record()
                loss = model(batch).float().square().mean()
                marks["train.forward"][1].record()
            with managed_span("backward", "train.backward"):
                marks["train.backward"][0].record()
                loss.backward()
                marks["train.backward"][1].record()
            with managed_span("optimizer", "train.optimizer"):
                marks["train.optimizer"][0].record()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                marks["train.optimizer"][1].record()
            with managed_span("log", "train.log"):
                marks["train.log"][0].record()
                loss.item()
                marks["train.log"][1].record()
            step_marks[1].record()
        walls.append(time.perf_counter() - started)
        truth.append((step_marks, marks))
    torch.cuda.synchronize()
    return walls


def _truth_goodput(truth, skip):
    shares = []
    for step_marks, marks in truth[skip:]:
        step_ms = step_marks[0].elapsed_time(step_marks[1])
        productive = sum(marks[n][0].elapsed_time(marks[n][1]) for n in PRODUCTIVE)
        shares.append(productive / step_ms)
    return statistics.median(shares)


def _spans(directory):
    spans = []
    for path in glob.glob(os.path.join(directory, "**", "traces-*.jsonl"), recursive=True):
        with open(path) as f:
            for line in f:
                for rs in json.loads(line).get("resourceSpans", ()):
                    for ss in rs.get("scopeSpans", ()):
                        for s in ss.get("spans", ()):
                            attrs = {}
                            for kv in s.get("attributes", ()):
                                value = kv["value"]
                                attrs[kv["key"]] = next(iter(value.values())) if value else None
                            for key in (semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME):
                                if key in attrs:
                                    attrs[key] = int(attrs[key])
                            spans.append((s["name"], int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]), attrs))
    return spans


def _goodput_from_spans(spans, skip, device):
    """Median per-step goodput: productive seconds / the step's wall, host-only or by the device rule."""
    by_step = {}
    for name, start, end, attrs in spans:
        iteration = attrs.get(semconv.RL_ITERATION)
        if iteration is not None:
            by_step.setdefault(int(iteration), []).append((name, start, end, attrs))
    shares, timed, leaves = [], 0, 0
    for iteration in sorted(by_step)[skip:]:
        spans_of = by_step[iteration]
        step = [s for s in spans_of if s[0] == "train.step"]
        if not step:
            continue
        wall = step[0][2] - step[0][1]
        busy = device_clock.DeviceBusy()
        productive = 0
        for name, start, end, attrs in sorted(spans_of, key=lambda s: s[2]):
            if name not in LEAVES:
                continue
            leaves += 1
            slot = 0 if name in PRODUCTIVE else 1
            if device:
                timed += device_clock.device_interval(attrs) is not None
                counted = busy.counted(attrs, start, end, slot)
            else:
                counted = end - start
            if slot == 0:
                productive += counted
        shares.append(productive / wall)
    return statistics.median(shares), timed, leaves


def _per_span_cost():
    """Application-thread CPU per span: device-timed against host-only (µs, median ratio)."""
    span = lens_core.managed_span

    def loop(group):
        started = time.thread_time()
        for _ in range(1000):
            with span(group, "name", a=1):
                pass
        return (time.thread_time() - started) * 1e3

    loop("forward")
    pairs = [(loop("forward"), loop("log")) for _ in range(30)]
    torch.cuda.synchronize()
    return (min(d for d, _ in pairs), min(h for _, h in pairs), statistics.median(d / h for d, h in pairs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=5, help="warm-up steps left out of the figures")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_check: needs CUDA (torch.cuda.is_available() is False)")
    from otel_bridge import setup_telemetry

    model, optimizer, host_batch = _workload(args)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, timing in (("off", None), ("host-only", "off"), ("device-timed", "on"), ("off again", None)):
            handle = None
            if timing is not None:
                handle = setup_telemetry(LensConfig(enabled=True, exporter="file", file_dir=tmp, run_id=label,
                                                    span_groups="per_step", metrics_enabled=False,
                                                    device_timing=timing), _allow_reinit=True)
            truth = []
            walls = _run(args, model, optimizer, host_batch, truth)
            cost = _per_span_cost() if timing == "on" else None
            if handle is not None:
                assert handle.shutdown() is True
            results[label] = (statistics.median(walls[args.skip:]), _truth_goodput(truth, args.skip), cost)
            if timing is not None:
                results[label] += (_goodput_from_spans(_spans(os.path.join(tmp, label)), args.skip, timing == "on"),)
    off = (results["off"][0] + results["off again"][0]) / 2
    print(f"workload: {args.layers} x bf16 Linear({args.width}, {args.width}), batch {args.batch}, "
          f"{args.steps} steps (first {args.skip} left out); {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'run':<14}{'step (ms)':>11}{'vs off':>9}{'truth goodput':>15}{'Lens goodput':>14}{'timed leaves':>14}")
    for label in ("off", "host-only", "device-timed", "off again"):
        wall, truth_goodput, cost, *lens = results[label]
        over = f"{(wall / off - 1) * 100:+.2f}%"
        lens_text, timed_text = ("-", "-")
        if lens:
            goodput, timed, leaves = lens[0]
            lens_text = f"{goodput * 100:.1f}%"
            timed_text = f"{timed} of {leaves}" if label == "device-timed" else "-"
        print(f"{label:<14}{wall * 1e3:>11.2f}{over:>9}{truth_goodput * 100:>14.1f}%{lens_text:>14}{timed_text:>14}")
    device_us, host_us, ratio = results["device-timed"][2]
    print(f"per span on the application thread: device-timed {device_us:.2f} µs, host-only {host_us:.2f} µs, "
          f"median ratio {ratio:.2f} (issue 38: <= 2)")


if __name__ == "__main__":
    main()
