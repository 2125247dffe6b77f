"""A with-block entered on the main thread and exited on another, under LENS_RECORDER; prints JSON:
whether the span ended, the next span's parent, the current span after, and the warnings."""

import json
import threading
import warnings

from opentelemetry import trace

from common import setup, span

handle = setup(exporter="none")
seen = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with span("g", "outer") as outer:
        outer_id = trace.get_current_span().get_span_context().span_id
        for i in range(3):  # three times: warned once
            cm = span("g", "handed.off")
            inner = cm.__enter__()
            worker = threading.Thread(target=cm.__exit__, args=(None, None, None))
            worker.start()
            worker.join()
        seen["inner_ended"] = not inner.is_recording()
        with span("g", "next"):
            parent = trace.get_current_span().parent
            seen["next_parent_is_outer"] = parent is not None and parent.span_id == outer_id
        seen["current_is_outer_after"] = trace.get_current_span().get_span_context().span_id == outer_id
    seen["current_after_outer_valid"] = trace.get_current_span().get_span_context().is_valid
seen["warnings"] = [str(w.message) for w in caught if "exited on a thread" in str(w.message)]
seen["shutdown"] = handle.shutdown()
print(json.dumps(seen))
