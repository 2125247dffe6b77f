"""Metric groups recorded through a real SDK MeterProvider; recording never raises."""

import logging
import math
import os

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from lens_core import semconv
from otel_bridge import instruments
from otel_bridge.instruments import MetricSpec, record_metrics, register_metric_group
from otel_bridge.instruments import registry


@pytest.fixture
def reader():
    """An in-memory reader on a fresh MeterProvider."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    reader.meter = provider.get_meter("test")
    yield reader
    provider.shutdown()


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Each test sees its own first warnings."""
    registry._warned.clear()


def collected(reader):
    """{metric name: (unit, [(attributes, point)])} from one collection."""
    out = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points = [(dict(p.attributes), p) for p in metric.data.data_points]
                out[metric.name] = (metric.unit, points)
    return out


def test_rl_values_arrive_with_their_names_units_and_attributes(reader):
    record_metrics(reader.meter, instruments.RL, {"reward_mean": 0.75, "kl": 0.01},
                   attributes={semconv.RL_ALGORITHM: "grpo"}, tokens_per_second=1200)
    metrics = collected(reader)
    unit, [(attrs, point)] = metrics[semconv.RL_REWARD_MEAN]
    assert (unit, attrs, point.value) == ("1", {semconv.RL_ALGORITHM: "grpo"}, 0.75)
    assert metrics[semconv.RL_KL][1][0][1].value == 0.01
    unit, [(_, point)] = metrics[semconv.RL_TOKENS_THROUGHPUT]
    assert (unit, point.value) == ("{token}/s", 1200)


def test_token_usage_is_one_histogram_split_by_token_type(reader):
    record_metrics(reader.meter, instruments.INFERENCE, input_tokens=100, output_tokens=30,
                   operation_duration=1.5, attributes={semconv.GEN_AI_REQUEST_MODEL: "llama"})
    metrics = collected(reader)
    unit, points = metrics[semconv.GEN_AI_CLIENT_TOKEN_USAGE]
    assert unit == "{token}"
    by_type = {attrs[semconv.GEN_AI_TOKEN_TYPE]: point.sum for attrs, point in points}
    assert by_type == {"input": 100, "output": 30}
    assert all(attrs[semconv.GEN_AI_REQUEST_MODEL] == "llama" for attrs, _ in points)
    unit, [(_, point)] = metrics[semconv.GEN_AI_CLIENT_OPERATION_DURATION]
    assert (unit, point.sum, point.explicit_bounds[0]) == ("s", 1.5, 0.01)


def test_training_gpu_memory_is_in_bytes_and_durations_in_seconds(reader):
    record_metrics(reader.meter, instruments.TRAINING, gpu_memory_allocated=2 << 30, step_duration=3.0)
    metrics = collected(reader)
    unit, [(_, point)] = metrics[semconv.NV_GPU_MEMORY_ALLOCATED]
    assert (unit, point.value) == ("By", 2 << 30)
    unit, [(_, point)] = metrics[semconv.NV_DL_TRAINING_STEP_DURATION]
    assert (unit, point.count, point.sum) == ("s", 1, 3.0)


def test_counters_add_and_up_down_counters_go_both_ways(reader):
    register_metric_group("test.counts", [
        MetricSpec("done", "test.done", "counter", "1", "Done."),
        MetricSpec("queued", "test.queued", "up_down_counter", "1", "Queued."),
    ])
    for _ in range(3):
        record_metrics(reader.meter, "test.counts", done=2, queued=1)
    record_metrics(reader.meter, "test.counts", queued=-2)
    metrics = collected(reader)
    assert metrics["test.done"][1][0][1].value == 6
    assert metrics["test.queued"][1][0][1].value == 1


def test_bad_input_warns_once_per_reason_and_never_raises(reader, caplog):
    bad = {"no_such_key": 1, "reward_mean": math.nan, "kl": "high", "entropy": math.inf, "grad_norm": True}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            record_metrics(reader.meter, instruments.RL, bad, learning_rate=1e-5)
            record_metrics(reader.meter, "no.such.group", x=1)
            record_metrics(reader.meter, instruments.RL, ["not", "a", "mapping"])
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 7
    for text in ("rl.no_such_key: unknown key", "rl.reward_mean: not a finite number",
                 "rl.kl: not a finite number", "rl.entropy", "rl.grad_norm",
                 "'no.such.group': not registered", "values must be a mapping"):
        assert sum(text in m for m in messages) == 1, text
    metrics = collected(reader)
    assert list(metrics) == [semconv.RL_LEARNING_RATE]  # the good value still arrived


def test_negative_counter_and_histogram_values_are_skipped_with_a_warning(reader, caplog):
    register_metric_group("test.neg", [MetricSpec("n", "test.n", "counter", "1", "N.")])
    with caplog.at_level(logging.WARNING):
        record_metrics(reader.meter, "test.neg", n=-1)
        record_metrics(reader.meter, "test.neg", n=-5)
        record_metrics(reader.meter, instruments.TRAINING, step_duration=-0.1)
    assert [r.getMessage().count("negative value") for r in caplog.records] == [1, 1]
    assert collected(reader) == {}


def test_a_failing_instrument_creation_warns_once_and_is_skipped(caplog):
    class BrokenMeter:
        def create_gauge(self, *args, **kwargs):
            raise RuntimeError("no gauges here")

    meter = BrokenMeter()
    with caplog.at_level(logging.WARNING):
        record_metrics(meter, instruments.RL, kl=1.0)
        record_metrics(meter, instruments.RL, kl=2.0)
    [record] = caplog.records
    assert "instrument creation failed" in record.getMessage()


def test_an_unhashable_group_name_warns_instead_of_raising(reader, caplog):
    with caplog.at_level(logging.WARNING):
        record_metrics(reader.meter, ["rl"], kl=1.0)
    assert "not registered" in caplog.text


def test_a_meter_of_none_does_nothing(caplog):
    record_metrics(None, "no.such.group", x=float("nan"))
    assert not caplog.records


def test_numpy_scalars_are_numbers(reader):
    np = pytest.importorskip("numpy", reason="needs NumPy: pip install numpy")
    record_metrics(reader.meter, instruments.RL, kl=np.float32(0.5), entropy=np.int64(2))
    metrics = collected(reader)
    assert metrics[semconv.RL_KL][1][0][1].value == 0.5
    assert metrics[semconv.RL_ENTROPY][1][0][1].value == 2


def test_an_observable_callback_is_called_on_collect(reader):
    calls = []

    def depth():
        calls.append(1)
        return [(4, {"queue": "a"}), (7, {"queue": "b"})]

    register_metric_group("test.obs", [
        MetricSpec("depth", "test.queue.depth", "observable_gauge", "1", "Depth.", callback=depth),
        MetricSpec("seen", "test.seen", "observable_counter", "1", "Seen.", callback=lambda: 11),
    ])
    record_metrics(reader.meter, "test.obs")
    record_metrics(reader.meter, "test.obs")  # creates nothing twice
    assert calls == []
    metrics = collected(reader)
    assert calls == [1]
    assert {a["queue"]: p.value for a, p in metrics["test.queue.depth"][1]} == {"a": 4, "b": 7}
    assert metrics["test.seen"][1][0][1].value == 11


def test_a_failing_observable_callback_warns_and_observes_nothing(reader, caplog):
    def broken():
        raise RuntimeError("gone")

    register_metric_group("test.broken", [
        MetricSpec("x", "test.broken.x", "observable_gauge", "1", "X.", callback=broken)])
    record_metrics(reader.meter, "test.broken")
    with caplog.at_level(logging.WARNING):
        assert "test.broken.x" not in collected(reader)
    assert "callback failed" in caplog.text


def test_instruments_are_created_once_per_meter(reader):
    created = []

    class CountingMeter:
        def __init__(self, meter):
            self.meter = meter

        def create_gauge(self, *args, **kwargs):
            created.append(args[0])
            return self.meter.create_gauge(*args, **kwargs)

    first, second = CountingMeter(reader.meter), CountingMeter(reader.meter)
    for _ in range(5):
        record_metrics(first, instruments.RL, kl=1.0, entropy=2.0)
    record_metrics(second, instruments.RL, kl=1.0)
    assert sorted(created) == [semconv.RL_ENTROPY, semconv.RL_KL, semconv.RL_KL]


def test_re_registering_a_group_replaces_its_instruments(reader):
    register_metric_group("test.swap", [MetricSpec("v", "test.swap.old", "gauge", "1", "Old.")])
    record_metrics(reader.meter, "test.swap", v=1)
    register_metric_group("test.swap", [MetricSpec("v", "test.swap.new", "gauge", "1", "New.")])
    record_metrics(reader.meter, "test.swap", v=2)
    metrics = collected(reader)
    assert metrics["test.swap.new"][1][0][1].value == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "sparkline"}, "is not one of"),
    ({"kind": "observable_gauge"}, "needs a callable callback"),
    ({"kind": "gauge", "callback": lambda: 1}, "takes no callback"),
    ({"kind": "gauge", "boundaries": (1, 2)}, "only histograms"),
])
def test_metric_specs_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MetricSpec("k", "test.k", unit="1", description="K.", **kwargs)


def test_duplicate_keys_in_a_group_are_rejected():
    spec = MetricSpec("k", "test.k", "gauge", "1", "K.")
    with pytest.raises(ValueError, match="duplicate"):
        register_metric_group("test.dup", [spec, spec])


def test_a_forked_child_starts_with_an_empty_instrument_cache(reader):
    record_metrics(reader.meter, instruments.RL, kl=1.0)
    assert reader.meter in registry._cache
    pid = os.fork()
    if pid == 0:  # child: must leave through os._exit, never back into pytest
        code = 1
        try:
            child_reader = InMemoryMetricReader()
            meter = MeterProvider(metric_readers=[child_reader]).get_meter("child")
            empty = len(registry._cache) == 0
            record_metrics(meter, instruments.RL, kl=3.0)
            arrived = child_reader.get_metrics_data() is not None
            code = 0 if empty and arrived and registry._lock.acquire(timeout=1) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_gym_durations_verify_outcomes_and_active_servers(reader):
    record_metrics(reader.meter, instruments.GYM, rollout_duration=42.0, verify_duration=0.8,
                   verify_succeeded=3, verify_failed=1, verify_success_rate=0.75, servers_active=1)
    record_metrics(reader.meter, instruments.GYM, servers_active=1)
    record_metrics(reader.meter, instruments.GYM, servers_active=-1, verify_succeeded=1)
    record_metrics(reader.meter, instruments.GYM, server_request_duration=0.02, attributes={"http.route": "/verify"})
    metrics = collected(reader)
    unit, [(_, point)] = metrics[semconv.GYM_ROLLOUT_DURATION]
    assert (unit, point.count, point.sum) == ("s", 1, 42.0)
    assert metrics[semconv.GYM_VERIFY_DURATION][1][0][1].sum == 0.8
    unit, points = metrics[semconv.GYM_VERIFY_COUNT]
    assert unit == "{verification}"
    assert {attrs[semconv.GYM_VERIFY_OUTCOME]: p.value for attrs, p in points} == {"success": 4, "failure": 1}
    assert metrics[semconv.GYM_VERIFY_SUCCESS_RATE][1][0][1].value == 0.75
    unit, [(_, point)] = metrics[semconv.GYM_SERVERS_ACTIVE]
    assert (unit, point.value) == ("{server}", 1)
    unit, [(attrs, point)] = metrics[semconv.GYM_SERVER_REQUEST_DURATION]
    assert (unit, attrs, point.sum, point.explicit_bounds[0]) == ("s", {"http.route": "/verify"}, 0.02, 0.005)


def test_rl_response_length_is_a_histogram_per_response_and_a_mean_gauge(reader):
    for length in (100, 300, 4096):
        record_metrics(reader.meter, instruments.RL, response_length=length)
    record_metrics(reader.meter, instruments.RL, response_length_mean=1498.67)
    metrics = collected(reader)
    unit, [(_, point)] = metrics[semconv.RL_RESPONSE_LENGTH]
    assert (unit, point.count, point.sum, point.max) == ("{token}", 3, 4496, 4096)
    assert point.explicit_bounds[:2] == (16, 32)
    unit, [(_, point)] = metrics[semconv.RL_RESPONSE_MEAN_LENGTH]
    assert (unit, point.value) == ("{token}", 1498.67)


def test_the_metrics_guide_documents_every_ready_made_group_and_key():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "metrics.md").read_text(encoding="utf-8")
    rows = {line for line in page.splitlines() if line.startswith("| `")}
    for group in (instruments.GYM, instruments.INFERENCE, instruments.RL, instruments.TRAINING):
        for spec in registry._groups[group].values():
            row = f"| `{group}` | `{spec.key}` | `{spec.name}` | {spec.kind.replace('_', '-')} | `{spec.unit}` |"
            assert any(line.startswith(row) for line in rows), f"docs/guide/metrics.md has no row {row}"
