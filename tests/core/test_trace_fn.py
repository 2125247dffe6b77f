"""trace_fn / umbrella_trace_fn: decided per call; functions, methods, coroutines, generators."""

import asyncio
import functools
import inspect

import pytest

import lens_core
from lens_core import SpanRegistry, trace_fn, umbrella_trace_fn


def enable(spec="work"):
    SpanRegistry.register("lib", ["work", "outer"], umbrellas=["outer"], buckets={"work": "productive"})
    lens_core.set_span_group_spec(spec)


def current_span_id():
    """The span id in the current context's carrier, or None."""
    carrier = lens_core.current_trace_carrier()
    return int(carrier["traceparent"].split("-")[2], 16) if carrier else None


def run(coro):
    return asyncio.run(coro)


# ---- decided at call time -------------------------------------------------------------------


def test_enabling_after_decoration_makes_the_next_call_traced(recorder):
    SpanRegistry.register("lib", ["work"])

    @trace_fn("work")
    def f(x):
        return x + 1

    assert f(1) == 2
    assert recorder.spans == []
    lens_core.set_span_group_spec("work")
    assert f(2) == 3
    assert recorder.names() == [f.__qualname__]


def test_disabling_after_decoration_stops_tracing(recorder):
    enable()

    @trace_fn("work", name="w")
    def f():
        return "done"

    f()
    lens_core.set_span_group_spec("")
    assert f() == "done"
    assert recorder.names() == ["w"]


def test_trace_fn_with_a_non_str_group_raises_type_error():
    with pytest.raises(TypeError, match="span group must be a str"):
        trace_fn(3)


def test_trace_fn_of_a_non_callable_raises_type_error():
    with pytest.raises(TypeError, match="trace_fn decorates callables"):
        trace_fn("work")(42)


# ---- functions and methods --------------------------------------------------------------------


def test_function_passes_arguments_and_returns_the_result(recorder):
    enable()

    @trace_fn("work", name="add")
    def add(a, b=0, *rest, **kw):
        return (a, b, rest, kw)

    assert add(1, 2, 3, k=4) == (1, 2, (3,), {"k": 4})
    assert add(a=5) == (5, 0, (), {})
    assert functools.partial(add, 9)(b=1) == (9, 1, (), {})
    assert recorder.names() == ["add", "add", "add"]


def test_function_span_is_current_inside_and_bucketed(recorder):
    enable()

    @trace_fn("work", name="f")
    def f():
        return current_span_id()

    assert f() == recorder.spans[0].span_id
    assert recorder.spans[0].attributes == {"rl.bucket": "productive"}


def test_function_exception_is_recorded_and_reraised(recorder):
    enable()

    @trace_fn("work", name="f")
    def f():
        raise KeyError("k")

    with pytest.raises(KeyError):
        f()
    assert isinstance(recorder.spans[0].error, KeyError)
    assert recorder.spans[0].ended


class Model:
    def __init__(self, scale):
        self.scale = scale

    @trace_fn("work")
    def forward(self, x):
        """Scale x."""
        return self.scale * x

    @trace_fn("work")
    @classmethod
    def build_outside(cls, scale):
        return cls(scale)

    @classmethod
    @trace_fn("work")
    def build_inside(cls, scale):
        return cls(scale)

    @trace_fn("work")
    @staticmethod
    def double_outside(x):
        return 2 * x

    @staticmethod
    @trace_fn("work")
    def double_inside(x):
        return 2 * x


def test_method_binds_self(recorder):
    enable()
    assert Model(3).forward(2) == 6
    assert Model.forward(Model(4), 2) == 8
    assert recorder.names() == ["Model.forward", "Model.forward"]


def test_disabled_method_binds_self(recorder):
    assert Model(3).forward(5) == 15
    assert recorder.spans == []


@pytest.mark.parametrize("builder", ["build_outside", "build_inside"])
def test_classmethod_binds_the_class(builder, recorder):
    enable()

    class Sub(Model):
        pass

    built = getattr(Sub, builder)(7)
    assert type(built) is Sub and built.scale == 7
    assert type(getattr(Sub(1), builder)(2)) is Sub
    assert recorder.names() == [f"Model.{builder}"] * 2


@pytest.mark.parametrize("method", ["double_outside", "double_inside"])
def test_staticmethod_takes_no_implicit_argument(method, recorder):
    enable()
    assert getattr(Model, method)(4) == 8
    assert getattr(Model(1), method)(5) == 10
    assert recorder.names() == [f"Model.{method}"] * 2


# ---- coroutines -------------------------------------------------------------------------------


def test_coroutine_span_covers_the_awaited_work(recorder):
    enable()

    @trace_fn("work", name="co")
    async def co():
        await asyncio.sleep(0.01)
        return "ok"

    async def main():
        pending = co()
        assert recorder.spans == []  # creating the coroutine starts no span
        return await pending

    assert run(main()) == "ok"
    span = recorder.named("co")
    assert span.ended
    assert span.end_ns - span.start_ns >= 10_000_000


def test_coroutine_span_is_current_inside_the_coroutine(recorder):
    enable()

    @trace_fn("work", name="co")
    async def co():
        before = current_span_id()
        await asyncio.sleep(0)
        return before, current_span_id()

    assert run(co()) == (recorder.spans[0].span_id, recorder.spans[0].span_id)


def test_coroutine_exception_is_recorded_and_reraised(recorder):
    enable()

    @trace_fn("work", name="co")
    async def co():
        await asyncio.sleep(0)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        run(co())
    assert isinstance(recorder.spans[0].error, ValueError)
    assert recorder.spans[0].ended


def test_disabled_coroutine_still_runs(recorder):
    SpanRegistry.register("lib", ["work"])

    @trace_fn("work")
    async def co(x):
        await asyncio.sleep(0)
        return x

    assert run(co(5)) == 5
    assert recorder.spans == []


# ---- generators -------------------------------------------------------------------------------


def test_generator_yields_values_and_returns_its_result(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen(n):
        yield from range(n)
        return "end"

    def consume():
        result = yield from gen(3)
        return result

    items = []
    it = consume()
    try:
        while True:
            items.append(next(it))
    except StopIteration as stop:
        assert stop.value == "end"
    assert items == [0, 1, 2]
    assert len(recorder.spans) == 1


def test_generator_span_starts_at_first_iteration_not_at_call(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen():
        yield 1

    it = gen()
    assert recorder.spans == []
    next(it)
    assert recorder.names() == ["gen"]


def test_generator_span_is_current_in_the_body_but_not_in_the_consumer(recorder):
    enable()
    seen = []

    @trace_fn("work", name="gen")
    def gen():
        for i in range(3):
            seen.append(("body", current_span_id()))
            yield i

    for _ in gen():
        seen.append(("consumer", current_span_id()))
    span_id = recorder.spans[0].span_id
    assert seen == [("body", span_id), ("consumer", None)] * 3


def test_generator_span_ends_only_when_exhausted(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen():
        yield 1
        yield 2

    it = gen()
    next(it)
    next(it)
    assert not recorder.spans[0].ended
    with pytest.raises(StopIteration):
        next(it)
    assert recorder.spans[0].ended
    assert recorder.spans[0].error is None


def test_generator_send_is_forwarded(recorder):
    enable()

    @trace_fn("work", name="acc")
    def acc():
        total = 0
        while True:
            got = yield total
            total += got

    it = acc()
    assert next(it) == 0
    assert it.send(5) == 5
    assert it.send(7) == 12


def test_generator_throw_is_forwarded_and_handled_inside(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen():
        try:
            yield 1
        except ValueError as exc:
            yield f"handled {exc}"

    it = gen()
    next(it)
    assert it.throw(ValueError("v")) == "handled v"
    assert not recorder.spans[0].ended
    assert recorder.spans[0].error is None


def test_generator_throw_not_handled_is_recorded_and_ends_the_span(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen():
        yield 1

    it = gen()
    next(it)
    with pytest.raises(ValueError):
        it.throw(ValueError("unhandled"))
    assert isinstance(recorder.spans[0].error, ValueError)
    assert recorder.spans[0].ended


def test_generator_close_is_forwarded_and_ends_the_span_without_error(recorder):
    enable()
    closed = []

    @trace_fn("work", name="gen")
    def gen():
        try:
            yield 1
            yield 2
        finally:
            closed.append(current_span_id())

    it = gen()
    next(it)
    it.close()
    assert closed == [recorder.spans[0].span_id]  # the cleanup ran inside the span
    assert recorder.spans[0].ended
    assert recorder.spans[0].error is None


def test_generator_exception_is_recorded_and_reraised(recorder):
    enable()

    @trace_fn("work", name="gen")
    def gen():
        yield 1
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        list(gen())
    assert isinstance(recorder.spans[0].error, RuntimeError)
    assert recorder.spans[0].ended


def test_disabled_generator_forwards_send(recorder):
    SpanRegistry.register("lib", ["work"])

    @trace_fn("work")
    def echo():
        got = yield "first"
        yield got

    it = echo()
    assert next(it) == "first"
    assert it.send("x") == "x"
    assert recorder.spans == []


# ---- async generators -------------------------------------------------------------------------


def test_async_generator_yields_values_and_span_covers_iteration(recorder):
    enable()

    @trace_fn("work", name="agen")
    async def agen(n):
        for i in range(n):
            await asyncio.sleep(0.005)
            yield i

    async def main():
        it = agen(2)
        assert recorder.spans == []
        return [i async for i in it]

    assert run(main()) == [0, 1]
    span = recorder.spans[0]
    assert span.ended and span.error is None
    assert span.end_ns - span.start_ns >= 10_000_000


def test_async_generator_span_is_current_in_the_body_but_not_in_the_consumer(recorder):
    enable()
    seen = []

    @trace_fn("work", name="agen")
    async def agen():
        for i in range(2):
            await asyncio.sleep(0)
            seen.append(("body", current_span_id()))
            yield i

    async def main():
        async for _ in agen():
            seen.append(("consumer", current_span_id()))

    run(main())
    assert seen == [("body", recorder.spans[0].span_id), ("consumer", None)] * 2


def test_async_generator_span_ends_only_when_exhausted(recorder):
    enable()

    @trace_fn("work", name="agen")
    async def agen():
        yield 1

    async def main():
        it = agen()
        await it.__anext__()
        ended_mid_way = recorder.spans[0].ended
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()
        return ended_mid_way

    assert run(main()) is False
    assert recorder.spans[0].ended


def test_async_generator_asend_is_forwarded(recorder):
    enable()

    @trace_fn("work", name="agen")
    async def acc():
        total = 0
        while True:
            got = yield total
            total += got

    async def main():
        it = acc()
        out = [await it.asend(None), await it.asend(2), await it.asend(3)]
        await it.aclose()
        return out

    assert run(main()) == [0, 2, 5]


def test_async_generator_athrow_is_forwarded(recorder):
    enable()

    @trace_fn("work", name="agen")
    async def agen():
        try:
            yield 1
        except KeyError:
            yield "handled"

    async def main():
        it = agen()
        await it.__anext__()
        return await it.athrow(KeyError("k"))

    assert run(main()) == "handled"


def test_async_generator_aclose_is_forwarded_and_ends_the_span(recorder):
    enable()
    closed = []

    @trace_fn("work", name="agen")
    async def agen():
        try:
            yield 1
            yield 2
        finally:
            closed.append(current_span_id())

    async def main():
        it = agen()
        await it.__anext__()
        await it.aclose()

    run(main())
    assert closed == [recorder.spans[0].span_id]
    assert recorder.spans[0].ended
    assert recorder.spans[0].error is None


def test_async_generator_exception_is_recorded_and_reraised(recorder):
    enable()

    @trace_fn("work", name="agen")
    async def agen():
        yield 1
        raise RuntimeError("inside")

    async def main():
        return [i async for i in agen()]

    with pytest.raises(RuntimeError, match="inside"):
        run(main())
    assert isinstance(recorder.spans[0].error, RuntimeError)
    assert recorder.spans[0].ended


def test_disabled_async_generator_still_yields(recorder):
    SpanRegistry.register("lib", ["work"])

    @trace_fn("work")
    async def agen():
        yield "a"
        yield "b"

    async def main():
        return [i async for i in agen()]

    assert run(main()) == ["a", "b"]
    assert recorder.spans == []


# ---- metadata -----------------------------------------------------------------------------------


def plain(a, b=1):
    """Plain doc."""
    return a


async def coroutine_fn(a, b=1):
    """Coroutine doc."""
    return a


def generator_fn(a, b=1):
    """Generator doc."""
    yield a


async def async_generator_fn(a, b=1):
    """Async generator doc."""
    yield a


KINDS = [plain, coroutine_fn, generator_fn, async_generator_fn]


@pytest.mark.parametrize("fn", KINDS, ids=lambda f: f.__name__)
def test_wrapper_keeps_name_qualname_doc_and_wrapped(fn):
    wrapped = trace_fn("work")(fn)
    assert (wrapped.__name__, wrapped.__qualname__, wrapped.__doc__, wrapped.__module__) == (
        fn.__name__, fn.__qualname__, fn.__doc__, fn.__module__)
    assert wrapped.__wrapped__ is fn
    assert str(inspect.signature(wrapped)) == "(a, b=1)"


@pytest.mark.parametrize("fn", KINDS, ids=lambda f: f.__name__)
def test_wrapper_keeps_the_function_kind(fn):
    wrapped = umbrella_trace_fn("outer")(fn)
    predicates = (inspect.iscoroutinefunction, inspect.isgeneratorfunction, inspect.isasyncgenfunction)
    assert [p(wrapped) for p in predicates] == [p(fn) for p in predicates]


def test_method_wrapper_keeps_its_docstring():
    assert Model.forward.__doc__ == "Scale x."
    assert Model.forward.__qualname__ == "Model.forward"


@pytest.mark.parametrize("fn", KINDS, ids=lambda f: f.__name__)
def test_default_span_name_is_the_qualname(fn, recorder):
    enable()
    wrapped = trace_fn("work")(fn)
    result = wrapped(1)
    if inspect.iscoroutine(result):
        run(result)
    elif inspect.isgenerator(result):
        list(result)
    elif inspect.isasyncgen(result):
        async def drain():
            return [x async for x in result]
        run(drain())
    assert recorder.names() == [fn.__qualname__]


def test_umbrella_trace_fn_spans_carry_no_bucket(recorder):
    enable("all")

    @umbrella_trace_fn("outer", name="o")
    def o():
        return 1

    o()
    assert recorder.spans[0].attributes == {}


def test_trace_fn_passes_its_tracer_to_the_backend(recorder):
    enable()
    tracer = object()

    @trace_fn("work", name="t", tracer=tracer)
    def f():
        pass

    @trace_fn("work", name="g", tracer=tracer)
    def g():
        yield 1

    f()
    list(g())
    assert [s.tracer for s in recorder.spans] == [tracer, tracer]
