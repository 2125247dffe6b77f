"""Which service name wins on the Resource: config, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, caller."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from lens_core import LensConfig  # noqa: E402
from otel_bridge.sdk.providers import build_resource  # noqa: E402


def _service(config, monkeypatch, caller=None, **env):
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resource = build_resource(service_name=config.service_name, user=config.user, run_id="r", rank=0,
                              world_size=1, local_rank=0, resource_attributes=caller)
    return resource.attributes["service.name"]


def test_an_explicit_config_service_name_beats_otel_service_name(monkeypatch):
    """Regression: the SDK's environment detector re-applied OTEL_SERVICE_NAME after lens's
    own attributes, overriding LENS_SERVICE_NAME / LensConfig(service_name=...)."""
    assert _service(LensConfig(service_name="trainer"), monkeypatch, OTEL_SERVICE_NAME="other") == "trainer"


def test_otel_resource_attributes_names_the_service_when_the_config_does_not(monkeypatch):
    assert _service(LensConfig(), monkeypatch, OTEL_RESOURCE_ATTRIBUTES="service.name=from-env") == "from-env"


def test_the_callers_resource_attributes_win_over_everything(monkeypatch):
    config = LensConfig(service_name="trainer")
    assert _service(config, monkeypatch, {"service.name": "caller"}, OTEL_SERVICE_NAME="x") == "caller"
