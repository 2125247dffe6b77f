"""The report's SQL in two dialects: every expression that differs between DuckDB and ClickHouse, and the span fields built from them."""

from __future__ import annotations

from dataclasses import dataclass

from lens_core import semconv

__all__ = [
    "CLICKHOUSE",
    "DUCKDB",
    "Dialect",
    "LENS_DISTRO",
    "LOSS_COUNTERS",
    "ResourceFields",
    "SpanFields",
    "sql_text",
]


LENS_DISTRO = "lens"
"""``telemetry.distro.name`` of a process that Lens set up: it writes a final loss record at shutdown."""


def sql_text(text: str) -> str:
    """``text`` as an SQL string literal (both dialects double a quote)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Dialect:
    """One engine's spelling of the expressions the report needs (``duckdb`` or ``clickhouse``).

    The differences that change answers are here and nowhere else: ClickHouse reads a missing
    map key as ``''`` (never NULL), has no ``TRY_CAST`` (``to*OrNull`` instead), anchors no
    regular expression by itself, and types ``NULL`` branches only with ``Nullable`` results.
    """

    name: str

    @property
    def clickhouse(self) -> bool:
        """True for ClickHouse (and chdb)."""
        return self.name == "clickhouse"

    def full_match(self, expr: str, pattern: str) -> str:
        """SQL: ``expr`` matches the whole ``pattern`` (NULL when ``expr`` is NULL)."""
        if self.clickhouse:
            return f"match({expr}, {sql_text('^(?:' + pattern + ')$')})"
        return f"regexp_full_match({expr}, {sql_text(pattern)})"

    def to_int(self, expr: str) -> str:
        """SQL: text as a 64-bit integer, NULL when it is not one."""
        return f"toInt64OrNull({expr})" if self.clickhouse else f"TRY_CAST({expr} AS BIGINT)"

    def to_bool(self, expr: str) -> str:
        """SQL: ``'true'``/``'false'`` text as a boolean, NULL otherwise (the exporter writes JSON booleans so)."""
        if self.clickhouse:
            return f"multiIf(lower({expr}) IN ('true', '1'), true, lower({expr}) IN ('false', '0'), false, NULL)"
        return f"TRY_CAST({expr} AS BOOLEAN)"

    def text(self, expr: str) -> str:
        """SQL: any value as text."""
        return f"toString({expr})" if self.clickhouse else f"CAST({expr} AS VARCHAR)"

    def null_if(self, expr: str, value: str) -> str:
        """SQL: NULL when ``expr`` equals ``value``."""
        return f"nullIf({expr}, {value})" if self.clickhouse else f"nullif({expr}, {value})"

    def regexp_group(self, expr: str, pattern: str, group: int) -> str:
        """SQL: capture ``group`` of the first match of ``pattern`` in ``expr`` ('' when none)."""
        if self.clickhouse:
            return f"regexpExtract({expr}, {sql_text(pattern)}, {int(group)})"
        return f"regexp_extract({expr}, {sql_text(pattern)}, {int(group)})"

    def map_value(self, column: str, key: str) -> str:
        """SQL: the value of ``key`` in a ClickHouse ``Map`` column, NULL when the key is absent.

        ``m['k']`` alone reads an absent key as ``''``, so an attribute set to the empty string
        and no attribute at all would read alike; the report tells them apart as files do. A key
        stored twice reads its first value, as ``m[key]`` does.
        """
        if not self.clickhouse:
            raise ValueError("map columns are the ClickHouse schema's; DuckDB reads OTLP attribute lists")
        # one search of the keys (computed once for both uses), not mapContains and then m[key]: ~3x less CPU
        at = f"indexOf(mapKeys({column}), {sql_text(key)})"
        return f"if({at} > 0, mapValues({column})[{at}], NULL)"

    def hex_id(self, expr: str, digits: int) -> str:
        """SQL: an unsigned integer id as ``digits`` lower-case hex digits (16 for a span, 32 for a trace)."""
        if self.clickhouse:  # printf takes no UInt128, and hex() drops leading zero bytes
            return f"lower(leftPad(hex({expr}), {int(digits)}, '0'))"
        return f"printf('%0{int(digits)}x', {expr})"

    def median(self, expr: str) -> str:
        """SQL: the exact median, the mean of the two middle values for an even count (ClickHouse's
        ``median`` is an estimate)."""
        return f"quantileExactInclusive(0.5)({expr})" if self.clickhouse else f"median({expr})"

    def arg_max(self, value: str, key: str) -> str:
        """SQL: ``value`` of the row with the largest ``key`` (a tuple orders lexicographically)."""
        return f"argMax({value}, {key})" if self.clickhouse else f"arg_max({value}, {key})"

    def in_part(self, expr: str, parts: int, i: int) -> str:
        """SQL: ``expr`` (an id) hashes into part ``i`` of ``parts``. A hash, not ``expr % parts``:
        ids that share a stride (a step anchor every 20 rows) would all fall into one part."""
        hashed = f"cityHash64({expr})" if self.clickhouse else f"hash({expr})"
        return f"{hashed} % {int(parts)} = {int(i)}"

    def prefix(self, expr: str, chars: int) -> str:
        """SQL: the first ``chars`` characters of text ``expr`` (NULL stays NULL): a page shows long names cut."""
        if self.clickhouse:
            return f"substringUTF8({expr}, 1, {int(chars)})"
        return f"substr({expr}, 1, {int(chars)})"

    def any_value(self, expr: str) -> str:
        """SQL: any one value of ``expr`` in the group."""
        return f"any({expr})" if self.clickhouse else f"any_value({expr})"

    def column_type(self, kind: str) -> str:
        """A column type for a table the report creates: ``VARCHAR``, ``BIGINT``, ``INTEGER`` or ``BOOLEAN``
        (nullable, as in DuckDB)."""
        if not self.clickhouse:
            return kind
        names = {"VARCHAR": "String", "BIGINT": "Int64", "INTEGER": "Int32", "BOOLEAN": "Bool"}
        if kind not in names:
            raise ValueError(f"column type {kind!r} is not one of {', '.join(names)}")
        return f"Nullable({names[kind]})"

    def literal(self, value: object) -> str:
        """``value`` (None, bool, int, float or str) as an SQL literal; ClickHouse also escapes backslashes."""
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        text = str(value)
        return sql_text(text.replace("\\", "\\\\") if self.clickhouse else text)


DUCKDB = Dialect("duckdb")
"""The embedded engine that reads trace files."""

CLICKHOUSE = Dialect("clickhouse")
"""ClickHouse: a server through clickhouse-connect, or chdb in process."""


@dataclass(frozen=True)
class ResourceFields:
    """The resource fields of a span as SQL expressions of text (NULL when absent), in one dialect."""

    dialect: Dialect
    run: str
    instance: str
    rank_text: str
    pid_text: str
    host: str
    service: str
    distro: str

    def process(self) -> str:
        """SQL: the process label: its instance id, else ``pid P@host``, else its service name."""
        d = self.dialect
        return (f"coalesce({self.instance}, CASE WHEN {self.pid_text} IS NOT NULL OR {self.host} IS NOT NULL "
                f"THEN concat('pid ', coalesce({self.pid_text}, '?'), '@', coalesce({self.host}, '?')) END, "
                f"{self.service}, 'unknown process')") if d.clickhouse else (
                f"coalesce({self.instance}, CASE WHEN {self.pid_text} IS NOT NULL OR {self.host} IS NOT NULL "
                f"THEN 'pid ' || coalesce({self.pid_text}, '?') || '@' || coalesce({self.host}, '?') END, "
                f"{self.service}, 'unknown process')")

    def run_id(self) -> str:
        """SQL: ``nemo.run.id``, else the ``service.instance.id`` before ``-rankN``, else ''."""
        d = self.dialect
        prefix = d.null_if(d.regexp_group(self.instance, r"^(.*?)-rank[0-9]+(-.*)?$", 1), "''")
        return f"coalesce({self.run}, {prefix}, '')"

    def rank(self) -> str:
        """SQL: ``nv.dl.rank`` as an integer (NULL unless it is digits)."""
        d = self.dialect
        return f"CASE WHEN {d.full_match(self.rank_text, '[0-9]{1,18}')} THEN {d.to_int(self.rank_text)} END"

    def pid(self) -> str:
        """SQL: ``process.pid`` as an integer."""
        d = self.dialect
        return f"CASE WHEN {d.full_match(self.pid_text, '[0-9]{1,18}')} THEN {d.to_int(self.pid_text)} END"

    def lens_process(self) -> str:
        """SQL: whether Lens set the process up (``telemetry.distro.name`` = ``lens``)."""
        return f"coalesce({self.distro} = {sql_text(LENS_DISTRO)}, false)"

    @staticmethod
    def rank_label(dialect: Dialect, rank: str, process: str) -> str:
        """SQL: ``rank N`` for a process with a rank, else its process label."""
        return f"CASE WHEN {rank} IS NOT NULL THEN concat('rank ', {dialect.text(rank)}) ELSE {process} END"


@dataclass(frozen=True)
class SpanFields:
    """Span attribute and field texts as SQL (NULL when absent), and what the store makes of them."""

    dialect: Dialect
    kind_text: str
    status_text: str

    def iteration(self, text: str) -> str:
        """SQL: ``rl.iteration`` as an integer (NULL unless it is an integer)."""
        d = self.dialect
        return f"CASE WHEN {d.full_match(text, '-?[0-9]{1,18}')} THEN {d.to_int(text)} END"

    def kind(self) -> str:
        """SQL: the span kind as its short upper-case name (``INTERNAL``), from a number or a name."""
        d = self.dialect
        names = "['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER']"
        index = f"{d.to_int(self.kind_text)} + 1"
        short = (f"upper(replaceRegexpOne({self.kind_text}, '^(SPAN_KIND_|SPAN_KIND)', ''))" if d.clickhouse
                 else f"regexp_replace({self.kind_text}, '^SPAN_KIND_', '')")
        by_index = f"arrayElement({names}, {index})" if d.clickhouse else f"{names}[{index}]"
        return (f"CASE WHEN {self.kind_text} IS NULL OR {self.kind_text} = '' THEN 'UNSPECIFIED' "
                f"WHEN length({self.kind_text}) = 1 THEN {by_index} ELSE {short} END")

    def error(self) -> str:
        """SQL: whether the status is an error (``2`` in OTLP/JSON, ``STATUS_CODE_ERROR`` or ``Error`` in ClickHouse)."""
        return f"coalesce({self.status_text} IN ('2', 'STATUS_CODE_ERROR', 'Error'), false)"


LOSS_COUNTERS = (semconv.LENS_SPANS_CREATED, semconv.LENS_SPANS_DROPPED, semconv.LENS_SPANS_FAILED,
                 semconv.LENS_SPANS_UNENDED, semconv.LENS_SPANS_TRUNCATED)
"""The loss record's counters, in the order of the store's ``loss`` array (then 1 for the final record)."""
