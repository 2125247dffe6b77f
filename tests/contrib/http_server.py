"""A FastAPI app under uvicorn for test_http: file telemetry as rank 1, instrumented with instrument_fastapi; SIGTERM flushes."""

import sys

import uvicorn
from fastapi import FastAPI

import lens_core
from contrib_helpers import telemetry_config
from otel_bridge import setup_telemetry
from otel_bridge.contrib.fastapi import instrument_fastapi


def main(port, file_dir, run_id):
    handle = setup_telemetry(telemetry_config(file_dir, run_id), rank=1, world_size=2, local_rank=0)
    app = FastAPI()

    @app.get("/echo/{value}")
    async def echo(value: int):
        with lens_core.span_cm("server.handler"):
            return {"value": value, "carrier": lens_core.current_trace_carrier()}

    assert instrument_fastapi(app, service_name="gym-server")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    # uvicorn shuts down gracefully on SIGTERM, restores the handler it found and raises
    # the signal again: lens's handler then flushes, and the default one ends the process.
    handle.install_signal_handlers()
    server.run()
    handle.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
