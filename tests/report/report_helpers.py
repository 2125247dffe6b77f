"""Helpers of the report tests: a small builder of OTLP-JSON trace export lines, and report shortcuts."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("duckdb")

from lens_core.catalogs.rl import SPAN_GROUPS  # noqa: E402
from lens_report import TraceStore, build_report  # noqa: E402

S = 1_000_000_000
T0 = 1_700_000_000 * S
TRACE = "0af7651916cd43dd8448eb211c80319c"


def sid(n: int) -> str:
    """The hex span id for a small number, e.g. 1 -> '0000000000000001'."""
    return f"{n:016x}"


class Otlp:
    """Builds OTLP-JSON dicts as the Collector's file exporter writes them (hex ids, string int64s)."""

    S = S
    T0 = T0
    TRACE = TRACE
    sid = staticmethod(sid)

    @staticmethod
    def value(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"boolValue": value}
        if isinstance(value, int):
            return {"intValue": str(value)}
        if isinstance(value, float):
            return {"doubleValue": value}
        if isinstance(value, list):
            return {"arrayValue": {"values": [Otlp.value(v) for v in value]}}
        return {"stringValue": value}

    @staticmethod
    def attrs(attributes: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": key, "value": Otlp.value(value)} for key, value in attributes.items()]

    @staticmethod
    def span(
        n: int,
        name: str,
        start_s: float,
        end_s: float,
        parent: int | None = None,
        *,
        bucket: str | None = None,
        iteration: int | None = None,
        trace: str = TRACE,
        unstamped: bool = False,
        **attributes: Any,
    ) -> dict[str, Any]:
        """A span with id ``sid(n)``, times in seconds after T0, and rl.* attributes when given.

        A bucketed span whose name the RL catalog does not know is stamped ``lens.group=test``
        as lens would stamp it (its group is a registered leaf), unless ``unstamped`` (a foreign
        emitter's span: the ``uncatalogued-bucket`` rule's input)."""
        attrs = {key.replace("_", "."): value for key, value in attributes.items()}
        if bucket is not None:
            attrs["rl.bucket"] = bucket
            if not unstamped and "lens.group" not in attrs and name not in SPAN_GROUPS:
                attrs["lens.group"] = "test"
        if iteration is not None:
            attrs["rl.iteration"] = iteration
        span = {
            "traceId": trace,
            "spanId": sid(n),
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(T0 + round(start_s * S)),
            "endTimeUnixNano": str(T0 + round(end_s * S)),
            "attributes": Otlp.attrs(attrs),
        }
        if parent is not None:
            span["parentSpanId"] = sid(parent)
        return span

    @staticmethod
    def request(spans: list[dict[str, Any]], **resource: Any) -> dict[str, Any]:
        """One ExportTraceServiceRequest; resource keys use '_' for '.' (service_name=...)."""
        res = {key.replace("_", "."): value for key, value in resource.items()}
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": Otlp.attrs(res)},
                    "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
                }
            ]
        }

    @staticmethod
    def write(path: Path, *lines: dict[str, Any] | str) -> Path:
        """Write requests (dicts as JSON, strings verbatim) one per line; gzip when the name ends in .gz."""
        text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        return path


def two_step_spans() -> list[dict[str, Any]]:
    """Job 0-20 s; step 1 at 1-9 s: productive 4, overhead 2; step 2 at 10-19 s: productive 6, idle 2."""
    span = Otlp.span
    return [
        span(1, "rl.grpo.job", 0, 20),
        span(2, "rl.grpo.step", 1, 9, 1, iteration=1),
        span(3, "rl.vllm.generate", 1, 5, 2, bucket="productive", iteration=1),
        span(4, "rl.grpo.checkpointing", 5, 7, 2, bucket="overhead", iteration=1),
        span(5, "rl.grpo.step", 10, 19, 1, iteration=2),
        span(6, "rl.grpo.policy_training", 10, 16, 5, bucket="productive", iteration=2),
        span(7, "rl.idle.buffer_starvation", 16, 18, 5, bucket="idle", iteration=2),
    ]


ENGINES_ENV = "LENS_REPORT_ENGINES"
"""Engine modes, comma-separated (and ``ENGINES_LOG`` set to a file): every :func:`report_of` also reports its
spans from ClickHouse in each mode and asserts the JSON equal to the files' report. ``clickhouse`` loads them
into ``otel_traces`` in chdb and reports from there; ``clickhouse-http`` does the same through a server: the
ClickHouse HTTP front of ``clickhouse_http`` over chdb, read with clickhouse-connect as ``lens report
--clickhouse http://...`` reads. ``clickhouse-stamped`` reports through the stamped sums (every trace whose stamps
give the walk's answer summed in ClickHouse, the rest walked), ``clickhouse-parts`` through the walk in parts of
traces, both with parts of one span (at most :data:`PARTS_AT_MOST` parts). ``clickhouse-rollup`` reports through
the schema helper's rollup where it covers the run. The files' report is made once for all the modes."""

PARTS_AT_MOST = 12
"""With ``clickhouse-stamped`` and ``clickhouse-parts`` a report's spans are walked in this many parts at most (a
part of one span where the run has fewer spans): each part is walked by statements of its own, so a part a span
made the 2,400 spans of the aggregates' known answers 2,400 walks. With the stamped sums unbounded and the walk at
40, the two modes took 11 of the slow suite's 37 minutes; the sums of many parts, empty ones among them, are what
they check."""

ENGINES_LOG = "LENS_REPORT_ENGINES_LOG"
"""A file :func:`report_of` appends one line to per report and mode: ``MODE|compared`` or ``MODE|files only: WHY``."""


def engine_modes() -> list[str]:
    """The engine modes :data:`ENGINES_ENV` names (none when unset)."""
    return [mode.strip() for mode in os.environ.get(ENGINES_ENV, "").split(",") if mode.strip()]


def comparable(report_json: dict[str, Any]) -> dict[str, Any]:
    """A report's JSON without what only files have: file names and lines (violations sorted without them)."""
    data = dict(report_json)
    data.pop("files", None)
    data.pop("path", None)  # how ClickHouse computed it: files have no path
    data["violations"] = sorted((json.dumps({k: v for k, v in violation.items() if k not in ("file", "line")},
                                            sort_keys=True) for violation in data["violations"]))
    return data


_HTTP_FRONT: list[Any] = []
_SUMMED: list[int] = []
"""How many spans the last report from ClickHouse summed by their stamps rather than walked."""
_REASONS: list[str] = []
"""Why the last reports with ``LENS_REPORT_ENGINES=clickhouse-rollup`` read the spans (the log says it)."""


def figures(report_json: dict[str, Any], not_computed: Any = ()) -> dict[str, Any]:
    """:func:`comparable` less the keys a report through the rollup leaves empty (``not_computed``)."""
    data = comparable(report_json)
    for key in not_computed:
        data.pop(key, None)
    return data


def _http_source() -> Any:
    """A ServerSource on this process's ClickHouse HTTP front (started on first use, stopped at exit)."""
    from lens_report.clickhouse import ServerSource

    if not _HTTP_FRONT:
        import atexit

        from clickhouse_http import ClickHouseHTTP

        _HTTP_FRONT.append(ClickHouseHTTP(users={"lens": ("known-answers", 0)}).start())
        atexit.register(_HTTP_FRONT[0].stop)
    return ServerSource(_HTTP_FRONT[0].url("lens", "known-answers"))


def counting_source() -> tuple[Any, list[str]]:
    """(a ChdbSource, the list each statement sent through it is appended to): a statement is a round trip to a
    server, so the tests of how many a report takes count them here."""
    from lens_report.clickhouse import ChdbSource

    source, sent = ChdbSource(), []
    for name in ("command", "rows", "batches"):
        method = getattr(source, name)
        setattr(source, name, lambda sql, *a, _m=method, **k: (sent.append(sql), _m(sql, *a, **k))[1])
    return source, sent


def rollup_schema(source: Any, table: str = "otel_traces") -> None:
    """Create ``table`` with the schema helper's columns, rollup table and view (``lens clickhouse-schema``)."""
    from lens_report.clickhouse import otel_traces_ddl, schema_sql

    source.command(otel_traces_ddl(table))
    text = "\n".join(line for line in schema_sql(table).splitlines() if not line.startswith("--"))
    for statement in filter(None, (part.strip() for part in text.split(";"))):
        source.command(statement)


def _clickhouse_report(paths: Any, options: dict[str, Any], mode: str) -> tuple[Any, Any]:
    """(the report, or the exception building it raised) over the spans of ``paths`` loaded into chdb (through the
    HTTP front in mode ``clickhouse-http``). In mode ``clickhouse-rollup`` the table has the schema helper's columns
    and rollup, and the report is the rollup's where it covers the run (its ``path`` says which)."""
    from lens_report.clickhouse import ChdbSource, ClickHouseStore, load_otlp_files

    over_http = mode == "clickhouse-http"
    through_rollup = mode == "clickhouse-rollup"
    source = _http_source() if over_http else ChdbSource()
    try:
        if over_http:  # one server for every report of the process: each starts from an empty table
            source.command("DROP TABLE IF EXISTS otel_traces")
        if through_rollup:
            from lens_report.clickhouse_rollup import rollup_report
            from lens_report.model import DEFAULT_STEP_PATTERN

            rollup_schema(source)
            load_otlp_files(source, "otel_traces", paths, create=False)
            pattern = options.get("step_pattern", DEFAULT_STEP_PATTERN)
            try:
                taken = rollup_report(source, "otel_traces", run=options.get("run"), attempt=options.get("attempt"),
                                      step_pattern=getattr(pattern, "pattern", pattern))
            except Exception as exc:  # noqa: BLE001 - compared with what the file report raised
                return None, exc
            if not isinstance(taken, str):
                return taken, None
            _REASONS.append(taken)
        else:
            load_otlp_files(source, "otel_traces", paths)
        # parts of one span, at most PARTS_AT_MOST of them (each is walked by statements of its own): every report
        # takes the stamped sums (or, with -parts, the walk in parts of traces)
        parts = {}
        if mode in ("clickhouse-stamped", "clickhouse-parts"):
            spans = int(source.rows("SELECT count() FROM otel_traces")[0][0])
            parts = {"part_spans": max(1, -(-spans // PARTS_AT_MOST)), "stamped": mode == "clickhouse-stamped"}
        with ClickHouseStore(source, "otel_traces", **parts) as store:
            store.load_table()
            try:
                report = build_report(store, **options)
            except Exception as exc:  # noqa: BLE001 - compared with what the file report raised
                return None, exc
            _SUMMED.append(store.span_count() - store.walked_spans)
            return report, None
    finally:
        source.close()


def _log(mode: str, line: str) -> None:
    with open(os.environ[ENGINES_LOG], "a", encoding="utf-8") as out:
        out.write(f"{mode}|{line}\n")


def report_of(*paths: Any, **options: Any) -> Any:
    """The report over ``paths`` (files or directories); options go to build_report.

    Where the compiled reader is built, the files are also read by the SQL reader and the two
    reports (every figure, problem, file and line) must be equal. With ``LENS_REPORT_ENGINES=clickhouse`` the same spans are also reported from ClickHouse
    (see :data:`ENGINES_ENV`) and the two reports must be equal.
    """
    if _compiled_and_sql():  # every known answer read by both readers, and the reports equal
        with _sql_reader():
            try:
                sql_report, sql_error = _files_report(paths, options, engines=False), None
            except Exception as exc:
                sql_report, sql_error = None, exc
        try:
            report = _files_report(paths, options)
        except Exception as exc:
            assert sql_report is None and type(sql_error) is type(exc) and str(sql_error) == str(exc), (exc, sql_error)
            raise
        assert sql_error is None, sql_error
        ours, theirs = report.to_json(), sql_report.to_json()
        assert ours == theirs, [(key, ours[key], theirs.get(key)) for key in ours if ours[key] != theirs.get(key)]
        return report
    return _files_report(paths, options)


def _compiled_and_sql() -> bool:
    """Whether files are read by the compiled reader here (then :func:`report_of` also reads them with SQL)."""
    from lens_report.engine import compiled_reader

    return compiled_reader() is not None


@contextlib.contextmanager
def _sql_reader() -> Any:
    saved = os.environ.get("LENS_PURE_PYTHON")
    os.environ["LENS_PURE_PYTHON"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["LENS_PURE_PYTHON"]
        else:
            os.environ["LENS_PURE_PYTHON"] = saved


def _files_report(paths: Any, options: dict[str, Any], engines: bool = True) -> Any:
    with TraceStore() as store:
        store.load(paths)
        modes = engine_modes() if engines else []
        # what the Collector's exporter never writes (unreadable lines, the same span twice) has no
        # otel_traces twin: such input is reported from files only
        out_of_range = store.con.execute(
            "SELECT count(*) FROM spans WHERE start_text IS NOT NULL OR end_text IS NOT NULL").fetchall()[0][0]
        why = ("input problems" if store.problems else "duplicate spans" if store.duplicate_count
               else "times past uint64 nanoseconds" if out_of_range else "")
        try:
            report = build_report(store, **options)
        except Exception as exc:
            for mode in modes if not why else ():
                _REASONS.clear()
                other, error = _clickhouse_report(paths, options, mode)
                assert other is None and type(error) is type(exc) and str(error) == str(exc), (mode, exc, error, other)
                _log(mode, _compared(None, mode))
            raise
    for mode in modes:
        if why:
            _log(mode, f"files only: {why}")
            continue
        _REASONS.clear()
        other, error = _clickhouse_report(paths, options, mode)
        assert error is None, (mode, error)
        skip = other.path.not_computed if other.path is not None and other.path.name == "rollup" else ()
        ours, theirs = figures(report.to_json(), skip), figures(other.to_json(), skip)
        assert theirs == ours, (mode, [(key, ours[key], theirs.get(key)) for key in ours if ours[key] != theirs.get(key)])
        _log(mode, _compared(other, mode))
    return report


def _compared(other: Any, mode: str) -> str:
    """The log line of a report compared in ``mode``: ``compared``, and with ``clickhouse-rollup`` which path it took."""
    if mode == "clickhouse-stamped" and _SUMMED and _SUMMED[-1]:
        return f"compared: {_SUMMED[-1]} spans summed by their stamps"
    if mode != "clickhouse-rollup":
        return "compared"
    if other is not None and other.path is not None and other.path.name == "rollup":
        return "compared: rollup"
    return f"compared: spans: {_REASONS[-1] if _REASONS else 'the rollup raised what the files raised'}"


def html_of(*paths: Any, steps: Any = None, ranks: Any = None, **options: Any) -> str:
    """The HTML page of the report over ``paths``."""
    from lens_report import render_html

    with TraceStore() as store:
        store.load(paths)
        return render_html(build_report(store, **options), store, steps=steps, ranks=ranks)
