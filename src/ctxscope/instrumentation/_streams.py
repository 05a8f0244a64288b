"""Stream proxies: every chunk passes through unchanged, the span ends with the stream.

A proxy (``wrapt.ObjectProxy``) stands for the SDK's stream object: the same
class for ``isinstance``, the same attributes, and each chunk or event it
yields is the very object the SDK produced. It shows each item to a
:class:`StreamState` (which keeps usage, model, ids) and ends the call's span
when the stream is exhausted, closed, left as a context manager, or raises.

The SDKs' streaming helpers (``client.chat.completions.stream(...)``,
``client.responses.stream(...)``, ``client.messages.stream(...)``) return
managers whose ``__enter__`` sends the request; :class:`ManagerProxy` ends
any call still open when the manager exits, since a helper closes its HTTP
response directly, not through the stream object we handed it.

A stream that is never consumed, closed, nor left as a context manager keeps
its span open until the proxy is garbage-collected (then it ends with what
it saw; not at interpreter exit, when the providers may be gone). That is
the same lifetime as the SDK's own HTTP response: close your streams.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import weakref
from typing import Any, Callable, Iterator

import wrapt

from ctxscope.faultlog import log_failure
from ctxscope.instrumentation._wrappers import ModelCall, ResponseInfo, StreamState

_log = logging.getLogger("ctxscope.instrumentation")

# Calls started while a streaming helper's manager is entering: the manager
# proxy ends them at exit if the stream did not.
_helper_calls: contextvars.ContextVar[list[ModelCall] | None] = contextvars.ContextVar(
    "ctxscope_helper_calls", default=None)


def register_helper_call(call: ModelCall) -> None:
    calls = _helper_calls.get()
    if calls is not None:
        calls.append(call)


def _abandoned(call: ModelCall, state: StreamState) -> None:
    """A stream dropped without being consumed or closed: end its span with what it saw."""
    try:
        if not call.ended:
            call.finish(_info(state))
    except Exception:  # noqa: BLE001 - runs from the garbage collector
        pass


def _bind(proxy: Any, call: ModelCall, state: StreamState) -> None:
    """Let the call reach its stream proxy (weakly: no cycle keeps the proxy alive) and end with it."""
    ref = weakref.ref(proxy)

    def finish() -> None:
        live = ref()
        if live is not None:
            live._self_finish()  # noqa: SLF001 - wrapt keeps a proxy's own attributes under _self_
        elif not call.ended:
            call.finish(_info(state))

    def fail(error: BaseException) -> None:
        live = ref()
        if live is not None:
            live._self_fail(error)  # noqa: SLF001 - wrapt keeps a proxy's own attributes under _self_
        elif not call.ended:
            call.fail(error, _info(state))

    call.stream_finish = finish
    call.stream_fail = fail
    finalizer = weakref.finalize(proxy, _abandoned, call, state)
    finalizer.atexit = False  # at exit the providers may be shut down already: nothing to end into


def _observe(state: StreamState, item: Any) -> None:
    try:
        state.observe(item)
    except Exception:  # noqa: BLE001 - ours: the chunk still reaches the caller
        log_failure(_log, "ctxscope: could not read a stream event")


def _info(state: StreamState) -> ResponseInfo | None:
    try:
        return state.info()
    except Exception:  # noqa: BLE001
        log_failure(_log, "ctxscope: could not read the stream's usage")
        return None


class _StreamProxy(wrapt.ObjectProxy):
    """What the sync and async proxies share: the call, the state, ending once."""

    def __init__(self, wrapped: Any, call: ModelCall, state: StreamState) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_state = state
        _bind(self, call, state)

    def _self_finish(self) -> None:
        if not self._self_call.ended:
            self._self_call.finish(_info(self._self_state))

    def _self_fail(self, error: BaseException) -> None:
        if not self._self_call.ended:
            self._self_call.fail(error, _info(self._self_state))

    def _self_next(self, item: Any) -> Any:
        _observe(self._self_state, item)
        return item

    def _self_ended(self, error: BaseException | None) -> None:
        """The stream ran out, was left, or raised: end the call accordingly (once)."""
        if error is None or isinstance(error, (StopIteration, StopAsyncIteration)):
            self._self_finish()
        else:
            self._self_fail(error)


class SyncStream(_StreamProxy):
    """Proxy of a synchronous SDK stream (``openai.Stream``, ``anthropic.Stream``)."""

    def __iter__(self) -> "SyncStream":
        return self

    def __next__(self) -> Any:
        try:
            item = self.__wrapped__.__next__()
        except BaseException as error:
            self._self_ended(error)
            raise
        return self._self_next(item)

    def __enter__(self) -> "SyncStream":
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_ended(exc)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_finish()


class AsyncStream(_StreamProxy):
    """Proxy of an asynchronous SDK stream (``openai.AsyncStream``, ``anthropic.AsyncStream``)."""

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.__wrapped__.__anext__()
        except BaseException as error:
            self._self_ended(error)
            raise
        return self._self_next(item)

    async def __aenter__(self) -> "AsyncStream":
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_ended(exc)

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_finish()

    async def aclose(self) -> None:
        try:
            closer = getattr(self.__wrapped__, "aclose", None) or self.__wrapped__.close
            await closer()
        finally:
            self._self_finish()


class ManagerProxy(wrapt.ObjectProxy):
    """Proxy of a streaming helper's manager (sync and async).

    ``start`` (optional) opens a call when the manager is entered and
    ``wrap`` turns the helper's stream into a proxy bound to it (Anthropic's
    helper sends the request itself, not through ``create``). Without them the
    calls come from the instrumented ``create`` the helper calls, collected
    while entering. At exit, calls still open end with what their streams saw.
    """

    def __init__(self, wrapped: Any, start: Callable[[], ModelCall | None] | None = None,
                 wrap: Callable[[Any, ModelCall], Any] | None = None) -> None:
        super().__init__(wrapped)
        self._self_start = start
        self._self_wrap = wrap
        self._self_calls: list[ModelCall] = []

    @contextlib.contextmanager
    def _self_entering(self) -> Iterator[tuple[list[ModelCall], ModelCall | None]]:
        """Around the manager's enter: collect the calls it starts; open our own if we send it."""
        calls: list[ModelCall] = []
        token = _helper_calls.set(calls)
        own = self._self_start() if self._self_start is not None else None
        # Our call is current while the manager sends (as create's is): the transport layer below
        # then does not measure the same request again, and the SDK's own call span stays out.
        active = own.activate() if own is not None else None
        try:
            yield calls, own
        except BaseException as error:
            if own is not None:
                own.fail(error)
            raise
        finally:
            if own is not None:
                own.deactivate(active)
            _helper_calls.reset(token)

    def _self_entered(self, calls: list[ModelCall], own: ModelCall | None, stream: Any) -> Any:
        self._self_calls = calls + ([own] if own is not None else [])
        if own is not None and self._self_wrap is not None:
            try:
                stream = self._self_wrap(stream, own)
            except Exception:  # noqa: BLE001
                log_failure(_log, "ctxscope: could not wrap the helper's stream")
        return stream

    def _self_exit(self, exc: BaseException | None) -> None:
        for call in self._self_calls:
            if call.ended:
                continue
            # The stream proxy bound to the call knows what the stream saw.
            if exc is not None:
                (call.stream_fail or call.fail)(exc)
            elif call.stream_finish is not None:
                call.stream_finish()
            else:
                call.finish(None)

    def __enter__(self) -> Any:
        with self._self_entering() as (calls, own):
            stream = self.__wrapped__.__enter__()
        return self._self_entered(calls, own, stream)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_exit(exc)

    async def __aenter__(self) -> Any:
        with self._self_entering() as (calls, own):
            stream = await self.__wrapped__.__aenter__()
        return self._self_entered(calls, own, stream)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_exit(exc)
