"""OTLP/JSON encoding of OTLP protobuf messages (the OpenTelemetry Collector file format)."""

from __future__ import annotations

import base64
import json
from typing import Any

# Imported here, when an exporter is built, never lazily at export time: an export runs on
# the batch worker thread, and a fork that lands while that thread holds an import lock
# leaves the child's first export waiting on it forever.
from google.protobuf import json_format

__all__ = ["ID_FIELDS", "to_otlp_json", "to_otlp_json_line"]

#: JSON field names that OTLP/JSON writes as lowercase hex instead of base64.
ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def to_otlp_json(message: Any) -> dict[str, Any]:
    """Return ``message`` (an OTLP protobuf message) as an OTLP/JSON dict.

    This is protobuf's canonical JSON mapping (camelCase names, 64-bit integers as
    decimal strings, default values omitted) with the two OTLP/JSON differences
    applied: enums are integers, and trace/span ids are lowercase hex, not base64.
    """
    data = json_format.MessageToDict(
        message,
        preserving_proto_field_name=False,
        use_integers_for_enums=True,
    )
    _ids_to_hex(data)
    return data


def to_otlp_json_line(message: Any) -> str:
    """Return ``message`` as one compact OTLP/JSON line, without the trailing newline."""
    return json.dumps(to_otlp_json(message), separators=(",", ":"), ensure_ascii=False)


def _ids_to_hex(node: Any) -> None:
    """Rewrite, in place, every base64 id field found anywhere in ``node`` as hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)
