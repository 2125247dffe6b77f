"""The efficiency/* metrics stay a bounded number of series whatever categories the code records."""

import json

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402

from lens_core import LensConfig, efficiency, semconv  # noqa: E402
from lens_core.catalogs import rl  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402


@pytest.fixture
def fresh_categories():
    getattr(efficiency, "_unregistered", set()).clear()  # the categories given series by earlier tests
    yield
    getattr(efficiency, "_unregistered", set()).clear()


def test_ten_thousand_distinct_efficiency_categories_stay_a_bounded_number_of_series(fresh_categories, caplog):
    """Regression: 10,000 distinct categories through record_efficiency_time made 10,012
    metric series and 14 MB of metrics. The catalog's categories and 32 others get series;
    the rest share efficiency/other (its count is how many waits went there), one warning."""
    rl.register()
    catalog = len(efficiency.EFFICIENCY_CATEGORY_BUCKET.keys() | efficiency.TIMER_ONLY)
    cap = getattr(efficiency, "MAX_UNREGISTERED_CATEGORIES", 32)
    reader = InMemoryMetricReader()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="all"), metric_reader=reader)
    try:
        efficiency.record_efficiency_time("idle/refit_event_wait", 1.5)  # a catalog category: its own series
        for i in range(10_000):
            efficiency.record_efficiency_time(f"hostile/{i}", 0.5)
        data = reader.get_metrics_data()
    finally:
        handle.shutdown()
    series = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name.startswith(semconv.EFFICIENCY_METRIC_PREFIX):
                    for point in metric.data.data_points:
                        series[(metric.name, json.dumps(dict(point.attributes), sort_keys=True))] = point
    size = len(data.to_json())
    print(f"10,000 categories: {len(series)} efficiency series, {size / 1e6:.2f} MB of metrics as JSON")
    names = {name for name, _ in series}
    assert len(series) <= catalog + cap + 1
    assert len(names - {f"efficiency/hostile/{i}" for i in range(10_000)}) == 2  # the catalog's one and other
    other = [p for (name, _), p in series.items() if name == "efficiency/other"]
    assert len(other) == 1 and other[0].count == 10_000 - cap
    assert other[0].attributes[semconv.RL_EFFICIENCY_CATEGORY] == "other"
    assert series_total_seconds(series) == 1.5 + 10_000 * 0.5  # no second lost
    assert sum("efficiency/other" in r.getMessage() for r in caplog.records) == 1


def series_total_seconds(series):
    return sum(p.sum for p in series.values())
