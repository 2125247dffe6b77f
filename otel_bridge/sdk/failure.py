"""An exception on a span: the ``exception`` event's attributes and ERROR status, never raising."""

from __future__ import annotations

from lens_core.attributes import describe_exception
from lens_core.redaction import redact_text

__all__ = ["CHAIN_EXCEPTIONS", "STACK_FRAMES", "exception_attributes", "record_failure", "stacktrace_text"]


def exception_attributes(exc, escaped=False) -> dict:
    """The ``exception`` event's attributes, as the SDK's record_exception writes them;
    never raises, even for an exception whose ``__str__`` does. Credential shapes in the
    message and the stack trace are redacted (lens_core.redaction.redact_text). The stack
    trace is bounded (stacktrace_text): recording one exception on each of 1,000 nested
    spans costs linear time, not quadratic."""
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


def _wrapper_files():
    # Lens's own call frames between a caller and a trace_fn function: the compiled gate's
    # (Cython names its file by package path), the pure gate's and spans._call_factory's.
    import os

    import lens_core

    root = os.path.dirname(os.path.abspath(lens_core.__file__))
    return ("lens_core/_gate.pyx", os.path.join(root, "_gate_py.py")), os.path.join(root, "spans.py")


_GATE_FILES, _SPANS_FILE = _wrapper_files()


def _hidden(tb) -> bool:
    # A frame an exception passed through inside Lens's trace_fn wrapper is not written: the
    # two gates' wrappers differ (one C frame, or two Python ones), and a stack trace that
    # named them would differ in length between the twins, and so in the bytes the buffer
    # budgets the span at (which spans a full buffer keeps). The innermost frame (where the
    # exception was raised) is always written, a bug inside the gate included.
    if tb.tb_next is None:
        return False
    code = tb.tb_frame.f_code
    name = code.co_filename
    return name in _GATE_FILES or (name == _SPANS_FILE and code.co_name == "_call_factory")
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _frame_text(tb) -> str:
    # A frame's text depends only on its code and line (file, function, source line):
    # formatted once and redacted once, so a frame seen again (the same exception recorded
    # on each span it leaves) costs a dict lookup. (No 3.11 caret lines: they need the
    # traceback module's private position walk.)
    import traceback


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
        if not _hidden(t):
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


def record_failure(span, exc) -> None:
    """``exc`` on a live OTel span: the ``exception`` event and ERROR status."""
    from opentelemetry.trace import Status, StatusCode

    span.add_event("exception", exception_attributes(exc, escaped=True))
    span.set_status(Status(StatusCode.ERROR, describe_exception(exc)))
