"""Resource detection from SLURM, Kubernetes, local and NVML state, and OTEL_RESOURCE_ATTRIBUTES."""

import logging
import os
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lens_core import semconv
from otel_bridge.resources import (
    OTEL_RESOURCE_ATTRIBUTES,
    detect_gpu,
    detect_k8s,
    detect_local,
    detect_resource_attributes,
    detect_slurm,
    encode_resource_attributes,
    parse_resource_attributes,
    publish_resource_attributes,
)
from otel_bridge.resources.local import cuda_visible_devices

SLURM_JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NAME": "grpo-70b",
    "SLURM_JOB_PARTITION": "batch",
    "SLURM_JOB_NUM_NODES": "16",
    "SLURM_NTASKS": "128",
    "SLURM_CLUSTER_NAME": "eos",
}

# ---- SLURM --------------------------------------------------------------------------------


def test_slurm_job_attributes_are_read_with_integers_as_ints():
    attrs = detect_slurm(SLURM_JOB)
    assert attrs[semconv.SLURM_JOB_ID] == "4242"
    assert attrs[semconv.SLURM_JOB_NAME] == "grpo-70b"
    assert attrs[semconv.SLURM_PARTITION] == "batch"
    assert attrs[semconv.SLURM_NODES] == 16
    assert attrs[semconv.SLURM_NTASKS] == 128
    assert attrs[semconv.SLURM_CLUSTER] == "eos"
    assert attrs[semconv.SLURM_RESTART_COUNT] == 0
    assert semconv.SLURM_ARRAY_JOB_ID not in attrs


def test_outside_slurm_nothing_is_reported():
    assert detect_slurm({"HOME": "/root"}) == {}


def test_slurm_nnodes_is_the_fallback_node_count():
    env = {"SLURM_JOBID": "7", "SLURM_NNODES": "2"}
    assert detect_slurm(env)[semconv.SLURM_NODES] == 2


def test_an_array_task_is_identified_as_job_underscore_task():
    env = dict(SLURM_JOB, SLURM_JOB_ID="4250", SLURM_ARRAY_JOB_ID="4242", SLURM_ARRAY_TASK_ID="8")
    attrs = detect_slurm(env)
    assert attrs[semconv.SLURM_JOB_ID] == "4242_8"
    assert attrs[semconv.SLURM_ARRAY_JOB_ID] == "4242"
    assert attrs[semconv.SLURM_ARRAY_TASK_ID] == 8


def test_a_restart_changes_the_run_uuid_but_not_the_job_uuid():
    first = detect_slurm(SLURM_JOB)
    again = detect_slurm(SLURM_JOB)
    restarted = detect_slurm(dict(SLURM_JOB, SLURM_RESTART_COUNT="1"))
    assert first[semconv.NV_DL_JOB_UUID] == again[semconv.NV_DL_JOB_UUID] == restarted[semconv.NV_DL_JOB_UUID]
    assert first[semconv.NV_DL_RUN_UUID] == again[semconv.NV_DL_RUN_UUID]
    assert first[semconv.NV_DL_RUN_UUID] != restarted[semconv.NV_DL_RUN_UUID]
    assert restarted[semconv.SLURM_RESTART_COUNT] == 1


def test_the_same_job_id_on_another_cluster_is_another_job():
    other = detect_slurm(dict(SLURM_JOB, SLURM_CLUSTER_NAME="selene"))
    assert other[semconv.NV_DL_JOB_UUID] != detect_slurm(SLURM_JOB)[semconv.NV_DL_JOB_UUID]


def test_malformed_slurm_numbers_are_dropped_with_a_warning(caplog):
    env = dict(SLURM_JOB, SLURM_NTASKS="lots", SLURM_RESTART_COUNT="x")
    with caplog.at_level(logging.WARNING):
        attrs = detect_slurm(env)
    assert semconv.SLURM_NTASKS not in attrs and semconv.SLURM_RESTART_COUNT not in attrs
    assert attrs[semconv.SLURM_NODES] == 16
    assert "SLURM_NTASKS='lots'" in caplog.text and "SLURM_RESTART_COUNT='x'" in caplog.text


# ---- Kubernetes ---------------------------------------------------------------------------

K8S_POD = {
    "KUBERNETES_SERVICE_HOST": "10.0.0.1",
    "POD_NAME": "trainer-0",
    "POD_NAMESPACE": "rl",
    "POD_UID": "0f6c-uid",
    "NODE_NAME": "node-17",
    "CONTAINER_NAME": "trainer",
    "JOB_NAME": "grpo",
    "HOSTNAME": "ignored-when-pod-name-is-set",
}


def test_k8s_attributes_come_from_downward_api_variables(tmp_path):
    attrs = detect_k8s(K8S_POD, namespace_file=tmp_path / "absent")
    assert attrs == {
        semconv.K8S_POD_NAME: "trainer-0",
        semconv.K8S_NAMESPACE_NAME: "rl",
        semconv.K8S_POD_UID: "0f6c-uid",
        semconv.K8S_NODE_NAME: "node-17",
        semconv.K8S_CONTAINER_NAME: "trainer",
        semconv.K8S_JOB_NAME: "grpo",
    }


def test_outside_kubernetes_nothing_is_reported():
    assert detect_k8s({"POD_NAME": "x", "HOSTNAME": "h"}) == {}


def test_k8s_falls_back_to_prefixed_names_hostname_and_the_namespace_file(tmp_path):
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("research\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "worker-3",
           "K8S_NODE_NAME": "node-2", "K8S_JOB_NAME": "sft"}
    attrs = detect_k8s(env, namespace_file=namespace_file)
    assert attrs == {
        semconv.K8S_POD_NAME: "worker-3",
        semconv.K8S_NAMESPACE_NAME: "research",
        semconv.K8S_NODE_NAME: "node-2",
        semconv.K8S_JOB_NAME: "sft",
    }


def test_an_unreadable_namespace_file_is_skipped(tmp_path):
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert detect_k8s(env, namespace_file=tmp_path) == {}  # a directory: open() fails


# ---- local --------------------------------------------------------------------------------


def test_local_attributes_describe_this_process():
    attrs = detect_local({})
    assert attrs[semconv.PROCESS_PID] == os.getpid()
    assert attrs[semconv.HOST_NAME]
    assert attrs[semconv.PROCESS_RUNTIME_NAME] == "cpython"
    assert attrs[semconv.PROCESS_RUNTIME_VERSION].count(".") == 2
    assert semconv.NV_GPU_COUNT not in attrs  # CUDA_VISIBLE_DEVICES unset: unknown


@pytest.mark.parametrize("value, count", [
    ("", 0),
    ("-1", 0),
    ("NoDevFiles", 0),
    ("0", 1),
    ("0,1,2,3", 4),
    (" 2, 3 ", 2),
    ("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,GPU-ab12cd34-0000-1111-2222-333344445555", 2),
    ("MIG-3f0a7d8e-9f3b-5c1e-a2b4-0123456789ab", 1),
    ("0,1,-1,2", 2),  # CUDA stops at the first invalid entry
    ("0,\u00b2", 1),  # a superscript two is a str.isdigit() digit, not a device index
])
def test_gpu_count_follows_cuda_visible_devices(value, count):
    assert detect_local({"CUDA_VISIBLE_DEVICES": value})[semconv.NV_GPU_COUNT] == count


def test_unset_cuda_visible_devices_is_not_an_empty_list():
    assert cuda_visible_devices({}) is None
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []


# ---- GPU (a fake pynvml: there is no GPU here) ---------------------------------------------

GPU_UUIDS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)]
MIG_UUID = "MIG-11111111-2222-3333-4444-555555555555"


def fake_nvml(fail_init=False):
    """A pynvml stand-in with four GPUs; GPU 2 carries one MIG instance."""
    calls = []

    class Handle:
        def __init__(self, index, uuid, memory, mig=False):
            self.index, self.uuid, self.memory, self.mig = index, uuid, memory, mig

    gpus = [Handle(i, GPU_UUIDS[i], (80 + i) << 30) for i in range(4)]
    mig = Handle(2, MIG_UUID, 10 << 30, mig=True)
    by_uuid = {h.uuid: h for h in gpus + [mig]}

    def init():
        calls.append("init")
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def index_of(handle):
        if handle.mig:
            raise RuntimeError("not supported on MIG handles")
        return handle.index

    return types.SimpleNamespace(
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda i: gpus[i],
        nvmlDeviceGetHandleByUUID=lambda u: by_uuid[u],
        nvmlDeviceGetDeviceHandleFromMigDeviceHandle=lambda h: gpus[h.index],
        nvmlDeviceGetIndex=index_of,
        nvmlDeviceGetUUID=lambda h: h.uuid,
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3" if not h.mig else "NVIDIA H100 MIG 1g.10gb",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=h.memory, used=0, free=h.memory),
    )


def test_the_local_rank_picks_its_entry_of_cuda_visible_devices():
    nvml = fake_nvml()
    attrs = detect_gpu({"CUDA_VISIBLE_DEVICES": "3,1"}, local_rank=1, nvml=nvml)
    assert attrs == {
        semconv.NV_GPU_INDEX: 1,
        semconv.NV_GPU_UUID: GPU_UUIDS[1],
        semconv.NV_GPU_NAME: "NVIDIA H100 80GB HBM3",
        semconv.NV_GPU_MEMORY_TOTAL: 81 << 30,
    }
    assert nvml.calls == ["init", "shutdown"]


def test_without_cuda_visible_devices_the_local_rank_is_the_physical_index():
    assert detect_gpu({"LOCAL_RANK": "2"}, nvml=fake_nvml())[semconv.NV_GPU_INDEX] == 2
    assert detect_gpu({"SLURM_LOCALID": "3"}, nvml=fake_nvml())[semconv.NV_GPU_INDEX] == 3
    assert detect_gpu({}, nvml=fake_nvml())[semconv.NV_GPU_INDEX] == 0


def test_a_single_bound_gpu_is_used_whatever_the_local_rank():
    attrs = detect_gpu({"CUDA_VISIBLE_DEVICES": "2", "LOCAL_RANK": "5"}, nvml=fake_nvml())
    assert attrs[semconv.NV_GPU_INDEX] == 2


def test_a_uuid_entry_is_looked_up_by_uuid_and_reports_its_physical_index():
    env = {"CUDA_VISIBLE_DEVICES": f"{GPU_UUIDS[0]},{GPU_UUIDS[3]}"}
    attrs = detect_gpu(env, local_rank=1, nvml=fake_nvml())
    assert attrs[semconv.NV_GPU_INDEX] == 3 and attrs[semconv.NV_GPU_UUID] == GPU_UUIDS[3]


def test_a_mig_entry_reports_the_instance_with_its_parent_gpu_index():
    attrs = detect_gpu({"CUDA_VISIBLE_DEVICES": MIG_UUID}, nvml=fake_nvml())
    assert attrs == {
        semconv.NV_GPU_INDEX: 2,
        semconv.NV_GPU_UUID: MIG_UUID,
        semconv.NV_GPU_NAME: "NVIDIA H100 MIG 1g.10gb",
        semconv.NV_GPU_MEMORY_TOTAL: 10 << 30,
    }


@pytest.mark.parametrize("env, local_rank", [
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2),  # rank past the list
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, -1),
    ({"CUDA_VISIBLE_DEVICES": ""}, 0),  # no devices
    ({}, 9),  # no such physical GPU
    ({"CUDA_VISIBLE_DEVICES": "GPU-unknown"}, 0),
    ({"LOCAL_RANK": "first"}, None),
])
def test_a_bad_device_gives_no_attributes(env, local_rank):
    assert detect_gpu(env, local_rank=local_rank, nvml=fake_nvml()) == {}


def test_an_nvml_failure_gives_no_attributes():
    assert detect_gpu({}, nvml=fake_nvml(fail_init=True)) == {}


def test_a_missing_pynvml_gives_no_attributes(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import raises ImportError
    assert detect_gpu({}) == {}


def test_all_detectors_merge_in_order(monkeypatch):
    monkeypatch.setattr("otel_bridge.resources.detect_gpu",
                        lambda environ, local_rank: {semconv.NV_GPU_INDEX: local_rank})
    env = dict(SLURM_JOB, **K8S_POD, CUDA_VISIBLE_DEVICES="0,1")
    attrs = detect_resource_attributes(env, local_rank=1)
    assert attrs[semconv.NV_GPU_COUNT] == 2
    assert attrs[semconv.SLURM_JOB_ID] == "4242"
    assert attrs[semconv.K8S_POD_NAME] == "trainer-0"
    assert attrs[semconv.NV_GPU_INDEX] == 1


# ---- OTEL_RESOURCE_ATTRIBUTES ------------------------------------------------------------

TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
keys = st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=20)
values = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
tricky = st.sampled_from([",", "=", "%", " ", "%2C", "é", "日本", "a=b,c=d", "  padded  ", "\t", "+"])
attributes = st.dictionaries(keys, st.one_of(values, tricky), max_size=8)


@given(attributes)
def test_parse_inverts_encode(attrs):
    assert parse_resource_attributes(encode_resource_attributes(attrs)) == attrs


@given(attributes)
def test_the_sdk_reads_what_encode_writes(attrs):
    from opentelemetry.sdk.resources import OTELResourceDetector

    saved = {name: os.environ.pop(name, None) for name in (OTEL_RESOURCE_ATTRIBUTES, "OTEL_SERVICE_NAME")}
    try:
        os.environ[OTEL_RESOURCE_ATTRIBUTES] = encode_resource_attributes(attrs)
        assert dict(OTELResourceDetector().detect().attributes) == attrs
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def test_non_string_values_are_written_as_their_text():
    text = encode_resource_attributes({"a": 3, "b": 0.5, "c": True, "d": False})
    assert parse_resource_attributes(text) == {"a": "3", "b": "0.5", "c": "true", "d": "false"}


def test_inherited_entries_are_kept_unless_overridden():
    text = encode_resource_attributes({"team": "rl", "new": "1"}, inherited="team=old,site=eos%20a")
    assert parse_resource_attributes(text) == {"team": "rl", "site": "eos a", "new": "1"}


def test_the_last_duplicate_wins_and_whitespace_around_entries_is_ignored():
    assert parse_resource_attributes(" a = 1 , b=2,a=3, ") == {"a": "3", "b": "2"}


def test_malformed_entries_are_dropped_with_one_warning_naming_them(caplog):
    text = "ok=1,novalue,bad key=2,pct=50%,raw=a b,utf=%FF,quote=\"x\",fine=%C3%A9"
    with caplog.at_level(logging.WARNING):
        assert parse_resource_attributes(text) == {"ok": "1", "fine": "é"}
    [record] = caplog.records
    for entry in ("novalue", "bad key=2", "pct=50%", "raw=a b", "utf=%FF", 'quote="x"'):
        assert repr(entry) in record.getMessage()


def test_bad_keys_and_values_to_encode_are_dropped_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING):
        text = encode_resource_attributes({"good": "1", "bad key": "x", "a=b": "y", "none": None,
                                           "list": [1], "surrogate": "\ud800"}, inherited="x,ok=2")
    assert parse_resource_attributes(text) == {"ok": "2", "good": "1"}
    [record] = caplog.records
    for name in ("'x'", "'bad key'", "'a=b'", "'none'", "'list'", "'surrogate'"):
        assert name in record.getMessage()


def test_publish_sets_the_variable_and_removes_it_when_it_was_absent():
    environ = {"PATH": "/bin"}
    with publish_resource_attributes({"nv.gpu.count": 8}, environ) as value:
        assert environ[OTEL_RESOURCE_ATTRIBUTES] == value == "nv.gpu.count=8"
    assert environ == {"PATH": "/bin"}


def test_publish_merges_with_and_then_restores_an_existing_value():
    environ = {OTEL_RESOURCE_ATTRIBUTES: "team=rl,a=1"}
    with publish_resource_attributes({"a": "2"}, environ):
        assert parse_resource_attributes(environ[OTEL_RESOURCE_ATTRIBUTES]) == {"team": "rl", "a": "2"}
        environ[OTEL_RESOURCE_ATTRIBUTES] = "changed-inside=1"
    assert environ == {OTEL_RESOURCE_ATTRIBUTES: "team=rl,a=1"}


def test_publish_restores_the_environment_when_the_block_raises():
    environ = {}
    with pytest.raises(KeyError):
        with publish_resource_attributes({"a": "1"}, environ):
            raise KeyError("boom")
    assert environ == {}


def test_publish_reaches_child_processes_through_os_environ(monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv(OTEL_RESOURCE_ATTRIBUTES, "inherited=yes")
    with publish_resource_attributes({"rank": 3}):
        out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['OTEL_RESOURCE_ATTRIBUTES'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert parse_resource_attributes(out) == {"inherited": "yes", "rank": "3"}
    assert os.environ[OTEL_RESOURCE_ATTRIBUTES] == "inherited=yes"
