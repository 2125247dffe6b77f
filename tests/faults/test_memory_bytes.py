"""LENS_BUFFER_MB bounds bytes, not records: a hung collector and 100 KB attribute values, with
real processes measuring their own RSS, under both recorders, with and without the disk spool."""

import socket

import pytest

from .figures import record_figure
from .processes import start

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

BUFFER_MB = 16


@pytest.fixture
def hung_collector():
    """A 127.0.0.1 port that accepts connections (the kernel completes them) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("spool_mb", [0, 256])
def test_a_hung_collector_and_100kb_values_stay_within_the_buffer_setting(tmp_path, recorder, hung_collector,
                                                                          spool_mb):
    """Regression: LENS_BUFFER_MB=16 with a hung collector and 100 KB attribute values grew RSS
    by 316 MB (native) and 558 MB (SDK recorder): the buffer counted records (32,768 of them),
    not bytes."""
    spans = 3000  # 300 MB of values
    proc = start("big_values.py", spans, LENS_EXPORTER="otlp", LENS_BUFFER_MB=BUFFER_MB,
                 OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{hung_collector}",
                 OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", LENS_RECORDER=recorder,
                 LENS_SPOOL_MB=spool_mb, LENS_SPOOL_DIR=tmp_path / "spool", LENS_RUN_ID="big")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    grown, dropped, created = stdout.split()
    record_figure(f"hung collector, 100 KB values, LENS_BUFFER_MB=16, spool {spool_mb} MB ({recorder})",
                  spans=int(created), rss_growth_mb=float(grown), dropped=int(dropped))
    assert int(created) == spans + 50  # and the warm-up
    assert int(dropped) > 0 if spool_mb == 0 else True  # the buffer really filled
    assert float(grown) <= BUFFER_MB + 16


@pytest.mark.parametrize("implementation", ["cython", "python"])
def test_the_buffer_holds_bytes_not_records(implementation):
    """Regression: a 1 MB buffer held 2,048 records whatever their size (2,048 x 100 KB =
    200 MB): it now holds what fits in 1 MB, in both recorder implementations, and gives the
    bytes back as the export side takes them."""
    from lens_core import _native

    try:
        impl = _native.load(implementation)
    except ImportError:
        pytest.skip("compiled recorder not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
    rec = impl.Recorder(buffer_bytes=1 << 20)

    def record(value):
        return impl.make_record(0, "big", 1, 1, 1, 0, False, None, 1, 2, {"v": value}, None, None, 0, None)

    accepted = sum(rec.add_record(record(f"{i:02d}" * 50_000)) for i in range(50))  # 100 KB each
    assert 9 <= accepted <= 10 and rec.dropped == 50 - accepted
    assert (1 << 20) - 100_512 < rec.queued_bytes() <= 1 << 20
    assert len(rec.take(100)) == accepted and rec.queued_bytes() == 0
    small = sum(rec.add_record(record("s")) for _ in range(3000))
    assert small == (1 << 20) // impl.RECORD_BYTES  # short values: the old record budget
