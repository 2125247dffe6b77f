"""An actor for test_ray_run_id; a module of its own so Ray workers import it by name."""

from lens_core import LensConfig, span_cm
from otel_bridge.contrib.ray import flush_actor_telemetry, init_actor_telemetry


class RunIdActor:
    """Sets up telemetry with no run id in its config: the run id must come from the driver."""

    def __init__(self, file_dir):
        config = LensConfig(enabled=True, exporter="file", file_dir=file_dir, metrics_enabled=False)
        self.handle = init_actor_telemetry(config, rank=1, world_size=2)

    def run_id(self):
        with span_cm("actor.work"):
            pass
        return self.handle.run_id

    def flush(self):
        return flush_actor_telemetry()
