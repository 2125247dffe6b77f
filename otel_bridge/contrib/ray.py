"""Ray: trace context across calls, telemetry inside actors, and where the driver's cluster came from."""

from __future__ import annotations

import os
import sys
import threading

from lens_core import _log, _stepping, current_trace_carrier, remote_trace_context, state
from lens_core.carrier import usable_carrier

from otel_bridge.contrib._active import missing_extra

__all__ = [
    "TRACE_CARRIER_KWARG",
    "accepts_trace_context",
    "dispatch_with_trace_context",
    "flush_actor_telemetry",
    "init_actor_telemetry",
    "publish_run_id",
    "ray_cluster_source",
]

TRACE_CARRIER_KWARG = "trace_carrier"
"""The keyword the carrier travels in; @accepts_trace_context adds it to a method."""

_EXTRA_HINT = "pip install 'lens-telemetry[ray]'"
_lock = threading.Lock()
_no_carrier = set()  # methods seen to reject the keyword: dispatched without it from then on
_published = set()  # (job id, run id) this driver has published for its workers


def _have_ray(what: str) -> bool:
    """True when Ray imports; else warn once that ``what`` carries no trace context."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        missing_extra(what, _EXTRA_HINT, exc)
        return False
    return True


# ---- the receiving side -------------------------------------------------------------------


class _CarrierSteps:
    """Step hooks for lens_core._stepping: the remote context is attached only while the
    wrapped coroutine or generator runs, never across a yield."""

    __slots__ = ("carrier",)

    def __init__(self, carrier):
        self.carrier = carrier

    def enter(self):
        scope = remote_trace_context(self.carrier)
        scope.__enter__()
        return scope

    def leave(self, scope):
        scope.__exit__(None, None, None)

    def finish(self, exc):
        pass


def _received_carrier(kwargs) -> dict:
    # kwargs is the wrapper's own fresh dict, so popping the keyword here keeps it away
    # from the wrapped function, which never declared it. Validated here, never by
    # truth value: `if carrier` raises for some objects (a numpy array).
    return usable_carrier(kwargs.pop(TRACE_CARRIER_KWARG, None), "accepts_trace_context")


def _take_carrier(args, kwargs):
    carrier = _received_carrier(kwargs)
    return _CarrierSteps(carrier) if carrier else None


def _with_carrier_parameter(signature, inspect):
    parameters = list(signature.parameters.values())
    position = len(parameters)
    if parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD:
        position -= 1
    extra = inspect.Parameter(TRACE_CARRIER_KWARG, inspect.Parameter.KEYWORD_ONLY, default=None)
    return signature.replace(parameters=parameters[:position] + [extra] + parameters[position:])


def accepts_trace_context(fn):
    """Decorator: the method (or function) accepts a ``trace_carrier=`` keyword and runs
    under that remote context (``lens_core.remote_trace_context``).

    Works for plain methods, coroutines (async actors), generators and async generators;
    for the last three the context is attached around each step and never held across
    a ``yield``, so the consumer never runs inside it. The wrapper's ``__signature__``
    advertises the keyword-only parameter, because Ray checks call arguments against
    the signature on the caller side (for the same reason it sets no ``__wrapped__``,
    which Ray would follow to the original signature). Does not need Ray; a call without the keyword (or
    with ``{}``, or with a malformed carrier, counted and warned about once) runs the body unchanged.

    Example::

        @ray.remote
        class Collector:
            @accepts_trace_context
            async def run_rollouts(self, batch):
                with lens_core.managed_span("rollout", "rl.gym.run_rollouts"):
                    ...
    """
    import functools
    import inspect

    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(accepts_trace_context(fn.__func__))
    if not callable(fn):
        raise TypeError(f"accepts_trace_context decorates callables, got {type(fn).__name__}: {fn!r}")
    signature = inspect.signature(fn)
    if TRACE_CARRIER_KWARG in signature.parameters:
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} already has a {TRACE_CARRIER_KWARG!r} "
                        "parameter; reopen it with lens_core.remote_trace_context instead")

    if inspect.iscoroutinefunction(fn):
        wrapper = _stepping.wrap_coroutine_function(fn, _take_carrier)
    elif inspect.isasyncgenfunction(fn):
        wrapper = _stepping.wrap_async_generator_function(fn, _take_carrier)
    elif inspect.isgeneratorfunction(fn):
        wrapper = _stepping.wrap_generator_function(fn, _take_carrier)
    else:
        def wrapper(*args, **kwargs):
            carrier = _received_carrier(kwargs)
            if not carrier:
                return fn(*args, **kwargs)
            with remote_trace_context(carrier):
                return fn(*args, **kwargs)

    functools.update_wrapper(wrapper, fn)
    # Ray reads actor method signatures from inspect.unwrap(method): a __wrapped__ link
    # would lead it past this wrapper to a signature without the keyword, and it would
    # reject every call that carries it.
    del wrapper.__wrapped__
    wrapper.__signature__ = _with_carrier_parameter(signature, inspect)
    wrapper._lens_accepts_trace_context = True
    return wrapper


# ---- the calling side ---------------------------------------------------------------------


def _method_key(remote_method):
    """``Class.method`` for an actor method handle, the qualified name of a remote function."""
    name = getattr(remote_method, "_method_name", None)
    if name is None:  # a remote function
        function = getattr(remote_method, "_function", None)
        return getattr(function, "__qualname__", None) or repr(remote_method)
    actor = getattr(remote_method, "_actor", None)
    if callable(actor) and not hasattr(actor, "_ray_actor_id"):  # a weak reference
        actor = actor()
    descriptor = getattr(actor, "_ray_actor_creation_function_descriptor", None)
    owner = getattr(descriptor, "class_name", None)
    return f"{owner}.{name}" if owner else name


def _rejects_carrier(exc: TypeError) -> bool:
    return TRACE_CARRIER_KWARG in str(exc)


def dispatch_with_trace_context(remote_method, *args, **kwargs):
    """``remote_method.remote(*args, trace_carrier=<current carrier>, **kwargs)``.

    ``remote_method`` is an actor method handle (``actor.method``) or a remote function;
    the carrier is ``lens_core.current_trace_carrier()`` (``{}`` when nothing is
    recording). The receiving method should be decorated with @accepts_trace_context.
    If it is not, Ray rejects the keyword on this side; then this warns once per method,
    calls it without the carrier (its spans start their own trace) and keeps doing so.
    A ``trace_carrier`` the caller passes is sent as given. With telemetry off or on a
    quiet rank (no span backend: nothing to carry) it is ``remote_method.remote(*args,
    **kwargs)`` and imports nothing; without Ray (``pip install 'lens-telemetry[ray]'``) it
    warns once and calls the method the same way.
    """
    if state.installed_backend() is None and TRACE_CARRIER_KWARG not in kwargs:
        return remote_method.remote(*args, **kwargs)
    if not _have_ray("dispatch_with_trace_context"):
        return remote_method.remote(*args, **kwargs)
    publish_run_id()
    if TRACE_CARRIER_KWARG in kwargs:
        return remote_method.remote(*args, **kwargs)
    key = _method_key(remote_method)
    if key in _no_carrier:
        return remote_method.remote(*args, **kwargs)
    try:
        return remote_method.remote(*args, **{TRACE_CARRIER_KWARG: current_trace_carrier()}, **kwargs)
    except TypeError as exc:
        if not _rejects_carrier(exc):
            raise
    with _lock:
        _no_carrier.add(key)
    _log.warn_once(("ray-no-carrier", key),
                   f"dispatch_with_trace_context: {key} does not accept {TRACE_CARRIER_KWARG}=; "
                   "decorate it with @accepts_trace_context to join the caller's trace. "
                   "Calling it without the carrier: its spans start their own trace.")
    return remote_method.remote(*args, **kwargs)


# ---- the run id ---------------------------------------------------------------------------


def publish_run_id(run_id: str = None) -> bool:
    """Publish this driver's run id (``run_id``, else the active setup's) for the workers of its
    Ray job, so actors that set up telemetry afterwards report under the same run; True when
    published. A driver that calls ``setup_telemetry`` after ``ray.init()`` needs none of this
    (setup publishes it); one that set up first publishes it here, or with its first
    ``dispatch_with_trace_context``, which calls this. A no-op without Ray, in a worker, or
    when already published for this job.
    """
    from otel_bridge.handle import active_handle
    from otel_bridge.runid import publish_ray_run_id, ray_job

    if run_id is None:
        handle = active_handle()
        if handle is None:
            return False
        run_id = handle.run_id
    job = ray_job()
    if job is None or job[2] or (job[0], run_id) in _published:
        return False
    if not publish_ray_run_id(run_id):
        return False
    with _lock:
        _published.add((job[0], run_id))
    return True


# ---- where the cluster came from -----------------------------------------------------------


def ray_cluster_source(address: str | None = None, *, reused: bool = False) -> str | None:
    """This driver's ``rl.ray.cluster_source`` (one of ``semconv.RAY_CLUSTER_SOURCES``), or None
    when it cannot be told; for the ``rl.setup.ray_init`` span, e.g.
    ``span.set_attribute(semconv.RL_RAY_CLUSTER_SOURCE, source)`` when not None.

    Never imports Ray. Once this process has called ``ray.init()``, the answer is what
    happened: ``started_local`` when that call booted the cluster (its driver node is the
    head it launched), else it connected to one already running: ``reused_local`` when the
    caller passes ``reused=True`` (it recognised a local cluster an earlier run of its own
    left behind, as NeMo-RL's ``init_ray`` does by its cluster tag resource), otherwise
    ``attached_external`` (a cluster ``ray.sub``, ``ray start`` or KubeRay had running).

    Before ``ray.init()`` it is predicted from ``address`` (what ``ray.init`` will be given),
    else ``RAY_ADDRESS``: ``"local"`` boots a new cluster (``started_local``); ``"auto"``, a
    ``host:port`` or a ``ray://`` client address joins a running one (``attached_external``,
    or ``reused_local`` with ``reused``). With neither, ``ray.init()`` connects to the last
    local cluster if one is running and boots one otherwise, so the answer is None: ask again
    after the call.
    """
    if not isinstance(reused, bool):
        raise TypeError(f"ray_cluster_source: reused must be True or False, not {reused!r}")
    if address is not None and not isinstance(address, str):
        raise TypeError(f"ray_cluster_source: address must be a str (what ray.init is given), not {address!r}")
    joined = "reused_local" if reused else "attached_external"
    ray = sys.modules.get("ray")  # imported by whoever uses Ray; quiet ranks never pay for it
    is_initialized = getattr(ray, "is_initialized", None)
    if is_initialized is not None and is_initialized():
        # ray.init() keeps the node it booted (head) or connected to; a ray:// client has
        # none, and always joined a cluster elsewhere (a private Ray field: the adapter).
        from otel_bridge.sdk import upstream

        head = upstream.ray_started_head()
        if head is None:
            return None  # a Ray that keeps its node differently: unknown rather than wrong
        return "started_local" if head else joined
    address = (address or os.environ.get("RAY_ADDRESS") or "").strip()  # ray.init reads "" as none given
    if not address:
        return None
    return "started_local" if address == "local" else joined


# ---- telemetry inside an actor ------------------------------------------------------------


def init_actor_telemetry(config, rank: int = 0, world_size: int = 1, **setup_kwargs):
    """Set up telemetry in an actor's constructor and return the handle.

    The rank is explicit because an actor's ``runtime_env`` copies the driver's
    environment, so ``RANK`` there is the driver's; a singleton actor is rank 0 of 1,
    an actor in a ranked group passes its own. Without a run id in ``config`` (or
    ``LENS_RUN_ID``) the actor takes its driver's (see :func:`publish_run_id`). ``setup_kwargs`` go to
    ``otel_bridge.setup_telemetry``. When this process already has an exporting setup,
    that handle is returned unchanged. Pair with flush_actor_telemetry, which the driver
    should have the actor run before ``ray.kill`` (a kill runs no atexit handler).
    Does not need Ray.
    """
    from otel_bridge.handle import active_handle, setup_telemetry

    handle = active_handle()
    if handle is not None:
        return handle
    setup_kwargs.setdefault("local_rank", 0)
    return setup_telemetry(config, rank=rank, world_size=world_size, **setup_kwargs)


def flush_actor_telemetry(timeout_ms: int = None, shutdown: bool = True) -> bool:
    """Export what this process has buffered, within ``timeout_ms`` (the config's shutdown
    timeout by default); True when everything went out.

    With ``shutdown`` (the default) the telemetry is shut down as well, as before a
    ``ray.kill``: spans opened afterwards are not exported, so stop the actor's own
    threads first. A no-op returning True when nothing was set up. Does not need Ray.
    """
    from otel_bridge.handle import active_handle

    handle = active_handle()
    if handle is None:
        return True
    if shutdown:
        return handle.shutdown(timeout_ms)
    return handle.force_flush(timeout_ms)
