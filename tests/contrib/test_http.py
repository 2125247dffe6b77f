"""A real uvicorn server and aiohttp client: the server span is parented on the client span, in one trace."""

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import time

import pytest

import lens_core
from contrib_helpers import HERE, ROOT, child_env, free_port, read_run, run_python

SERVER_START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 30


def _wait_for_port(proc, port):
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {proc.stderr.read()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"server did not listen on {port} within {SERVER_START_TIMEOUT_S} s")


@pytest.fixture
def server(tmp_path):
    """The FastAPI app in a uvicorn subprocess writing to tmp_path/run as rank 1; its port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "http_server.py"), str(port), str(tmp_path), "run"],
                            cwd=ROOT, env=child_env(PYTHONPATH=f"{ROOT}:{HERE}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_port(proc, port)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.engines
def test_server_span_is_parented_on_the_aiohttp_client_span_across_processes(tmp_path, active_telemetry, server):
    import aiohttp

    from otel_bridge.contrib.aiohttp import instrument_aiohttp_client, uninstrument_aiohttp_client

    proc, port = server
    assert instrument_aiohttp_client()
    assert instrument_aiohttp_client()  # a second call is harmless

    async def call():
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            with lens_core.span_cm("client.root") as root:
                async with session.get(f"http://127.0.0.1:{port}/echo/7") as response:
                    assert response.status == 200
                    return root, await response.json()

    try:
        root, body = asyncio.run(asyncio.wait_for(call(), REQUEST_TIMEOUT_S))
    finally:
        uninstrument_aiohttp_client()
    proc.send_signal(signal.SIGTERM)
    # uvicorn re-raises the SIGTERM after its graceful shutdown; lens's handler flushed first.
    assert proc.wait(timeout=30) in (0, -signal.SIGTERM), proc.stderr.read()[-3000:]
    assert active_telemetry.shutdown()

    trace_id = format(root.get_span_context().trace_id, "032x")
    assert body["value"] == 7 and body["carrier"]["traceparent"].split("-")[1] == trace_id
    spans = read_run(tmp_path, "run")
    client_root = next(s for s in spans if s.name == "client.root")
    (client,) = [s for s in spans if s.kind == "CLIENT"]
    (server_span,) = [s for s in spans if s.kind == "SERVER"]
    handler = next(s for s in spans if s.name == "server.handler")
    assert {s.trace_id for s in (client_root, client, server_span, handler)} == {trace_id}
    assert client.parent_span_id == client_root.span_id
    assert server_span.parent_span_id == client.span_id
    assert handler.parent_span_id == server_span.span_id
    assert client.resource.get(lens_core.semconv.NV_DL_RANK) == 0
    assert server_span.resource.get(lens_core.semconv.NV_DL_RANK) == 1
    assert server_span.attributes.get(lens_core.semconv.SERVICE_NAME) == "gym-server"


def test_both_instrumentations_warn_and_do_nothing_without_telemetry(caplog):
    from fastapi import FastAPI

    from otel_bridge.contrib.aiohttp import instrument_aiohttp_client
    from otel_bridge.contrib.fastapi import instrument_fastapi

    app = FastAPI()
    with caplog.at_level(logging.WARNING, logger="lens_core"):
        assert instrument_fastapi(app) is False
        assert instrument_aiohttp_client() is False
    assert not getattr(app, "_is_instrumented_by_opentelemetry", False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("instrument_fastapi" in m and "not set up" in m for m in messages)
    assert any("instrument_aiohttp_client" in m and "not set up" in m for m in messages)


@pytest.mark.parametrize("module,function,framework,extra", [
    ("otel_bridge.contrib.fastapi", "instrument_fastapi(None)", "fastapi", "fastapi"),
    ("otel_bridge.contrib.aiohttp", "instrument_aiohttp_client()", "aiohttp", "aiohttp"),
])
def test_helpers_warn_once_and_return_false_naming_the_extra_without_the_framework(
        module, function, framework, extra):
    """Regression: instrument_aiohttp_client raised ImportError without the extra, failing the
    constructor of the actor that called it; and with telemetry off it loaded 57 OpenTelemetry modules."""
    code = (f"import logging, sys\nsys.modules[{framework!r}] = None\n"
            "records = []\n"
            "class H(logging.Handler):\n    def emit(self, r): records.append(r.getMessage())\n"
            "logging.getLogger('lens_core').addHandler(H())\n"
            f"import {module} as m\n"
            "assert not [n for n in sys.modules if n.startswith('opentelemetry')]\n"
            f"assert m.{function} is False  # telemetry off: nothing imported\n"
            "assert not [n for n in sys.modules if n.startswith('opentelemetry')]\n"
            "import otel_bridge\nfrom lens_core import LensConfig\n"
            "otel_bridge.setup_telemetry(LensConfig(enabled=True, exporter='none'))\n"
            f"assert m.{function} is False and m.{function} is False\n"
            f"hits = [r for r in records if \"lens-telemetry[{extra}]\" in r]\n"
            "assert len(hits) == 1, records\n")
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
