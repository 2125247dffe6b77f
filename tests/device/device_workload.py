"""The workload tests/device/test_device_recorders.py runs under each recorder and gate: device-timed
leaves on a CPU stand-in whose device lags the host by a known amount (LAG_MS), host-only leaves
beside them, and an umbrella step; prints the truth (when the stand-in's device reached each
span's events) as JSON on its last line."""

import json
import os
import sys
import threading
import time

import lens_core
from lens_core import Bucket, LensConfig, SpanRegistry, iteration_scope, managed_span, umbrella_span
from lens_core import _device

LAG_NS = int(float(os.environ.get("LAG_MS", "3")) * 1e6)
STEPS = int(os.environ.get("STEPS", "4"))

SpanRegistry.register("dev", ["step", "forward", "backward", "log"], umbrellas=["step"],
                      buckets={"forward": Bucket.PRODUCTIVE, "backward": Bucket.PRODUCTIVE, "log": Bucket.OVERHEAD},
                      device_timed=["forward", "backward"])


class WatchedStandIn(_device.StandInDevice):
    """The stand-in, noting which threads ask it whether the device is done (while the loop runs)."""

    asked_on = set()
    watching = True

    def query(self, event):
        if self.watching:
            self.asked_on.add(threading.current_thread().name)
        return super().query(event)

    def anchor(self, device):
        if self.watching:
            self.asked_on.add(threading.current_thread().name)
        return super().anchor(device)


device = WatchedStandIn(lag=LAG_NS)
_device.use(lambda: device)


def main():
    from otel_bridge import setup_telemetry

    handle = setup_telemetry(LensConfig.from_env().replace(enabled=True, span_groups="all", metrics_enabled=False,
                                                          exporter="file", file_dir="traces"))
    print(type(lens_core.state.installed_backend()).__name__)
    truth = {}
    for step in range(1, STEPS + 1):
        with iteration_scope(step), umbrella_span("step", "train.step"):
            for name in ("train.forward", "train.backward"):
                before = device.records
                with managed_span("forward" if name == "train.forward" else "backward", name) as span:
                    time.sleep(0.001)
                if device.records == before + 2:  # timed (not when the event pool was empty)
                    ctx = span.get_span_context()
                    truth[f"{ctx.span_id:016x}"] = [device.log[-2][1], device.log[-1][1]]
            with managed_span("log", "train.log"):
                time.sleep(min(LAG_NS / 1e9, 0.05))  # the host waits for the device, as loss.item() would
        time.sleep(float(os.environ.get("PAUSE_S", "0")))  # give the export thread a turn
    device.watching = False
    assert handle.shutdown() is True
    print(json.dumps({"truth": truth, "asked_on": sorted(device.asked_on)}))


if __name__ == "__main__":
    sys.exit(main())
