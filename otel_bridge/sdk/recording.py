"""Builds an exporting rank's span recording: the TracerProvider, the span pipeline and its sink,
and (``LENS_RECORDER=native``) the native recorder bound to OpenTelemetry's context."""

from __future__ import annotations

import json
import os

from lens_core import semconv

__all__ = ["CHAIN_EXCEPTIONS", "RECORDERS", "STACK_FRAMES", "build_span_pipeline", "exception_attributes",
           "sampling_mode", "stacktrace_text"]

#: Values of ``LENS_RECORDER``: ``native`` records Lens spans as compact records (no SDK
#: span object per span); ``sdk`` creates SDK spans (for span processors of your own).
RECORDERS = ("native", "sdk")


def build_span_pipeline(config, exporter_name, resource, *, run_id, rank, span_exporter=None, sampler=None):
    """(tracer_provider, pipeline, native recorder or None) for ``config``; the pipeline's
    export thread is running. ``exporter_name`` may be ``auto`` (decided for traces);
    ``sampler`` None means the SDK's (OTEL_TRACES_SAMPLER)."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider

    from lens_core import _impl
    from lens_core._native._shared import Limits

    from otel_bridge.sdk.pipeline import ScopeTable, SdkSpanProcessor, SpanPipeline
    from otel_bridge.sdk.providers import SeedIndependentIdGenerator, lens_version

    from otel_bridge import exporters

    impl = _impl.recorder()
    recorder = impl.Recorder(max_open=config.max_open_spans, buffer_bytes=config.buffer_mb << 20)
    sink = _sink(exporters.resolve_exporter_name(exporter_name, signal="traces"), config, run_id, rank,
                 span_exporter, impl)
    # One set of OpenTelemetry span limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the rest, the
    # SDK's 128 defaults) for SDK spans and the native recorder alike: both write the same data.
    limits = SpanLimits()
    recorder.set_limits(Limits.of(limits))
    # shutdown_on_exit=False: the SDK's own exit hook has no deadline; ours does.
    tracer_provider = TracerProvider(resource=resource, id_generator=SeedIndependentIdGenerator(),
                                     sampler=sampler, shutdown_on_exit=False, span_limits=limits)
    pipeline = SpanPipeline(recorder, sink, scopes=ScopeTable("lens", lens_version()), encoders=impl,
                            resource=resource, retarget=_retargeter(run_id))
    pipeline.sdk = SdkSpanProcessor(pipeline, config.max_open_spans)
    tracer_provider.add_span_processor(pipeline.sdk)
    native = None
    if config.recorder == "native":
        _bind(recorder, tracer_provider, impl)
        native = recorder
    pipeline.start()
    return tracer_provider, pipeline, native


def _sink(exporter_name, config, run_id, rank, span_exporter, impl):
    from otel_bridge import exporters
    from otel_bridge.sdk.pipeline import FileSink, NullSink, OtlpSink, SdkExporterSink

    if span_exporter is not None:
        return SdkExporterSink(span_exporter)
    if exporter_name == "none":
        return NullSink()
    if exporter_name == "otlp":
        protocol = exporters.resolve_otlp_protocol("traces")
        sink = OtlpSink(lambda: exporters.otlp_span_exporter(protocol), impl.encode_traces_pb)
        sink.exporter  # built now, so a bad OTEL_EXPORTER_OTLP_* setting fails setup, not the first export
        return sink
    if exporter_name == "file":
        from otel_bridge.exporters._file import JsonLinesWriter

        return FileSink(JsonLinesWriter(config.file_dir or exporters.DEFAULT_FILE_DIR, run_id, rank, "traces"),
                        impl.encode_traces_json, max_line_bytes=config.file_line_mb << 20)
    return SdkExporterSink(exporters.console_span_exporter())


def _retargeter(run_id):
    """resource -> the same resource for this process (a forked child gets its own pid and
    service.instance.id)."""

    def retarget(resource):
        from opentelemetry.sdk.resources import Resource

        from otel_bridge.sdk.providers import instance_id

        attrs = dict(resource.attributes)
        pid = os.getpid()
        if attrs.get(semconv.PROCESS_PID) == pid:
            return resource
        attrs[semconv.PROCESS_PID] = pid
        attrs[semconv.SERVICE_INSTANCE_ID] = instance_id(run_id, attrs.get(semconv.NV_DL_RANK, 0), pid)
        return Resource(attrs, resource.schema_url)

    return retarget


def encode_resource(resource):
    """(protobuf bytes, OTLP/JSON text) of ``resource``."""
    from opentelemetry.exporter.otlp.proto.common._internal import _encode_resource

    from otel_bridge.exporters._otlp_json import to_otlp_json

    message = _encode_resource(resource)
    return message.SerializeToString(), json.dumps(to_otlp_json(message), separators=(",", ":"), ensure_ascii=False)


# ---- the native recorder and OpenTelemetry ----------------------------------------------


def _bind(recorder, tracer_provider, impl) -> None:
    from opentelemetry import context, trace
    from opentelemetry.context.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
    from opentelemetry.trace.propagation import _SPAN_KEY

    runtime = getattr(context, "_RUNTIME_CONTEXT", None)
    contextvar = getattr(runtime, "_current_context", None)
    recorder.bind_otel(
        contextvar=contextvar if type(runtime).__name__ == "ContextVarsRuntimeContext" else None,
        context_type=Context, span_key=_SPAN_KEY, span_context_type=SpanContext, trace_flags_type=TraceFlags,
        trace_state_type=TraceState, non_recording_span_type=NonRecordingSpan,
        get_current=context.get_current, attach=context.attach, detach=context.detach,
        format_exc=exception_attributes, fail_span=_fail_span)
    recorder.set_sampler(*sampling_mode(tracer_provider.sampler, impl))
    if not issubclass(impl.Span, trace.Span):
        trace.Span.register(impl.Span)  # isinstance(span, opentelemetry.trace.Span) holds


def _fail_span(span, exc) -> None:
    """An exception on an SDK span (one a user-given tracer made), as the OTel backend records it."""
    from otel_bridge.sdk.backend import OTelBackend

    OTelBackend.record_failure(span, exc)


def sampling_mode(sampler, impl):
    """(mode, ratio, sampler) for Recorder.set_sampler: the SDK's built-in samplers are
    decided natively; any other sampler is asked for every span."""
    from opentelemetry.sdk.trace import sampling

    if hasattr(sampler, "selected") and hasattr(sampler, "delegate"):  # otel_bridge.sdk.sampling.RankSampler
        if not sampler.selected:
            return impl.SAMPLE_ALWAYS_OFF, 1.0, None
        sampler = sampler.delegate

    def static(s):
        if isinstance(s, sampling.StaticSampler):
            return 1.0 if s._decision is sampling.Decision.RECORD_AND_SAMPLE else 0.0
        return None

    if static(sampler) is not None:
        return (impl.SAMPLE_ALWAYS_ON if static(sampler) else impl.SAMPLE_ALWAYS_OFF), 1.0, None
    if type(sampler) is sampling.TraceIdRatioBased:
        return impl.SAMPLE_RATIO, sampler.rate, None
    if type(sampler) is sampling.ParentBased and _default_delegates(sampler, static):
        root = sampler._root
        if static(root) is not None:
            return impl.SAMPLE_PARENT_RATIO, static(root), None
        if type(root) is sampling.TraceIdRatioBased:
            return impl.SAMPLE_PARENT_RATIO, root.rate, None
    return impl.SAMPLE_CUSTOM, 1.0, sampler


def _default_delegates(sampler, static) -> bool:
    return (static(sampler._remote_parent_sampled) == 1.0 and static(sampler._local_parent_sampled) == 1.0
            and static(sampler._remote_parent_not_sampled) == 0.0 and static(sampler._local_parent_not_sampled) == 0.0)


def exception_attributes(exc, escaped=False) -> dict:
    """The ``exception`` event's attributes, as the SDK's record_exception writes them;
    never raises, even for an exception whose ``__str__`` does. Credential shapes in the
    message and the stack trace are redacted (lens_core.redaction.redact_text). The stack
    trace is bounded (stacktrace_text): recording one exception on each of 1,000 nested
    spans costs linear time, not quadratic."""
    from lens_core.attributes import describe_exception

    kind = type(exc)
    module, qualname = kind.__module__, kind.__qualname__
    try:
        stacktrace = stacktrace_text(exc)
    except Exception:
        stacktrace = f"{qualname}: {describe_exception(exc, with_type=False)}"
    return {
        "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
        "exception.message": describe_exception(exc, with_type=False),
        "exception.stacktrace": stacktrace,
        "exception.escaped": str(escaped),
    }


#: Frames of one traceback written in full; past it the outermost and innermost halves are
#: kept with a line saying how many were left out between them (a recursion 1,000 deep
#: raising through a span at each level would otherwise write 1,000 frames 1,000 times).
STACK_FRAMES = 64
#: Exceptions of a __cause__ / __context__ chain written, newest first.
CHAIN_EXCEPTIONS = 8
_FRAME_CACHE_LIMIT = 4096
_frame_texts: dict = {}  # (id(code), line) -> (code, that frame's redacted text)
_GROUP = getattr(__import__("builtins"), "BaseExceptionGroup", None)  # Python 3.11+
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _frame_text(tb) -> str:
    # A frame's text depends only on its code and line (file, function, source line):
    # formatted once and redacted once, so a frame seen again (the same exception recorded
    # on each span it leaves) costs a dict lookup. (No 3.11 caret lines: they need the
    # traceback module's private position walk.)
    import traceback

    from lens_core.redaction import redact_text

    code = tb.tb_frame.f_code
    # keyed by id: hashing a code object hashes its bytecode and constants every time
    key = (id(code), tb.tb_lineno)
    hit = _frame_texts.get(key)
    if hit is not None and hit[0] is code:
        return hit[1]
    text = redact_text("".join(traceback.StackSummary.extract([(tb.tb_frame, tb.tb_lineno)]).format()))
    if len(_frame_texts) >= _FRAME_CACHE_LIMIT:
        _frame_texts.clear()
    _frame_texts[key] = (code, text)  # the code object kept: its id cannot be reused meanwhile
    return text


# The last traceback formatted: (id of its head entry, id of that entry's frame, its line,
# its instruction, frames in all, the outermost texts (all of them when there are at most
# STACK_FRAMES), the innermost texts). The same exception recorded on the next span out has
# one more entry in front of that head: only the new entries are walked and formatted, so
# a traceback N deep recorded N times costs O(N), not O(N^2). No traceback is kept alive
# (exceptions and tracebacks cannot be weakly referenced): the head is matched by id and
# checked by its frame, line and instruction, all unchanged while its exception lives.
_last_walk = None


def _frames(tb) -> str:
    global _last_walk
    if tb is None:
        return ""
    half = STACK_FRAMES // 2
    last = _last_walk
    new, t, hit = [], tb, None
    while t is not None:
        if (last is not None and id(t) == last[0] and id(t.tb_frame) == last[1] and t.tb_lineno == last[2]
                and t.tb_lasti == last[3]):
            hit = last
            break
        new.append(t)
        t = t.tb_next
    if hit is None:
        count = len(new)
        if count <= STACK_FRAMES:
            outer, inner = [_frame_text(e) for e in new], []
        else:
            outer = [_frame_text(e) for e in new[:half]]
            inner = [_frame_text(e) for e in new[-half:]]
    else:
        count = len(new) + hit[4]
        if hit[4] <= STACK_FRAMES:  # the known part was short: all its texts are there
            full = [_frame_text(e) for e in new] + hit[5]
            outer, inner = (full, []) if count <= STACK_FRAMES else (full[:half], full[-half:])
        else:
            outer = ([_frame_text(e) for e in new[:half]] + hit[5])[:half]
            inner = hit[6]
    _last_walk = (id(tb), id(tb.tb_frame), tb.tb_lineno, tb.tb_lasti, count, outer, inner)
    shown = outer if count <= STACK_FRAMES else outer + [f"  [... {count - 2 * half} frames not shown ...]\n"] + inner
    return "Traceback (most recent call last):\n" + "".join(shown)


def _exception_only(exc) -> str:
    # What traceback.format_exception_only writes, without building a TracebackException:
    # that walks the whole __cause__ / __context__ chain again for every exception of it
    # (quadratic in a chain of `raise ... from`). SyntaxError's caret lines keep the
    # standard formatter.
    import traceback

    from lens_core.redaction import redact_text
    from lens_core.attributes import describe_exception

    kind = type(exc)
    if issubclass(kind, SyntaxError):
        cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
        try:
            exc.__cause__ = exc.__context__ = None  # format this one alone
            return redact_text("".join(traceback.format_exception_only(kind, exc)))
        finally:
            exc.__cause__, exc.__context__ = cause, context
            exc.__suppress_context__ = suppress
    name, module = kind.__qualname__, kind.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module}.{name}"
    message = describe_exception(exc, with_type=False)
    lines = [f"{name}: {message}\n" if message else f"{name}\n"]
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, (list, tuple)):
        lines.extend(f"{note}\n" if isinstance(note, str) else "<note str() failed>\n" for note in notes)
    return redact_text("".join(lines))


def stacktrace_text(exc) -> str:
    """``exc``'s traceback as ``traceback.format_exception`` writes it (its __cause__ /
    __context__ chain first), bounded: at most STACK_FRAMES frames per traceback and
    CHAIN_EXCEPTIONS exceptions of the chain, each frame formatted once per process (a
    bounded cache) and credential shapes redacted."""
    import traceback

    from lens_core.redaction import redact_text

    if _GROUP is not None and isinstance(exc, _GROUP):
        # an exception group's members have tracebacks of their own: the standard format
        return redact_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    chain, links, seen = [], [], set()
    current, link = exc, None
    while current is not None and id(current) not in seen and len(chain) < CHAIN_EXCEPTIONS:
        seen.add(id(current))
        chain.append(current)
        links.append(link)
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts = []
    if current is not None and id(current) not in seen:
        parts.append("[... earlier exceptions of the chain not shown ...]\n\n")
    for position in range(len(chain) - 1, -1, -1):
        item = chain[position]
        parts.append(_frames(item.__traceback__))
        parts.append(_exception_only(item))
        if position:
            parts.append(links[position])
    return "".join(parts)
