"""The export thread dies (a span exporter raises SystemExit once, the way a BaseException from
anywhere would end a thread): a new one must take over, the lost batch and the restart counted.
Prints spans exported, the final loss record's attributes as JSON, and shutdown's result."""

import json

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from common import setup, span


class DiesOnce(SpanExporter):
    def __init__(self):
        self.spans, self.died = [], False

    def export(self, spans):
        if not self.died:
            self.died = True
            raise SystemExit("an exporter that ends its thread")
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


exporter = DiesOnce()
handle = setup(span_exporter=exporter)
for _ in range(1000):
    with span("g", "before"):
        pass
first = handle.force_flush(5000)  # the batch that kills the thread
for _ in range(1000):
    with span("g", "after"):
        pass
second = handle.force_flush(5000)  # a new thread exports these
ok = handle.shutdown(timeout_ms=10_000)
final = [s for s in exporter.spans if s.name == "lens.telemetry.loss" and s.attributes.get("lens.telemetry.final")]
names = [s.name for s in exporter.spans if s.name != "lens.telemetry.loss"]
print(names.count("before"), names.count("after"), json.dumps(dict(final[-1].attributes) if final else None),
      first, second, ok, flush=True)
