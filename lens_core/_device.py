"""Device-timed spans: events on the current stream, resolved off the application thread, mapped to the host clock.

Loaded only when device timing is on (``LENS_DEVICE_TIMING``, see docs/guide/gpu-timing.md):
``import lens_core`` and the disabled path never import this module.

A device-timed span records one event on the current stream of the current device when it is
entered and one when it exits (``DeviceTimer.enter`` / ``exit``, on the application thread:
two event records, never a wait). The export thread resolves them once the device has
reached both (``DeviceTimer.settle``): the device's times are mapped to the host clock through
anchors (a host time paired with an event the device reached at that moment, on an idle
stream of Lens's own), re-anchored as the export thread runs and corrected for the rate at
which the two clocks drift apart, and stamped on the span as ``lens.device.*``.

Events come from a bounded pool: a span made when every event is in flight, or whose events
the device has not reached by the deadline, is exported host-only and counted
(``lens.device.untimed``). Records leave ``settle`` in the order they came in (live goodput
needs children before their parents), so a record waiting for the device holds back the ones
behind it, up to a bound.

The device sits behind a small protocol (``DeviceBackend``): ``CudaDriver`` (libcuda through
ctypes, loaded at run time) and ``StandInDevice`` (a CPU stand-in whose clock lags the host
by known amounts, for tests and benchmarks).
"""

from __future__ import annotations

import collections
import sys
import threading
import time

from lens_core import _lifecycle, _log, semconv
from lens_core.registry import SpanRegistry

__all__ = [
    "CudaDriver",
    "DeviceBackend",
    "DeviceTimer",
    "StandInDevice",
    "UNTIMED",
    "cuda_initialised",
    "timer_for",
]

_LENS_GROUP = semconv.LENS_GROUP
_START, _END, _INDEX = semconv.LENS_DEVICE_START_TIME, semconv.LENS_DEVICE_END_TIME, semconv.LENS_DEVICE_INDEX

#: The mark of a device-timed span that could not be timed (no event left): exported host-only.
UNTIMED = ()

REANCHOR_S = 1.0  # how often the export thread takes a new anchor (per device in use)
RATE_WINDOW_S = 60.0  # anchors older than this (but the newest two) are dropped
RATE_MIN_S = 1.0  # the shortest anchor span a drift rate is estimated over
HOLD_S = 30.0  # the longest a record waits for the device before it is exported host-only
HOLD_RECORDS = 1 << 16  # the most records held behind one still waiting for the device


class DeviceBackend:
    """The protocol a device implements (events are opaque handles of the backend's).

    Application thread (cheap, never waits): ``device()``, ``create(device)`` (rare: the pool
    grows to its bound), ``record(event)`` (on the current stream of the current device).
    Export thread: ``query(event)`` (has the device reached it?), ``elapsed_ns(a, b)`` (device
    time from ``a`` to ``b``, both reached), ``anchor(device)`` (``(host_ns, event)``: an event
    the device reached at host time ``host_ns``, on the host clock spans use), ``destroy``."""

    name = "abstract"

    def device(self) -> int:
        """The current device's index."""
        raise NotImplementedError

    def create(self, device: int):
        """A new event on ``device``."""
        raise NotImplementedError

    def record(self, event) -> None:
        """Record ``event`` on the current stream of the current device."""
        raise NotImplementedError

    def query(self, event) -> bool:
        """True once the device has reached ``event``."""
        raise NotImplementedError

    def elapsed_ns(self, a, b) -> int:
        """Device nanoseconds from event ``a`` to event ``b`` (negative if ``b`` came first)."""
        raise NotImplementedError

    def anchor(self, device: int):
        """``(host_ns, event)``: an event the device reached at ``host_ns`` (time.time_ns's clock)."""
        raise NotImplementedError

    def destroy(self, event) -> None:
        """Free ``event``."""


# ---- the CPU stand-in ----------------------------------------------------------------------------


class StandInDevice(DeviceBackend):
    """A CPU stand-in for a GPU: one in-order stream per device whose work completes ``lag``
    ns after it is queued (``lag(host_ns)`` or a number, changeable at any time), on a device
    clock that counts from ``offset_ns`` and runs ``drift_ppm`` parts per million faster than
    the host's. ``log`` holds the newest records as ``(event, host time the device reaches it)``
    (``log=False``: none kept, for benchmarks)."""

    name = "standin"

    def __init__(self, lag=0, *, drift_ppm: float = 0.0, offset_ns: int = 5_000_000_000_000, clock=time.time_ns,
                 devices: int = 1, log: bool = True):
        self.lag = lag
        self.drift_ppm = drift_ppm
        self.offset_ns = offset_ns
        self.clock = clock
        self.current = 0
        self.devices = devices
        self._origin = clock()
        self._done = [None]  # event (an index) -> host time the device reaches it, None: not recorded
        self._tail = [0] * devices  # per device: when its stream's last queued work completes
        self._device_of = [None]
        self._next = 0
        self.records = 0
        self.log = collections.deque(maxlen=64) if log else None  # (event, host time reached), newest last

    def _lag(self, now):
        lag = self.lag
        return int(lag(now) if callable(lag) else lag)

    def device_clock(self, host_ns: int) -> int:
        """The device clock's reading at host time ``host_ns``."""
        return self.offset_ns + round((host_ns - self._origin) * (1.0 + self.drift_ppm * 1e-6))

    def launch(self, duration_ns: int) -> int:
        """Queue ``duration_ns`` of work on the current device's stream (from any thread, as
        autograd's engine thread launches backward kernels); the host time it completes."""
        now = self.clock()
        device = self.current
        done = max(now + self._lag(now), self._tail[device]) + int(duration_ns)
        self._tail[device] = done
        return done

    def device(self) -> int:
        return self.current

    def create(self, device: int):
        self._next += 1
        self._device_of.append(device)
        self._done.append(None)
        return self._next

    def record(self, event) -> None:
        # on the current device (as CUDA requires of an event: the device it was made on)
        now = self.clock()
        lag = self.lag
        done = now + (lag if type(lag) is int else int(lag(now)))
        tail = self._tail
        device = self.current
        if done < tail[device]:
            done = tail[device]  # in order: after the work queued before it
        tail[device] = done
        self._done[event] = done
        self.records += 1
        if self.log is not None:
            self.log.append((event, done))

    def query(self, event) -> bool:
        done = self._done[event]
        return done is not None and done <= self.clock()

    def elapsed_ns(self, a, b) -> int:
        if not (self.query(a) and self.query(b)):
            raise RuntimeError("elapsed_ns on an event the device has not reached")
        return self.device_clock(self._done[b]) - self.device_clock(self._done[a])

    def anchor(self, device: int):
        event = self.create(device)
        now = self.clock()
        self._done[event] = now  # an idle stream of its own: reached at once
        return now, event

    def destroy(self, event) -> None:
        self._done[event] = self._device_of[event] = None


# ---- CUDA through the driver API ---------------------------------------------------------------


def cuda_initialised() -> bool:
    """True when this process has initialised CUDA through torch (torch is never imported here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


class CudaDriver(DeviceBackend):
    """CUDA events through libcuda (ctypes, loaded here at run time): cuEventRecord on the
    current stream (torch's, when torch is loaded; else the legacy default stream), cuEventQuery
    and cuEventElapsedTime off the application thread, anchors on a non-blocking stream of Lens's
    own. Raises OSError when libcuda cannot be loaded or no context is current."""

    name = "cuda"

    def __init__(self):
        import ctypes

        self._ct = ctypes
        lib = ctypes.CDLL("libcuda.so.1")
        self._lib = lib
        self._check(lib.cuInit(0), "cuInit")
        self._record = lib.cuEventRecord
        self._record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._record.restype = ctypes.c_int
        self._query = lib.cuEventQuery
        self._query.argtypes = [ctypes.c_void_p]
        self._query.restype = ctypes.c_int
        self._elapsed = lib.cuEventElapsedTime
        self._elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
        self._elapsed.restype = ctypes.c_int
        self._ms = ctypes.c_float()
        self._ms_ref = ctypes.byref(self._ms)
        torch = sys.modules.get("torch")
        cuda_c = getattr(torch, "_C", None) if torch is not None else None
        # torch's current device and raw stream, when torch runs the job (C functions, ~0.1 µs)
        self._torch_device = getattr(cuda_c, "_cuda_getDevice", None)
        self._torch_stream = getattr(cuda_c, "_cuda_getCurrentRawStream", None)
        self._contexts = {}
        self._streams = {}
        if self.device() < 0:  # no torch and no context on this thread: device 0's primary context
            self._context(0)
            if self.device() < 0:
                raise OSError("no CUDA context is current on this thread")

    def _check(self, code, what):
        if code != 0:
            raise OSError(f"{what} failed with CUDA error {code}")

    def device(self) -> int:
        if self._torch_device is not None:
            return self._torch_device()
        dev = self._ct.c_int(-1)
        if self._lib.cuCtxGetDevice(self._ct.byref(dev)) != 0:
            return -1
        return dev.value

    def _context(self, device):
        ctx = self._contexts.get(device)
        if ctx is None:
            ctx = self._ct.c_void_p()
            self._check(self._lib.cuDevicePrimaryCtxRetain(self._ct.byref(ctx), device), "cuDevicePrimaryCtxRetain")
            self._contexts[device] = ctx
        self._check(self._lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx

    def create(self, device: int):
        event = self._ct.c_void_p()
        self._check(self._lib.cuEventCreate(self._ct.byref(event), 0), "cuEventCreate")
        return event.value

    def record(self, event) -> None:
        stream = self._torch_stream(self._torch_device()) if self._torch_stream is not None else 0
        self._record(event, stream)

    def query(self, event) -> bool:
        return self._query(event) == 0  # CUDA_SUCCESS; CUDA_ERROR_NOT_READY (600) while pending

    def elapsed_ns(self, a, b) -> int:
        self._check(self._elapsed(self._ms_ref, a, b), "cuEventElapsedTime")
        return round(self._ms.value * 1e6)

    def anchor(self, device: int):
        # On an idle non-blocking stream of our own the device stamps the event as soon as it
        # sees it: between the host times before the record and after the synchronize. The
        # tightest of three tries gives the midpoint.
        self._context(device)
        stream = self._streams.get(device)
        if stream is None:
            stream = self._ct.c_void_p()
            self._check(self._lib.cuStreamCreate(self._ct.byref(stream), 1), "cuStreamCreate")  # NON_BLOCKING
            self._streams[device] = stream
        best = None
        for _ in range(3):
            event = self.create(device)
            before = time.time_ns()
            self._check(self._record(event, stream), "cuEventRecord")
            self._check(self._lib.cuEventSynchronize(self._ct.c_void_p(event)), "cuEventSynchronize")
            after = time.time_ns()
            if best is None or after - before < best[0]:
                if best is not None:
                    self.destroy(best[2])
                best = (after - before, (before + after) // 2, event)
            else:
                self.destroy(event)
        return best[1], best[2]

    def destroy(self, event) -> None:
        self._lib.cuEventDestroy_v2(self._ct.c_void_p(event))


# ---- the timer --------------------------------------------------------------------------------


class DeviceTimer:
    """Device timing for one process: the bounded event pool, the application thread's event
    records (``enter``/``exit``), and the export thread's resolution (``settle``).

    ``backend`` is a DeviceBackend, or a callable probed (at most once a second, at a
    device-timed span) until it returns one: None means "not yet" (CUDA not initialised),
    an exception "never" (timing stays off). ``capacity`` bounds the events held at once (two a
    device-timed span while the device has not reached them)."""

    def __init__(self, backend, *, capacity: int = 4096, hold_s: float = HOLD_S, reanchor_s: float = REANCHOR_S):
        if isinstance(backend, DeviceBackend):
            self.backend, self._factory = backend, None
        else:
            self.backend, self._factory = None, backend
        self._next_probe = 0.0
        self.capacity = capacity
        self.hold_s = hold_s
        self.reanchor_s = reanchor_s
        self._fresh()
        _lifecycle.on_fork("lens_core.device", after_in_child=DeviceTimer._after_fork, owner=self)

    def _fresh(self):
        self._free = {}  # device -> events free to record (list.pop / append: atomic under the GIL)
        self._made = 0
        self._lock = threading.Lock()  # pool growth and the untimed count (rare paths only)
        self.untimed = 0
        self.timed = 0
        self.keyed = {}  # span id -> mark, for spans recorded as SDK spans (the record is made later)
        self._held = collections.deque()  # (record, first seen monotonic) in arrival order
        self._anchors = {}  # device -> deque of (host_ns, event), oldest first
        self._rate = {}  # device -> host ns per device ns
        self._last_anchor = {}  # device -> monotonic time of its newest anchor
        self._off = False

    def _after_fork(self):
        # The child never touches the parent's events (a forked child cannot use its CUDA
        # context anyway): its device-timed spans are host-only from here on, uncounted.
        self._free = {}
        self._held = collections.deque()
        self._anchors = {}
        self.keyed = {}
        self._lock = threading.Lock()
        self.untimed = self.timed = 0
        self._off = True

    # ---- the application thread ----------------------------------------------------------------

    def enter(self, attrs):
        """At a span's start: a mark (a list) if its group is device-timed, ``UNTIMED`` when no
        event is left, else None. Records one event; never waits for the device."""
        if attrs.get(_LENS_GROUP) not in SpanRegistry._view.device_timed:
            return None
        return self.begin()

    def begin(self):
        """``enter`` for a span whose group the caller found device-timed (the compiled recorder)."""
        if self._off:
            return None
        backend = self.backend
        if backend is None:
            backend = self._probe()
            if backend is None:
                return None
        device = backend.device()
        try:
            event = self._free[device].pop()
        except (KeyError, IndexError):  # no list for this device yet, or none free
            event = self._grow(device)
            if event is None:
                return UNTIMED
        backend.record(event)
        return [device, event, None]

    def _probe(self):
        now = time.monotonic()
        if self._factory is None or now < self._next_probe:
            return None
        self._next_probe = now + 1.0
        try:
            backend = self._factory()
        except Exception as exc:
            self._factory = None
            _log.warn_once("device-off", f"lens telemetry: device timing is off: {exc}")
            return None
        if backend is not None:
            self.backend = backend
        return backend

    def exit(self, mark) -> None:
        """At the span's end: records its end event (or gives the start back: untimed)."""
        if not mark or self._off:
            return
        device = mark[0]
        try:
            event = self._free[device].pop()
        except (KeyError, IndexError):
            event = self._grow(device)
            if event is None:
                self._give(device, mark[1])  # re-recorded later; the device may still be reaching it
                mark[1] = None
                return
        self.backend.record(event)
        mark[2] = event

    def _grow(self, device):
        # The pool's slow path: a new event while fewer than ``capacity`` exist, else None (counted).
        with self._lock:
            if self._made >= self.capacity:
                self.untimed += 1
                return None
            self._made += 1
        try:
            return self.backend.create(device)
        except Exception:
            with self._lock:
                self._made -= 1
                self.untimed += 1
            return None

    def _give(self, device, event):
        free = self._free.get(device)
        if free is None:
            free = self._free.setdefault(device, [])
        free.append(event)

    def hand_over(self, span_id, mark) -> None:
        """Keep ``mark`` for the record the SDK recorder will make of span ``span_id`` (settle
        claims it). Bounded: past a quarter of the pool's events in marks the oldest is given up
        (host-only, counted), so marks whose records never arrive (dropped at a full queue)
        cannot keep the pool's events from the spans that follow."""
        keyed = self.keyed
        if len(keyed) >= max(1, self.capacity // 4):
            try:
                old = keyed.pop(next(iter(keyed)))
            except (StopIteration, KeyError, RuntimeError):  # emptied or changed by the export thread
                old = None
            if old:
                with self._lock:
                    self.untimed += 1
                for event in (old[1], old[2]):
                    if event is not None:
                        self._give(old[0], event)
        keyed[span_id] = mark

    # ---- the export thread --------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Records waiting for the device (and those behind them)."""
        return len(self._held)

    def settle(self, records, deadline=None, final=False):
        """The records ready to export, in arrival order: device-timed ones stamped with their
        device times once the device has reached both events. ``final``: wait until ``deadline``
        (time.monotonic) for the device, then export the rest host-only (counted)."""
        keyed = self.keyed
        held = self._held
        if not held and not keyed:
            for r in records:
                if r.dev_mark is not None:
                    break
            else:
                return records  # the common case on a rank without device-timed spans
        now = time.monotonic()
        out = []
        resolve = self._resolve
        for r in records:
            if keyed and r.dev_mark is None:
                mark = keyed.pop(r.span_id, None)
                if mark is not None:
                    r.dev_mark = mark
            if held or (r.dev_mark is not None and not resolve(r, r.dev_mark)):
                held.append((r, now))  # behind one waiting for the device: waits too (order)
            else:
                out.append(r)
        while True:
            out.extend(self._release(now, final))
            if not held or not final or deadline is None or time.monotonic() >= deadline:
                break
            time.sleep(0.001)
            now = time.monotonic()
        if final:
            while held:  # out of time: host-only, counted
                r, _ = held.popleft()
                self._untime(r)
                out.append(r)
        return out

    def _release(self, now, final):
        held = self._held
        out = []
        while held:
            r, seen = held[0]
            mark = r.dev_mark
            if mark is not None and not self._resolve(r, mark):
                if now - seen < self.hold_s and len(held) <= HOLD_RECORDS:
                    break
                if final:
                    break
                self._untime(r)  # the device did not reach it in time: host-only, counted
            held.popleft()
            out.append(r)
        return out

    def _untime(self, r):
        mark = r.dev_mark
        if mark is not None:
            r.dev_mark = None
            if mark:
                self.untimed += 1
                for event in (mark[1], mark[2]):
                    if event is not None:
                        self._give(mark[0], event)

    def _resolve(self, r, mark) -> bool:
        # True when the record can go: stamped, or host-only (counted) when it cannot be timed.
        if not mark:  # UNTIMED at enter (already counted)
            r.dev_mark = None
            return True
        device, start, end = mark[0], mark[1], mark[2]
        if start is None or end is None:  # no event left at exit (counted there)
            r.dev_mark = None
            if start is not None:
                self._give(device, start)
            return True
        backend = self.backend
        try:
            if not (backend.query(end) and backend.query(start)):
                return False
            self._anchor(device)
            host_ns, anchor = self._anchors[device][-1]
            rate = self._rate.get(device, 1.0)
            start_ns = host_ns + round(backend.elapsed_ns(anchor, start) * rate)
            end_ns = host_ns + round(backend.elapsed_ns(anchor, end) * rate)
        except Exception as exc:
            _log.warn_once("device-resolve", f"lens telemetry: a device time could not be read ({exc!r}); "
                                             f"such spans are exported host-only (counted in {semconv.LENS_DEVICE_UNTIMED})")
            self._untime(r)
            return True
        r.dev_mark = None
        self._give(device, start)
        self._give(device, end)
        attrs = r.attrs
        attrs[_START] = start_ns
        attrs[_END] = end_ns if end_ns >= start_ns else start_ns
        attrs[_INDEX] = device
        self.timed += 1
        return True

    # ---- anchors: device time -> host time -----------------------------------------------------

    def _anchor(self, device, force=False):
        now = time.monotonic()
        last = self._last_anchor.get(device)
        if last is not None and not force and now - last < self.reanchor_s:
            return
        self._last_anchor[device] = now
        host_ns, event = self.backend.anchor(device)
        anchors = self._anchors.get(device)
        if anchors is None:
            anchors = self._anchors[device] = collections.deque()
        anchors.append((host_ns, event))
        while len(anchors) > 2 and host_ns - anchors[0][0] > RATE_WINDOW_S * 1e9:
            self.backend.destroy(anchors.popleft()[1])
        base_ns, base = anchors[0]
        span_ns = host_ns - base_ns
        if span_ns >= RATE_MIN_S * 1e9:
            device_ns = self.backend.elapsed_ns(base, event)
            if device_ns > 0:
                self._rate[device] = span_ns / device_ns

    def _to_host(self, device, event) -> int:
        """``event``'s device time on the host clock: the newest anchor plus the device time
        since it, scaled by the drift rate the anchors measured."""
        host_ns, anchor = self._anchors[device][-1]
        return host_ns + round(self.backend.elapsed_ns(anchor, event) * self._rate.get(device, 1.0))

    # ---- shutdown ------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the events (after the final settle)."""
        if self._off:
            return
        self._off = True
        backend = self.backend
        if backend is None:
            return
        for free in self._free.values():
            for event in free:
                try:
                    backend.destroy(event)
                except Exception:
                    pass
        for anchors in self._anchors.values():
            for _, event in anchors:
                try:
                    backend.destroy(event)
                except Exception:
                    pass
        self._free = {}
        self._anchors = {}


# ---- choosing -----------------------------------------------------------------------------------

_backend_factory = None  # tests and benchmarks: a callable returning a DeviceBackend (lens_core._device.use)


def use(factory) -> None:
    """Make ``timer_for`` build its backend with ``factory()`` (None: CUDA) — for tests, the
    example's --device standin and benchmarks."""
    global _backend_factory
    _backend_factory = factory


def timer_for(mode: str, capacity: int = 4096):
    """A DeviceTimer for ``LENS_DEVICE_TIMING=mode``; None for ``off``. Its device is found at
    the first device-timed span: ``auto`` waits until the process has initialised CUDA through
    torch (libcuda is loaded only then); ``on`` loads libcuda at once and, without a usable
    device, warns once and stays host-only."""
    if mode == "off":
        return None
    if _backend_factory is not None:
        return DeviceTimer(_backend_factory, capacity=capacity)

    def cuda():
        if mode == "auto" and not cuda_initialised():
            return None
        try:
            return CudaDriver()
        except (OSError, AttributeError) as exc:
            if mode == "auto":
                raise OSError(f"CUDA is initialised but its events cannot be used ({exc})") from None
            raise OSError(f"LENS_DEVICE_TIMING=on but no CUDA device can be timed ({exc}); "
                          "device-timed spans are host-only") from None

    return DeviceTimer(cuda, capacity=capacity)
