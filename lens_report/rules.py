"""The report's by-name rules over the catalog: efficiency buckets, validation, umbrella stamps, uncatalogued buckets.

Each rule is one query over the classified spans (``k``, with the stamped group, category and
catalog membership each rule tests; ``kd``, ``anc`` (each span's parent id) and the catalog tables
``lens_report.classify`` loads) that yields ``(span row id, reason)``; the rollup counts
and lists them beside its own invariants. A span a rule flags is still counted in the sums: these
rules say what the emitter got wrong, the structural ones (``bucketed-umbrella``, ...) what a sum
must leave out.
"""

from __future__ import annotations

from typing import Any

from .classify import KD
from .dialect import Dialect
from .model import BUCKETS, Rule

__all__ = [
    "VOCABULARY_RULES",
    "load_rule_tables",
    "vocabulary_violations",
]

VOCABULARY_RULES = (Rule.EFFICIENCY_BUCKET, Rule.UMBRELLA_GROUP_BUCKET, Rule.UNCATALOGUED_BUCKET,
                    Rule.VALIDATION_PRODUCTIVE)
"""The rules this module checks."""

_BUCKET_LIST = "(" + ", ".join(f"'{b}'" for b in BUCKETS) + ")"
# Depth at which the walk up from a productive span gives up (a parent cycle, or absurd nesting).
_MAX_DEPTH = 64


def _queries(d: Dialect) -> dict[Rule, str]:
    # the bucket a category's span must carry: the catalog's, else the category's prefix when it
    # names a bucket (idle/x -> idle), as lens_core.efficiency.category_bucket decides at emission
    prefix = d.regexp_group("d.category", "^([^/]*)", 1)
    expected = f"""coalesce(cb.bucket, CASE WHEN {prefix} IN {_BUCKET_LIST} THEN {prefix} END)"""
    return {
        Rule.EFFICIENCY_BUCKET: f"""
            SELECT d.id, 'efficiency category ' || d.category || ' is bucketed ' || {expected}
                         || ' but the span carries rl.bucket=' || d.bucket
                         || '; an efficiency span keeps its category''s bucket'
            FROM k d LEFT JOIN category_buckets cb ON cb.category = d.category
            WHERE d.bucketed AND d.category IS NOT NULL AND d.bucket IN {_BUCKET_LIST}
                  AND d.category NOT IN (SELECT category FROM category_rules)
                  AND {expected} IS NOT NULL AND d.bucket <> {expected}""",
        Rule.UMBRELLA_GROUP_BUCKET: f"""
            SELECT k.id, 'stamped lens.group=' || k.stamped_grp || ', an umbrella group, but carries rl.bucket='
                         || k.bucket || '; spans of an umbrella group overlap (one per prompt, or containing other '
                         || 'work) and are never bucketed'
            FROM k
            WHERE k.bucketed AND NOT coalesce(k.umbrella, false) AND k.stamped_grp IN (SELECT grp FROM umbrella_groups)""",
        Rule.UNCATALOGUED_BUCKET: f"""
            SELECT k.id, 'carries rl.bucket=' || k.bucket || ' but has no lens.group stamp and no catalog knows '
                         || 'its name, so nothing says it is a leaf; register its group, or emit it through lens'
            FROM k WHERE k.bucketed AND k.stamped_grp IS NULL AND NOT k.catalogued""",
        Rule.VALIDATION_PRODUCTIVE: f"""
            WITH RECURSIVE {KD}, evals AS (SELECT id, name FROM kd WHERE grp = 'evaluate'),
            up(id, pid, depth) AS (
                SELECT k.id, p.pid, 1 FROM k JOIN anc p ON p.id = k.id
                WHERE k.bucketed AND k.bucket = 'productive' AND EXISTS (SELECT 1 FROM evals)
                UNION ALL
                SELECT up.id, p.pid, up.depth + 1 FROM up JOIN anc p ON p.id = up.pid
                WHERE up.depth < {_MAX_DEPTH} AND up.pid NOT IN (SELECT id FROM evals)
            )
            SELECT up.id, 'productive under evaluate span ''' || min(e.name) || ''''
                          || ': validation generation is scored and discarded, so it is overhead '
                          || '(open it inside bucket_scope(Bucket.OVERHEAD))'
            FROM up JOIN evals e ON e.id = up.pid GROUP BY up.id""",
    }


def load_rule_tables(db: Any) -> None:
    """Create ``category_buckets`` (category, bucket) and ``umbrella_groups`` (grp) from the RL catalog."""
    from lens_core.catalogs import rl

    db.create_columns("category_buckets", "category VARCHAR, bucket VARCHAR",
                      [[category, bucket] for category, bucket in rl.EFFICIENCY_CATEGORY_BUCKET.items()
                       if bucket is not None])
    db.create_columns("umbrella_groups", "grp VARCHAR", [[group] for group in rl.UMBRELLAS])


_HAS_EVALUATE_SPANS = """
    SELECT count(*) FROM (
        SELECT 1 FROM spans s WHERE s.grp = 'evaluate'
            OR (s.grp IS NULL AND s.name IN (SELECT name FROM catalog WHERE grp = 'evaluate')) LIMIT 1) e"""
"""SQL: 1 when some span is of the evaluate group (stamped, or by its catalogued name), else 0: without one the
validation rule has nothing to find, and its walk up from every productive span (the costliest rule, ~1 s of CPU
per 1M spans) is not run."""


def vocabulary_violations(db: Any, limit: int) -> tuple[list[tuple[Rule, int, str]], dict[str, int]]:
    """``(rule, span row id, reason)`` for the first ``limit`` spans of each rule, and every rule's count
    (the tables of :func:`load_rule_tables` made first, once a report)."""
    found: list[tuple[Rule, int, str]] = []
    queries = _queries(db.dialect)
    validation = queries.pop(Rule.VALIDATION_PRODUCTIVE)
    # the rules of single spans counted, then listed where some span breaks them (their query run again: only on
    # input that breaks them); three tables were made, counted and dropped
    selects = [f"(SELECT count(*) FROM ({query}) h)" for query in queries.values()] + [f"({_HAS_EVALUATE_SPANS})"]
    if db.dialect.clickhouse:  # a statement is a round trip to the server: every count in one
        *counted, evaluated = db.rows("SELECT " + ", ".join(selects))[0]
    else:  # in process, one at a time: side by side DuckDB needed twice the rollup's memory (each rule reads k)
        *counted, evaluated = [db.value("SELECT " + select) for select in selects]
    counts: dict[str, int] = {rule: int(n or 0) for rule, n in zip(queries, counted)}
    for rule, query in queries.items():
        if counts[rule]:
            rows = db.rows(f"SELECT * FROM ({query}) h ORDER BY 1 LIMIT {int(limit)}")
            found += [(rule, span_id, reason) for span_id, reason in rows]
    counts[Rule.VALIDATION_PRODUCTIVE] = 0  # without an evaluate span nothing to walk up to: that walk is skipped
    if evaluated:
        db.create("rule_hits", validation)
        counts[Rule.VALIDATION_PRODUCTIVE] = int(db.value("SELECT count(*) FROM rule_hits") or 0)
        if counts[Rule.VALIDATION_PRODUCTIVE]:
            rows = db.rows(f"SELECT * FROM rule_hits ORDER BY 1 LIMIT {int(limit)}")
            found += [(Rule.VALIDATION_PRODUCTIVE, span_id, reason) for span_id, reason in rows]
        db.drop("rule_hits")
    return found, counts
