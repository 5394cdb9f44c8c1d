"""A stream that an ``@ot.llm`` function returns for its caller to read: the model call lasts until the caller
is done with it.

``return client.chat.completions.create(..., stream=True)`` (``openai.Stream`` / ``AsyncStream``), Anthropic's
``messages.create(stream=True)`` and ``messages.stream(...)`` (a ``MessageStreamManager``, entered by the
caller), OpenAI's ``chat.completions.stream(...)``, LangChain's ``.stream()`` / ``.astream()``: the result is
wrapped in a proxy (the object itself for every other use, ``isinstance`` included) whose iteration records
each chunk, as OpenTelemetry's openai-v2 instrumentation wraps its streams. The span ends once, when the
stream is exhausted (a complete reply), closed or exited before that, garbage-collected unread, or raises
(an incomplete reply: see ``Invocation.close``). Stream helpers that keep the reply so far themselves
(Anthropic's ``current_message_snapshot``, OpenAI's ``current_completion_snapshot``) are read at the end
instead, so a reply read by ``text_stream``, ``until_done()`` or ``get_final_message()`` is recorded too.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import wrapt

from orchestrace.failsafe import failsafe, log_once
from orchestrace.invocation import LlmSpec
from orchestrace.replies import normalize

if TYPE_CHECKING:
    from orchestrace.invocation import Invocation

#: Properties of stream helpers that hold the reply accumulated so far.
_SNAPSHOTS = ("current_message_snapshot", "current_completion_snapshot")


def is_stream(result: Any) -> bool:
    """Whether an ``@ot.llm`` function's result is a stream (an iterator, sync or async) or a client's
    stream manager (a context manager whose class says it opens a stream: ``MessageStreamManager``,
    ``ChatCompletionStreamManager`` ...; other context managers, an HTTP response, are replies)."""
    kind = type(result)
    if hasattr(kind, "__next__") or hasattr(kind, "__anext__"):
        return True
    return "Stream" in kind.__name__ and (hasattr(kind, "__enter__") or hasattr(kind, "__aenter__"))


def traced(invocation: Invocation, result: Any, token: object) -> Any:
    """``result`` to return to the caller: a stream wrapped so that the call ends with its reading, anything
    else as it is, the call ended (status OK)."""
    if is_stream(result):
        try:
            LlmSpec.stream_of(invocation)
            wrapped = _proxy(result, _End(invocation))
        except Exception as exc:  # a result that takes no proxy: recorded as it is
            log_once("orchestrace.returned.traced", exc)
        else:
            invocation.suspend(token)
            return wrapped
    invocation.stop(result, token)
    return result


def _proxy(stream: Any, end: _End) -> Any:
    kind = type(stream)
    if hasattr(kind, "__next__") or hasattr(kind, "__anext__"):
        return TracedStream(stream, end)
    return TracedStreamManager(stream, end)


def _snapshot(stream: Any) -> Any:
    """The reply a stream helper accumulated, or ``None``."""
    for name in _SNAPSHOTS:
        if hasattr(type(stream), name):
            try:
                return getattr(stream, name)
            except Exception:  # nothing arrived yet (Anthropic's property asserts there is a snapshot)
                return None
    return None


class _End:
    """The model call of one returned stream, ended once by whichever of its proxies sees the end."""

    __slots__ = ("ended", "invocation")

    def __init__(self, invocation: Invocation) -> None:
        self.invocation = invocation
        self.ended = False

    def item(self, chunk: Any) -> None:
        self.invocation.on_item(chunk)

    @failsafe(default=None)
    def finish(self, stream: Any, exhausted: bool) -> None:
        """The stream was read to its end (``exhausted``), or left before it."""
        if self.ended:
            return
        self.ended = True
        snapshot = _snapshot(stream)
        if exhausted or self._said_done(snapshot):  # left after the model said why it stopped: complete
            self.invocation.stop(snapshot)
        else:
            self.invocation.close(result=snapshot)

    def _said_done(self, snapshot: Any) -> bool:
        if snapshot is not None:
            reply = normalize(snapshot)
            return reply is not None and reply.finish_reason is not None
        stream = self.invocation.stream
        return stream is not None and stream.reply.finish_reason is not None

    @failsafe(default=None)
    def fail(self, stream: Any, exc: BaseException) -> None:
        if self.ended:
            return
        self.ended = True
        self.invocation.fail(exc, result=_snapshot(stream))


class TracedStream(wrapt.ObjectProxy):
    """A returned stream, sync or async: each chunk read through it is recorded."""

    def __init__(self, stream: Any, end: _End) -> None:
        super().__init__(stream)
        self._self_end = end

    def __iter__(self) -> TracedStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self.__wrapped__)
        except StopIteration:
            self._self_end.finish(self.__wrapped__, True)
            raise
        except BaseException as exc:
            self._self_end.fail(self.__wrapped__, exc)
            raise
        self._self_end.item(chunk)
        return chunk

    def __aiter__(self) -> TracedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_end.finish(self.__wrapped__, True)
            raise
        except BaseException as exc:
            self._self_end.fail(self.__wrapped__, exc)
            raise
        self._self_end.item(chunk)
        return chunk

    def close(self) -> Any:
        """Sync streams and generators close at once; OpenAI's and Anthropic's async streams return a
        coroutine: the call ends when it is awaited."""
        closed = self.__wrapped__.close()
        if inspect.isawaitable(closed):
            return self._self_after(closed)
        self._self_end.finish(self.__wrapped__, False)
        return closed

    async def aclose(self) -> Any:
        closed = await self.__wrapped__.aclose()
        self._self_end.finish(self.__wrapped__, False)
        return closed

    async def _self_after(self, closed: Any) -> Any:
        result = await closed
        self._self_end.finish(self.__wrapped__, False)
        return result

    def __enter__(self) -> Any:
        entered = self.__wrapped__.__enter__()
        return self if entered is self.__wrapped__ else entered

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_end.finish(self.__wrapped__, False)

    async def __aenter__(self) -> Any:
        entered = await self.__wrapped__.__aenter__()
        return self if entered is self.__wrapped__ else entered

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_end.finish(self.__wrapped__, False)

    def __del__(self) -> None:  # left unread and unclosed: the call still ends
        self._self_end.finish(self.__wrapped__, False)


class TracedStreamManager(wrapt.ObjectProxy):
    """A returned context manager that opens the stream (``messages.stream(...)``): the stream it opens is
    traced, and the call ends at the latest when it exits."""

    def __init__(self, manager: Any, end: _End) -> None:
        super().__init__(manager)
        self._self_end = end
        self._self_stream: Any = None

    def _self_opened(self, stream: Any) -> Any:
        self._self_stream = stream
        try:
            return TracedStream(stream, self._self_end) if is_stream(stream) else stream
        except Exception as exc:
            log_once("orchestrace.returned.TracedStreamManager", exc)
            return stream

    def __enter__(self) -> Any:
        return self._self_opened(self.__wrapped__.__enter__())

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_end.finish(self._self_stream, False)

    async def __aenter__(self) -> Any:
        return self._self_opened(await self.__wrapped__.__aenter__())

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_end.finish(self._self_stream, False)

    def __del__(self) -> None:
        self._self_end.finish(self._self_stream, False)
