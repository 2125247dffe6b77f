"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

# ---------------------------------------------------------------------------------------
# OTLP receiver fixtures (owned by otel_bridge.exporters; keep this section together)
# ---------------------------------------------------------------------------------------

_OTEL_EXPORTER_VARIABLE_PREFIX = "OTEL_EXPORTER_OTLP_"


@pytest.fixture(scope="session")
def otlp_receiver_session():
    """One real OTLP gRPC + HTTP receiver for the whole session (prefer ``otlp_receiver``)."""
    pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.proto")
    from otlp_receiver import OTLPReceiver

    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def otlp_receiver(otlp_receiver_session, monkeypatch):
    """The session's OTLP receiver, emptied, with a clean ``OTEL_EXPORTER_OTLP_*`` environment.

    Any ``OTEL_EXPORTER_OTLP_*`` variable from the outer environment is removed and
    proxies are bypassed for 127.0.0.1, so exporters reach the receiver only where the
    test points them.
    """
    import os

    for name in list(os.environ):
        if name.startswith(_OTEL_EXPORTER_VARIABLE_PREFIX):
            monkeypatch.delenv(name)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    otlp_receiver_session.clear()
    yield otlp_receiver_session
    otlp_receiver_session.clear()
