"""A slow or absent collector, with real processes and a real OTLP receiver: spans wait in the
disk spool and are delivered in order when the collector catches up, by the same process, the
next process of the run, or `lens replay`. The spool's files: private, crash-safe framing."""

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from .figures import record_figure
from .processes import child_environ, start

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")

from otlp_receiver import OTLPReceiver  # noqa: E402

from otel_bridge.sdk.spool import Spool, SpoolError  # noqa: E402


def _otlp_env(receiver_or_port, tmp_path, recorder, **extra):
    port = receiver_or_port if isinstance(receiver_or_port, int) else receiver_or_port.http_port
    return {"LENS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "LENS_RUN_ID": "spool",
            "LENS_SPOOL_DIR": tmp_path / "spool", "LENS_RECORDER": recorder, **extra}


def _final(receiver):
    finals = [s.attributes for s in receiver.spans(loss_records=True) if s.attributes.get("lens.telemetry.final")]
    return finals[-1] if finals else None


def _spool_files(tmp_path):
    return sorted((tmp_path / "spool").rglob("*.spool"))


@pytest.mark.slow
def test_a_collector_draining_20k_spans_a_second_loses_nothing_with_default_settings(tmp_path, recorder):
    """Regression: 200k spans from a tight loop to a receiver draining ~20k spans/s lost
    59-80 % with default settings (the buffer filled while the export thread waited on the
    network)."""
    total = 200_000
    with OTLPReceiver(drain_spans_per_s=20_000) as receiver:
        proc = start("slow_collector.py", total, -1, **_otlp_env(receiver, tmp_path, recorder))
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
        loop_s, ok = stdout.split()
        delivered = sum(1 for s in receiver.spans() if s.name == "tight")
        final = _final(receiver)
    record_figure(f"collector draining 20k spans/s, 200k spans ({recorder})", created=total, delivered=delivered,
                  reported_dropped=final["lens.spans.dropped"], loop_s=float(loop_s))
    assert ok == "True" and delivered == total
    assert final["lens.spans.created"] == total and final["lens.spans.dropped"] == final["lens.spans.failed"] == 0
    assert _spool_files(tmp_path) == []  # everything delivered: nothing left on disk


@pytest.mark.slow
def test_a_collector_down_for_30_seconds_mid_run_loses_nothing(tmp_path):
    """Regression: a collector restart lost every span exported while it was away (counted
    failed). The receiver is stopped for 30 s while the loop records; it comes back on the
    same port."""
    total, pause_at = 100_000, 50_000
    receiver = OTLPReceiver().start()
    port = receiver.http_port
    proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "programs", "slow_collector.py"),
                             str(total), str(pause_at)], env=child_environ(**_otlp_env(port, tmp_path, "native")),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "paused"
        time.sleep(2)  # let the first half go out
        before = sum(1 for s in receiver.spans() if s.name == "tight")
        receiver.stop()
        down_at = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        spooled_while_down = 0
        while time.monotonic() - down_at < 30:
            time.sleep(1)
            spooled_while_down = max(spooled_while_down, sum(f.stat().st_size for f in _spool_files(tmp_path)))
        receiver = OTLPReceiver(http_port=port).start()
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        receiver.stop()
    assert proc.returncode == 0, stderr[-3000:]
    after = sum(1 for s in receiver.spans() if s.name == "tight")
    final = _final(receiver)
    assert final is not None, (before, after, stdout, stderr[-3000:])
    record_figure("collector down 30 s mid-run, 100k spans (native)", created=total, delivered=before + after,
                  spooled_mb_while_down=round(spooled_while_down / 2**20, 1),
                  reported_lost=final["lens.spans.dropped"] + final["lens.spans.failed"] + final["lens.spans.unended"])
    assert spooled_while_down > 0  # the second half really waited on disk
    assert before + after >= total and stdout.split()[1] == "True"
    assert final["lens.spans.dropped"] == final["lens.spans.failed"] == final["lens.spans.unended"] == 0


def test_spans_still_spooled_at_exit_are_replayed_by_the_next_process_of_the_run(tmp_path, recorder, unused_port):
    """What the collector never took before the deadline is not lost: the loss record says
    it is spooled, and the next process of the same run delivers it, final record included."""
    first = start("slow_collector.py", 5_000, -1, 1500, **_otlp_env(unused_port, tmp_path, recorder))
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr[-3000:]
    assert stdout.split()[1] == "False" and _spool_files(tmp_path)
    for path in _spool_files(tmp_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with OTLPReceiver() as receiver:
        second = start("slow_collector.py", 1_000, -1, **_otlp_env(receiver, tmp_path, recorder))
        stdout, stderr = second.communicate(timeout=120)
        assert second.returncode == 0, stderr[-3000:]
        spans = [s for s in receiver.spans() if s.name == "tight"]
        finals = {s.resource["service.instance.id"]: s.attributes for s in receiver.spans(loss_records=True)
                  if s.attributes.get("lens.telemetry.final")}
    by_process = {}
    for s in spans:
        by_process[s.resource["service.instance.id"]] = by_process.get(s.resource["service.instance.id"], 0) + 1
    record_figure(f"spooled at exit, replayed by the next process ({recorder})", first_created=5_000,
                  first_replayed=sorted(by_process.values())[-1], second_created=1_000)
    assert sorted(by_process.values()) == [1_000, 5_000]
    assert len(finals) == 2  # the first process's final record, spooled behind its spans, arrived too
    first_final = next(v for v in finals.values() if v["lens.spans.created"] == 5_000)
    assert first_final["lens.spans.spooled"] == 5_000 and first_final["lens.spans.unended"] == 0
    second_final = next(v for v in finals.values() if v["lens.spans.created"] == 1_000)
    assert second_final["lens.spans.replayed"] == 5_000
    assert _spool_files(tmp_path) == []


def test_lens_replay_sends_what_an_ended_process_left_in_the_spool(tmp_path, unused_port):
    """`lens replay` delivers a dead run's spool and says what it did; run again, it has nothing to do."""
    first = start("slow_collector.py", 3_000, -1, 1000, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    assert _spool_files(tmp_path)
    with OTLPReceiver() as receiver:
        env = child_environ(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
                            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
        command = [sys.executable, "-m", "lens_cli", "replay", "--spool-dir", str(tmp_path / "spool")]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        delivered = sum(1 for s in receiver.spans() if s.name == "tight")
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    record_figure("lens replay of a dead process's spool", spooled=3_000, delivered=delivered)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"delivered": 3_000, "undelivered": 0, "dropped": 0, "damaged": 0, "refused": 0}
    assert delivered == 3_000 and _spool_files(tmp_path) == []
    assert again.returncode == 3 and "nothing spooled" in again.stderr


def test_a_torn_spool_tail_is_skipped_and_counted_and_the_records_before_it_are_read(tmp_path):
    """A process killed mid-write leaves a torn record: the ones before it are replayed, the
    torn one is counted (never parsed as garbage)."""
    directory = str(tmp_path / "spool" / "run")
    writer = Spool(directory, 1 << 30)
    for i in range(5):
        assert writer.append(f"payload-{i}".encode() * 100, 10)
    (path,) = (tmp_path / "spool" / "run").iterdir()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size - 7)  # the last record loses its end, as a crash mid-write leaves it
    writer.forget()  # the writer "dies": its lock goes with it
    reader = Spool(directory, 1 << 30)
    assert reader.adopt() == 40
    payloads = []
    while (head := reader.peek()) is not None:
        payloads.append(head[0])
        reader.done(head[3])
    record_figure("torn spool tail", written=5, replayed=len(payloads), torn=reader.torn)
    assert payloads == [f"payload-{i}".encode() * 100 for i in range(4)] and reader.torn == 1


def test_a_segment_a_live_process_holds_is_never_adopted(tmp_path):
    """Two processes of one run share the spool directory: each replays only what ended ones left."""
    directory = str(tmp_path / "spool" / "run")
    live = Spool(directory, 1 << 30)
    assert live.append(b"x" * 100, 3)
    other = Spool(directory, 1 << 30)
    assert other.adopt() == 0 and other.peek() is None


def test_a_closed_spool_forgotten_in_a_child_closes_no_descriptor_it_once_held(tmp_path):
    """Regression: forget() (a forked child's) closed the descriptor numbers of a spool the
    parent had already closed, and those numbers named other files by then: a subprocess that
    Ray started with a preexec_fn lost its stdout (EBADF)."""
    spool = Spool(str(tmp_path / "spool" / "run"), 1 << 20)
    assert spool.append(b"x" * 100, 3)  # one segment open, pending
    held = {spool._dir_fd, spool._writing.fd}
    spool.close()
    reused = [os.open(os.devnull, os.O_RDONLY) for _ in range(len(held) + 8)]
    try:
        assert held <= set(reused)  # the lowest free numbers: the closed spool's among them
        spool.forget()
        for fd in reused:
            os.fstat(fd)  # raises EBADF when forget() closed it
    finally:
        for fd in reused:
            os.close(fd)


def test_the_spool_refuses_a_symlinked_or_shared_directory(tmp_path):
    """A spool directory planted as a symlink, or one others can write, is refused with a
    message naming it (spans are then dropped when the buffer fills, not written there)."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "base").mkdir()
    os.symlink(target, tmp_path / "base" / "run")
    with pytest.raises(SpoolError, match="symlink"):
        Spool(str(tmp_path / "base" / "run"), 1 << 20)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(SpoolError, match="writable by others"):
        Spool(str(shared), 1 << 20)


def test_the_spool_budget_bounds_the_disk_used_and_nothing_partial_is_left(tmp_path):
    """Past LENS_SPOOL_MB a batch is refused whole (the pipeline counts it dropped)."""
    spool = Spool(str(tmp_path / "s"), 10_000)
    accepted = sum(spool.append(b"y" * 1000, 1) for _ in range(20))
    on_disk = sum(p.stat().st_size for p in (tmp_path / "s").iterdir())
    assert accepted == 9 and on_disk == spool.used_bytes <= 10_000


@pytest.mark.parametrize("value", ["-1", "abc", "1048577", "1.5"])
def test_a_bad_spool_size_is_refused_at_config_time(value):
    """LENS_SPOOL_MB outside 0..1048576 (or not a whole number) fails setup with a message naming it."""
    from lens_core import LensConfig

    with pytest.raises(ValueError, match="LENS_SPOOL_MB"):
        LensConfig.from_env(environ={"LENS_SPOOL_MB": value})
    with pytest.raises(ValueError, match="spool_dir"):
        LensConfig(spool_dir="")


def test_records_marked_sent_while_their_segment_is_written_leave_the_rest_intact(tmp_path):
    """Regression: segments were opened O_APPEND, where Linux's pwrite appends whatever the
    offset: marking a record sent added a byte at the end and shifted every later record
    (27,826 of 100,000 spans refused by the collector as corrupt after a 30 s outage)."""
    spool = Spool(str(tmp_path / "s"), 1 << 30)
    payloads = [bytes([i]) * (1000 + i) for i in range(10)]
    delivered = []
    for i, payload in enumerate(payloads):
        assert spool.append(payload, 1)
        if i % 3 == 0:  # the sender takes some while the export thread keeps appending
            head = spool.peek()
            delivered.append(head[0])
            spool.done(head[3])
    while (head := spool.peek()) is not None:
        delivered.append(head[0])
        spool.done(head[3])
    assert delivered == payloads and spool.torn == 0


def _replay(receiver, spool_dir, *extra):
    env = child_environ(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    command = [sys.executable, "-m", "lens_cli", "replay", "--spool-dir", str(spool_dir), *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def _spool_bytes(tmp_path):
    return {path.name: path.read_bytes() for path in _spool_files(tmp_path)}


def test_lens_replay_keeps_every_span_a_collector_rejects_until_it_is_taken_or_given_up(tmp_path, unused_port):
    """Regression: `lens replay` against a collector answering 400, 401, 403, 404 or 413
    deleted every spooled span while printing "they stay spooled" (an expired token or a
    wrong URL path wiped the spool). Now the files are untouched by a refusal, a 413 is met
    by smaller requests, and only --drop-rejected deletes what is rejected (counted)."""
    first = start("slow_collector.py", 3_000, -1, 1000, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    before = _spool_bytes(tmp_path)
    assert before
    with OTLPReceiver() as receiver:
        for status in (400, 401, 403, 404):
            receiver.reply_status = status
            done = _replay(receiver, tmp_path / "spool")
            assert done.returncode == 1, (status, done.stderr)
            assert json.loads(done.stdout)["undelivered"] == 3_000 and "stay spooled" in done.stderr
            assert _spool_bytes(tmp_path) == before, status  # not a byte changed: nothing marked sent
        receiver.reply_status = 200
        receiver.max_spans_per_request = 100  # every spooled request is larger: 413, then halves
        done = _replay(receiver, tmp_path / "spool")
        delivered = sorted(s.span_id for s in receiver.spans() if s.name == "tight")
        largest = max(sum(len(ss.spans) for rs in r.request.resource_spans for ss in rs.scope_spans)
                      for r in receiver.requests("traces"))
    record_figure("lens replay against a collector refusing 4xx, then 413 at 100 spans", spooled=3_000,
                  kept_through_refusals=3_000, delivered_in_halves=len(delivered), largest_request=largest)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"delivered": 3_000, "undelivered": 0, "dropped": 0, "damaged": 0, "refused": 0}
    assert len(delivered) == len(set(delivered)) == 3_000 and largest <= 100
    assert _spool_files(tmp_path) == []


def test_lens_replay_drop_rejected_deletes_what_the_collector_rejects_and_says_how_many(tmp_path, unused_port):
    """The one way to give up spooled spans the collector will never take: --drop-rejected,
    counted in the JSON and said on stderr; the files go."""
    first = start("slow_collector.py", 2_000, -1, 1000, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    assert _spool_files(tmp_path)
    with OTLPReceiver() as receiver:
        receiver.reply_status = 400
        done = _replay(receiver, tmp_path / "spool", "--drop-rejected")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["dropped"] >= 2_000 and counts["delivered"] == counts["undelivered"] == 0  # + the final record
    assert f"{counts['dropped']} spooled spans the collector rejected" in done.stderr
    assert _spool_files(tmp_path) == []


def test_a_record_too_large_for_the_collector_even_alone_stays_on_disk(tmp_path):
    """A one-span record the collector refuses as too large cannot be cut: it stays spooled
    (the other records are delivered)."""
    from otel_bridge.sdk.spool import replay

    directory = tmp_path / "spool" / "run"
    writer = Spool(str(directory), 1 << 30)
    for payload, spans in ((b"small", 1), (b"huge" * 1000, 1), (b"small too", 1)):
        assert writer.append(payload, spans)
    writer.forget()
    sent = []

    def deliver(payload, spans):
        if len(payload) > 100:
            return False, "HTTP 413", False, 413
        sent.append(payload)
        return True, None, False, 200

    done = replay(str(tmp_path / "spool"), deliver, split=lambda payload: None)
    assert sent == [b"small", b"small too"] and (done.delivered, done.undelivered) == (2, 1)
    reader = Spool(str(directory), 1 << 30)
    assert reader.adopt() == 1 and reader.peek()[0] == b"huge" * 1000


def test_a_byte_changed_anywhere_in_a_segment_costs_only_the_record_it_hit(tmp_path):
    """Regression: one flipped byte in the middle of a segment lost every intact record
    after it (250 of 950 spans delivered, "1 torn"). Reading resumes at the next record with
    a good checksum: a byte flipped at each of ~300 offsets (headers, payloads, the last
    record, the first) costs at most the one record it hit, counted damaged."""
    directory = tmp_path / "spool" / "run"
    writer = Spool(str(directory), 1 << 30)
    payloads = [(f"record {i} ".encode() + bytes([i]) * (40 + 13 * i)) for i in range(40)]
    for i, payload in enumerate(payloads):
        assert writer.append(payload, i + 1)
    head = writer.peek()  # the first record delivered: marked sent, still in the file
    writer.done(head[3])
    writer.forget()
    (path,) = directory.iterdir()
    original = path.read_bytes()
    offsets = sorted(set(range(0, len(original), 37)) | {0, 4, 20, len(original) - 1})
    lost_beyond_the_hit = []
    for offset in offsets:
        damaged = bytearray(original)
        damaged[offset] ^= 0x5A
        path.write_bytes(bytes(damaged))
        reader = Spool(str(directory), 1 << 30)
        reader.adopt()
        read = []
        while (head := reader.peek()) is not None:
            read.append(head[0])
            reader.keep(head[3])
        reader.close()
        missing = [p for p in payloads[1:] if p not in read]
        if len(missing) + reader.torn > 2 or (missing and reader.torn != 1):
            lost_beyond_the_hit.append((offset, len(missing), reader.torn))
        assert all(p in payloads[1:] for p in read)
    record_figure("a byte flipped at each of many offsets of a spool segment", offsets=len(offsets),
                  records=len(payloads), offsets_losing_more_than_the_hit_record=len(lost_beyond_the_hit))
    assert lost_beyond_the_hit == []


def test_lens_replay_of_a_segment_damaged_in_the_middle_delivers_every_intact_span_and_the_loss_record(
        tmp_path, unused_port):
    """Regression: a flipped byte mid-segment: 250 of 950 spans delivered, exit 0, "1 torn",
    and the first process's own loss record (last in the segment) lost. Now every intact
    span and the loss record arrive, and replay exits 1 saying one record was damaged."""
    first = start("slow_collector.py", 950, -1, 1000, 50, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    from otel_bridge.sdk.spool import read_segment

    (path,) = _spool_files(tmp_path)
    fd = os.open(path, os.O_RDONLY)
    try:
        records, _ = read_segment(fd)
    finally:
        os.close(fd)
    assert len(records) >= 5  # spans in batches, the loss record last
    data = bytearray(path.read_bytes())
    hit = len(data) // 3
    data[hit] ^= 0xFF
    path.write_bytes(bytes(data))
    hit_spans = next(count for offset, _, count, length in records if offset <= hit < offset + 20 + length)
    with OTLPReceiver() as receiver:
        done = _replay(receiver, tmp_path / "spool")
        delivered = sum(1 for s in receiver.spans() if s.name == "tight")
        final = _final(receiver)
    counts = json.loads(done.stdout)
    record_figure("lens replay of a segment with one byte flipped mid-way", spooled=950, delivered=delivered,
                  in_the_damaged_record=hit_spans, damaged=counts["damaged"])
    assert done.returncode == 1 and "1 spool records were damaged" in done.stderr, done.stderr
    assert counts["damaged"] == 1 and delivered == 950 - hit_spans and counts["delivered"] == delivered
    assert final is not None and final["lens.spans.spooled"] == 950


def _one_segment_run(tmp_path, payload=b"mine"):
    directory = tmp_path / "spool" / "run"
    writer = Spool(str(directory), 1 << 30)
    assert writer.append(payload, 1)
    writer.forget()
    (path,) = directory.iterdir()
    return directory, path


def test_spool_files_of_another_user_or_open_to_others_are_never_adopted_or_sent(tmp_path):
    """Regression: segments owned by another user or readable by others were adopted and
    sent (a planted copy of a segment was delivered twice). Checked on the opened
    descriptor: only this user's private regular files are sent; the others are left as
    they are and named (a FIFO planted among them does not hang the open)."""
    from otel_bridge.sdk.spool import replay

    directory, path = _one_segment_run(tmp_path)
    planted = {}
    for name, mode, owner in (("copy-0644", 0o644, None), ("copy-0640", 0o640, None), ("copy-0606", 0o606, None),
                              ("nobody-0600", 0o600, 65534)):
        target = directory / f"{name}.spool"
        target.write_bytes(path.read_bytes())
        os.chmod(target, mode)
        if owner is not None:
            os.chown(target, owner, owner)
        planted[name] = target.read_bytes()
    os.mkfifo(directory / "fifo.spool", 0o600)
    sent = []
    done = replay(str(tmp_path / "spool"), lambda payload, spans: (sent.append(payload) or True, None, False, 200))
    assert sent == [b"mine"] and done.delivered == 1
    record_figure("spool files planted by another user or open to others", planted=5, sent=len(sent),
                  refused=len(done.refused))
    assert sorted(os.path.basename(p) for p in done.refused) == sorted(
        [f"{name}.spool" for name in planted] + ["fifo.spool"])
    assert all((directory / f"{name}.spool").read_bytes() == data for name, data in planted.items())


def test_a_symlinked_or_foreign_spool_base_directory_is_refused(tmp_path):
    """Regression: a symlinked LENS_SPOOL_DIR, and a base directory owned by another user
    with mode 1777, were used (only the run directory below them was checked). Both are
    refused on the opened descriptor, by the writer and by `lens replay` (one line, exit 2)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, tmp_path / "link")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    os.chmod(shared, 0o1777)
    for base, why in ((tmp_path / "link", "symlink"), (shared, "belongs to uid 65534")):
        with pytest.raises(SpoolError, match=why):
            Spool(str(base / "run"), 1 << 20)
        done = subprocess.run([sys.executable, "-m", "lens_cli", "replay", "--spool-dir", str(base)],
                              env=child_environ(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and why in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert list(elsewhere.iterdir()) == [] and list(shared.iterdir()) == []


def test_a_process_with_a_symlinked_spool_dir_warns_once_and_writes_nothing_through_it(tmp_path, unused_port):
    """LENS_SPOOL_DIR planted as a symlink: one warning that says what becomes of the spans,
    nothing written where the link points, and the loss record counts what was not sent."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, tmp_path / "link")
    env = _otlp_env(unused_port, tmp_path, "native", LENS_SPOOL_DIR=tmp_path / "link")
    proc = start("slow_collector.py", 500, -1, 1000, **env)
    stdout, stderr = proc.communicate(timeout=120)
    warnings = [line for line in stderr.splitlines() if "no disk spool" in line]
    assert len(warnings) == 1 and "symlink" in warnings[0] and "dropped" in warnings[0], stderr
    assert list(elsewhere.rglob("*")) == [] and stdout.split()[1] == "False"


@pytest.mark.parametrize("value", ["spool", "./spool", "~/spool"])
def test_lens_spool_dir_is_parsed_and_checked_in_one_place_for_processes_and_replay(tmp_path, value):
    """Regression: LENS_SPOOL_DIR was parsed twice, and `lens replay`'s copy skipped the
    check (a relative path, which the processes of a run and replay resolve against
    different working directories, was used as given). Both now go through LensConfig."""
    from lens_core import LensConfig

    with pytest.raises(ValueError, match="LENS_SPOOL_DIR=.*absolute"):
        LensConfig.from_env(environ={"LENS_SPOOL_DIR": value})
    done = subprocess.run([sys.executable, "-m", "lens_cli", "replay"], env=child_environ(LENS_SPOOL_DIR=value),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "LENS_SPOOL_DIR" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert LensConfig.from_env(environ={"LENS_SPOOL_DIR": f" {tmp_path} "}).spool_dir == str(tmp_path)


def test_the_next_process_queues_its_spans_behind_a_large_adopted_spool(tmp_path, unused_port):
    """Regression: a process's export thread could take its first spans before its sender had
    adopted the spool an earlier process of the run left (40 % of runs with 3,000 spans spooled):
    they went to the outbox, ahead of the adopted ones, and a collector answering 401 had them
    counted failed and dropped where the adopted spans stayed on disk. Now they queue behind the
    adopted spans until the sender has looked, and are kept with them."""
    first = start("slow_collector.py", 30_000, -1, 1000, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    with OTLPReceiver() as receiver:
        receiver.reply_status = 401
        second = start("slow_collector.py", 100, -1, 3000, **_otlp_env(receiver, tmp_path, "native"))
        second.communicate(timeout=120)
        finals = [s.attributes for s in receiver.spans(loss_records=True) if s.attributes.get("lens.telemetry.final")]
        receiver.reply_status = 200
        done = _replay(receiver, tmp_path / "spool")
        delivered = sum(1 for s in receiver.spans() if s.name == "tight")
    assert done.returncode == 0, done.stderr
    assert not any(f.get("lens.spans.failed") for f in finals), finals
    assert delivered == 30_100 and _spool_files(tmp_path) == []


def test_a_process_whose_collector_rejects_adopted_spans_leaves_them_on_disk(tmp_path, unused_port):
    """Regression: the next process of a run adopting a dead process's spool, against a
    collector answering 401 (an expired token), marked every adopted record sent: the
    spool was wiped. The records stay on disk, and `lens replay` delivers them later."""
    first = start("slow_collector.py", 3_000, -1, 1000, **_otlp_env(unused_port, tmp_path, "native"))
    first.communicate(timeout=120)
    before = _spool_bytes(tmp_path)
    assert before
    with OTLPReceiver() as receiver:
        receiver.reply_status = 401
        second = start("slow_collector.py", 100, -1, 3000, **_otlp_env(receiver, tmp_path, "native"))
        _, stderr = second.communicate(timeout=120)
        assert "rejected spooled spans" in stderr, stderr[-3000:]
        after = _spool_bytes(tmp_path)
        assert all(after.get(name) == data for name, data in before.items())  # every adopted record still pending
        receiver.reply_status = 200
        done = _replay(receiver, tmp_path / "spool")
        delivered = sum(1 for s in receiver.spans() if s.name == "tight")
    record_figure("adopted spans against a collector answering 401", spooled=3_000, kept=3_000,
                  replayed_later=delivered)
    assert done.returncode == 0, done.stderr
    # the second process's own 100 were spooled behind the adopted ones, and kept too
    assert delivered == 3_100 and _spool_files(tmp_path) == []
