"""Run coroutines and (async) generators with a context entered around each step.

A generator must never hold a context attached across a ``yield``: the consumer would run
inside it, and the detach would happen in another context. So context is entered before
each resume and left before each value is handed out. trace_fn and the Ray helper share
this; ``start_hooks(args, kwargs)`` returns None (plain delegation) or an object with
``enter() -> token``, ``leave(token)`` and ``finish(exc_or_None)``.
"""

from __future__ import annotations

__all__ = ["wrap_async_generator_function", "wrap_coroutine_function", "wrap_generator_function"]


def wrap_coroutine_function(fn, start_hooks):
    """An ``async def`` wrapper around coroutine function ``fn``."""

    async def wrapper(*args, **kwargs):
        hooks = start_hooks(args, kwargs)
        if hooks is None:
            return await fn(*args, **kwargs)
        failure = None
        token = hooks.enter()  # one task, one context: held across awaits is correct
        try:
            return await fn(*args, **kwargs)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            try:
                hooks.leave(token)
            finally:
                hooks.finish(failure)

    return wrapper


def wrap_generator_function(fn, start_hooks):
    """A generator wrapper around generator function ``fn`` (send/throw/close forwarded)."""

    def wrapper(*args, **kwargs):
        hooks = start_hooks(args, kwargs)
        gen = fn(*args, **kwargs)
        if hooks is None:
            return (yield from gen)
        failure = None
        try:
            value, thrown = None, None
            while True:
                token = hooks.enter()
                try:
                    item = gen.send(value) if thrown is None else gen.throw(thrown)
                except StopIteration as stop:
                    return stop.value
                finally:
                    hooks.leave(token)
                value, thrown = None, None
                try:
                    value = yield item
                except GeneratorExit:
                    token = hooks.enter()
                    try:
                        gen.close()
                    finally:
                        hooks.leave(token)
                    raise
                except BaseException as exc:  # thrown in by the consumer: forward it
                    thrown = exc
        except BaseException as exc:
            failure = exc
            raise
        finally:
            hooks.finish(failure)

    return wrapper


def wrap_async_generator_function(fn, start_hooks):
    """An async-generator wrapper around ``fn`` (asend/athrow/aclose forwarded)."""

    async def wrapper(*args, **kwargs):
        hooks = start_hooks(args, kwargs)
        agen = fn(*args, **kwargs)
        failure = None
        try:
            value, thrown = None, None
            while True:
                token = hooks.enter() if hooks else None
                try:
                    if thrown is None:
                        item = await agen.asend(value)
                    else:
                        item = await agen.athrow(thrown)
                except StopAsyncIteration:
                    return
                finally:
                    if hooks:
                        hooks.leave(token)
                value, thrown = None, None
                try:
                    value = yield item
                except GeneratorExit:
                    token = hooks.enter() if hooks else None
                    try:
                        await agen.aclose()
                    finally:
                        if hooks:
                            hooks.leave(token)
                    raise
                except BaseException as exc:
                    thrown = exc
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if hooks:
                hooks.finish(failure)

    return wrapper
