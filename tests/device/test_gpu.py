"""Device timing on a real NVIDIA GPU (marked ``gpu``; skipped without CUDA): the driver backend's
events, a span around ``loss.backward()`` on the caller's thread, the whole pipeline, the example.

Run on a GPU machine: ``python -m pytest -m gpu tests/device/test_gpu.py -s`` (docs/guide/gpu-timing.md).
"""

import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA (torch)")]

from lens_core import Bucket, LensConfig, SpanRegistry, managed_span, semconv  # noqa: E402
from lens_core import _device  # noqa: E402

START, END, INDEX = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME, semconv.LENS_DEVICE_INDEX
MS = 1_000_000


class Record:
    __slots__ = ("attrs", "dev_mark", "span_id")

    def __init__(self):
        self.attrs = {semconv.LENS_GROUP: "fwd"}
        self.dev_mark = None
        self.span_id = 0


@pytest.fixture
def cuda_timer():
    SpanRegistry.register("gpu", ["fwd"], buckets={"fwd": Bucket.PRODUCTIVE}, device_timed=["fwd"])
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context is current on this thread
    assert _device.cuda_initialised()
    timer = _device.DeviceTimer(_device.CudaDriver())
    yield timer
    timer.close()


def _settle(timer, records, timeout=10.0):
    out = timer.settle(records)
    deadline = time.monotonic() + timeout
    while timer.held and time.monotonic() < deadline:
        time.sleep(0.001)
        out += timer.settle([])
    return out


def _matmuls(n=8, size=4096):
    a = torch.randn(size, size, device="cuda")
    for _ in range(n):
        a = a @ a
        a = a / a.norm()
    return a


def test_a_span_times_the_kernels_it_queued(cuda_timer):
    """The device interval of a span around queued matmuls matches CUDA events recorded on the same
    boundaries (within 5 % or 50 µs), starts after the host start and ends before the host saw
    the work done; the host span itself ends long before the device does."""
    _matmuls(1)
    torch.cuda.synchronize()
    r = Record()
    truth_start, truth_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    host_start = time.time_ns()
    r.dev_mark = cuda_timer.enter(r.attrs)
    truth_start.record()
    _matmuls()
    truth_end.record()
    cuda_timer.exit(r.dev_mark)
    host_end = time.time_ns()
    torch.cuda.synchronize()
    host_done = time.time_ns()
    assert _settle(cuda_timer, [r]) == [r]
    device_ns = r.attrs[END] - r.attrs[START]
    truth_ns = truth_start.elapsed_time(truth_end) * MS
    print(f"\ndevice interval {device_ns / MS:.3f} ms, CUDA events {truth_ns / MS:.3f} ms, "
          f"host span {(host_end - host_start) / MS:.3f} ms")
    assert abs(device_ns - truth_ns) <= max(0.05 * truth_ns, 50_000)
    assert host_start - 200_000 <= r.attrs[START] and r.attrs[END] <= host_done + 200_000
    assert r.attrs[INDEX] == torch.cuda.current_device()


def test_a_span_around_backward_on_the_callers_thread_times_its_kernels(cuda_timer):
    """Autograd runs backward on its own thread; the kernels go to the caller's current stream, so
    the span's end event, recorded after loss.backward() returns, is reached after them."""
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(6)]).cuda()
    x = torch.randn(4096, 4096, device="cuda")
    model(x).square().mean().backward()
    torch.cuda.synchronize()
    loss = model(x).square().mean()
    r = Record()
    truth_start, truth_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    r.dev_mark = cuda_timer.enter(r.attrs)
    truth_start.record()
    loss.backward()
    truth_end.record()
    cuda_timer.exit(r.dev_mark)
    torch.cuda.synchronize()
    assert _settle(cuda_timer, [r]) == [r]
    device_ns = r.attrs[END] - r.attrs[START]
    truth_ns = truth_start.elapsed_time(truth_end) * MS
    print(f"\nbackward: device interval {device_ns / MS:.3f} ms, CUDA events {truth_ns / MS:.3f} ms")
    assert truth_ns > 1 * MS and abs(device_ns - truth_ns) <= max(0.05 * truth_ns, 50_000)


def test_anchors_a_second_apart_map_an_event_to_the_same_host_time(cuda_timer):
    """An event mapped through the first anchor and through one taken a second later (with the
    drift rate the two measure) lands within 50 µs: re-anchoring does not move what it maps."""
    r = Record()
    r.dev_mark = cuda_timer.enter(r.attrs)
    event = r.dev_mark[1]
    cuda_timer.exit(r.dev_mark)
    torch.cuda.synchronize()
    assert _settle(cuda_timer, [r]) == [r]
    device = r.attrs[INDEX]
    time.sleep(1.1)
    cuda_timer._anchor(device, force=True)
    host_ns, anchor = cuda_timer._anchors[device][-1]
    again = host_ns + round(cuda_timer.backend.elapsed_ns(anchor, event) * cuda_timer._rate.get(device, 1.0))
    print(f"\nremapped through a newer anchor: {(again - r.attrs[START]) / 1000:.1f} µs apart")
    assert abs(again - r.attrs[START]) < 50_000


def test_setup_telemetry_exports_device_times_after_cuda_init(tmp_path):
    """LENS_DEVICE_TIMING=auto, CUDA initialised after setup: the device-timed leaves of the example
    carry lens.device.* (the timer finds CUDA at the first device-timed span)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env.update(PYTHONPATH=root, LENS_ENABLED="1", LENS_SPAN_GROUPS="per_step", LENS_EXPORTER="file",
               LENS_FILE_DIR=str(tmp_path), LENS_RUN_ID="gpu", EXAMPLE_STEPS="6")
    proc = subprocess.run([sys.executable, os.path.join(root, "examples", "generic_trainer.py"), "--device", "cuda"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sys.path.insert(0, os.path.join(root, "tests"))
    from trace_files import final_losses, read_spans

    spans = read_spans(tmp_path / "gpu")
    timed = [s for s in spans if s["name"] in ("train.forward", "train.backward", "train.optimizer_step")]
    stamped = [s for s in timed if START in s["attributes"]]
    print(f"\n{len(stamped)} of {len(timed)} device-timed leaves carry device times")
    assert len(timed) == 18 and len(stamped) >= 15  # the probe may miss the first step's first leaf
    for s in stamped:
        assert s["attributes"][START] <= s["attributes"][END]
        assert s["attributes"][START] >= s["start"] - 1_000_000
    assert not any(START in s["attributes"] for s in spans if s["name"] in ("train.step", "train.load_batch"))
    (final,) = final_losses(tmp_path / "gpu").values()
    assert final.get(semconv.LENS_DEVICE_UNTIMED, 0) == 0


def test_per_span_cost_device_timed_against_host_only():
    """The application thread's cost of a device-timed span against a host-only one (both enabled,
    native recorder), on CUDA events: printed, and held to the issue's 2x."""
    from otel_bridge import setup_telemetry

    import lens_core

    SpanRegistry.register("cost", ["g", "d"], device_timed=["d"])
    torch.zeros(1, device="cuda")
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g,d", metrics_enabled=False,
                                        device_timing="auto"), _allow_reinit=True)
    span = lens_core.managed_span

    def loop(group):
        started = time.thread_time()
        for _ in range(1000):
            with span(group, "name", a=1):
                pass
        return time.thread_time() - started

    try:
        loop("d")
        ratios, device_us, host_us = [], [], []
        for _ in range(30):
            d, h = loop("d"), loop("g")
            ratios.append(d / h)
            device_us.append(d * 1e3)
            host_us.append(h * 1e3)
            time.sleep(0.02)
    finally:
        handle.shutdown()
    ratios.sort()
    print(f"\nper span: device-timed {min(device_us):.2f} us, host-only {min(host_us):.2f} us, "
          f"median ratio {ratios[len(ratios) // 2]:.2f}")
    assert ratios[len(ratios) // 2] <= 2.0
