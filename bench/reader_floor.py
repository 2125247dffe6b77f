"""DuckDB alone reading trace lines into the report's OTLP structure: today's SQL reader's way or read_json's.

    python bench/reader_floor.py objects DIR   # read_ndjson_objects + json_transform (the SQL reader's lines)
    python bench/reader_floor.py json DIR      # read_json(columns=...) of the same structure, typed columns

One thread; each statement sums the resource lists and line numbers, so nothing is pruned. Time
the two alternately with farm-bench (docs/performance-reader.md).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from lens_report.ingest import _line_type  # noqa: E402
from lens_report.plan import EXPORTER_MAX_LINE  # noqa: E402


def duckdb_type(node: Any) -> str:
    """A JSON structure (as ``json_transform`` takes it) as a DuckDB type (as ``read_json``'s ``columns`` take it)."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return duckdb_type(node[0]) + "[]"
    return "STRUCT(" + ", ".join(f'"{key}" {duckdb_type(value)}' for key, value in node.items()) + ")"


def statement(how: str, files: list[str]) -> str:
    """The SQL of one way of reading ``files``."""
    listed = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    size = EXPORTER_MAX_LINE + 2**20
    if how == "objects":
        return (f"SELECT sum(len(j.resourceSpans)), sum(o) FROM (SELECT ordinality AS o, "
                f"json_transform(json, '{_line_type(False)}') AS j FROM read_ndjson_objects({listed}, "
                f"ignore_errors=true, filename=true, maximum_object_size={size}) WITH ORDINALITY)")
    spans_type = duckdb_type(json.loads(_line_type(False))["resourceSpans"]).replace("'", "''")
    return (f"SELECT sum(len(resourceSpans)), sum(o) FROM (SELECT ordinality AS o, resourceSpans "
            f"FROM read_json({listed}, columns={{'resourceSpans': '{spans_type}'}}, format='newline_delimited', "
            f"records=true, ignore_errors=true, filename=true, maximum_object_size={size}) WITH ORDINALITY)")


def main(argv: list[str]) -> int:
    """Read the ``*.jsonl`` files under ``argv[1]`` the way ``argv[0]`` names; print the sums and the CPU time."""
    how, folder = argv
    if how not in ("objects", "json"):
        print("usage: reader_floor.py {objects,json} DIR", file=sys.stderr)
        return 2
    files = sorted(str(p) for p in Path(folder).rglob("*.jsonl"))
    con = duckdb.connect()
    con.execute("SET threads = 1")
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    sums = con.execute(statement(how, files)).fetchall()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"{how}: {sums} in {time.perf_counter() - started:.2f} s wall, {cpu:.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
