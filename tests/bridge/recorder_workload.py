"""The workload tests/bridge/test_recorders_same_data.py runs under each recorder: every kind of
Lens span, OpenTelemetry interop both ways, scopes, redaction, exceptions, threads, links."""

import asyncio
import threading

import lens_core
from lens_core import (
    Bucket,
    IdleWait,
    LensConfig,
    SpanRegistry,
    bucket_scope,
    current_trace_carrier,
    deferred_child_span,
    efficiency_span,
    iteration_scope,
    managed_span,
    span_cm,
    trace_fn,
    umbrella_span,
)
from lens_core.efficiency import register_efficiency_categories

REMOTE = {"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", "tracestate": "vendor=1"}

SpanRegistry.register("cmp", ["job", "step", "gen", "ckpt", "efficiency"],
                      buckets={"gen": Bucket.PRODUCTIVE, "ckpt": Bucket.OVERHEAD}, umbrellas=["job", "step"])
register_efficiency_categories({"idle/wait": Bucket.IDLE, "idle/loop": None})


@trace_fn("gen", "sync.fn")
def plain(x):
    return x + 1


@trace_fn("gen", "async.fn")
async def coroutine():
    await asyncio.sleep(0)
    return 2


@trace_fn("gen", "generator.fn")
def generator():
    yield 1
    yield 2


def main():
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    from otel_bridge import setup_telemetry
    from otel_bridge.distributed import create_linked_span

    handle = setup_telemetry(LensConfig.from_env().replace(enabled=True, span_groups="all", metrics_enabled=False,
                                                           run_id="cmp"), rank=0, world_size=1, local_rank=0)
    print(type(lens_core.installed_backend()).__name__)  # the test checks which recorder ran
    raw = trace.get_tracer("raw-lib", "1.2")
    with umbrella_span("job", "job", run="r"):
        for i in (1, 2):
            with iteration_scope(i), umbrella_span("step", "step", n=i):
                with managed_span("gen", "generate", prompts=8, temperature=0.5, greedy=False, tags=["a", "b"],
                                  api_key="sk-abcdefghijklmnop", prompt="do not export me") as span:
                    span.set_attribute("late", i)
                    span.add_event("halfway", {"done": 0.5})
                    with raw.start_as_current_span("raw.child", attributes={"k": 1}):
                        with managed_span("gen", "lens.in.raw", depth=2):
                            pass
                plain(1)
                asyncio.run(coroutine())
                list(generator())
                with bucket_scope(Bucket.OVERHEAD), managed_span("gen", "validate"):
                    pass
                with efficiency_span("idle/wait"):
                    pass
                wait = IdleWait("idle/loop")
                wait.starved()
                wait.starved()
                wait.done()
                try:
                    with managed_span("ckpt", "failing"):
                        raise ValueError("boom")
                except ValueError:
                    pass
                carrier = current_trace_carrier()

                def finalize(carrier=carrier, i=i):
                    with deferred_child_span("ckpt", "finalize", carrier, iteration=i, files=3):
                        pass

                worker = threading.Thread(target=finalize, name="finalizer")
                worker.start()
                worker.join()
                with span_cm("server", context=REMOTE, route="/v1"):
                    pass
                with create_linked_span("linked", remote_carrier=carrier, stage=i):
                    pass
                manual = raw.start_span("manual")
                manual.set_attribute("x", 1)
                manual.set_status(Status(StatusCode.ERROR, "bad"))
                manual.end()
    assert handle.shutdown() is True


if __name__ == "__main__":
    main()
