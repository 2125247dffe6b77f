"""The report reads the Collector's protobuf-JSON file format exactly like this project's file exporter output."""

import dataclasses
import threading

import pytest

import lens_core
from lens_core import (
    IdleWait,
    bucket_scope,
    current_trace_carrier,
    deferred_child_span,
    efficiency_span,
    iteration_scope,
    managed_span,
    remote_trace_context,
    umbrella_span,
)
from lens_core.catalogs.rl import RLSpanGroup as G
import lens_report
from lens_report import read_spans

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")
json_format = pytest.importorskip("google.protobuf.json_format",
                                  reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


@pytest.fixture
def sdk_spans(rl):
    """Real SDK spans (ReadableSpan) of a small instrumented run through the OTel backend."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_bridge.sdk.backend import OTelBackend

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "t", "process.pid": 4242}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    lens_core.install_backend(OTelBackend(provider))
    _small_run()
    provider.shutdown()
    lens_core.uninstall_backend()
    return memory.get_finished_spans()


def _small_run():
    finalizers = []
    with umbrella_span(G.U_JOB, "rl.grpo.job"):
        carrier = current_trace_carrier()

        def collector():
            with remote_trace_context(carrier):
                with umbrella_span(G.U_ROLLOUT, "rl.grpo.generation", **{"rl.weight_version": 0}):
                    pass
                with efficiency_span("idle/generation_limit_pause"):
                    pass

        thread = threading.Thread(target=collector)
        thread.start()
        thread.join()
        for step in (1, 2, 3):
            with iteration_scope(step), umbrella_span(G.U_STEP, "rl.grpo.step"):
                wait = IdleWait("idle/buffer_starvation")
                for _ in range(step):
                    wait.starved()
                wait.done()
                with managed_span(G.DATA_PROCESSING, "rl.grpo.data_processing"):
                    pass
                with umbrella_span(G.U_ROLLOUT, "rl.grpo.generation"), managed_span(G.GENERATION, "rl.vllm.generate"):
                    pass
                with managed_span(G.POLICY_UPDATE, "rl.grpo.policy_training"):
                    pass
                with umbrella_span(G.U_EVALUATE, "rl.grpo.evaluate", **{"rl.iteration": step}):
                    with bucket_scope("overhead"), managed_span(G.GENERATION, "rl.vllm.generate"):
                        pass
                if step == 1:
                    with managed_span(G.CHECKPOINT, "rl.grpo.checkpointing"):
                        fin_carrier = current_trace_carrier()

                    def finalize():
                        try:
                            with deferred_child_span(G.CHECKPOINT, "rl.checkpoint.finalize", fin_carrier,
                                                     iteration=1):
                                raise OSError("disk full")
                        except OSError:
                            pass

                    finalizers.append(threading.Thread(target=finalize))
                    finalizers[-1].start()
        for thread in finalizers:
            thread.join()


def _write_collector_format(spans, path, batches=3):
    """One ``MessageToJson(ExportTraceServiceRequest)`` per line: base64 ids, enum names."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    lines = [json_format.MessageToJson(encode_spans(spans[i::batches]), indent=None) for i in range(batches)]
    assert all("\n" not in line for line in lines)
    path.write_text("\n".join(lines) + "\n")


def _write_file_exporter_format(spans, directory):
    from otel_bridge.exporters import FileSpanExporter

    exporter = FileSpanExporter(directory, "run", rank=0)
    exporter.export(list(spans[: len(spans) // 2]))
    exporter.export(list(spans[len(spans) // 2:]))
    exporter.shutdown()
    return exporter.path


def _without_location(read):
    return {span.key: dataclasses.replace(span, file="", line=0) for span in read.spans}


def _rollup(report):
    data = report.to_json()
    data.pop("files")
    for violation in data["violations"]:
        violation.pop("file"), violation.pop("line")
    return data


@pytest.mark.slow  # ~27 s on a loaded 2-core machine
def test_collector_json_and_file_exporter_output_give_the_same_spans_and_rollup(sdk_spans, tmp_path):
    collector_file = tmp_path / "collector.jsonl"
    _write_collector_format(sdk_spans, collector_file)
    ours = _write_file_exporter_format(sdk_spans, tmp_path / "lens")
    assert "STATUS_CODE_ERROR" in collector_file.read_text()  # the canonical mapping, not OTLP/JSON

    from_collector, from_ours = read_spans([collector_file]), read_spans([ours])
    assert from_collector.problems == () and from_ours.problems == ()
    assert len(from_collector.spans) == len(sdk_spans)
    assert _without_location(from_collector) == _without_location(from_ours)

    collector_report, our_report = lens_report.report(collector_file), lens_report.report(ours)
    assert _rollup(collector_report) == _rollup(our_report)
    assert [step.iteration for step in our_report.steps] == [1, 2, 3]
    assert our_report.run.bucket_ns["productive"] > 0 and our_report.run.bucket_ns["idle"] > 0
    assert our_report.error_count == 1 and our_report.violations == ()


def test_ids_parents_times_and_attributes_survive_the_collector_format(sdk_spans, tmp_path):
    path = tmp_path / "collector.jsonl"
    _write_collector_format(sdk_spans, path)
    read = {span.span_id: span for span in read_spans([path]).spans}
    for original in sdk_spans:
        span = read[f"{original.context.span_id:016x}"]
        assert span.trace_id == f"{original.context.trace_id:032x}"
        assert span.parent_span_id == (f"{original.parent.span_id:016x}" if original.parent else None)
        assert (span.start_ns, span.end_ns) == (original.start_time, original.end_time)
        assert span.attributes == dict(original.attributes)
        assert span.resource["process.pid"] == 4242
