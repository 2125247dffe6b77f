"""Log records through the logging bridge: ``extra`` fields are redacted like span attributes,
by key and by credential shape."""

import logging

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from lens_core import LensConfig  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402
from secret_cases import JWT, OPENAI  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*LoggingHandler.*:DeprecationWarning")


def test_extra_fields_with_credentials_in_their_text_are_redacted(otlp_receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
    handle = setup_telemetry(LensConfig(enabled=True, logs_enabled=True, traces_enabled=False,
                                        metrics_enabled=False))
    logging.getLogger("app.secrets").warning("calling the model", extra={
        "headers": f"Authorization: Bearer {JWT}", "endpoint": "https://alice:hunter2@llm.example.com/v1",
        "model_cfg": OPENAI, "clientSecret": "s3cr3t-value", "model": "Qwen/Qwen2.5-7B-Instruct"})
    handle.shutdown()
    (log,) = otlp_receiver.wait_for_logs(1)
    assert {k: log.attributes[k] for k in ("headers", "endpoint", "model_cfg", "clientSecret", "model")} == {
        "headers": "Authorization: Bearer [REDACTED]", "endpoint": "https://[REDACTED]@llm.example.com/v1",
        "model_cfg": "[REDACTED]", "clientSecret": "[REDACTED]", "model": "Qwen/Qwen2.5-7B-Instruct"}
