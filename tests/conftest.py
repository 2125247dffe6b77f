"""Shared fixtures: clean lens_core state, an in-memory recording backend, a real OTLP receiver."""

import os
import signal
import sys

import pytest

# A suite started in the background by a shell without job control (`nohup .ci/run &`) inherits
# SIGINT ignored, and so would every command the tests start: Lens then rightly leaves Ctrl-C
# alone (lens_core.interrupts.watch_interrupts), and the tests that send it fail. Python's own
# handler here makes every child start with SIGINT's default action, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

sys.path.insert(0, os.path.dirname(__file__))

import lens_core  # noqa: E402
from lens_core import _log, state  # noqa: E402
from lens_core.registry import SpanRegistry  # noqa: E402
from recording import RecordingBackend  # noqa: E402


def pytest_sessionstart(session):
    """With LENS_REQUIRE_CYTHON=1 (CI), refuse to run the suite on the pure-Python fallback:
    a silently failed build must not make the run test the fallback twice."""
    if os.environ.get("LENS_REQUIRE_CYTHON") == "1" and lens_core.IMPLEMENTATION != "cython":
        pytest.exit(f"LENS_REQUIRE_CYTHON=1 but lens_core.IMPLEMENTATION == {lens_core.IMPLEMENTATION!r}: "
                    "the compiled gate did not load (was it built?)", returncode=3)


@pytest.fixture(autouse=True)
def clean_lens_state():
    """Every test starts and ends with no backend, no spec and an empty registry."""
    lens_core.uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()
    _log._reset_for_tests()
    yield
    lens_core.uninstall_backend()
    SpanRegistry.clear()
    state._reset_for_tests()


@pytest.fixture
def recorder():
    """A RecordingBackend installed into lens_core for the test."""
    backend = RecordingBackend()
    lens_core.install_backend(backend)
    yield backend
    lens_core.uninstall_backend()


# ---------------------------------------------------------------------------------------
# OTLP receiver fixtures (owned by otel_bridge.exporters; keep this section together)
# ---------------------------------------------------------------------------------------

_OTEL_EXPORTER_VARIABLE_PREFIX = "OTEL_EXPORTER_OTLP_"


@pytest.fixture(scope="session")
def otlp_receiver_session():
    """One real OTLP gRPC + HTTP receiver for the whole session (prefer ``otlp_receiver``)."""
    pytest.importorskip("grpc", reason="needs grpcio: pip install 'lens-telemetry[otel]'")
    pytest.importorskip("opentelemetry.proto", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")
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
