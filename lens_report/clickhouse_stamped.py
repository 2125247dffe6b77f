"""The report's stamped sums over ``otel_traces``: the traces whose Lens stamps give the parent walk's answer,
summed where the spans lie (``GROUP BY``), so only the other traces are copied and walked.

The rollup (:mod:`lens_report.rollup`) gives each counted leaf to its nearest step ancestor by
walking parent links. A trace needs no walk when its structure pins every answer down, which
two passes over its spans check: the children grouped by parent, then each span beside its
children's entry (past :data:`CHECK_PART_FACTOR` × ``--part-spans`` spans, the span ids apart in
parts by span id, the two passes in parts of whole traces of :data:`PARENT_PART_FACTOR` ×
``--part-spans`` parents):

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
from .model import BUCKETS
from .rollup import COUNTED, classified_columns, is_step_span, is_well_timed

__all__ = ["CHECK_DUPLICATES", "CHECK_PARENTS", "CHECK_PART_FACTOR", "COMPLEX_TRACES", "PARENT_PART_FACTOR",
           "STAMPED_STEPS", "STEP_COLUMNS", "TRACE_PLAN", "duplicates_sql", "presum_sql", "stamped_steps_sql",
           "trace_checks_sql", "trace_plan_sql"]

COMPLEX_TRACES = "complex_traces"
"""The working table of the traces that are walked (``trace``): every trace :func:`complex_traces_sql` finds."""

TRACE_PLAN = "trace_plan"
"""The working table of every trace of the run and whether it is walked (``trace``, ``walk``)."""

STAMPED_STEPS = "stamped_steps"
"""The working table of the steps of the other traces, as the walk's ``steps`` rows with each one's count of step
spans (:func:`stamped_steps_sql`); the rows of one step span, in traces not walked after all, are the steps."""

STEP_COLUMNS = ("anchor", "rank", "rank_label", "iteration", "trace", "span", "name", "wall_ns", "method", "start_ns",
                *BUCKETS)
"""The columns of the walk's ``steps`` rows, in its order (``stamped_steps`` also counts each row's step spans)."""

GROUP_BY_SPILL_BYTES = 256_000_000
"""Memory a span-by-span ``GROUP BY`` may hold before ClickHouse writes its groups to disk: the bound on the
stamped sums' working set whatever the number of spans."""

_SPILL = (f"SETTINGS max_bytes_before_external_group_by = {GROUP_BY_SPILL_BYTES}, "
          "max_bytes_ratio_before_external_group_by = 0")
"""The settings every ``GROUP BY`` of the spans runs under: its groups go to disk past the bound."""

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
finds a span stored twice) is checked on its own, in parts of this size, and the rest of the check in parts of
:data:`PARENT_PART_FACTOR` × ``--part-spans`` parents."""

PARENT_PART_FACTOR = 2
"""Past :data:`CHECK_PART_FACTOR` × ``--part-spans`` spans, the structure check's two passes take the traces of
this many × ``--part-spans`` parents (span ids that spans name as their parent) at once: what they hold is a row
a parent (at 100M spans with 1M parents, chdb: 0.56 GB peak for the first pass, 0.64 GB for the second). A Lens
trace has a parent a step and umbrella, so a run's parents follow its (rank, step) cells, not its spans."""

CHECK_DUPLICATES = "check_duplicates"
"""The working table of the traces with a span stored twice (``trace``), when :func:`duplicates_sql` found them
apart from the structure check (a run past :data:`CHECK_PART_FACTOR` × ``--part-spans`` spans)."""

CHECK_PARENTS = "check_parents"
"""The working table of one part's parents, made by :func:`trace_checks_sql`'s first statement: a row a span id
that spans of the part name as their parent (``trace``, ``key``), with what its children need of it."""

# a span's place in the order (start, span id), as one number
_ORDER = "bitShiftLeft(toUInt128(coalesce(start_ns, 0) + 9223372036854775808), 64) + span"
# a span's (process, iteration), as one number (0: no iteration)
_CODE = "if(iteration IS NULL, toUInt64(0), bitOr(cityHash64(process, iteration), 1))"


def trace_checks_sql(relation: str, where: str, duplicates: bool = True) -> tuple[str, str]:
    """ClickHouse SQL, two statements: :data:`CHECK_PARENTS` of ``relation`` (spans that satisfy ``where``),
    then per trace what the structure check found: ``bad`` (a condition of the module broken), ``steps``
    (step spans) and ``fallbacks`` (fallback step candidates), from which :func:`trace_plan_sql` decides.
    The store runs them on parts of whole traces (:meth:`~lens_report.clickhouse.ClickHouseStore.span_parts`);
    a trace larger than a part is checked whole, its ``GROUP BY`` spilled to disk past
    :data:`GROUP_BY_SPILL_BYTES`.

    The first groups the children by parent: what a parent must satisfy is the earliest of its children
    in the order (start, span id), and the (process, iteration) its children other than step spans
    need of it (a 64-bit hash: two that differ read equal once in 2^64 comparisons). The second reads
    each span beside its entry there, if any, and per trace counts the spans, the distinct span ids (a
    span stored twice; not with ``duplicates`` False: :func:`duplicates_sql` then finds them), the parents
    found (each parent id a span of the trace) and any broken rule.
    Grouping the children alone keeps the groups to the parents (a tenth of the spans of a Lens trace):
    one ``GROUP BY`` of every span id with its children's rows took 13.8 s at 10M spans (chdb, 2 cores),
    these two 7.4 s."""
    # the children's side reads the spans' own columns only (no joins to the rules: 3.8 s to 2.6 s at 10M spans);
    # a step span needs nothing of its parent
    need = f"if({_NAMED_STEP}, NULL, {_CODE})"
    parents = f"""
SELECT trace, parent AS key, min({_ORDER}) AS kid_ord, min({need}) AS need_lo, max({need}) AS need_hi
FROM {relation} s
{f"{where} AND" if where else "WHERE"} s.parent IS NOT NULL
GROUP BY trace, parent
{_SPILL}"""
    # a parent: bucketed, or not before each child, or not the (process, iteration) a child needs
    broken = f"""bucketed OR NOT coalesce({_ORDER} < p.kid_ord, false)
                 OR (p.need_lo IS NOT NULL AND NOT coalesce(p.need_lo = {_CODE} AND p.need_hi = {_CODE}, false))"""
    per_trace = f"""
SELECT c.trace AS trace, {"count() <> uniqExact(c.span) OR " if duplicates else ""}max(flagged)
           OR max(p.key IS NOT NULL AND ({broken}))
           AS broken, countIf(p.key IS NOT NULL) AS found, countIf(named_step) AS steps,
       countIf(fallback_cand) AS fallbacks
FROM ({_classified(relation, where)}) c
LEFT JOIN {CHECK_PARENTS} p ON p.trace = c.trace AND p.key = c.span
GROUP BY c.trace
{_SPILL}"""
    # a parent id no span of its trace has (an orphan) is a parent not found
    checks = f"""
SELECT t.trace AS trace, broken OR found <> coalesce(n.parents, 0) AS bad, steps, fallbacks
FROM ({per_trace}) t
LEFT JOIN (SELECT trace, count() AS parents FROM {CHECK_PARENTS} GROUP BY trace) n ON n.trace = t.trace"""
    return parents, checks


def duplicates_sql(relation: str, where: str) -> str:
    """ClickHouse SQL: the traces of ``relation``'s spans (that satisfy ``where``) with a span id stored twice.
    Run on parts by a hash of the span id (the copies of a span lie in one part), it holds a part's span ids,
    not the run's (a ninth of 100M spans, one ``uniqExact`` a trace: 0.23 GB more than the first pass, chdb)."""
    return f"SELECT trace FROM {relation} s {where} GROUP BY trace HAVING count() <> uniqExact(span)"


def trace_plan_sql(duplicates: bool = False) -> str:
    """ClickHouse SQL: each trace and whether it must be walked (``walk``), from ``trace_checks`` (every part's
    :func:`trace_checks_sql`, a row a trace: a part holds whole traces): a broken condition, or fallback step
    candidates and no step span (the walk's iteration fallback), or (``duplicates``) a span stored twice, from
    :data:`CHECK_DUPLICATES`. Two conditions :func:`stamped_steps_sql` finds (a step span twice, a bucket
    overflow)."""
    twice = f" OR trace IN (SELECT trace FROM {CHECK_DUPLICATES})" if duplicates else ""
    return f"SELECT trace, bad OR (steps = 0 AND fallbacks > 0){twice} AS walk FROM trace_checks"


def _simple(relation: str, where: str) -> str:
    """ClickHouse SQL: the classified spans of the traces that are not walked."""
    also = f"{where} AND" if where else "WHERE"
    return _classified(relation, f"{also} s.trace NOT IN (SELECT trace FROM {COMPLEX_TRACES})")


_STEP_RANK_LABEL = ResourceFields.rank_label(CLICKHOUSE, "step.1", "process")
"""SQL: the step span's rank label, from its rank and its process (the group's): the spans' own ``rank_label``."""


def stamped_steps_sql(relation: str, where: str) -> str:
    """ClickHouse SQL: the steps of the traces that are not walked, as the walk's ``steps`` rows (the anchor is a
    negative number: walked spans' row ids are not)."""
    return f"""
SELECT -1 - toInt64(rowNumberInAllBlocks()) AS anchor, step.1 AS rank, {_STEP_RANK_LABEL} AS rank_label, iteration,
       trace, step.2 AS span, step.3 AS name, step.4 AS wall_ns, 'pattern' AS method, step.5 AS start_ns,
       {", ".join(BUCKETS)}, step_spans
FROM (
    -- the step span's fields as one tuple: one aggregate, not five (with plain sums: 8.1 s to 5.1 s at 10M spans);
    -- its rank label made from them once a step, not carried from every span (4.9 s to 4.2 s)
    SELECT trace, process, iteration, anyIf((rank, span, name, end_ns - start_ns, start_ns), named_step)
               AS step, countIf(named_step) AS step_spans, {_BUCKET_SUMS}
    FROM ({_simple(relation, where)}) c
    WHERE named_step OR counted
    GROUP BY trace, process, iteration)
{_SPILL}"""


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
