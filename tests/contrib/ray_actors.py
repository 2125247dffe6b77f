"""Actor classes for test_ray; a module of their own so Ray workers import them by name."""

import asyncio

import lens_core
from contrib_helpers import telemetry_config
from otel_bridge.contrib.ray import accepts_trace_context, flush_actor_telemetry, init_actor_telemetry


def _ids():
    return lens_core.current_trace_carrier().get("traceparent")


class TracedActor:
    """Sets up telemetry as rank 1 in its constructor; every method opens one span."""

    def __init__(self, file_dir, run_id):
        self.handle = init_actor_telemetry(telemetry_config(file_dir, run_id), rank=1, world_size=2)

    @accepts_trace_context
    def sync_work(self, value):
        with lens_core.span_cm("actor.sync"):
            return value, _ids()

    @accepts_trace_context
    async def async_work(self, value):
        await asyncio.sleep(0.01)
        with lens_core.span_cm("actor.async"):
            await asyncio.sleep(0.01)
            return value, _ids()

    @accepts_trace_context
    def gen_work(self, count):
        for index in range(count):
            with lens_core.span_cm(f"actor.gen.{index}"):
                yield index, _ids()

    @accepts_trace_context
    async def agen_work(self, count):
        for index in range(count):
            await asyncio.sleep(0.01)
            with lens_core.span_cm(f"actor.agen.{index}"):
                yield index, _ids()

    def undecorated(self, value):
        with lens_core.span_cm("actor.undecorated"):
            return value, _ids()

    def flush(self):
        return flush_actor_telemetry()
