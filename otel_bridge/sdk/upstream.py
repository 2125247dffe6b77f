"""Every reach into a private upstream API (OpenTelemetry, gRPC, Ray), one function per assumption.

Lens relies on names its upstreams do not promise to keep. Each such reach is here and
nowhere else, with the versions it was checked against, and tests/upstream/test_assumptions.py
fails by the assumption's name when an upgrade breaks one. Functions import their upstream
lazily: importing this module costs nothing (a quiet rank may import it and load no SDK).

A broken assumption raises :class:`UpstreamChanged` (a RuntimeError naming what changed and
the versions known to work), never falls back silently — except where a fallback is itself
correct, which each function says.
"""

from __future__ import annotations

__all__ = [
    "ASSUMPTIONS",
    "LOGS_MODULES",
    "UpstreamChanged",
    "adapt_grpc_exporter",
    "encode_logs",
    "encode_resource",
    "grpc_channel",
    "grpc_export",
    "grpc_fork_register_channel",
    "grpc_fork_unregister_channel",
    "http_export",
    "http_exporter_ready",
    "log_exporter_types",
    "log_record_attributes_hook",
    "logs_module",
    "parent_based_delegates",
    "ray_global_worker",
    "ray_kv_get",
    "ray_kv_put",
    "ray_started_head",
    "runtime_contextvar",
    "sampler_from_env",
    "sdk_span_reader",
    "span_key",
    "static_decision",
]

#: The versions every assumption below was read and tested against: the pins of constraints.txt
#: and the floors of pyproject.toml (.ci/floor_check.sh runs tests/upstream at the floors). For
#: OpenTelemetry the floor is the pin (pyproject.toml says why).
CHECKED = "opentelemetry 1.45.0 / 0.66b0, grpcio 1.63.2 and 1.85.3, ray 2.9.3 and 2.60.0"

#: assumption name -> the function that holds it (the tests walk this table)
ASSUMPTIONS = {
    "otlp-encode-resource": "encode_resource",
    "otlp-log-encoder": "encode_logs",
    "trace-span-key": "span_key",
    "context-runtime-contextvar": "runtime_contextvar",
    "sampler-static-decision": "static_decision",
    "sampler-parent-based-delegates": "parent_based_delegates",
    "sampler-from-env": "sampler_from_env",
    "sdk-span-value-storage": "sdk_span_reader",
    "grpc-exporter-export-hooks": "adapt_grpc_exporter",
    "grpc-exporter-channel": "grpc_channel",
    "http-exporter-client": "http_export",
    "grpc-fork-channel-registry": "grpc_fork_unregister_channel",
    "logging-handler-get-attributes": "log_record_attributes_hook",
    "sdk-log-exporter-names": "log_exporter_types",
    "logs-underscore-modules": "logs_module",
    "ray-global-worker": "ray_global_worker",
    "ray-internal-kv": "ray_kv_get",
}


class UpstreamChanged(RuntimeError):
    """An upstream package no longer has what Lens relies on (the message names the assumption)."""

    def __init__(self, assumption: str, what: str):
        super().__init__(f"upstream assumption {assumption!r} broke: {what} (checked against {CHECKED}); "
                         "pin the versions in constraints.txt or update otel_bridge/sdk/upstream.py")
        self.assumption = assumption


# ---- OTLP encoding ---------------------------------------------------------------------------


def encode_resource(resource):
    """The OTLP protobuf ``Resource`` message of an SDK Resource.

    Private: ``opentelemetry.exporter.otlp.proto.common._internal._encode_resource``
    (opentelemetry-exporter-otlp-proto-common 1.45.0)."""
    try:
        from opentelemetry.exporter.otlp.proto.common._internal import _encode_resource
    except ImportError as exc:
        raise UpstreamChanged("otlp-encode-resource", f"_encode_resource is gone ({exc})") from exc
    return _encode_resource(resource)


def encode_logs(batch):
    """The OTLP ``ExportLogsServiceRequest`` of a batch of SDK log records.

    Private module: ``opentelemetry.exporter.otlp.proto.common._log_encoder.encode_logs``
    (opentelemetry-exporter-otlp-proto-common 1.45.0)."""
    try:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs as encode
    except ImportError as exc:
        raise UpstreamChanged("otlp-log-encoder", f"_log_encoder.encode_logs is gone ({exc})") from exc
    return encode(batch)


#: The logs signal's modules: still underscore-named upstream (the signal is not declared
#: stable in Python), so every import of them goes through :func:`logs_module`.
LOGS_MODULES = {
    "api": "opentelemetry._logs",
    "sdk": "opentelemetry.sdk._logs",
    "sdk.export": "opentelemetry.sdk._logs.export",
    "otlp.grpc": "opentelemetry.exporter.otlp.proto.grpc._log_exporter",
    "otlp.http": "opentelemetry.exporter.otlp.proto.http._log_exporter",
}


def logs_module(which: str):
    """The logs signal's module ``which`` (a key of :data:`LOGS_MODULES`).

    Private-named: ``opentelemetry._logs``, ``opentelemetry.sdk._logs[.export]`` and the
    OTLP exporters' ``_log_exporter`` (opentelemetry 1.45.0). A module that moved
    (the signal going stable would rename them) raises, naming it."""
    import importlib

    name = LOGS_MODULES[which]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name) and exc.name.startswith("opentelemetry."):
            raise UpstreamChanged("logs-underscore-modules", f"{name} is gone ({exc})") from exc
        raise  # a package that is not installed: the caller names the extra to install


def log_exporter_types():
    """(LogRecordExporter, LogRecordExportResult) of ``opentelemetry.sdk._logs.export``.

    The SDK's logs module is still ``_logs``, and these names replaced ``LogExporter`` /
    ``LogExportResult`` in an earlier release (the old names are taken when the new ones are
    missing). Checked against opentelemetry-sdk 1.45.0."""
    export = logs_module("sdk.export")
    exporter = getattr(export, "LogRecordExporter", None) or getattr(export, "LogExporter", None)
    result = getattr(export, "LogRecordExportResult", None) or getattr(export, "LogExportResult", None)
    if exporter is None or result is None:
        raise UpstreamChanged("sdk-log-exporter-names",
                              "opentelemetry.sdk._logs.export has neither LogRecordExporter nor LogExporter")
    return exporter, result


# ---- the API's context -----------------------------------------------------------------------


def span_key() -> str:
    """The context key under which the API stores the current span.

    Private: ``opentelemetry.trace.propagation._SPAN_KEY`` (opentelemetry-api 1.45.0). The native recorder writes its spans into OTel contexts under this key."""
    from opentelemetry.trace import propagation

    key = getattr(propagation, "_SPAN_KEY", None)
    if not isinstance(key, str):
        raise UpstreamChanged("trace-span-key", "opentelemetry.trace.propagation._SPAN_KEY is gone")
    return key


def runtime_contextvar():
    """The ``ContextVar`` holding the current OTel Context, or None when the runtime context
    is not the default ``ContextVarsRuntimeContext`` (then the recorder goes through
    ``context.attach`` / ``get_current``, which is correct, only slower).

    Private: ``opentelemetry.context._RUNTIME_CONTEXT._current_context`` (opentelemetry-api
    1.45.0). The default runtime without that attribute is a broken assumption."""
    import contextvars

    from opentelemetry import context

    runtime = getattr(context, "_RUNTIME_CONTEXT", None)
    if type(runtime).__name__ != "ContextVarsRuntimeContext":
        return None  # OTEL_PYTHON_CONTEXT names another runtime: the public calls serve it
    var = getattr(runtime, "_current_context", None)
    if not isinstance(var, contextvars.ContextVar):
        raise UpstreamChanged("context-runtime-contextvar",
                              "ContextVarsRuntimeContext no longer keeps its ContextVar in _current_context")
    return var


# ---- samplers --------------------------------------------------------------------------------


def static_decision(sampler):
    """The fixed Decision of a ``StaticSampler`` (ALWAYS_ON / ALWAYS_OFF), else None.

    Private: ``StaticSampler._decision`` (opentelemetry-sdk 1.45.0)."""
    from opentelemetry.sdk.trace import sampling

    if not isinstance(sampler, sampling.StaticSampler):
        return None
    decision = getattr(sampler, "_decision", None)
    if not isinstance(decision, sampling.Decision):
        raise UpstreamChanged("sampler-static-decision", "StaticSampler keeps no Decision in _decision")
    return decision


def parent_based_delegates(sampler):
    """A ``ParentBased`` sampler's delegates: (root, remote_parent_sampled,
    local_parent_sampled, remote_parent_not_sampled, local_parent_not_sampled).

    Private: ``ParentBased._root`` / ``_remote_parent_sampled`` / ... (opentelemetry-sdk
    1.45.0)."""
    names = ("_root", "_remote_parent_sampled", "_local_parent_sampled", "_remote_parent_not_sampled",
             "_local_parent_not_sampled")
    missing = [n for n in names if not hasattr(sampler, n)]
    if missing:
        raise UpstreamChanged("sampler-parent-based-delegates", f"ParentBased has no {', '.join(missing)}")
    return tuple(getattr(sampler, n) for n in names)


def sampler_from_env():
    """The sampler ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` name, read as the SDK
    reads them for a TracerProvider given none (``parentbased_always_on`` when unset).

    Private: ``opentelemetry.sdk.trace.sampling._get_from_env_or_default`` (opentelemetry-sdk
    1.45.0); the SDK has no public way to build the sampler its environment names."""
    from opentelemetry.sdk.trace import sampling

    read = getattr(sampling, "_get_from_env_or_default", None)
    if read is None:
        raise UpstreamChanged("sampler-from-env", "opentelemetry.sdk.trace.sampling has no _get_from_env_or_default")
    return read()


# ---- SDK spans' values -----------------------------------------------------------------------


def sdk_span_reader():
    """``(span types, reader)`` for lens_core's record_size (``_shared.set_record_reader``):
    ``reader(span)`` gives an ended SDK span's ``(attributes, event attributes)`` as the
    dicts behind its public views (``attributes``, ``events``, each event's ``attributes``),
    without going through them: ``attributes`` is a MappingProxyType over a BoundedAttributes,
    whose values the Mapping ABC reads one Python ``__getitem__`` at a time, and ``events``
    a locked copy of a BoundedList.

    Private: ``opentelemetry.sdk.trace._Span`` (the class a Tracer makes), the
    ``_attributes`` (a BoundedAttributes, a dict or None) and ``_events`` (a BoundedList, or
    the tuple or list given to ReadableSpan) of a ReadableSpan, ``BoundedAttributes._dict``,
    ``BoundedList._dq`` and ``Event._attributes`` (opentelemetry-sdk and -api 1.45.0). A span
    stored otherwise gives None, and record_size then reads its public views: correct, only
    slower, so this falls back instead of raising (its test fails by this assumption's name);
    so does an SDK without these classes: ``((), None)``, no reader."""
    from collections import deque

    try:
        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk import trace as sdk_trace
        from opentelemetry.sdk.util import BoundedList

        event_type = sdk_trace.Event
    except (ImportError, AttributeError):
        return (), None
    unknown = object()

    def values_of(attrs):
        kind = type(attrs)
        if kind is BoundedAttributes:
            attrs = getattr(attrs, "_dict", unknown)
            return attrs if type(attrs) is dict else unknown
        return attrs if attrs is None or kind is dict else unknown

    def reader(span):
        attrs = values_of(getattr(span, "_attributes", unknown))  # a Tracer's span holds a BoundedAttributes
        if attrs is unknown:
            return None
        events = getattr(span, "_events", unknown)
        if type(events) is BoundedList:
            events = getattr(events, "_dq", unknown)
            if type(events) is not deque:
                return None
        elif type(events) is not tuple and type(events) is not list:
            return None
        if not events:
            return attrs, ()
        event_attrs = []
        for event in events:
            if type(event) is not event_type:
                return None
            found = values_of(getattr(event, "_attributes", unknown))
            if found is unknown:
                return None
            event_attrs.append(found)
        return attrs, event_attrs

    kinds = (getattr(sdk_trace, "_Span", None), sdk_trace.Span, sdk_trace.ReadableSpan)
    return tuple(kind for kind in kinds if isinstance(kind, type)), reader


# ---- OTLP exporters' transport ---------------------------------------------------------------


def adapt_grpc_exporter(exporter, parse) -> bool:
    """Make an SDK gRPC exporter send Lens's encoded batches through its own retry loop:
    ``_export(batch)`` then calls ``_translate_data(batch)`` (-> ``parse(batch.data)``) and
    ``_count_data(batch)`` (-> ``batch.count``). False when ``exporter`` is not such an
    exporter (the HTTP one has no ``_translate_data``).

    Private: ``OTLPExporterMixin._export`` / ``_translate_data`` / ``_count_data``
    (opentelemetry-exporter-otlp-proto-grpc 1.45.0, whose retry loop asks ``_count_data`` for
    the batch's size for its exporter metrics)."""
    if not (hasattr(exporter, "_translate_data") and hasattr(exporter, "_export")):
        return False
    exporter._translate_data = lambda batch: parse(batch.data)
    exporter._count_data = lambda batch: batch.count
    return True


def grpc_export(exporter, batch):
    """Send one adapted batch through the gRPC exporter's retry loop; its export result."""
    return exporter._export(batch)


def grpc_channel(exporter):
    """The gRPC exporter's channel (None when it has none).

    Private: ``OTLPExporterMixin._channel`` (opentelemetry-exporter-otlp-proto-grpc
    1.45.0). None is correct only for a non-gRPC exporter: the fork handling then stays gRPC's."""
    return getattr(exporter, "_channel", None)


def http_export(exporter, data: bytes):
    """POST one serialized OTLP request through the HTTP exporter's client (its retries,
    compression, headers and timeouts); the client's result (``success``, ``error``,
    ``status_code``, ``reason``).

    Private: ``OTLPSpanExporter._client.export(bytes)`` (opentelemetry-exporter-otlp-proto-http
    1.45.0, through opentelemetry-exporter-otlp-common's ``_OTLPHTTPClient``; 1.44 and older
    have no client that takes serialized bytes)."""
    client = getattr(exporter, "_client", None)
    if client is None or not callable(getattr(client, "export", None)):
        raise UpstreamChanged(
            "http-exporter-client",
            f"{type(exporter).__name__} has no serialized-payload client (opentelemetry-exporter-otlp-proto-http "
            "1.45 or newer has one); install a newer exporter or use LENS_RECORDER=sdk with a custom exporter")
    return client.export(data)


def http_exporter_ready(exporter) -> None:
    """Raise UpstreamChanged now (at setup) unless ``exporter`` has the client http_export uses."""
    client = getattr(exporter, "_client", None)
    if client is None or not callable(getattr(client, "export", None)):
        http_export(exporter, b"")  # raises, with the message


def grpc_fork_unregister_channel(channel) -> None:
    """Take ``channel`` off gRPC's fork-handling list (the child then never touches it).

    Private: ``grpc._cython.cygrpc.fork_unregister_channel`` (grpcio 1.63.2 and 1.85.3)."""
    from grpc._cython import cygrpc

    cygrpc.fork_unregister_channel(channel)


def grpc_fork_register_channel(channel) -> None:
    """Put ``channel`` back on gRPC's fork-handling list (after the fork, in the parent).

    Private: ``grpc._cython.cygrpc.fork_register_channel`` (grpcio 1.63.2 and 1.85.3)."""
    from grpc._cython import cygrpc

    cygrpc.fork_register_channel(channel)


# ---- the logging handler ---------------------------------------------------------------------


def log_record_attributes_hook(handler_class) -> str:
    """The name of the method ``handler_class.emit`` asks for a record's attributes; the
    bridge overrides it to redact secrets in ``extra`` fields.

    Private: ``LoggingHandler._get_attributes(record) -> (attributes, event_name)``
    (opentelemetry-instrumentation-logging 0.66b0). If it is gone the override would never
    run and records would leave unredacted: raises instead, so the bridge refuses to load."""
    import inspect

    hook = getattr(handler_class, "_get_attributes", None)
    if not callable(hook):
        raise UpstreamChanged("logging-handler-get-attributes",
                              f"{handler_class.__module__}.{handler_class.__qualname__} has no _get_attributes: "
                              "the bridge cannot redact log attributes")
    try:
        source = inspect.getsource(handler_class)
    except (OSError, TypeError):  # no source (a zipped install): the test proves the path instead
        return "_get_attributes"
    if "self._get_attributes(" not in source:
        raise UpstreamChanged("logging-handler-get-attributes",
                              f"{handler_class.__qualname__} no longer calls self._get_attributes: "
                              "the bridge cannot redact log attributes")
    return "_get_attributes"


# ---- Ray -------------------------------------------------------------------------------------


def ray_global_worker(ray):
    """This process's Ray worker (for the cluster's session name and the worker mode; neither
    has a public accessor).

    Private: ``ray._private.worker.global_worker`` (ray 2.9.3 and 2.60.0)."""
    try:
        return ray._private.worker.global_worker
    except AttributeError as exc:
        raise UpstreamChanged("ray-global-worker", f"ray._private.worker.global_worker is gone ({exc})") from exc


def ray_started_head():
    """For a process whose ``ray.init()`` ran: True when it booted the cluster's head node,
    False when it joined a cluster already running (a ``ray://`` client keeps no node and
    always joined one elsewhere), None when Ray keeps its node where this does not look.

    Private: ``ray._private.worker._global_node`` and ``Node.head`` (ray 2.60.0). Read with
    getattr: a Ray that moved them gives None (unknown), never a wrong answer."""
    import sys

    worker = sys.modules.get("ray._private.worker")
    if worker is None:
        return None
    node = getattr(worker, "_global_node", None)
    if node is None:
        return False
    head = getattr(node, "head", None)
    return head if isinstance(head, bool) else None


def _internal_kv():
    try:
        from ray.experimental import internal_kv
    except ImportError as exc:
        raise UpstreamChanged("ray-internal-kv", f"ray.experimental.internal_kv is gone ({exc})") from exc
    if not (callable(getattr(internal_kv, "_internal_kv_get", None))
            and callable(getattr(internal_kv, "_internal_kv_put", None))):
        raise UpstreamChanged("ray-internal-kv", "ray.experimental.internal_kv has no _internal_kv_get/_put")
    return internal_kv


def ray_kv_get(key: bytes):
    """The value stored under ``key`` in the cluster's internal KV, or None.

    Private: ``ray.experimental.internal_kv._internal_kv_get`` (ray 2.9.3 and 2.60.0). The
    driver publishes the run id there; if it moved, workers would derive their own and the
    report would split one job, so a missing function raises rather than reads None."""
    return _internal_kv()._internal_kv_get(key)


def ray_kv_put(key: bytes, value: bytes) -> None:
    """Store ``value`` under ``key`` in the cluster's internal KV (overwriting).

    Private: ``ray.experimental.internal_kv._internal_kv_put`` (ray 2.9.3 and 2.60.0)."""
    _internal_kv()._internal_kv_put(key, value, overwrite=True)
