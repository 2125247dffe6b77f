"""The report's invariants: each broken rule counted and the first listed, parent cycles walked once."""

from __future__ import annotations

from array import array
from collections import Counter

from .classify import KD
from .rules import vocabulary_violations
from .store import Store
from .model import BUCKETS, NS_PER_S, Rule, Violation

__all__ = ["TOLERANCE_NS"]

TOLERANCE_NS = 1_000
"""Slack (1 µs) allowed before bucket seconds exceeding a wall time count as a violation."""

_BUCKET_LIST = "(" + ", ".join(f"'{b}'" for b in BUCKETS) + ")"


def _span_ref(db: Store, ids: list[int]) -> dict[int, tuple[str, str, str, str, int, str]]:
    """id -> (trace hex, span hex, name, file, line, rank) for the spans a report names."""
    if not ids:
        return {}
    d = db.dialect
    db.create_columns("wanted", "id BIGINT", [[i] for i in ids])
    rows = db.rows(f"""
        SELECT s.rowid, {d.hex_id('s.trace', 32)}, {d.hex_id('s.span', 16)}, s.name, f.path, s.line - f.first + 1,
               s.rank_label
        FROM spans s JOIN wanted w ON w.id = s.rowid JOIN files f ON f.idx = s.file
    """)
    return {row[0]: row[1:] for row in rows}


def _seconds(ns: int) -> str:
    return f"{ns / NS_PER_S:.6f} s"


def _span_violations(db: Store, limit: int) -> tuple[list[Violation], Counter[str], list[int]]:
    """The invariants the spans ``spans`` holds break (a part of whole traces: each rule but the rank
    overflow, :func:`_merge_violations`, lies within one trace): counted by rule, the first ``limit`` of each
    (by file and line) listed; and the part's (spans, traces, error spans, orphans), read with the counts."""
    d = db.dialect
    # rule -> (condition on k that finds the spans, the reason, read from kd for the listed ones)
    queries = {
        Rule.BAD_TIMING: ("NOT ok", """CASE
                WHEN start_ns IS NULL AND start_text IS NOT NULL AND end_ns IS NULL AND end_text IS NOT NULL
                    THEN 'start ' || start_text || ' and end ' || end_text || ' ns are out of range; skipped'
                WHEN start_ns IS NULL AND start_text IS NOT NULL THEN 'start ' || start_text || ' ns is out of range; skipped'
                WHEN end_ns IS NULL AND end_text IS NOT NULL THEN 'end ' || end_text || ' ns is out of range; skipped'
                WHEN start_ns IS NULL AND end_ns IS NULL THEN 'missing start and end timestamp; skipped'
                WHEN start_ns IS NULL THEN 'missing start timestamp; skipped'
                WHEN end_ns IS NULL THEN 'missing end timestamp; skipped'
                ELSE 'ends ' || printf('%.6f', (start_ns - end_ns) / 1e9) || ' s before it starts; skipped' END"""),
        Rule.UNKNOWN_BUCKET: (f"bucketed AND bucket NOT IN {_BUCKET_LIST}",
                             f"'rl.bucket ''' || bucket || ''' is not one of {', '.join(BUCKETS)}'"),
        Rule.BUCKETED_UMBRELLA: ("bucketed AND umbrella", """
            'umbrella span' || coalesce(' of group ' || grp, '') || ' carries rl.bucket=' || bucket
            || '; umbrellas contain or overlap other work and are never bucketed; not counted'"""),
        Rule.BUCKETED_OVERLAP: ("bucketed AND never_reason IS NOT NULL AND NOT coalesce(umbrella, false)", """
            'carries rl.bucket=' || bucket || ', but ' || never_reason || ', so it must carry no bucket; not counted'"""),
        Rule.TIMER_ONLY: ("bucketed AND timer_only", """
            'efficiency category ' || category || ' is timer-only (a metric, never a span) '
            || 'but was emitted as a span with rl.bucket=' || bucket || '; not counted'"""),
    }
    found: list[tuple[Rule, int, str]] = []
    counts: Counter[str] = Counter()
    nested = ("SELECT anc.fb AS fb, count(*) AS n_inner, min(anc.id) AS example FROM anc "
              "WHERE anc.fb IS NOT NULL AND NOT anc.cyclic AND anc.counted_bucket IS NOT NULL GROUP BY anc.fb")
    overflow = f"{'+'.join(BUCKETS)} > wall_ns + {TOLERANCE_NS}"
    # every rule counted in one statement with the part's sums (a round trip to a ClickHouse server; nine
    # before, one a rule): only a rule that some span breaks is listed
    row = [int(n or 0) for n in db.rows(f"""
        SELECT count(*), count(DISTINCT trace), count(*) FILTER (WHERE error),
               count(*) FILTER (WHERE parent IS NOT NULL) - (SELECT count(*) FROM anc),
               (SELECT count(*) FROM anc WHERE cyclic),
               (SELECT count(*) FROM ({nested}) nested), (SELECT count(*) FROM steps WHERE {overflow}),
               {", ".join(f"count(*) FILTER (WHERE {condition})" for condition, _ in queries.values())}
        FROM k
    """)[0]]
    summary, (cyclic, counts[Rule.NESTED_BUCKET], counts[Rule.STEP_OVERFLOW]), by_span = row[:4], row[4:7], row[7:]
    for (rule, (condition, reason)), count in zip(queries.items(), by_span):
        counts[rule] = count
        if count:
            rows = db.rows(f"WITH {KD} SELECT id, {reason} FROM kd WHERE {condition} "
                           f"ORDER BY file, line, id LIMIT {int(limit)}")
            found += [(rule, span_id, text) for span_id, text in rows]
    if counts[Rule.NESTED_BUCKET]:
        rows = db.rows(f"""
            WITH {KD}
            SELECT o.id, 'bucketed (' || o.bucket || ') span has ' || {d.text('n.n_inner')}
                         || ' bucketed descendant(s), e.g. ''' || e.name || ''' span=' || {d.hex_id('e.span', 16)}
                         || ' (' || e.bucket || ')'
            FROM ({nested}) n JOIN k o ON o.id = n.fb JOIN kd e ON e.id = n.example
            ORDER BY o.file, o.line, o.id LIMIT {int(limit)}
        """)
        found += [(Rule.NESTED_BUCKET, span_id, text) for span_id, text in rows]
    if counts[Rule.STEP_OVERFLOW]:
        rows = db.rows(f"""
            SELECT anchor, 'buckets under step ' || {d.text('iteration')} || ' sum to '
                           || printf('%.6f', ({'+'.join(BUCKETS)}) / 1e9)
                           || ' s, more than its wall time ' || printf('%.6f', wall_ns / 1e9) || ' s'
            FROM steps WHERE {overflow} ORDER BY anchor LIMIT {int(limit)}
        """)
        found += [(Rule.STEP_OVERFLOW, span_id, text) for span_id, text in rows]
    vocabulary, vocabulary_counts = vocabulary_violations(db, limit)  # lens_report.rules
    found += vocabulary
    counts.update(vocabulary_counts)
    counts[Rule.PARENT_CYCLE], cycles = _cycles(db, limit) if cyclic else (0, [])
    found += [(Rule.PARENT_CYCLE, span_id, reason) for span_id, reason in cycles]
    refs = _span_ref(db, sorted({span_id for _, span_id, _ in found}))
    violations = []
    for rule, span_id, reason in found:
        trace, span, name, file, line, rank = refs[span_id]
        violations.append(Violation(rule, trace, span, name, file, line, reason, rank))
    return violations, counts, summary


def _merge_violations(db: Store, found: list[Violation], counts: Counter[str],
                      limit: int) -> tuple[tuple[Violation, ...], Counter[str]]:
    """Every broken invariant of the run: the spans' (``found`` and ``counts``, of every part), then each rank
    whose buckets overflow its wall (from ``rank_totals``); counted by rule, the first ``limit`` listed (the
    ranks', then the spans' by file and line)."""
    counts = Counter(counts)
    overflowing = db.rows(f"""
        SELECT rank_label, rank, {'+'.join(BUCKETS)} AS buckets, wall_ns FROM rank_totals
        WHERE {'+'.join(BUCKETS)} > wall_ns + {TOLERANCE_NS} ORDER BY rank NULLS LAST, rank_label
    """)
    counts[Rule.RANK_OVERFLOW] = len(overflowing)
    rank_violations = [
        Violation(Rule.RANK_OVERFLOW, "-", "-", f"({label})", "", 0,
                  f"buckets of {label} sum to {_seconds(int(buckets))}, more than its wall time {_seconds(int(wall))}",
                  label)
        for label, _, buckets, wall in overflowing]
    counts += Counter()  # drop zero counts
    violations = sorted(found, key=lambda v: (v.file, v.line, v.rule, v.span_id))
    return tuple((rank_violations + violations)[:limit]), counts


def _cycles(db: Store, limit: int) -> tuple[int, list[tuple[int, str]]]:
    """How many spans lie on a parent cycle, and (id, reason) for the first ``limit`` of them (asked only when
    some look never reached a root: :func:`_span_violations` counts them).

    Only spans whose look never reached a root (malformed input) are walked, each once. Their
    parents are among them (a chain that never ends goes on through the parent), so they are
    numbered 0..m-1 in the engine and read back as two arrays of 8 bytes a span: a dict of
    Python ints for 1M cyclic spans took ~330 MB outside ``--memory-limit`` (a 256 MB report
    peaked at 497 MiB)."""
    db.create("cyclic", "SELECT id, pid, row_number() OVER (ORDER BY id) - 1 AS n FROM anc WHERE cyclic")
    ids, parent = array("q"), array("q")
    for _, chunk in db.stream("SELECT c.id, p.n FROM cyclic c JOIN cyclic p ON p.id = c.pid ORDER BY c.n"):
        for span_id, parent_n in chunk:
            ids.append(span_id)
            parent.append(parent_n)
    db.drop("cyclic")
    state = bytearray(len(ids))  # 0: not seen, 1: on the current path, 2: done
    path = array("q")
    on_cycle = 0
    examples: list[tuple[int, str]] = []
    for start in range(len(ids)):
        node = start
        del path[:]
        while not state[node]:
            state[node] = 1
            path.append(node)
            node = parent[node]
        if state[node] == 1:  # the walk came back to its own path: a new cycle
            first = path.index(node)
            on_cycle += len(path) - first
            reason = f"parent ids form a cycle of {len(path) - first} span(s); no root"
            examples += [(ids[member], reason) for member in path[first:first + max(0, limit - len(examples))]]
        for member in path:
            state[member] = 2
    return on_cycle, examples
