"""The report's by-name rules over the catalog: efficiency buckets, validation, umbrella stamps, uncatalogued buckets.

Each rule is one query over the classified spans (``k``, ``kd``, ``parents`` and the catalog
tables ``lens_report.classify`` loads) that yields ``(span row id, reason)``; the rollup counts
and lists them beside its own invariants. A span a rule flags is still counted in the sums: these
rules say what the emitter got wrong, the structural ones (``bucketed-umbrella``, ...) what a sum
must leave out.
"""

from __future__ import annotations

from typing import Any

from .model import BUCKETS

__all__ = [
    "RULE_EFFICIENCY_BUCKET",
    "RULE_UMBRELLA_GROUP_BUCKET",
    "RULE_UNCATALOGUED_BUCKET",
    "RULE_VALIDATION_PRODUCTIVE",
    "VOCABULARY_RULES",
    "vocabulary_violations",
]

RULE_EFFICIENCY_BUCKET = "efficiency-bucket"
"""An efficiency span carries a bucket other than its category's (``rl.idle.refit_bubble`` productive)."""

RULE_VALIDATION_PRODUCTIVE = "validation-productive"
"""A productive span under an evaluate span: validation tokens are scored and discarded, so overhead."""

RULE_UMBRELLA_GROUP_BUCKET = "umbrella-group-bucket"
"""A bucketed span whose stamped ``lens.group`` is an umbrella group (``per_prompt`` on a data-plane put)."""

RULE_UNCATALOGUED_BUCKET = "uncatalogued-bucket"
"""A bucketed span with no ``lens.group`` stamp whose name no catalog knows: its bucket is unchecked."""

VOCABULARY_RULES = (RULE_EFFICIENCY_BUCKET, RULE_UMBRELLA_GROUP_BUCKET, RULE_UNCATALOGUED_BUCKET,
                    RULE_VALIDATION_PRODUCTIVE)
"""The rules this module checks."""

_BUCKET_LIST = "(" + ", ".join(f"'{b}'" for b in BUCKETS) + ")"
# Depth at which the walk up from a productive span gives up (a parent cycle, or absurd nesting).
_MAX_DEPTH = 64


def _queries() -> dict[str, str]:
    # the bucket a category's span must carry: the catalog's, else the category's prefix when it
    # names a bucket (idle/x -> idle), as lens_core.efficiency.category_bucket decides at emission
    expected = f"""coalesce(cb.bucket, CASE WHEN split_part(d.category, '/', 1) IN {_BUCKET_LIST}
                                     THEN split_part(d.category, '/', 1) END)"""
    return {
        RULE_EFFICIENCY_BUCKET: f"""
            SELECT d.id, 'efficiency category ' || d.category || ' is bucketed ' || {expected}
                         || ' but the span carries rl.bucket=' || d.bucket
                         || '; an efficiency span keeps its category''s bucket'
            FROM kd d LEFT JOIN category_buckets cb ON cb.category = d.category
            WHERE d.bucketed AND d.category IS NOT NULL AND d.bucket IN {_BUCKET_LIST}
                  AND d.category NOT IN (SELECT category FROM category_rules)
                  AND {expected} IS NOT NULL AND d.bucket <> {expected}""",
        RULE_UMBRELLA_GROUP_BUCKET: """
            SELECT k.id, 'stamped lens.group=' || s.grp || ', an umbrella group, but carries rl.bucket=' || k.bucket
                         || '; spans of an umbrella group overlap (one per prompt, or containing other work) '
                         || 'and are never bucketed'
            FROM k JOIN spans s ON s.rowid = k.id
            WHERE k.bucketed AND NOT coalesce(k.umbrella, false) AND s.grp IN (SELECT grp FROM umbrella_groups)""",
        RULE_UNCATALOGUED_BUCKET: """
            SELECT k.id, 'carries rl.bucket=' || k.bucket || ' but has no lens.group stamp and no catalog knows '
                         || 'its name, so nothing says it is a leaf; register its group, or emit it through lens'
            FROM k JOIN spans s ON s.rowid = k.id
            WHERE k.bucketed AND s.grp IS NULL AND s.name NOT IN (SELECT name FROM catalog)""",
        RULE_VALIDATION_PRODUCTIVE: f"""
            WITH RECURSIVE evals AS (SELECT id, name FROM kd WHERE grp = 'evaluate'),
            up(id, pid, depth) AS (
                SELECT k.id, p.pid, 1 FROM k JOIN parents p ON p.id = k.id
                WHERE k.bucketed AND k.bucket = 'productive' AND EXISTS (SELECT 1 FROM evals)
                UNION ALL
                SELECT up.id, p.pid, up.depth + 1 FROM up JOIN parents p ON p.id = up.pid
                WHERE up.depth < {_MAX_DEPTH} AND up.pid NOT IN (SELECT id FROM evals)
            )
            SELECT up.id, 'productive under evaluate span ' || chr(39) || min(e.name) || chr(39)
                          || ': validation generation is scored and discarded, so it is overhead '
                          || '(open it inside bucket_scope(Bucket.OVERHEAD))'
            FROM up JOIN evals e ON e.id = up.pid GROUP BY up.id""",
    }


def load_rule_tables(con: Any) -> None:
    """Create ``category_buckets`` (category, bucket) and ``umbrella_groups`` (grp) from the RL catalog."""
    from lens_core.catalogs import rl

    con.execute("CREATE OR REPLACE TEMP TABLE category_buckets (category VARCHAR, bucket VARCHAR)")
    rows = [[category, bucket] for category, bucket in rl.EFFICIENCY_CATEGORY_BUCKET.items() if bucket is not None]
    if rows:
        con.executemany("INSERT INTO category_buckets VALUES (?, ?)", rows)
    con.execute("CREATE OR REPLACE TEMP TABLE umbrella_groups (grp VARCHAR)")
    con.executemany("INSERT INTO umbrella_groups VALUES (?)", [[group] for group in rl.UMBRELLAS])


def vocabulary_violations(con: Any, limit: int) -> tuple[list[tuple[str, int, str]], dict[str, int]]:
    """``(rule, span row id, reason)`` for the first ``limit`` spans of each rule, and every rule's count."""
    load_rule_tables(con)
    found: list[tuple[str, int, str]] = []
    counts: dict[str, int] = {}
    for rule, query in _queries().items():
        con.execute(f"CREATE OR REPLACE TEMP TABLE rule_hits AS {query}")
        counts[rule] = con.execute("SELECT count(*) FROM rule_hits").fetchall()[0][0]
        if counts[rule]:
            rows = con.execute(f"SELECT * FROM rule_hits ORDER BY 1 LIMIT {int(limit)}").fetchall()
            found += [(rule, span_id, reason) for span_id, reason in rows]
    con.execute("DROP TABLE IF EXISTS rule_hits")
    return found, counts
