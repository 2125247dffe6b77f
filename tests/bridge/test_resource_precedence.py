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


def _resource(monkeypatch, caller=None, **env):
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_resource(service_name="lens", run_id="r", rank=0, world_size=1, local_rank=0,
                          resource_attributes=caller).attributes


def test_nv_dl_rank_in_otel_resource_attributes_names_the_instance_and_stays_an_int(monkeypatch):
    """Regression (issue 41, NeMo Lens's open work since our pin): with nv.dl.rank=7 in
    OTEL_RESOURCE_ATTRIBUTES the resource said "7" (a string) while service.instance.id said
    rank 0; the seed resolves the instance id from nv.dl.rank."""
    attrs = _resource(monkeypatch, OTEL_RESOURCE_ATTRIBUTES="nv.dl.rank=7,nv.dl.world_size=8,nv.dl.local_rank=3")
    assert (attrs["nv.dl.rank"], attrs["nv.dl.world_size"], attrs["nv.dl.local_rank"]) == (7, 8, 3)
    assert attrs["service.instance.id"].startswith("r-rank7-")
    # the caller's rank still wins, and text that is no number is left as given
    attrs = _resource(monkeypatch, {"nv.dl.rank": 3}, OTEL_RESOURCE_ATTRIBUTES="nv.dl.rank=7")
    assert attrs["nv.dl.rank"] == 3 and attrs["service.instance.id"].startswith("r-rank3-")
    attrs = _resource(monkeypatch, OTEL_RESOURCE_ATTRIBUTES="nv.dl.rank=seven")
    assert attrs["nv.dl.rank"] == "seven"
    assert _resource(monkeypatch)["service.instance.id"].startswith("r-rank0-")
