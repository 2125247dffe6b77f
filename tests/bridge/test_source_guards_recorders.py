"""The bucket guard holds on both recorders and both gates: a caller's rl.bucket passed as a keyword is
validated on the compiled fast path (_gate._gated_attributes) exactly as on the Python one."""

import logging

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, _impl, managed_span  # noqa: E402
from lens_core.catalogs import rl  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402

IMPLEMENTATIONS = ["cython", "python"] if _impl.IMPLEMENTATION == "cython" else ["python"]


@pytest.fixture(params=IMPLEMENTATIONS)
def gate(request):
    before = _impl.IMPLEMENTATION
    _impl.use(request.param)
    yield request.param
    _impl.use(before)


@pytest.mark.parametrize("recorder", ["native", "sdk"])
def test_an_unknown_bucket_keyword_is_refused_on_every_path(gate, recorder, caplog):
    """Regression: the compiled fast path copied a leaf's rl.bucket keyword through unchecked."""
    rl.register()
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, span_groups="all", recorder=recorder), span_exporter=exporter)
    try:
        with caplog.at_level(logging.WARNING, "lens_core"):
            with managed_span("policy_update", "bad", **{"rl.bucket": "nonsense"}):
                pass
            with managed_span("generation", "fine", **{"rl.bucket": "overhead"}):
                pass
            with managed_span("reward", "plain", n=1):
                pass
    finally:
        handle.shutdown()
    spans = {s.name: dict(s.attributes) for s in exporter.get_finished_spans()}
    assert spans["bad"]["rl.bucket"] == "productive"
    assert spans["fine"]["rl.bucket"] == "overhead"
    assert spans["plain"]["rl.bucket"] == "productive" and spans["plain"]["n"] == 1
    assert any(__file__ in r.getMessage() and "nonsense" in r.getMessage() for r in caplog.records)
    assert lens_core.installed_backend() is None
