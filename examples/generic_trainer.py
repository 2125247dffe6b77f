"""A plain training loop (no RL) instrumented with Lens: steps the goodput report finds.

Run it and report on it::

    LENS_ENABLED=1 LENS_SPAN_GROUPS=per_step LENS_RUN_ID=trainer python examples/generic_trainer.py
    lens report ./lens-traces/trainer

A step is an umbrella span whose name ends in ``step`` (``train.step``), opened inside
``iteration_scope(n)``: the scope stamps the step number (the ``rl.iteration`` attribute,
``lens_core.semconv.RL_ITERATION``) on the step and on every span inside it, and the
report groups the step's buckets by it. The leaves carry goodput buckets: forward,
backward and the optimizer step are productive, loading data and checkpoints overhead.

On a GPU (``--device cuda``) forward, backward and the optimizer step are device-timed
(``device_timed=`` below): CUDA runs them after their host spans end, so each also carries when
the GPU reached its start and end (``lens.device.*``), and goodput counts the GPU's time.
``LENS_DEVICE_TIMING=auto`` (the default) turns that on once the process has initialised CUDA;
docs/guide/gpu-timing.md says more. On the CPU (the default) it runs as before.
"""

import argparse
import os
import tempfile
import time

import torch

from lens_core import Bucket, LensConfig, SpanRegistry, iteration_scope, managed_span, trace_fn, umbrella_span
from otel_bridge import setup_telemetry
from otel_bridge.instruments import TRAINING, record_metrics

SpanRegistry.register(
    "trainer",
    ["step", "data", "forward", "backward", "optimizer", "checkpoint"],
    presets={"default": ["step", "checkpoint"],
             "per_step": ["step", "data", "forward", "backward", "optimizer", "checkpoint"]},
    buckets={"data": Bucket.OVERHEAD, "forward": Bucket.PRODUCTIVE, "backward": Bucket.PRODUCTIVE,
             "optimizer": Bucket.PRODUCTIVE, "checkpoint": Bucket.OVERHEAD},
    umbrellas=["step"],
    device_timed=["forward", "backward", "optimizer"],
)

STEPS = int(os.environ.get("EXAMPLE_STEPS", "4"))


@trace_fn("data", "train.load_batch")
def load_batch(device):
    return torch.randn(64, 32, device=device), torch.randn(64, 1, device=device)


@trace_fn("checkpoint", "train.checkpoint")
def save_checkpoint(model, directory, step):
    torch.save(model.state_dict(), os.path.join(directory, f"step{step}.pt"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, or cuda:N")
    device = torch.device(parser.parse_args(argv).device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {device}: CUDA is not available here (torch {torch.__version__})")
    handle = setup_telemetry(LensConfig.from_env())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tempfile.TemporaryDirectory() as checkpoints:
        for step in range(1, STEPS + 1):
            started = time.perf_counter()
            with iteration_scope(step), umbrella_span("step", "train.step"):
                inputs, targets = load_batch(device)
                with managed_span("forward", "train.forward"):
                    loss = torch.nn.functional.mse_loss(model(inputs), targets)
                with managed_span("backward", "train.backward"):
                    optimizer.zero_grad()
                    loss.backward()
                with managed_span("optimizer", "train.optimizer_step"):
                    optimizer.step()
                if step % 2 == 0:
                    save_checkpoint(model, checkpoints, step)
            record_metrics(handle.meter, TRAINING, step_duration=time.perf_counter() - started, loss=loss.item())
    handle.shutdown()


if __name__ == "__main__":
    main()
