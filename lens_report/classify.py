"""What a span is, for the invariant checks: its group, whether it is an umbrella, its efficiency category.

A span stamped by lens carries ``lens.group`` and (on umbrellas) ``lens.umbrella``; efficiency
spans carry ``rl.efficiency.category``. A span without them (an older or a foreign trace) is
resolved by name from the RL catalog (``lens_core.catalogs.rl``). The tables below are loaded
into the report's database once, so every check is a join, not a Python loop over spans.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CATALOG_COLUMNS", "KD", "K_COLUMNS", "load_catalog"]

CATALOG_COLUMNS = "name VARCHAR, grp VARCHAR, umbrella BOOLEAN, category VARCHAR, never_reason VARCHAR"
"""Columns of the ``catalog`` table: one row per catalogued span name."""


K_COLUMNS = ("id", "trace", "span", "parent", "bucket", "iteration", "start_ns", "end_ns", "error", "rank",
              "rank_label", "file", "line", "ok", "bucketed", "umbrella", "never_reason", "timer_only", "counted",
              "cand", "dev_start", "dev_end")
"""The columns of the rollup's classified spans (``k``) that ``kd`` carries (``k`` also keeps what the
by-name rules test: the stamped group, the category and whether the catalog knows the name)."""
KD = """kd AS (
    SELECT """ + ", ".join(f"k.{c} AS {c}" for c in K_COLUMNS) + """, s.name AS name, s.process AS process, s.start_text AS start_text, s.end_text AS end_text,
           coalesce(s.grp, c.grp) AS grp, coalesce(s.category, c.category) AS category
    FROM k JOIN spans s ON s.rowid = k.id LEFT JOIN catalog c ON c.name = s.name)"""
"""A common table expression (``WITH`` + this): ``kd``, each classified span (``k``) with its name,
process, timestamp texts, group and category, read from ``spans`` for the few rows a report lists."""


def _catalog_rows() -> tuple[list[tuple[Any, ...]], list[tuple[str, str]]]:
    from lens_core.catalogs import rl

    umbrellas = set(rl.UMBRELLAS)
    names: list[tuple[Any, ...]] = []
    for name, groups in rl.SPAN_GROUPS.items():
        kinds = {group in umbrellas for group in groups}
        group = groups[0] if len(groups) == 1 else None  # ambiguous names need lens.group
        umbrella = kinds.pop() if len(kinds) == 1 else None
        category = None
        if rl.RLSpanGroup.EFFICIENCY in groups:  # rl.idle.refit_bubble -> idle/refit_bubble
            category = name.removeprefix("rl.").replace(".", "/", 1)
        names.append((name, group, umbrella, category, rl.NEVER_BUCKETED.get(name)))
    for category in rl.TIMER_ONLY_CATEGORIES:
        names.append(("rl." + category.replace("/", "."), rl.RLSpanGroup.EFFICIENCY, False, category, None))
    categories = [(category, "collector" if category in rl.COLLECTOR_LOOP_CATEGORIES else "unbucketed")
                  for category in rl.UNBUCKETED_SPAN_CATEGORIES]
    categories += [(category, "timer-only") for category in rl.TIMER_ONLY_CATEGORIES]
    return names, categories


def load_catalog(db: Any) -> None:
    """Create ``catalog`` (span names) and ``category_rules`` (category, rule: ``collector``,
    ``unbucketed`` or ``timer-only``) in the store ``db`` (either engine) from the RL catalog."""
    names, categories = _catalog_rows()
    db.create_columns("catalog", CATALOG_COLUMNS, [list(row) for row in names])
    db.create_columns("category_rules", "category VARCHAR, rule VARCHAR", [list(row) for row in categories])
