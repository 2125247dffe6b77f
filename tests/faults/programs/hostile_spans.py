"""Hostile span content, the same under each recorder (LENS_RECORDER): 100,004 attributes on one
span, 300 attributes at the start, 300 events of 200 attributes, 300 links, keys set again near
the limit, long and unicode values, secrets in names. Writes files; prints {"shutdown": ...}."""

import json

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from common import setup, span

handle = setup()
long_text = "é" * 5000 + "x" * 5000


def api():
    return trace.get_current_span()


with span("g", "many.attributes") as s:
    current = api()
    for i in range(100_000):
        current.set_attribute(f"k{i}", i)
    current.set_attribute("k99990", "set again: now the newest")
    current.set_attributes({"long": long_text, "seq": (long_text, "short"), "n": 1})

with span("g", "wide.start", **{f"a{i:03d}": i for i in range(300)}):
    pass

with span("g", "many.events") as s:
    current = api()
    for i in range(300):
        current.add_event(f"event {i}", {f"e{j}": j for j in range(200)})
    current.add_event("last", {"text": long_text})

with span("g", "source") as source:
    context = api().get_span_context()
with span("g", "many.links") as s:
    current = api()
    for i in range(300):
        current.add_link(context, {f"l{j}": j for j in range(150)})

with span("g", "near.limit", **{f"b{i:03d}": i for i in range(120)}) as s:
    current = api()
    current.set_attribute("b000", "again")  # the oldest, set again: now the newest
    for i in range(20):
        current.set_attribute(f"c{i}", i)
    current.update_name("renamed with sk-proj-4fJk2mQ9xZ7pL1vB8nR3tY6wE0aS5dG inside")
    current.set_status(Status(StatusCode.ERROR, "failed at https://alice:hunter2@db.example.com/x"))

print(json.dumps({"shutdown": handle.shutdown()}))
