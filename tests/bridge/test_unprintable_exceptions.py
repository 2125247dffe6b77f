"""A user's exception whose __str__ or __repr__ raises propagates unchanged through every
recording path of the OpenTelemetry backend, and the span still records the failure."""

import asyncio

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import lens_core  # noqa: E402
from lens_core import LensConfig, SpanRegistry  # noqa: E402
from lens_core.spans import describe_exception  # noqa: E402
from otel_bridge import setup_telemetry  # noqa: E402


class StrRaises(Exception):
    """Its __str__ fails (a lazy message built from state that is gone)."""

    def __str__(self):
        raise ValueError("__str__ failed")


class BothRaise(Exception):
    """Neither __str__ nor __repr__ works."""

    def __str__(self):
        raise RuntimeError("__str__ failed")

    def __repr__(self):
        raise RuntimeError("__repr__ failed")


class StrNotText(Exception):
    """__str__ returns no str (str() raises TypeError)."""

    def __str__(self):
        return 42


class KeyboardStyle(BaseException):
    """Not an Exception subclass, and unprintable."""

    def __str__(self):
        raise ValueError("no")


UNPRINTABLE = [StrRaises, BothRaise, StrNotText, KeyboardStyle]


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


def _run(coroutine):
    # Not asyncio.run: its Runner installs a SIGINT handler holding the main task, and
    # on close repr()s that handler, so an exception whose __repr__ raises breaks
    # asyncio.run itself (and every later call in the process), Lens or not.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def _with(cm, error):
    with cm:
        raise error


def _trace_fn_sync(error):
    @lens_core.trace_fn("g", "fn.sync")
    def work():
        raise error

    work()


def _trace_fn_coroutine(error):
    @lens_core.trace_fn("g", "fn.coroutine")
    async def work():
        await asyncio.sleep(0)
        raise error

    _run(work())


def _trace_fn_generator(error):
    @lens_core.trace_fn("g", "fn.generator")
    def work():
        yield 1
        raise error

    list(work())


def _trace_fn_async_generator(error):
    @lens_core.trace_fn("g", "fn.async_generator")
    async def work():
        yield 1
        raise error

    async def drain():
        return [item async for item in work()]

    _run(drain())


def _start_efficiency_span_ended_with_it(error):
    wait = lens_core.start_efficiency_span("idle/wait")
    try:
        raise error
    except BaseException as exc:
        wait.end(exc)
        raise


def _idle_wait(error):
    wait = lens_core.IdleWait("idle/poll")
    try:
        wait.starved()
        raise error
    finally:
        wait.done()


PATHS = {
    "managed_span": (lambda e: _with(lens_core.managed_span("g", "managed"), e), "managed"),
    "umbrella_span": (lambda e: _with(lens_core.umbrella_span("g", "umbrella"), e), "umbrella"),
    "span_cm": (lambda e: _with(lens_core.span_cm("free"), e), "free"),
    "trace_fn": (_trace_fn_sync, "fn.sync"),
    "trace_fn coroutine": (_trace_fn_coroutine, "fn.coroutine"),
    "trace_fn generator": (_trace_fn_generator, "fn.generator"),
    "trace_fn async generator": (_trace_fn_async_generator, "fn.async_generator"),
    "efficiency_span": (lambda e: _with(lens_core.efficiency_span("idle/cm"), e), "rl.idle.cm"),
    "start_efficiency_span": (_start_efficiency_span_ended_with_it, "rl.idle.wait"),
    "deferred_child_span": (lambda e: _with(lens_core.deferred_child_span("g", "deferred", {}), e), "deferred"),
    "IdleWait": (_idle_wait, "rl.idle.poll"),
}


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
    if path == "IdleWait":  # a poll-loop wait records no failure: it only ends
        assert span.status.status_code is StatusCode.UNSET
        return
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == describe_exception(error)
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.type"].endswith(kind.__qualname__)
    assert event.attributes["exception.message"] == describe_exception(error, type_name=False)
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
    assert describe_exception(ValueError("x"), type_name=False) == "x"
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
