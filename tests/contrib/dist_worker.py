"""One torch.distributed (gloo) rank for test_distributed: sets up file telemetry, broadcasts, prints JSON."""

import json
import os
import sys

import torch.distributed as dist

import lens_core
from lens_core.config import LensConfig
from otel_bridge import setup_telemetry
from otel_bridge.distributed import broadcast_trace_context, create_linked_span


def main(scenario, rank, world_size, port, file_dir, run_id):
    config = LensConfig(enabled=True, exporter="file", file_dir=file_dir, run_id=run_id,
                        metrics_enabled=False, span_groups="all")
    handle = setup_telemetry(config, rank=rank, world_size=world_size, local_rank=rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    out = {"rank": rank}
    if rank == 0:
        with lens_core.span_cm("rank0.root") as root:
            out["root_span_id"] = format(root.get_span_context().span_id, "016x")
            out["root_trace_id"] = format(root.get_span_context().trace_id, "032x")
            carrier = broadcast_trace_context()
    else:
        carrier = broadcast_trace_context()
    out["carrier"] = carrier
    with lens_core.remote_trace_context(carrier):
        with lens_core.span_cm(f"rank{rank}.work", rank_index=rank):
            pass

    if scenario == "extras":
        # Oversized and malformed carriers reach every rank as {}.
        huge = {"traceparent": carrier["traceparent"], "tracestate": "k=" + "v" * 5000}
        out["oversized"] = broadcast_trace_context(carrier=huge if rank == 0 else None)
        out["malformed"] = broadcast_trace_context(carrier={"traceparent": "nope"} if rank == 0 else None)
        # A non-zero source.
        with lens_core.span_cm(f"rank{rank}.source") as span:
            out["from_last"] = broadcast_trace_context(src_rank=world_size - 1)
            out["own_carrier"] = lens_core.current_trace_carrier()
        # A pipeline stage links to the previous stage instead of joining its trace.
        lens_core.set_pp_trace_carrier(carrier)
        with create_linked_span(f"rank{rank}.stage", remote_carrier=carrier, stage=rank) as span:
            out["linked_span_id"] = format(span.get_span_context().span_id, "016x")
        with create_linked_span(f"rank{rank}.pp_stage"):
            pass

    dist.barrier()
    dist.destroy_process_group()
    out["shutdown_ok"] = handle.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    scenario, rank, world_size, port, file_dir, run_id = sys.argv[1:]
    os.environ.pop("RANK", None)
    main(scenario, int(rank), int(world_size), int(port), file_dir, run_id)
