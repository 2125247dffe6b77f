"""Read OTLP-JSON trace files (one ExportTraceServiceRequest per line, optionally gzipped) into spans."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import RESOURCE_KEYS, Problem, Span

__all__ = [
    "ReadResult",
    "TRACE_FILE_SUFFIXES",
    "find_trace_files",
    "read_spans",
]

TRACE_FILE_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
"""File names a directory argument is searched for (recursively)."""

_HEX = re.compile(r"[0-9a-fA-F]+")
_UINT = re.compile(r"[0-9]+")
_INT = re.compile(r"-?[0-9]+")
_SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_SPECIAL_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass(frozen=True)
class ReadResult:
    """Spans read from trace files (deduplicated by trace and span id), and what could not be read."""

    spans: tuple[Span, ...]
    problems: tuple[Problem, ...]
    files: tuple[str, ...]
    duplicate_count: int


class _BadInput(ValueError):
    """A span or resource that does not have the OTLP-JSON shape; the message says what is wrong."""


def find_trace_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[Problem]]:
    """Expand the given paths: files are kept as given, directories searched recursively for trace files.

    Returns the files in order (each once) and a problem for every path that is missing or
    a directory holding no trace file.
    """
    files: list[str] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(
                str(p) for p in path.rglob("*") if p.is_file() and p.name.endswith(TRACE_FILE_SUFFIXES)
            )
            if not found:
                problems.append(Problem(str(path), 0, f"no {', '.join(TRACE_FILE_SUFFIXES)} files found"))
            files.extend(found)
        elif path.is_file():
            files.append(str(path))
        else:
            problems.append(Problem(str(path), 0, "no such file or directory"))
    return list(dict.fromkeys(files)), problems


def read_spans(paths: Iterable[str | os.PathLike[str]]) -> ReadResult:
    """Read every span from the given files and directories.

    Input that cannot be read (a truncated line, text that is not JSON, a span missing its
    ids or carrying a wrongly typed field) becomes a :class:`Problem` naming the file and
    line, and is skipped; reading never raises for bad content. A span seen twice (same
    trace and span id) is kept once.
    """
    files, problems = find_trace_files(paths)
    spans: dict[tuple[str, str], Span] = {}
    duplicates = 0
    for file in files:
        for span in _read_file(file, problems):
            if span.key in spans:
                duplicates += 1
            else:
                spans[span.key] = span
    return ReadResult(tuple(spans.values()), tuple(problems), tuple(files), duplicates)


def _read_file(file: str, problems: list[Problem]) -> Iterator[Span]:
    line_no = 0
    try:
        with _open(file) as lines:
            for line_no, text in enumerate(lines, start=1):
                if not text.strip():
                    continue
                try:
                    request = json.loads(text)
                except json.JSONDecodeError as exc:
                    problems.append(Problem(file, line_no, f"invalid JSON: {exc.msg} at column {exc.colno}"))
                    continue
                except (ValueError, RecursionError) as exc:
                    problems.append(Problem(file, line_no, f"invalid JSON: {exc}"))
                    continue
                yield from _spans_of_request(request, file, line_no, problems)
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(Problem(file, line_no + 1, f"cannot read file: {exc}"))


def _open(file: str) -> Any:
    if file.endswith(".gz"):
        return gzip.open(file, "rt", encoding="utf-8", errors="replace")
    return open(file, encoding="utf-8", errors="replace")


def _spans_of_request(request: Any, file: str, line: int, problems: list[Problem]) -> Iterator[Span]:
    if not isinstance(request, dict):
        problems.append(Problem(file, line, f"expected a JSON object, got {type(request).__name__}"))
        return
    resource_spans = request.get("resourceSpans")
    if not isinstance(resource_spans, list):
        problems.append(Problem(file, line, "no resourceSpans list (not an OTLP trace export?)"))
        return
    for i, entry in enumerate(resource_spans):
        where = f"resourceSpans[{i}]"
        try:
            if not isinstance(entry, dict):
                raise _BadInput("is not an object")
            resource = _resource(entry.get("resource"))
            scope_spans = _list(entry.get("scopeSpans"), "scopeSpans")
        except _BadInput as exc:
            problems.append(Problem(file, line, f"{where}: {exc}"))
            continue
        for j, scope in enumerate(scope_spans):
            try:
                if not isinstance(scope, dict):
                    raise _BadInput("is not an object")
                raw_spans = _list(scope.get("spans"), "spans")
            except _BadInput as exc:
                problems.append(Problem(file, line, f"{where}.scopeSpans[{j}]: {exc}"))
                continue
            for k, raw in enumerate(raw_spans):
                try:
                    yield _span(raw, resource, file, line)
                except _BadInput as exc:
                    problems.append(Problem(file, line, f"{where}.scopeSpans[{j}].spans[{k}]: {exc}"))


def _resource(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _BadInput("resource is not an object")
    attributes = _attributes(raw.get("attributes"), "resource attributes")
    return {key: attributes[key] for key in RESOURCE_KEYS if key in attributes}


def _span(raw: Any, resource: dict[str, Any], file: str, line: int) -> Span:
    if not isinstance(raw, dict):
        raise _BadInput("span is not an object")
    if "traceId" not in raw or "spanId" not in raw:
        raise _BadInput("missing " + " and ".join(k for k in ("traceId", "spanId") if k not in raw))
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise _BadInput("name is not a string")
    return Span(
        trace_id=_decode_id(raw["traceId"], 16, "traceId"),
        span_id=_decode_id(raw["spanId"], 8, "spanId"),
        parent_span_id=_parent_id(raw.get("parentSpanId")),
        name=name,
        kind=_kind(raw.get("kind")),
        start_ns=_time(raw.get("startTimeUnixNano"), "startTimeUnixNano"),
        end_ns=_time(raw.get("endTimeUnixNano"), "endTimeUnixNano"),
        attributes=_attributes(raw.get("attributes"), "attributes"),
        resource=resource,
        error=_is_error(raw.get("status")),
        events=tuple(_event_name(event) for event in _list(raw.get("events"), "events")),
        links=tuple(_link(link) for link in _list(raw.get("links"), "links")),
        file=file,
        line=line,
    )


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadInput(f"{what} is not a list")
    return value


def _decode_id(value: Any, size: int, what: str) -> str:
    """Hex as the Collector writes it, or base64 as protobuf's JSON mapping writes bytes."""
    if not isinstance(value, str):
        raise _BadInput(f"{what} is not a string")
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise _BadInput(f"{what} {value!r} is neither {2 * size} hex digits nor base64 of {size} bytes")
    return raw.hex()


def _parent_id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    parent = _decode_id(value, 8, "parentSpanId")
    return None if parent == "0" * 16 else parent


def _time(value: Any, what: str) -> int | None:
    """Unix nanoseconds from a string or integer; missing or 0 (proto's unset) is ``None``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value or None
    if isinstance(value, str) and _UINT.fullmatch(value):
        return int(value) or None
    raise _BadInput(f"{what} must be a non-negative integer or a string of one, got {value!r}")


def _kind(value: Any) -> str:
    if value is None:
        return _SPAN_KINDS[0]
    if isinstance(value, int) and not isinstance(value, bool):
        return _SPAN_KINDS[value] if 0 <= value < len(_SPAN_KINDS) else str(value)
    if isinstance(value, str):
        return value.removeprefix("SPAN_KIND_")
    raise _BadInput(f"kind must be an integer or a name, got {value!r}")


def _is_error(status: Any) -> bool:
    if status is None:
        return False
    if not isinstance(status, dict):
        raise _BadInput("status is not an object")
    code = status.get("code", 0)
    if not isinstance(code, (int, str)) or isinstance(code, bool):
        raise _BadInput(f"status code must be an integer or a name, got {code!r}")
    return code in (2, "STATUS_CODE_ERROR")


def _event_name(event: Any) -> str:
    if not isinstance(event, dict) or not isinstance(event.get("name", ""), str):
        raise _BadInput("event is not an object with a string name")
    return event.get("name", "")


def _link(link: Any) -> tuple[str, str]:
    if not isinstance(link, dict):
        raise _BadInput("link is not an object")
    return (_decode_id(link.get("traceId"), 16, "link traceId"), _decode_id(link.get("spanId"), 8, "link spanId"))


def _attributes(items: Any, what: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for item in _list(items, what):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise _BadInput(f"{what}: entry without a string key")
        attributes[item["key"]] = _any_value(item.get("value"), item["key"])
    return attributes


def _any_value(value: Any, key: str) -> Any:
    """Decode an OTLP ``AnyValue``; an empty one (proto omits defaults) is ``None``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _BadInput(f"attribute {key!r}: value is not an object")
    if "stringValue" in value:
        return _typed(value["stringValue"], str, key)
    if "boolValue" in value:
        return _typed(value["boolValue"], bool, key)
    if "intValue" in value:
        number = value["intValue"]
        if isinstance(number, str) and _INT.fullmatch(number):
            return int(number)
        return _typed(number, int, key)
    if "doubleValue" in value:
        number = value["doubleValue"]
        if isinstance(number, str) and number in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[number]
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return float(number)
        raise _BadInput(f"attribute {key!r}: doubleValue is not a number")
    if "arrayValue" in value:
        array = value["arrayValue"]
        if not isinstance(array, dict):
            raise _BadInput(f"attribute {key!r}: arrayValue is not an object")
        return [_any_value(item, key) for item in _list(array.get("values"), f"attribute {key!r} values")]
    if "kvlistValue" in value:
        kvlist = value["kvlistValue"]
        if not isinstance(kvlist, dict):
            raise _BadInput(f"attribute {key!r}: kvlistValue is not an object")
        return _attributes(kvlist.get("values"), f"attribute {key!r} values")
    if "bytesValue" in value:
        return _typed(value["bytesValue"], str, key)
    return None


def _typed(value: Any, kind: type, key: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _BadInput(f"attribute {key!r}: expected {kind.__name__}, got {value!r}")
    return value
