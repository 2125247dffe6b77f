"""One side of the end-to-end pipeline benchmark, in a fresh process: N spans from a tight loop,
created and delivered, then print what it cost as one JSON line.

    python bench/pipeline_run.py SIDE SINK N OUT
    SIDE: native | native-nospool (LENS_SPOOL_MB=0) | native-python | sdk-recorder | otel-sdk
    SINK: otlp-http ENDPOINT (OUT is the endpoint) | file (OUT is a directory)

``otel-sdk`` is the OpenTelemetry SDK as its own setup builds it: a TracerProvider with a
BatchSpanProcessor (queue large enough to deliver every span) over the SDK's OTLP/HTTP
exporter, or over its ConsoleSpanExporter with the compact formatter writing to a file.
The Lens sides use ``setup_telemetry`` with default settings. CPU is the process's own
(user + system, every thread), from before the first span until the last one is delivered
(shutdown returned); the receiver runs in another process.
"""

import json
import os
import resource
import sys
import time

ATTRS = {"a": 1, "b": "x", "c": 2.5}


def _rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _lens(side, sink, n, out):
    if side == "native-python":
        os.environ["LENS_PURE_PYTHON"] = "1"
    import lens_core
    from lens_core import LensConfig, SpanRegistry
    from otel_bridge import setup_telemetry

    SpanRegistry.register("bench", ["g"])
    if sink == "otlp-http":
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = out
        os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
        exporter = "otlp"
    else:
        exporter = "file"
    config = LensConfig(enabled=True, span_groups="g", exporter=exporter, file_dir=out, run_id="bench",
                        metrics_enabled=False, recorder="sdk" if side == "sdk-recorder" else "native",
                        spool_mb=0 if side == "native-nospool" else 256,
                        spool_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), f"lens-bench-spool-{os.getpid()}"))
    handle = setup_telemetry(config, rank=0, world_size=1, local_rank=0)
    span = lens_core.managed_span
    base_rss = _rss_mb()
    cpu0, wall0, thread0 = time.process_time(), time.perf_counter(), time.thread_time()
    for _ in range(n):
        with span("g", "work", a=1, b="x", c=2.5):
            pass
    app_cpu = time.process_time() - cpu0
    app_thread_cpu, loop_wall = time.thread_time() - thread0, time.perf_counter() - wall0
    ok = handle.shutdown(timeout_ms=120_000)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    counts = handle.pipeline.counts()
    return {"cpu_s": cpu, "wall_s": wall, "app_cpu_s": app_cpu, "app_thread_cpu_s": app_thread_cpu,
            "loop_wall_s": loop_wall, "created": counts.created,
            "exported": counts.exported, "dropped": counts.dropped, "failed": counts.failed, "ok": ok,
            "impl": lens_core.IMPLEMENTATION, "base_rss_mb": base_rss}


def _otel_sdk(sink, n, out):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    fh = None
    if sink == "otlp-http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=out)
    else:
        os.makedirs(out, exist_ok=True)
        fh = open(os.path.join(out, "sdk-console.jsonl"), "w")
        exporter = ConsoleSpanExporter(out=fh, formatter=lambda s: s.to_json(indent=None) + os.linesep)
    provider = TracerProvider()
    # a queue as large as the run: the SDK must deliver every span too, or it would do less work
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=n + 1))
    tracer = provider.get_tracer("bench")
    attrs = {"rl.bucket": "overhead", **ATTRS}
    base_rss = _rss_mb()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        with tracer.start_as_current_span("work", attributes=attrs):
            pass
    app_cpu = time.process_time() - cpu0
    provider.shutdown()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if fh is not None:
        fh.close()
    return {"cpu_s": cpu, "wall_s": wall, "app_cpu_s": app_cpu, "created": n, "base_rss_mb": base_rss}


def main(argv):
    side, sink, n, out = argv[0], argv[1], int(argv[2]), argv[3]
    if side == "otel-sdk":
        result = _otel_sdk(sink, n, out)
    else:
        result = _lens(side, sink, n, out)
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["extra_rss_mb"] = result["max_rss_mb"] - result["base_rss_mb"]
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
