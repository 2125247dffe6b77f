"""The Store protocol: both engines' stores implement it, and the report asks nothing of a store outside it."""

from __future__ import annotations

import ast
import pathlib

import pytest

from lens_report.store import Store, TraceStore

_REPORT = pathlib.Path(__file__).resolve().parents[2] / "lens_report"


def _members(protocol: type) -> set[str]:
    names = set(getattr(protocol, "__annotations__", {}))
    return names | {name for name in vars(protocol) if not name.startswith("_")}


def test_the_file_store_is_a_store():
    """TraceStore (DuckDB) has every member the protocol lists."""
    with TraceStore() as store:
        assert isinstance(store, Store)


def test_the_clickhouse_store_is_a_store():
    """ClickHouseStore (chdb here) has every member the protocol lists, whatever it inherits or not."""
    pytest.importorskip("chdb")
    from lens_report.clickhouse import ChdbSource, ClickHouseStore

    source = ChdbSource()
    try:
        with ClickHouseStore(source, "otel_traces") as store:
            assert isinstance(store, Store)
    finally:
        source.close()


def test_a_class_without_a_member_is_not_a_store():
    """The check above can fail: a store that cannot drop its working tables is not a Store."""

    class NoDrop(TraceStore):
        drop = None  # type: ignore[assignment]

    with NoDrop() as store:
        assert not isinstance(store, Store)


@pytest.mark.parametrize("module", ["rollup.py", "invariants.py", "waterfall.py", "render_html.py", "perfetto.py"])
def test_the_rollup_and_the_views_ask_only_for_the_protocols_members(module):
    """Every attribute the rollup, the page and the Perfetto export read of a store (``store.x``,
    ``db.x``) is a member of Store: a second engine's store that implements the protocol runs them."""
    tree = ast.parse((_REPORT / module).read_text())
    asked = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("store", "db")}
    assert asked, f"{module} names no store attribute: the scan found nothing to check"
    assert asked <= _members(Store), sorted(asked - _members(Store))


def test_report_of_a_path_or_of_paths_is_build_report_over_a_loaded_store(two_step_file):
    """``lens_report.report`` (the package's entry point) takes one path or several and gives
    what :func:`build_report` gives over a store that loaded them; options pass through."""
    import lens_report

    with TraceStore() as store:
        store.load([two_step_file])
        built = lens_report.build_report(store, top_n=1).to_json()
    assert lens_report.report(two_step_file, top_n=1).to_json() == built
    assert lens_report.report([str(two_step_file)], top_n=1).to_json() == built


def test_the_package_exports_its_entry_points_rules_and_result_model_only():
    """``lens_report``'s public names: entry points, the Store protocol, Rule and the result
    model, sorted and each documented; no rule constants or install plumbing."""
    import lens_report

    names = lens_report.__all__
    assert list(names) == sorted(names) and len(names) <= 30
    assert not [n for n in names if n.startswith("RULE") or n in ("ENGINE_HINT", "require_duckdb", "find_trace_files")]
    undocumented = [n for n in names if not (getattr(lens_report, n).__doc__ or "").strip()]
    assert not undocumented, undocumented
