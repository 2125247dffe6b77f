"""The report's stamped sums over ``otel_traces``: the traces whose Lens stamps give the parent walk's answer,
summed where the spans lie (``GROUP BY``), so only the other traces are copied and walked.

The rollup (:mod:`lens_report.rollup`) gives each counted leaf to its nearest step ancestor by
walking parent links. A trace needs no walk when its structure pins every answer down, which
two passes over its spans check, the children grouped by parent, then each parent beside its
children's entry (past :data:`CHECK_PART_FACTOR` × ``--part-spans`` spans, in parts of whole traces
of :data:`PARENT_PART_FACTOR` × ``--part-spans`` parents, read from one sorted copy); a third finds the span
ids stored twice (by one sort past that size, spilled to disk); the rules of single spans and of steps are
checked where the steps are summed (per trace, process and iteration):

* every span is well timed, and no rule of the report flags it (``flagged``): a flagged
  span is listed as a violation, which only the walk does;
* every parent id is a span of the trace, stored once; no bucketed span has children;
* a child sorts after its parent by (start, span id): no chain of parents is a cycle;
* a span stamped with ``rl.iteration`` other than a step span has a parent, of the same process
  and iteration, and an unstamped span has an unstamped parent (or none): every stamped leaf's
  nearest step ancestor is then the one step span of its (trace, process, iteration);
* the trace has a step span (matching the step pattern) for each (process, iteration) at most
  once, or no step candidate at all; and no step's buckets overflow its wall time.

Such a trace's steps, rank sums, span-name sums and counts are ``GROUP BY`` s of its spans,
equal to what the walk gives. Every other trace (another library's spans, steps found by the
iteration fallback, a rule broken, a span stored twice) is walked, in parts of bounded size.
"""

from __future__ import annotations

from .dialect import CLICKHOUSE, ResourceFields
from .invariants import TOLERANCE_NS
from .model import BUCKETS
from .rollup import COUNTED, classified_columns, is_step_span, is_well_timed

__all__ = ["BROKEN_TRACES", "CHECK_DUPLICATES", "CHECK_PARENTS", "CHECK_PART_FACTOR", "CHECK_SPANS",
           "COMPLEX_TRACES", "PARENT_PART_FACTOR", "PART_COPY_ENGINE", "STAMPED_STEPS", "STEP_COLUMNS", "TRACE_PLAN",
           "check_columns_sql", "duplicates_sorted_sql", "duplicates_sql", "part_copy_sql", "presum_sql",
           "stamped_steps_sql", "trace_checks_sql", "trace_plan_sql"]

COMPLEX_TRACES = "complex_traces"
"""The working table of the traces that are walked (``trace``): those :func:`trace_plan_sql` says must be."""

TRACE_PLAN = "trace_plan"
"""The working table of every trace of the run and whether it is walked (``trace``, ``walk``)."""

STAMPED_STEPS = "stamped_steps"
"""The working table of every (trace, process, iteration) of the run (:func:`stamped_steps_sql`): its step span
as the walk's ``steps`` row, its bucket sums and what the rules of single spans found in it. The rows of one step
span, in traces not walked, are the steps of the traces summed where they lie."""

STEP_COLUMNS = ("anchor", "rank", "rank_label", "iteration", "trace", "span", "name", "wall_ns", "method", "start_ns",
                *BUCKETS)
"""The columns of the walk's ``steps`` rows, in its order (``stamped_steps`` also counts each row's step spans)."""

GROUP_BY_SPILL_BYTES = 256_000_000
"""Memory a span-by-span ``GROUP BY`` may hold before ClickHouse writes its groups to disk: the bound on the
stamped sums' working set whatever the number of spans."""


def _spill(step: str, bound: int) -> str:
    """ClickHouse SQL: the settings under which a ``step`` (``group_by`` or ``sort``) of the spans writes what it
    holds to disk past ``bound`` bytes (and past no share of the server's memory)."""
    return (f"SETTINGS max_bytes_before_external_{step} = {bound}, "
            f"max_bytes_ratio_before_external_{step} = 0")


_SPILL = _spill("group_by", GROUP_BY_SPILL_BYTES)
"""The settings every ``GROUP BY`` of the spans runs under: its groups go to disk past the bound."""

CELLS_SPILL_BYTES = 512_000_000
"""The bound of the two ``GROUP BY`` s of the spans whose groups follow the answer's (rank, step) cells, not its
spans: the step sums (:func:`stamped_steps_sql`, a group a (trace, process, iteration)) and the check's parents
(:func:`trace_checks_sql`, a group a parent: a step or umbrella of a Lens trace). At 500,000 cells (chdb, 2
cores, 10M spans) under :data:`GROUP_BY_SPILL_BYTES` both wrote their groups to disk: the step sums held ~0.35
GB and took 3.2-3.5 s against 2.2-2.3 s unspilled; the parents (1M groups) 1.56-1.60 s against 1.33-1.37 s. A
larger answer still spills past this bound; the two run one after the other, so the peak is one of them."""

_SORT_SPILL = _spill("sort", GROUP_BY_SPILL_BYTES)
"""The settings a sort of the spans runs under: its sorted runs go to disk past the same bound."""

_BUCKET_LIST = "(" + ", ".join(f"'{b}'" for b in BUCKETS) + ")"

_NAMED_STEP = f"coalesce({is_step_span('s')} AND {is_well_timed('s')}, false)"
"""SQL over a span ``s`` of the store's spans columns: whether it is a step span (well timed, its name a step name,
with ``rl.iteration`` and no bucket)."""

_BUCKET_SUMS = ", ".join(f"sum(if(counted AND bucket = '{b}', assumeNotNull(end_ns - start_ns), 0)) AS {b}"
                         for b in BUCKETS)
"""SQL select items: per bucket, the nanoseconds of the counted spans (a counted span has both times); a plain
``sum`` of an ``if``, which ClickHouse runs faster than ``sumIf``."""


def _classified(relation: str, where: str) -> str:
    """ClickHouse SQL: each span of ``relation`` (the store's spans columns) that satisfies ``where``, with the
    rollup's classification (:func:`~lens_report.rollup.classified_columns`), whether it counts, whether it is
    a step span (``named_step``) or could be a fallback step candidate, and whether a rule flags it."""
    prefix = "regexpExtract(category, '^([^/]*)', 1)"
    expected = f"coalesce(category_bucket, if({prefix} IN {_BUCKET_LIST}, {prefix}, NULL))"
    return f"""
SELECT *, {COUNTED} AS counted,
       coalesce(iteration IS NOT NULL AND bucket IS NULL AND ok, false) AS fallback_cand,
       (NOT ok OR (bucketed AND NOT {COUNTED})
        OR (bucketed AND category IS NOT NULL AND NOT coalesce(bucket = {expected}, false))
        OR (bucketed AND NOT coalesce(umbrella, false) AND coalesce(stamped_grp IN (SELECT grp FROM umbrella_groups), false))
        OR (bucketed AND stamped_grp IS NULL AND NOT catalogued)
        OR coalesce(any_grp = 'evaluate', false)
        -- a stamped span other than a step span with no parent: its leaves' step is no step span of theirs
        OR (iteration IS NOT NULL AND parent IS NULL AND NOT named_step)) AS flagged
FROM (
    SELECT s.trace AS trace, s.span AS span, s.parent AS parent, s.name AS name, s.start_ns AS start_ns,
           s.end_ns AS end_ns, s.error AS error, s.bucket AS bucket, s.iteration AS iteration, s.rank AS rank,
           s.rank_label AS rank_label, s.process AS process, s.lens_process AS lens_process, s.run AS run,
           {_NAMED_STEP} AS named_step, {classified_columns()}, coalesce(s.grp, c.grp) AS any_grp,
           cb.bucket AS category_bucket
    FROM {relation} s
    LEFT JOIN catalog c ON c.name = s.name
    LEFT JOIN category_rules r ON r.category = coalesce(s.category, c.category)
    LEFT JOIN category_buckets cb ON cb.category = coalesce(s.category, c.category)
    {where}) classified"""


CHECK_PART_FACTOR = 12
"""The structure check takes ``--part-spans`` × this many spans at once: a span checked holds about a twelfth
of what a walked span holds (measured on chdb: the report's peak RSS with 10M spans checked at once 0.80-0.86 GB,
with 1M walked ~0.5 GB; chdb alone ~0.27 GB). Past that, what grows with the spans (the set of span ids that
finds a span stored twice, a pass of its own) is found by a sort that spills to disk
(:func:`duplicates_sorted_sql`), and the rest of the check runs in parts of :data:`PARENT_PART_FACTOR` ×
``--part-spans`` parents."""

PARENT_PART_FACTOR = 2
"""Past :data:`CHECK_PART_FACTOR` × ``--part-spans`` spans, the structure check's two passes take the traces of
this many × ``--part-spans`` parents (span ids that spans name as their parent) at once: what they hold is a row
a parent (at 100M spans with 1M parents, chdb: 0.56 GB peak for the first pass, 0.64 GB for the second). A Lens
trace has a parent a step and umbrella, so a run's parents follow its (rank, step) cells, not its spans."""

CHECK_SPANS = "check_spans"
"""The working table, on disk, of what the structure check reads of each span (:func:`check_columns_sql`), with
its part (``part``, by a hash of the trace: the walk's parts), sorted by part (:data:`PART_COPY_ENGINE`): made
when the check runs in parts, so that each part reads its own rows of it and not the whole run (see
:func:`part_copy_sql`)."""

PART_COPY_ENGINE = ("MergeTree ORDER BY part SETTINGS max_bytes_to_merge_at_max_space_in_pool = 0, "
                    "parts_to_delay_insert = 100000, parts_to_throw_insert = 100000")
"""The engine of a copy sorted by part (:func:`part_copy_sql`: :data:`CHECK_SPANS`, the walk's ``walk_spans``),
whatever ``--work-tables`` says: sorted by part, on disk, never merged (it is read once a part, then dropped), so it
is as many parts as the copy writes blocks (~380 at 100M spans, ~3,800 at 1B), which the server must not refuse or
delay. Merges running beside the check held ~0.2 GB more and slowed it (at 100M spans, chdb, 2 cores: the copy
26-30 s against 17-19 s unmerged, a part's two passes 1.3-1.6 s against 0.7-0.9 s)."""

_COPY_SETTINGS = ("SETTINGS max_insert_threads = 1, max_block_size = 65536, min_insert_block_size_rows = 262144, "
                  "min_insert_block_size_bytes = 33554432")
"""The settings a copy sorted by part is written under: one writer of blocks of at most ~32 MB (at 100M spans,
chdb, 2 cores: 0.54 GB peak RSS up to the check's copy, in 16-19 s, against 1.04 GB in 12.8 s with the defaults'
blocks of 1M rows and a writer a core)."""

CHECK_DUPLICATES = "check_duplicates"
"""The working table of the traces with a span stored twice (``trace``), found by :func:`duplicates_sql` or
:func:`duplicates_sorted_sql`."""

BROKEN_TRACES = "broken_traces"
"""The working table of the traces where a parent id is no span of the trace or a parent breaks a rule of the
module (``trace``), made by :func:`trace_checks_sql`'s second statement."""

CHECK_PARENTS = "check_parents"
"""The working table of one part's parents, made by :func:`trace_checks_sql`'s first statement: a row a span id
that spans of the part name as their parent (``trace``, ``key``), with what its children need of it."""

# a span's place in the order (start, span id), as one number
_ORDER = "bitShiftLeft(toUInt128(coalesce(start_ns, 0) + 9223372036854775808), 64) + span"
# a span's (process, iteration), as one number (0: no iteration)
_CODE = "if(iteration IS NULL, toUInt64(0), bitOr(cityHash64(process, iteration), 1))"


def check_columns_sql(relation: str, where: str) -> str:
    """ClickHouse SQL (a subquery): what the structure check reads of each of ``relation``'s spans (that satisfy
    ``where``): its ``trace``, ``span`` and ``parent``, its place in the order (start, span id) as one number
    (``ord``), its (process, iteration) as one 64-bit hash (``code``: two that differ read equal once in 2^64
    comparisons), what it needs of its parent (``need``: its ``code``, NULL for a step span, which needs nothing)
    and whether it is ``bucketed``. Computed in the pass that reads it (ClickHouse does not store a subquery)."""
    need = f"if({_NAMED_STEP}, NULL, {_CODE})"
    return f"""(
SELECT trace, span, parent, {_ORDER} AS ord, {_CODE} AS code, {need} AS need, bucket IS NOT NULL AS bucketed
FROM {relation} s {where})"""


def part_copy_sql(rows: str, parts: int) -> str:
    """ClickHouse SQL: a copy sorted by part (the table made under :data:`PART_COPY_ENGINE`): ``rows`` (a subquery
    with a ``trace`` column) with each row's part of ``parts`` by a hash of its trace (the walk's), sorted by part
    and compressed on disk, so that each part reads its own rows of it, not the whole table again.

    The structure check's (:data:`CHECK_SPANS`, ~10 bytes a span): at 100M spans in 6 parts (chdb, 2 cores) a
    16-19 s copy, then 0.7-0.9 s a part, against 10.5 s a part reading the whole run (its two passes each a scan of
    every span), so that a part's cost no longer grows with the run: at 1B spans in ~50 parts, ~4 minutes where the
    scans took ~2.2 hours. The walk's (every column of the walked spans) is the same for the parts it walks."""
    return f"SELECT cityHash64(trace) % {int(parts)} AS part, * FROM {rows} {_COPY_SETTINGS}"


def trace_checks_sql(checked: str) -> tuple[str, str]:
    """ClickHouse SQL, two statements over ``checked``'s spans (:func:`check_columns_sql`'s columns):
    :data:`CHECK_PARENTS`, then :data:`BROKEN_TRACES`: the traces where a parent id is no span of the trace (an
    orphan) or a parent breaks a rule of the module for its children. The store runs them on parts of whole
    traces (:meth:`~lens_report.clickhouse.ClickHouseStore.span_parts`, reading :data:`CHECK_SPANS`); a trace
    larger than a part is checked whole, its ``GROUP BY`` spilled to disk past :data:`CELLS_SPILL_BYTES`. A span
    stored twice is :func:`duplicates_sql`'s to find, the rules of single spans and of steps
    :func:`stamped_steps_sql`'s.

    The first groups the children by parent: what a parent must satisfy is the earliest of its children
    in the order (start, span id), and the (process, iteration) its children other than step spans
    need of it. The second reads the spans whose id is a parent id beside their entry there: the others, most
    spans, are passed over by a set of ids before the join (at 10M spans, chdb, 2 cores: 1.5 s joined all, 0.7 s).
    Grouping the children alone keeps the groups to the parents (a tenth of the spans of a Lens trace):
    one ``GROUP BY`` of every span id with its children's rows took 13.8 s at 10M spans, these two 2.7-2.8 s (the
    children's side reads the spans' own columns only, no joins to the rules: 3.8 s to 2.6 s)."""
    parents = f"""
SELECT trace, parent AS key, min(ord) AS kid_ord, min(need) AS need_lo, max(need) AS need_hi
FROM {checked} s
WHERE s.parent IS NOT NULL
GROUP BY trace, parent
{_spill("group_by", CELLS_SPILL_BYTES)}"""
    # a parent: bucketed, or not before each child, or not the (process, iteration) a child needs
    broken = """s.bucketed OR NOT coalesce(s.ord < p.kid_ord, false)
                 OR (p.need_lo IS NOT NULL AND NOT coalesce(p.need_lo = s.code AND p.need_hi = s.code, false))"""
    # each parent id of a trace found once, as a span no rule of its children breaks
    checks = f"""
SELECT n.trace AS trace
FROM (SELECT trace, count() AS parents FROM {CHECK_PARENTS} GROUP BY trace) n
LEFT JOIN (
    SELECT s.trace AS trace, max({broken}) AS broken, count() AS found
    FROM {checked} s
    JOIN {CHECK_PARENTS} p ON p.trace = s.trace AND p.key = s.span
    WHERE s.span IN (SELECT key FROM {CHECK_PARENTS})
    GROUP BY s.trace) f ON f.trace = n.trace
WHERE coalesce(f.broken, false) OR coalesce(f.found, 0) <> n.parents"""
    return parents, checks


def duplicates_sql(relation: str, where: str) -> str:
    """ClickHouse SQL: the traces of ``relation``'s spans (that satisfy ``where``) with a span id stored twice,
    found by a set of span ids a trace: the whole run's ids at once (a run of up to :data:`CHECK_PART_FACTOR` ×
    ``--part-spans`` spans; past it, :func:`duplicates_sorted_sql`)."""
    return f"SELECT trace FROM {relation} s {where} GROUP BY trace HAVING count() <> uniqExact(span)"


def duplicates_sorted_sql(relation: str, where: str) -> str:
    """ClickHouse SQL: :func:`duplicates_sql`'s traces, found by sorting the spans by (trace, span id) and comparing
    each with the one before: memory bounded by :data:`GROUP_BY_SPILL_BYTES` (the sorted runs spill to disk, ~24
    bytes a span) and time that grows as a sort's (n log n), not with the square of the run. It replaced parts
    by a hash of the span id, each a scan of the whole run (100M spans in 9 parts: 36 s; sorted: 12 s, 0.77 GB
    peak RSS, chdb, 2 cores). The first row's predecessor is NULL, not a span of trace 0."""
    return f"""
SELECT DISTINCT trace FROM (
    SELECT trace, span, lagInFrame(trace) OVER by_id AS trace_before,
           lagInFrame(toNullable(span)) OVER by_id AS span_before
    FROM {relation} s {where}
    WINDOW by_id AS (ORDER BY trace, span ROWS BETWEEN 1 PRECEDING AND CURRENT ROW))
WHERE span = span_before AND trace = trace_before
{_SORT_SPILL}"""


def stamped_steps_sql(relation: str, where: str) -> str:
    """ClickHouse SQL: :data:`STAMPED_STEPS`'s rows, one a (trace, process, iteration) of ``relation``'s spans
    (that satisfy ``where``): its step span as the walk's ``steps`` columns (but ``anchor``), its bucket sums,
    its ``step_spans``, ``spans``, whether a rule flags one of them (``flagged``) and its ``fallbacks``
    (fallback step candidates).

    The step span's fields are not an aggregate of the sums' pass: their states (a tuple a group) pushed the
    pass past :data:`GROUP_BY_SPILL_BYTES` into writing its groups to disk (4.7 s at 10M spans, chdb, 2 cores;
    2.9 s without them). They are read apart, by the step names, which the exporter's sorting key holds
    (0.06 s)."""
    also = f"{where} AND" if where else "WHERE"
    return f"""
SELECT s.rank AS rank, {ResourceFields.rank_label(CLICKHOUSE, "s.rank", "g.process")} AS rank_label,
       g.iteration AS iteration, g.trace AS trace, s.span AS span, s.name AS name, s.wall_ns AS wall_ns,
       'pattern' AS method, s.start_ns AS start_ns, {", ".join(BUCKETS)}, step_spans, spans, flagged, fallbacks
FROM (
    -- a (process, iteration) with two step spans is walked: one of them is enough here
    SELECT trace, process, iteration, rank, span, name, end_ns - start_ns AS wall_ns, start_ns
    FROM {relation} s {also} {_NAMED_STEP}
    LIMIT 1 BY trace, process, iteration) s
RIGHT JOIN (
    SELECT trace, process, iteration, countIf(named_step) AS step_spans, {_BUCKET_SUMS}, count() AS spans,
           max(flagged) AS flagged, countIf(fallback_cand) AS fallbacks
    FROM ({_classified(relation, where)}) c
    GROUP BY trace, process, iteration
    {_spill('group_by', CELLS_SPILL_BYTES)}) g
ON s.trace = g.trace AND s.process = g.process AND s.iteration = g.iteration"""


def trace_plan_sql() -> str:
    """ClickHouse SQL: each trace, whether it must be walked (``walk``) and its ``spans``, from
    :data:`STAMPED_STEPS`, :data:`BROKEN_TRACES` (every part's :func:`trace_checks_sql`: a part holds whole traces)
    and :data:`CHECK_DUPLICATES`: a parent missing or breaking a rule, a flagged span, fallback step
    candidates and no step span (the walk's iteration fallback), a (process, iteration) with two step spans (a
    leaf's nearest one is the walk's to find), a step whose buckets overflow its wall time (a violation the
    walk lists), or a span stored twice."""
    overflow = f"step_spans > 1 OR {'+'.join(BUCKETS)} > wall_ns + {TOLERANCE_NS}"
    return f"""
SELECT trace, max(flagged) OR (sum(step_spans) = 0 AND sum(fallbacks) > 0) OR max(coalesce({overflow}, false))
           OR trace IN (SELECT trace FROM {BROKEN_TRACES}) OR trace IN (SELECT trace FROM {CHECK_DUPLICATES}) AS walk,
       sum(spans) AS spans
FROM {STAMPED_STEPS}
GROUP BY trace"""


def _simple(relation: str, where: str) -> str:
    """ClickHouse SQL: the classified spans of the traces that are not walked."""
    also = f"{where} AND" if where else "WHERE"
    return _classified(relation, f"{also} s.trace NOT IN (SELECT trace FROM {COMPLEX_TRACES})")


def presum_sql(relation: str, where: str, cond: str) -> dict[str, str]:
    """ClickHouse SQL: table -> query for the sums of the traces that are not walked, as the walk's ``rank_parts``,
    ``name_parts``, ``process_parts`` and ``rank_process_parts``, all from one pass (``simple_cube``, made
    first: per rank, process and span name), and ``summary``: (spans, traces, error spans, orphans: 0, as
    every parent is found)."""
    lens = f"lens_process{' AND ' + cond if cond else ''}"
    cube = f"""
        SELECT rank_label, process, name, min(rank) AS rank_min, count() AS n, countIf(error) AS errors,
               sum(end_ns - start_ns) AS total, min(start_ns) AS first_ns, max(end_ns) AS last_ns, {_BUCKET_SUMS},
               countIf({lens}) AS lens_n, minIf(rank, {lens}) AS lens_rank
        FROM ({_simple(relation, where)}) c GROUP BY rank_label, process, name
        {_SPILL}"""
    return {
        "simple_cube": cube,
        "rank_parts": f"""
            SELECT rank_label, min(rank_min) AS rank, min(first_ns) AS first_ns, max(last_ns) AS last_ns,
                   {", ".join(f"sum({b}) AS {b}" for b in BUCKETS)}, 0 AS leaves, 0 AS timed
            FROM simple_cube GROUP BY rank_label""",
        "name_parts": "SELECT name, sum(n) AS n, sum(total) AS total FROM simple_cube GROUP BY name",
        "process_parts": """
            SELECT any(rank_label) AS rank_label, process, sum(lens_n) AS n, min(lens_rank) AS rank FROM simple_cube
            WHERE lens_n > 0 GROUP BY process""",
        "rank_process_parts": "SELECT DISTINCT rank_label, process FROM simple_cube",
        "summary": f"""
            SELECT (SELECT sum(n) FROM simple_cube), (SELECT count() FROM trace_plan WHERE trace NOT IN
                    (SELECT trace FROM {COMPLEX_TRACES})), (SELECT sum(errors) FROM simple_cube), 0""",
    }
