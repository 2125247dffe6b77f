"""The buffer's byte ledger (LENS_BUFFER_MB): every queued record is budgeted once, when it is
queued, and exactly those bytes are given back when it is taken, in both recorder
implementations, for Lens's own spans, records of other origins and SDK spans alike."""

import contextvars
import os

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from lens_core import _native  # noqa: E402
from lens_core._native import _shared  # noqa: E402
from lens_core.config import pure_python_requested  # noqa: E402

_PURE = pure_python_requested()


@pytest.fixture(params=["python"] if _PURE else ["cython", "python"])
def impl(request):
    """Each recorder implementation in turn (the compiled one required under LENS_REQUIRE_CYTHON=1)."""
    try:
        return _native.load(request.param)
    except ImportError:
        if os.environ.get("LENS_REQUIRE_CYTHON") == "1":
            pytest.fail("LENS_REQUIRE_CYTHON=1 but the compiled recorder did not load")
        pytest.skip("the compiled recorder is not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")


@pytest.fixture
def size_calls(monkeypatch):
    """The records whose size is computed (record_size, in either implementation), in order."""
    from lens_core._native import _recorder_py

    calls = []
    real = _shared.record_size

    def counting(record):
        calls.append(record)
        return real(record)

    monkeypatch.setattr(_shared, "record_size", counting)  # what the compiled recorder calls for other records
    monkeypatch.setattr(_recorder_py, "_record_size", counting)  # what the pure one calls for all
    return calls


@pytest.fixture
def sdk_reader():
    """Installs the SDK span reader (as build_span_pipeline does) for the test; yields a list
    that counts the reader's calls."""
    from otel_bridge.sdk import upstream

    kinds, reader = upstream.sdk_span_reader()
    calls = []

    def counting(span):
        calls.append(span)
        return reader(span)

    before = {kind: _shared._READERS.get(kind) for kind in kinds}
    for kind in kinds:
        _shared.set_record_reader(kind, counting)
    try:
        yield calls
    finally:
        for kind, old in before.items():
            _shared.set_record_reader(kind, old)


def _recorder(impl, buffer_bytes=1 << 24):
    from opentelemetry.sdk.trace import TracerProvider

    from otel_bridge.sdk import recording

    rec = impl.Recorder(buffer_bytes=buffer_bytes)
    recording._bind(rec, TracerProvider(shutdown_on_exit=False), impl)
    return rec


def _sdk_spans():
    """Ended SDK spans: short attributes, long values, events with long values, no attributes."""
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("raw")
    spans = []
    for i in range(4):
        attrs = {"a": 1, "b": "short", "c": 2.5, "d": True}
        if i % 2:
            attrs.update(long="L" * (100 + i), seq=("S" * 80, "s", 3), raw=b"B" * 70)
        with tracer.start_as_current_span(f"sdk{i}", attributes=attrs) as span:
            if i >= 2:
                span.add_event("plain")
                span.add_event("valued", {"k": "E" * (300 + i), "n": 1})
        spans.append(span)
    with tracer.start_as_current_span("bare") as span:
        pass
    spans.append(span)
    return spans


def _native_spans(rec):
    """Lens spans started and ended on ``rec``: short attributes, long values, events."""
    ended = []
    for i in range(4):
        span = rec.start(f"native{i}", {"a": 1, "b": "x", "c": 2.5})
        if i % 2:
            span.set_attributes({"long": "N" * (200 + i), "seq": ("Q" * 90, "q"), "raw": b"R" * 65})
        if i >= 2:
            span.add_event("plain")
            span.add_event("valued", {"k": "V" * (400 + i)})
        rec.end(span)
        ended.append(span)
    return ended


def _other_records(impl):
    """make_record records (another origin's spans), one with long values and events."""
    def record(i, attrs, events):
        return impl.make_record(0, f"other{i}", 1, 1, i + 1, 0, False, None, 1, 2, attrs, events, None, 0, None)

    return [record(0, {"a": 1}, None),
            record(1, {"v": "O" * 1000, "w": b"W" * 500}, [("e", 5, {"k": "K" * 250}), ("f", 6, {})])]


def _check_balanced(impl, rec, records, size_calls=()):
    """``rec`` holds ``records`` and nothing else: its queued bytes are their sizes, taking them
    in uneven batches gives back exactly those bytes (the records themselves, in order) and
    computes no size, and after the last one the ledger is at zero: a record queued then is
    budgeted at its own size."""
    sizes = [_shared.record_size(r) for r in records]
    assert rec.queued() == len(records) and rec.queued_bytes() == sum(sizes)
    taken = []
    computed = len(size_calls)
    for limit in (1, 2, 3, 1 << 20):
        batch = rec.take(limit)
        assert all(type(r) is not tuple for r in batch)
        taken.extend(batch)
        assert rec.queued_bytes() == sum(sizes[len(taken):])
    assert len(size_calls) == computed, "take computed sizes again"
    assert [id(r) for r in taken] == [id(r) for r in records]
    assert rec.queued() == 0 and rec.queued_bytes() == 0
    probe = _other_records(impl)[1]
    assert rec.add_record(probe)
    # bytes in == bytes out: a ledger that gave back more than it took in reads low here
    assert rec.queued_bytes() == _shared.record_size(probe) > _shared.RECORD_BYTES + 1000
    assert rec.take(10) == [probe] and rec.queued_bytes() == 0


def test_the_ledger_balances_for_native_spans_sdk_spans_and_long_values(impl, size_calls, sdk_reader):
    """Regression: an SDK span's size was computed twice, at enqueue and again at take,
    through the Mapping ABC (3.8 µs each on a loaded machine: the SDK recorder's enabled span
    went from 1.24x to 1.61-1.73x the bare SDK). Each record is now budgeted once, when
    queued, and take gives back the bytes it was queued with: for Lens spans, records of
    other origins, SDK spans, long attribute values and events, the bytes taken in equal the
    bytes given back, whatever the batches."""

    def run():
        rec = _recorder(impl)
        native = _native_spans(rec)
        others = _other_records(impl)
        for r in others:
            assert rec.add_record(r)
        sdk = _sdk_spans()
        for span in sdk:
            assert rec._enqueue(span)
        assert [id(r) for r in size_calls if r in sdk] == [id(r) for r in sdk]  # each SDK span sized once
        assert len(sdk_reader) == len(sdk)  # through the reader (the dicts behind its views)
        _check_balanced(impl, rec, native + others + sdk, size_calls)

    contextvars.Context().run(run)


def test_the_ledger_balances_for_sdk_spans_without_the_reader(impl, size_calls):
    """The same ledger when no SDK span reader is installed (lens_core alone, or an SDK whose
    spans the reader does not know): their public views are read, once, at enqueue."""

    def run():
        saved = dict(_shared._READERS)
        _shared._READERS.clear()
        try:
            rec = _recorder(impl)
            sdk = _sdk_spans()
            for span in sdk:
                assert rec._enqueue(span)
            assert [id(r) for r in size_calls] == [id(r) for r in sdk]  # each sized once, at enqueue
            _check_balanced(impl, rec, sdk, size_calls)
        finally:
            _shared._READERS.update(saved)

    contextvars.Context().run(run)


def test_the_ledger_balances_for_spans_truncated_at_shutdown(impl, size_calls):
    """Regression: the compiled recorder queued the spans it truncated at shutdown without
    counting their bytes in, and take counted them out: the ledger then read low by their
    sizes (queued_bytes() 0 while records were queued; the buffer took that much more than
    LENS_BUFFER_MB). Both recorders now count them in, as the pure one did."""

    def run():
        rec = _recorder(impl)
        opened = [rec.start(f"open{i}", {"v": "T" * (100 * (i + 1))}) for i in range(3)]
        ended = _native_spans(rec)
        assert rec.end_open_spans("test") == 3
        _check_balanced(impl, rec, ended + opened[::-1], size_calls)

    contextvars.Context().run(run)


def test_the_sdk_recorder_installs_the_span_reader():
    """build_span_pipeline installs the SDK span reader (upstream.sdk_span_reader), so the
    recorder budgets an SDK span from the dicts behind its views, at the size its public
    views give."""
    from lens_core import LensConfig
    from otel_bridge import setup_telemetry

    handle = setup_telemetry(LensConfig(enabled=True, exporter="none", metrics_enabled=False, recorder="sdk"),
                             _allow_reinit=True)
    try:
        spans = _sdk_spans()
        assert type(spans[0]) in _shared._READERS
        sizes = [_shared.record_size(s) for s in spans]
        reader = _shared._READERS[type(spans[0])]
        assert all(reader(s) is not None for s in spans)
        saved = dict(_shared._READERS)
        _shared._READERS.clear()
        try:
            assert [_shared.record_size(s) for s in spans] == sizes  # the public views agree
        finally:
            _shared._READERS.update(saved)
    finally:
        handle.shutdown()
