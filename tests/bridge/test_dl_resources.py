"""The nv.dl.* resource families, process tags, the declared schema, and the efficiency/* and setup metrics."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, efficiency, efficiency_span, semconv  # noqa: E402
from lens_core.catalogs import rl  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from otel_bridge.instruments.registry import record_metrics  # noqa: E402
from otel_bridge.resources import (  # noqa: E402
    detect_software,
    detect_topology,
    process_attributes,
    topology_attributes,
    training_attributes,
)

T = semconv.NV_DL_TOPOLOGY_SIZE


def test_topology_comes_from_the_launchers_environment():
    assert detect_topology({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}) == {T + "world": 16, T + "local": 8,
                                                                           T + "nodes": 2}
    assert detect_topology({"SLURM_NTASKS": "32", "SLURM_NTASKS_PER_NODE": "4(x8)", "SLURM_JOB_NUM_NODES": "8"}) == {
        T + "world": 32, T + "local": 4, T + "nodes": 8}
    assert detect_topology({}) == {}


def test_a_bad_topology_variable_is_ignored_with_a_warning(caplog):
    assert detect_topology({"WORLD_SIZE": "many", "SLURM_NTASKS": "4"}) == {T + "world": 4}
    assert "WORLD_SIZE='many'" in caplog.text


def test_parallelism_sizes_are_validated():
    assert topology_attributes(tensor_parallel=8, pipeline_parallel=2) == {T + "tensor_parallel": 8,
                                                                           T + "pipeline_parallel": 2}
    with pytest.raises(ValueError, match="tensor_parallel=0: must be a positive int"):
        topology_attributes(tensor_parallel=0)
    with pytest.raises(ValueError, match="'tp' is not one of"):
        topology_attributes(tp=8)


def test_software_versions_come_from_installed_metadata():
    from importlib import metadata

    found = detect_software(("opentelemetry-sdk", "surely-not-installed-lens-package"))
    assert found == {semconv.NV_DL_SOFTWARE + "opentelemetry_sdk": metadata.version("opentelemetry-sdk")}


def test_software_versions_equal_importlib_metadata_for_every_default_package():
    """The dist-info listing (one listdir per path entry) says what importlib.metadata says."""
    from importlib import metadata

    from otel_bridge.resources.dl import SOFTWARE_PACKAGES, _package_key

    expected = {}
    for package in SOFTWARE_PACKAGES:
        try:
            expected[semconv.NV_DL_SOFTWARE + _package_key(package)] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    assert detect_software() == expected and expected


def test_training_config_and_targets_flatten_to_dotted_keys():
    attrs = training_attributes({"micro_batch_size": 4, "optimizer": {"lr": 1e-5, "name": "adam"}, "skip": None,
                                 "seq": [1, 2]}, {"steps": 10_000})
    assert attrs == {"nv.dl.training.config.micro_batch_size": 4, "nv.dl.training.config.optimizer.lr": 1e-5,
                     "nv.dl.training.config.optimizer.name": "adam", "nv.dl.training.config.seq": (1, 2),
                     "nv.dl.training.target.steps": 10_000}
    with pytest.raises(ValueError, match="training config: bad=.*object"):
        training_attributes({"bad": object()})


@pytest.mark.parametrize("algorithm,stage", [("grpo", "RL"), ("sft", "SFT"), ("sft_v2", "SFT"), ("rm", "RM"),
                                             ("dpo", "RL")])
def test_process_attributes_derive_the_campaign_stage(algorithm, stage):
    attrs = process_attributes(algorithm=algorithm, model="llama", precision="bf16", provider="nvidia")
    assert attrs == {semconv.RL_ALGORITHM: algorithm, semconv.RL_MODEL: "llama", semconv.NEMO_PRECISION: "bf16",
                     semconv.NV_DL_PROVIDER_NAME: "nvidia", semconv.NV_DL_CAMPAIGN_STAGE: stage}


def test_an_exporting_rank_carries_the_families_the_schema_and_the_callers_tags(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none"), span_exporter=exporter,
                             resource_attributes={**process_attributes(algorithm="grpo", model="m"),
                                                  **training_attributes(target={"steps": 5})})
    try:
        resource = handle.providers.resource
        attrs = dict(resource.attributes)
        assert resource.schema_url == semconv.SCHEMA_URL
        assert attrs[T + "world"] == 1 and attrs[T + "nodes"] == 1
        assert semconv.NV_DL_SOFTWARE + "opentelemetry_sdk" in attrs
        assert attrs[semconv.NV_DL_CAMPAIGN_STAGE] == "RL" and attrs["nv.dl.training.target.steps"] == 5
        with lens_core.span_cm("x"):
            pass
    finally:
        handle.shutdown()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "x"]
    assert span.instrumentation_scope.schema_url == semconv.SCHEMA_URL


def test_the_declared_schema_is_a_published_opentelemetry_schema():
    from opentelemetry.semconv.schemas import Schemas

    assert semconv.SCHEMA_URL in {schema.value for schema in Schemas}


def _histograms(reader):
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    if hasattr(point, "count"):  # histograms only
                        out.setdefault(metric.name, []).append((dict(point.attributes), point.count, point.sum))
    return out


def test_timer_only_categories_and_recorded_timers_reach_the_efficiency_metrics(tmp_path):
    rl.register()
    reader = InMemoryMetricReader()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="all"), metric_reader=reader)
    try:
        with efficiency_span("idle/validation"):
            pass
        efficiency.record_efficiency_time("idle/refit_event_wait", 1.5)
        efficiency.record_efficiency_time("wasted/failed_trajectory", 0.25)
        record_metrics(handle.meter, "rl", setup_duration=12.0, attributes={semconv.RL_SETUP_PHASE: "total_setup"})
        record_metrics(handle.meter, "rl", init_total=30.0)
        got = _histograms(reader)
    finally:
        handle.shutdown()
    (attrs, count, _), = got["efficiency/idle/validation"]
    assert count == 1 and attrs[semconv.RL_EFFICIENCY_MEASUREMENT] == "driver_wall_clock"
    (attrs, _, total), = got["efficiency/idle/refit_event_wait"]
    assert total == 1.5 and attrs[semconv.RL_EFFICIENCY_MEASUREMENT] == "collector_wall_clock"
    (attrs, _, _), = got["efficiency/wasted/failed_trajectory"]
    assert attrs[semconv.RL_EFFICIENCY_MEASUREMENT] == "thread_seconds"
    assert got[semconv.RL_SETUP_DURATION] == [({semconv.RL_SETUP_PHASE: "total_setup"}, 1, 12.0)]
    assert got[semconv.INIT_TOTAL_METRIC] == [({semconv.RL_BUCKET: "overhead"}, 1, 30.0)]
    assert efficiency._sink is None  # shut down: timers go nowhere
    assert lens_core.installed_backend() is None
