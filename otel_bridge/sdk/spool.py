"""A bounded on-disk spool of encoded OTLP requests: spilled when the collector is slow or down, replayed in order.

Layout: ``<LENS_SPOOL_DIR>/<run_id>/`` (mode 0700, owned by this user, never a symlink)
holds segment files ``<ns>-r<rank>-p<pid>-<seq>.spool`` (mode 0600, created with
``O_EXCL|O_NOFOLLOW``), each a sequence of records::

    magic "LSP1" | state (1 byte: 0 pending, 1 sent) | 3 zero bytes | span count (u32)
    | payload length (u32) | CRC-32 of count and payload (u32) | payload

The writing process holds an exclusive ``flock`` on each of its segments; a segment nobody
holds belongs to a process that ended, and the next process of the same run (or ``lens
replay``) adopts it. A record is marked sent (one byte written in place) once delivered,
so a crash sends at most the one record in flight twice. A damaged record (a torn tail
from a crash mid-write, a byte the disk changed) fails its framing or checksum and is
skipped and counted; reading resumes at the next whole record with a good checksum.
"""

from __future__ import annotations

import collections
import errno
import os
import stat
import struct
import threading
import time
import zlib

__all__ = ["DEFAULT_SPOOL_MB", "SEGMENT_BYTES", "ReplayResult", "Spool", "SpoolError", "check_spool_base",
           "default_spool_dir", "read_segment", "replay", "spool_run_dir"]

#: LENS_SPOOL_MB when unset: disk the spool may use per process before spans are dropped.
DEFAULT_SPOOL_MB = 256
#: A segment is closed and a new one begun past this size (a fully sent segment is deleted).
SEGMENT_BYTES = 8 << 20

_MAGIC = b"LSP1"
_HEADER = struct.Struct("<4sB3xIII")  # magic, state, span count, payload length, crc32
_PENDING, _SENT = 0, 1
_STATE_OFFSET = 4
_SUFFIX = ".spool"
_OPEN_FLAGS = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class SpoolError(OSError):
    """The spool directory cannot be used safely (a symlink, another owner, open to others)."""


def default_spool_dir() -> str:
    """``<tmp>/lens-spool-<uid>``: node-local, per user (LENS_SPOOL_DIR overrides it)."""
    import tempfile

    uid = os.geteuid() if hasattr(os, "geteuid") else 0
    return os.path.join(tempfile.gettempdir(), f"lens-spool-{uid}")


def _crc(count: int, payload) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<I", count)))


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _euid():
    return os.geteuid() if hasattr(os, "geteuid") else None


def _checked_dir(path: str, name: str = None, dir_fd: int = None) -> int:
    """An O_DIRECTORY descriptor of ``name`` in ``dir_fd`` (or of ``path``), opened without
    following a symlink and checked on the descriptor itself: SpoolError unless it is a
    directory owned by this user that no one else can write (a shared 1777 one included)."""
    try:
        fd = os.open(name if name is not None else path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise SpoolError(exc.errno, f"spool directory {path} is not a plain directory "
                                    f"(a symlink is refused): {exc.strerror}") from exc
    st = os.fstat(fd)
    if _euid() is not None and st.st_uid != _euid():
        os.close(fd)
        raise SpoolError(errno.EPERM, f"spool directory {path} belongs to uid {st.st_uid}, not to this user "
                                      f"(uid {_euid()}); use a directory of your own")
    if st.st_mode & 0o022:
        os.close(fd)
        raise SpoolError(errno.EPERM, f"spool directory {path} is writable by others "
                                      f"(mode {stat.S_IMODE(st.st_mode):o}); make it 0700")
    return fd


def check_spool_base(directory: str) -> None:
    """SpoolError unless ``directory`` (LENS_SPOOL_DIR) may hold a spool: not a symlink,
    owned by this user, writable by no one else."""
    os.close(_checked_dir(directory))


def _private_dir(path: str) -> int:
    """An O_DIRECTORY descriptor of the run directory ``path``, created 0700; SpoolError
    unless both it and its base directory (LENS_SPOOL_DIR) are real directories owned by
    this user that no one else can write."""
    base, name = os.path.split(os.path.normpath(path))
    base = base or "."
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)  # the spool's base dir, private too
    except OSError as exc:
        raise SpoolError(exc.errno, f"cannot create spool directory {base}: {exc.strerror}") from exc
    base_fd = _checked_dir(base)
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=base_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise SpoolError(exc.errno, f"cannot create spool directory {path}: {exc.strerror}") from exc
        return _checked_dir(path, name, base_fd)
    finally:
        os.close(base_fd)


def _foreign(st) -> str:
    """Why a segment file is not this user's to send ('' when it is)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if _euid() is not None and st.st_uid != _euid():
        return f"owned by uid {st.st_uid}"
    if st.st_mode & 0o077:
        return f"open to others (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def _read_all(fd: int) -> bytes:
    size, chunks, offset = os.fstat(fd).st_size, [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _record_at(data: bytes, offset: int, check_sent: bool):
    """(state, count, length) of a well-formed record at ``offset``, else None. A pending
    record's checksum is always checked; a sent one's only when ``check_sent``."""
    if offset + _HEADER.size > len(data):
        return None
    magic, state, count, length, crc = _HEADER.unpack_from(data, offset)
    start = offset + _HEADER.size
    if magic != _MAGIC or state not in (_PENDING, _SENT) or start + length > len(data):
        return None
    if (state == _PENDING or check_sent) and _crc(count, data[start:start + length]) != crc:
        return None
    return state, count, length


def read_segment(fd: int):
    """((offset, state, count, length) per intact record, damaged): a record that fails its
    framing or checksum (a torn tail, a changed byte) is skipped and counted in
    ``damaged``, and reading resumes at the next offset where a whole record with a good
    checksum begins, so every intact record after it is read too."""
    data = _read_all(fd)
    records, damaged, offset = [], 0, 0
    while offset < len(data):
        record = _record_at(data, offset, False)
        if record is None:
            damaged += 1
            offset = _resync(data, offset + 1)
            continue
        records.append((offset, *record))
        offset += _HEADER.size + record[2]
    return records, damaged


def _resync(data: bytes, offset: int) -> int:
    """The next offset from ``offset`` where a record with a good checksum begins (the
    end of ``data`` when none does)."""
    while True:
        offset = data.find(_MAGIC, offset)
        if offset < 0:
            return len(data)
        if _record_at(data, offset, True) is not None:
            return offset
        offset += 1


class _Segment:
    __slots__ = ("name", "fd", "size", "pending", "adopted", "kept")

    def __init__(self, name, fd, size, adopted):
        self.name, self.fd, self.size, self.pending, self.adopted = name, fd, size, 0, adopted
        self.kept = 0  # records the collector would not take: left pending on disk, not queued

    def removable(self) -> bool:
        """True when nothing in the segment waits on disk any more."""
        return self.pending == 0 and self.kept == 0


class Spool:
    """One process's spool: ``append`` on the export thread, ``peek``/``done`` on the
    sender; both under the spool's own lock, which no application thread takes."""

    def __init__(self, directory: str, limit_bytes: int, *, rank=0):
        self.directory = directory
        self.limit_bytes = limit_bytes
        self._dir_fd = _private_dir(directory)
        self._prefix = f"{time.time_ns():020d}-r{rank}-p{os.getpid()}-"
        self._seq = 0
        self._lock = threading.Lock()
        self._writing = None  # the segment appended to
        self._queue = collections.deque()  # (segment, offset, count, length), oldest first
        self._kept = {}  # id -> segment holding records kept on disk (see keep)
        self.used_bytes = 0
        self.pending_spans = 0  # own spans spooled and not yet delivered
        self.adopted_spans = 0  # other processes' spans adopted and not yet delivered
        self.spooled = 0  # own spans ever written to the spool
        self.torn = 0  # records skipped for a torn tail or a bad checksum
        self.refused = {}  # segment name -> why it is not adopted (another owner, open to others)
        self.closed = False
        # close() closed every descriptor: their numbers may be another file's now (forget() must not close them)
        self._released = False
        self._pid = os.getpid()

    # ---- writing ---------------------------------------------------------------------------

    def _new_segment(self):
        import fcntl

        old = self._writing
        if old is not None and old.removable():
            self._remove(old)  # fully delivered while it was being written: nothing left in it
        name = f"{self._prefix}{self._seq:06d}{_SUFFIX}"
        self._seq += 1
        # Not O_APPEND: on Linux a pwrite to an O_APPEND file appends whatever the offset,
        # so marking a record sent would corrupt the segment. Records go at our own offset.
        fd = os.open(name, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=self._dir_fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours while this process lives
        segment = _Segment(name, fd, 0, False)
        self._writing = segment
        return segment

    def append(self, payload: bytes, count: int) -> bool:
        """Spool one encoded request of ``count`` spans; False when the budget is spent or
        the disk refuses (nothing partial is left behind)."""
        record = _HEADER.pack(_MAGIC, _PENDING, count, len(payload), _crc(count, payload)) + payload
        with self._lock:
            if self.closed or self.used_bytes + len(record) > self.limit_bytes:
                return False
            segment = self._writing
            try:
                if segment is None or segment.size >= SEGMENT_BYTES:
                    segment = self._new_segment()
                written = os.pwrite(segment.fd, record, segment.size)
            except OSError:
                written = -1
            if written != len(record):
                if segment is not None and written:
                    try:  # a short write (disk full): cut the fragment off
                        os.ftruncate(segment.fd, segment.size)
                    except OSError:
                        pass
                return False
            self._queue.append((segment, segment.size, count, len(payload)))
            segment.size += len(record)
            segment.pending += 1
            self.used_bytes += len(record)
            self.pending_spans += count
            self.spooled += count
            return True

    # ---- reading ---------------------------------------------------------------------------

    def has_pending(self) -> bool:
        """True while any record waits (own or adopted)."""
        return bool(self._queue)

    def peek(self):
        """(payload, count, adopted, token) of the oldest pending record, or None. A record
        whose checksum no longer matches (the disk changed it) is skipped and counted torn."""
        while True:
            with self._lock:
                if not self._queue:
                    return None
                entry = self._queue[0]
                segment, offset, count, length = entry
                head = os.pread(segment.fd, _HEADER.size, offset)
                payload = os.pread(segment.fd, length, offset + _HEADER.size)
                if len(head) == _HEADER.size and len(payload) == length and _HEADER.unpack(head)[4] == _crc(count, payload):
                    return payload, count, segment.adopted, entry
                self.torn += 1
            self.done(entry)

    def done(self, token) -> None:
        """The record ``token`` (from peek) was delivered, or the user gave it up: mark it
        sent; a segment with nothing left pending is deleted. The only way a record leaves
        the disk."""
        with self._lock:
            if not self._queue or self._queue[0] is not token:
                return
            self._queue.popleft()
            segment, offset, count, _ = token
            try:
                os.pwrite(segment.fd, bytes((_SENT,)), offset + _STATE_OFFSET)
            except OSError:
                pass
            if segment.adopted:
                self.adopted_spans -= count
            else:
                self.pending_spans -= count
            segment.pending -= 1
            if segment.removable() and segment is not self._writing:
                self._remove(segment)

    def keep(self, token) -> None:
        """The collector would not take the record ``token`` (from peek): stop offering it
        in this process but leave it pending on disk, for ``lens replay`` (its spans still
        count as spooled)."""
        with self._lock:
            if not self._queue or self._queue[0] is not token:
                return
            self._queue.popleft()
            segment = token[0]
            segment.pending -= 1
            segment.kept += 1
            self._kept[id(segment)] = segment

    def _segments(self):
        """Every segment this spool has open: queued, kept, and the one written."""
        segments = {id(s): s for s, *_ in self._queue}
        segments.update(self._kept)
        if self._writing is not None:
            segments[id(self._writing)] = self._writing
        return segments

    def _remove(self, segment) -> None:
        try:
            os.unlink(segment.name, dir_fd=self._dir_fd)
        except OSError:
            pass
        try:
            os.close(segment.fd)
        except OSError:
            pass
        self.used_bytes -= segment.size

    # ---- other processes' segments ---------------------------------------------------------

    def adopt(self) -> int:
        """Queue (first, oldest first) the pending records of segments no live process
        holds; returns how many spans that adds. Torn tails are skipped and counted."""
        import fcntl

        added = 0
        with self._lock:
            own = {s.name for s in self._segments().values()}
            adopted = []
            for name in sorted(os.listdir(self._dir_fd)):
                if not name.endswith(_SUFFIX) or name in own:
                    continue
                try:  # O_NONBLOCK: a FIFO planted here must not hang the open
                    fd = os.open(name, _OPEN_FLAGS | os.O_NONBLOCK, dir_fd=self._dir_fd)
                except OSError:
                    continue
                try:
                    why = _foreign(os.fstat(fd))
                    if why:  # another user's, or one others could have written: never sent
                        if name not in self.refused:
                            self.refused[name] = why
                        raise OSError(why)
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    records, torn = read_segment(fd)
                except OSError:  # held by a live process, or unreadable: not ours
                    os.close(fd)
                    continue
                self.torn += torn
                segment = _Segment(name, fd, os.fstat(fd).st_size, True)
                pending = [(segment, off, count, length) for off, state, count, length in records if state == _PENDING]
                if not pending:
                    self._remove_adopted(segment)
                    continue
                segment.pending = len(pending)
                self.used_bytes += segment.size
                adopted.extend(pending)
                added += sum(p[2] for p in pending)
            self._queue.extendleft(reversed(adopted))
            self.adopted_spans += added
        return added

    def _remove_adopted(self, segment) -> None:
        try:
            os.unlink(segment.name, dir_fd=self._dir_fd)
        except OSError:
            pass
        os.close(segment.fd)

    # ---- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Sync what is still pending (left for the next process or ``lens replay``),
        delete what is not, release the segments."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if os.getpid() != self._pid:
                return  # a forked child: the parent's segments are the parent's
            self._released = True  # first: a descriptor closed below is never closed again, even if one fails
            for segment in self._segments().values():
                if not segment.removable():
                    try:
                        os.fsync(segment.fd)
                    except OSError:
                        pass
                    os.close(segment.fd)
                else:
                    self._remove(segment)
            self._writing = None
            os.close(self._dir_fd)

    def forget(self) -> None:
        """In a forked child: drop the parent's descriptors without touching its files or locks."""
        # Closing a duplicate descriptor releases no flock while the parent holds its own.
        # A spool the parent closed holds none: the numbers it kept may name the child's own files now.
        if not self._released:
            for segment in self._segments().values():
                try:
                    os.close(segment.fd)
                except OSError:
                    pass
            try:
                os.close(self._dir_fd)
            except OSError:
                pass
            self._released = True
        self._queue.clear()
        self._kept.clear()
        self._writing = None
        self.closed = True


class ReplayResult:
    """What ``replay`` did, in spans (``damaged`` in records): delivered; undelivered (left
    on disk, to be replayed again); dropped (rejected by the collector and given up because
    the caller said so); damaged (records whose bytes no longer match their checksum);
    refused (path -> why, for run directories and segments that are not this user's alone:
    left where they are, never sent)."""

    __slots__ = ("delivered", "undelivered", "dropped", "damaged", "refused", "error")

    def __init__(self):
        self.delivered = self.undelivered = self.dropped = self.damaged = 0
        self.refused = {}
        self.error = None


_TOO_LARGE = 413
_ENDPOINT_REFUSED = (401, 403, 404)  # credentials or the URL: every record would be refused alike


def replay(directory: str, deliver, *, run_id=None, retries: int = 3, drop_rejected: bool = False,
           split=None) -> ReplayResult:
    """Send what ended processes left in the spool under ``directory`` (every run, or only
    ``run_id``'s) through ``deliver(payload, spans) -> (ok, error, retryable, status)``,
    oldest first per run.

    A record leaves the disk only when the collector took it, or when it rejected it
    (HTTP 4xx) and ``drop_rejected`` is set (counted dropped). A record refused as too large
    (413) is cut in two by ``split(payload) -> [(payload, spans), ...]`` (None when it
    cannot be cut) and the parts sent; parts still refused are written back as new records
    before the old one is marked sent. A 401/403/404 (the credentials or the URL) or a
    collector that cannot take a record after ``retries`` tries stops the run's replay:
    the rest stays spooled. SpoolError when ``directory`` itself is a symlink, another
    user's, or writable by others."""
    check_spool_base(directory)
    if run_id is not None:
        runs = [spool_run_dir(run_id)]
    else:
        try:
            runs = sorted(name for name in os.listdir(directory) if os.path.isdir(os.path.join(directory, name)))
        except FileNotFoundError:
            runs = []
    result = ReplayResult()

    def send(payload, count):
        """(ok, status, parts the collector did not take), retrying what may pass later."""
        for attempt in range(retries):
            ok, result.error, retryable, status = deliver(payload, count)
            if ok or not retryable:
                break
            time.sleep(min(2.0, 0.25 * 2 ** attempt))
        if ok:
            result.delivered += count
            return True, status, []
        if retryable or status != _TOO_LARGE or split is None:
            return False, status, [(payload, count)]
        parts = split(payload)
        if not parts:
            return False, status, [(payload, count)]
        left, worst = [], status
        for i, (part, spans) in enumerate(parts):
            part_ok, part_status, part_left = send(part, spans)
            left.extend(part_left)
            if not part_ok:
                worst = part_status
                if part_status is None or not 400 <= part_status < 500:
                    left.extend(parts[i + 1:])  # the collector went away: the rest waits too
                    break
        return not left, worst, left

    for run in runs:
        path = os.path.join(directory, run)
        if not os.path.isdir(path):
            continue
        try:
            spool = Spool(path, 1 << 62)
        except SpoolError as exc:
            result.refused[path] = exc.strerror
            continue
        try:
            spool.adopt()
            while True:
                head = spool.peek()
                if head is None:
                    break
                payload, count, _, token = head
                ok, status, left = send(payload, count)
                if ok:
                    spool.done(token)
                    continue
                rejected = status is not None and 400 <= status < 500 and status not in (408, 429)
                stop = not rejected or status in _ENDPOINT_REFUSED
                if rejected and drop_rejected:
                    result.dropped += sum(spans for _, spans in left)
                    spool.done(token)
                    continue
                if left != [(payload, count)] and all(spool.append(p, n) for p, n in left):
                    # What was not taken is on disk again, as smaller records queued last
                    # (tried once more, then kept); only then does the old one go.
                    spool.done(token)
                else:
                    spool.keep(token)
                    result.undelivered += count
                if stop:
                    while (rest := spool.peek()) is not None:
                        result.undelivered += rest[1]
                        spool.keep(rest[3])
                    break
        finally:
            result.damaged += spool.torn
            result.refused.update((os.path.join(path, name), why) for name, why in spool.refused.items())
            spool.close()
    return result


def spool_run_dir(run_id) -> str:
    """The spool's directory name for ``run_id`` (a plain name: separators and dots made safe)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(run_id))
    return name if name.strip(".") else "_" + name
