"""A validator of Chrome's Trace Event Format (the JSON that chrome://tracing and Perfetto's UI open).

Written from the format's definition: the JSON Object Format (``traceEvents`` plus optional
``displayTimeUnit`` and ``otherData``) or a bare array of events; every event an object with a
known phase ``ph``; timestamps ``ts`` in microseconds; complete events (``X``) with a
non-negative ``dur``; metadata events (``M``) naming a process or thread or ordering them;
``args`` an object. Complete events on one thread (pid, tid) must nest: a viewer stacks them
into one track and cannot draw two that overlap without one containing the other.
"""

from __future__ import annotations

from collections import defaultdict
from numbers import Real
from typing import Any

PHASES = frozenset("BEXiICbneSTpFsftPNODMVvRc()")
METADATA = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
            "thread_name": "name", "thread_sort_index": "sort_index"}
TIME_UNITS = ("ms", "ns")


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and value == value


def validate(data: Any) -> list[str]:
    """Every way ``data`` (parsed JSON) breaks the format; empty when it is valid."""
    errors: list[str] = []
    if isinstance(data, dict):
        events = data.get("traceEvents")
        if not isinstance(events, list):
            return ["the JSON object has no traceEvents array"]
        unit = data.get("displayTimeUnit", "ms")
        if unit not in TIME_UNITS:
            errors.append(f"displayTimeUnit {unit!r} is not one of {TIME_UNITS}")
        if "otherData" in data and not isinstance(data["otherData"], dict):
            errors.append("otherData is not an object")
    elif isinstance(data, list):
        events = data
    else:
        return ["a trace is a JSON object with traceEvents or an array of events"]
    complete: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
    for i, event in enumerate(events):
        where = f"event {i}"
        if not isinstance(event, dict):
            errors.append(f"{where} is not an object")
            continue
        ph = event.get("ph")
        if ph not in PHASES:
            errors.append(f"{where}: unknown phase {ph!r}")
            continue
        if not isinstance(event.get("name", ""), str):
            errors.append(f"{where}: name is not a string")
        if not isinstance(event.get("cat", ""), str):
            errors.append(f"{where}: cat is not a string")
        for key in ("pid", "tid"):
            if key in event and not isinstance(event[key], (int, str)):
                errors.append(f"{where}: {key} is neither an integer nor a string")
        if "args" in event and not isinstance(event["args"], dict):
            errors.append(f"{where}: args is not an object")
        if ph == "M":
            field = METADATA.get(event.get("name"))
            if field is None:
                errors.append(f"{where}: unknown metadata event {event.get('name')!r}")
            elif not isinstance(event.get("args"), dict) or field not in event["args"]:
                errors.append(f"{where}: metadata {event['name']} needs args.{field}")
            elif field == "sort_index" and not isinstance(event["args"][field], int):
                errors.append(f"{where}: {event['name']} sort_index is not an integer")
            continue
        if not _number(event.get("ts")):
            errors.append(f"{where}: ts is not a number")
            continue
        if ph == "X":
            if "pid" not in event or "tid" not in event:
                errors.append(f"{where}: a complete event needs pid and tid")
                continue
            if not _number(event.get("dur")) or event["dur"] < 0:
                errors.append(f"{where}: a complete event needs a non-negative dur")
                continue
            complete[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"], i))
    for (pid, tid), spans in complete.items():
        open_ends: list[tuple[float, int]] = []
        for start, end, i in sorted(spans, key=lambda s: (s[0], -s[1], s[2])):
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0]:
                errors.append(f"event {i} on pid {pid} tid {tid} overlaps event {open_ends[-1][1]} without nesting")
            open_ends.append((end, i))
    return errors
