"""One trace across torchrun ranks: rank 0 opens the root span, the others join it.

Run on CPU with gloo (any number of processes)::

    LENS_ENABLED=1 LENS_SPAN_GROUPS=per_step LENS_RUN_ID=first-job \\
        torchrun --standalone --nproc-per-node 2 examples/torchrun_trace.py
    lens report ./lens-traces/first-job

Only rank 0 opens ``example.job``; ``broadcast_trace_context`` (a collective every rank
calls) hands its context to the others, which open their steps inside
``remote_trace_context``: every rank's ``example.step`` is a child of rank 0's job span, so
the whole job is one waterfall. ``iteration_scope`` stamps the step number on every span of
a step.
"""

import os

import torch
import torch.distributed as dist

from lens_core import (
    Bucket,
    LensConfig,
    SpanRegistry,
    iteration_scope,
    managed_span,
    remote_trace_context,
    umbrella_span,
)
from otel_bridge import setup_telemetry
from otel_bridge.distributed import broadcast_trace_context

# At import time, as a library would: the groups this program emits.
SpanRegistry.register(
    "example",
    ["job", "step", "compute", "sync"],
    presets={"default": ["job", "step"], "per_step": ["job", "step", "compute", "sync"]},
    buckets={"compute": Bucket.PRODUCTIVE, "sync": Bucket.OVERHEAD},
    umbrellas=["job", "step"],
)

STEPS = int(os.environ.get("EXAMPLE_STEPS", "3"))


def train(model, optimizer, steps):
    """A data-parallel loop: forward/backward, then all-reduce the gradients."""
    world_size = dist.get_world_size()
    for step in range(1, steps + 1):
        with iteration_scope(step), umbrella_span("step", "example.step"):
            with managed_span("compute", "example.forward_backward"):
                batch = torch.randn(32, 16)
                loss = model(batch).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
            with managed_span("sync", "example.all_reduce"):
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                    param.grad /= world_size
            with managed_span("compute", "example.optimizer_step"):
                optimizer.step()


def main():
    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    handle = setup_telemetry(LensConfig.from_env())  # rank and world size from RANK / WORLD_SIZE
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if dist.get_rank() == 0:
        with umbrella_span("job", "example.job", world_size=dist.get_world_size()):
            broadcast_trace_context(src_rank=0)  # sends the job span's context
            train(model, optimizer, STEPS)
    else:
        carrier = broadcast_trace_context(src_rank=0)
        with remote_trace_context(carrier):  # spans opened in here join rank 0's trace
            train(model, optimizer, STEPS)
    dist.barrier()
    dist.destroy_process_group()
    handle.shutdown()


if __name__ == "__main__":
    main()
