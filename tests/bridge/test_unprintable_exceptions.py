"""A user's exception whose __str__ or __repr__ raises propagates unchanged through every
recording path of the OpenTelemetry backend, and the span still records the failure."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

# Recording paths: run under each gate-and-recorder twin (tests/twins.py).
pytestmark = pytest.mark.usefixtures("twin")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import lens_core  # noqa: E402
from exception_paths import PATHS, RECORDS_NO_FAILURE, UNPRINTABLE, BothRaise, KeyboardStyle, StrNotText, StrRaises  # noqa: E402
from lens_core import LensConfig, SpanRegistry  # noqa: E402
from lens_core.spans import describe_exception  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402


@pytest.fixture
def exported():
    """An exporting setup with group ``g`` on and the efficiency category registered;
    yields a function that flushes and returns the finished spans by name."""
    SpanRegistry.register("t", ["g", "efficiency"])
    spans = InMemorySpanExporter()
    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", span_groups="g,efficiency",
                                        metrics_enabled=False), span_exporter=spans, _allow_reinit=True)

    def by_name():
        assert handle.force_flush(5000)
        return {span.name: span for span in spans.get_finished_spans()}

    yield by_name
    handle.shutdown()


@pytest.mark.parametrize("kind", UNPRINTABLE, ids=lambda k: k.__name__)
@pytest.mark.parametrize("path", list(PATHS))
def test_an_unprintable_exception_propagates_unchanged_and_is_recorded(exported, path, kind):
    """Regression: a user's exception whose __str__ raised was replaced, when the span
    recorded it, by the error from __str__ (the backend's status text and the SDK's
    record_exception both called str())."""
    run, span_name = PATHS[path]
    error = kind("payload")
    with pytest.raises(kind) as raised:
        run(error)
    assert raised.value is error
    span = exported()[span_name]
    if path in RECORDS_NO_FAILURE:
        assert span.status.status_code is StatusCode.UNSET
        return
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == describe_exception(error)
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.type"].endswith(kind.__qualname__)
    assert event.attributes["exception.message"] == describe_exception(error, with_type=False)
    assert kind.__name__ in event.attributes["exception.stacktrace"]


@pytest.mark.parametrize("kind, text", [
    (StrRaises, "StrRaises: <str() failed> StrRaises('payload')"),
    (BothRaise, "BothRaise: <unprintable BothRaise>"),
    (StrNotText, "StrNotText: <str() failed> StrNotText('payload')"),
    (KeyboardStyle, "KeyboardStyle: <str() failed> KeyboardStyle('payload')"),
])
def test_describe_exception_never_raises(kind, text):
    assert describe_exception(kind("payload")) == text


def test_describe_exception_keeps_ordinary_messages_and_redacts_credentials():
    assert describe_exception(ValueError("bad shape (3, 4)")) == "ValueError: bad shape (3, 4)"
    assert describe_exception(KeyError()) == "KeyError"
    assert describe_exception(ValueError("x"), with_type=False) == "x"
    leaked = ConnectionError("cannot reach https://alice:hunter2@db.example.com/prod")
    assert describe_exception(leaked) == "ConnectionError: cannot reach https://[REDACTED]@db.example.com/prod"


def test_a_printable_exception_is_recorded_as_the_sdk_records_it(exported):
    """Same event attributes as the SDK's own record_exception (type, message, stack
    trace, escaped) and the usual "Type: message" status."""
    with pytest.raises(ValueError):
        with lens_core.managed_span("g", "plain"):
            raise ValueError("bad shape (3, 4)")
    span = exported()["plain"]
    assert span.status.description == "ValueError: bad shape (3, 4)"
    (event,) = span.events
    assert (event.name, event.attributes["exception.type"], event.attributes["exception.message"],
            event.attributes["exception.escaped"]) == ("exception", "ValueError", "bad shape (3, 4)", "True")
    assert event.attributes["exception.stacktrace"].startswith("Traceback (most recent call last):")
