"""Instrumentor of the Anthropic SDK: messages.

Wraps ``messages.create`` (sync and async, ``stream=True`` included),
``messages.parse``, and the ``messages.stream(...)`` helper (sync and async
context managers, which send their request themselves rather than through
``create``); the same of ``beta.messages``. Each call is a GenAI client span
``chat {model}`` carrying the context annotation.

Reported input (SPEC section 4): ``input_tokens + cache_creation_input_tokens
+ cache_read_input_tokens``; a stream reports it in ``message_start`` (and,
with newer API versions, again in ``message_delta``), so even a stream closed
early has its reported input.

Recent ``anthropic`` releases emit their own span per API call
(``anthropic.messages.create``, scope ``com.anthropic.sdk.python``); ours is
made current while the SDK sends, so theirs nests under it.
"""

from __future__ import annotations

import logging
from typing import Any, Collection

from ._wrappers import ResponseInfo, Telemetry, request_body, start_call, usage_from

_log = logging.getLogger("ctxscope.instrumentation")

PROVIDER = "anthropic"
API_MESSAGES = "anthropic.messages"

_INSTRUMENTS = ("anthropic >= 0.40",)

# parse() posts itself rather than calling create(); beta.messages is the same API
# with beta features (what agent harnesses such as Claude Code call).
_CREATE_TARGETS = (
    ("anthropic.resources.messages", "Messages.create", False),
    ("anthropic.resources.messages", "AsyncMessages.create", True),
    ("anthropic.resources.messages", "Messages.parse", False),
    ("anthropic.resources.messages", "AsyncMessages.parse", True),
    ("anthropic.resources.beta.messages", "Messages.create", False),
    ("anthropic.resources.beta.messages", "AsyncMessages.create", True),
    ("anthropic.resources.beta.messages", "Messages.parse", False),
    ("anthropic.resources.beta.messages", "AsyncMessages.parse", True),
)
_HELPER_TARGETS = (
    ("anthropic.resources.messages", "Messages.stream", False),
    ("anthropic.resources.messages", "AsyncMessages.stream", True),
    ("anthropic.resources.beta.messages", "Messages.stream", False),
    ("anthropic.resources.beta.messages", "AsyncMessages.stream", True),
)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def message_usage(usage: Any) -> Any:
    uncached = _int(_get(usage, "input_tokens"))
    write = _int(_get(usage, "cache_creation_input_tokens"))
    read = _int(_get(usage, "cache_read_input_tokens"))
    reported = None if uncached is None else uncached + (write or 0) + (read or 0)
    return usage_from(input_tokens=uncached, output_tokens=_get(usage, "output_tokens"),
                      cache_read=read, cache_creation=write, reported_input=reported)


def message_info(message: Any) -> ResponseInfo:
    info = ResponseInfo(response_model=_get(message, "model"), response_id=_get(message, "id"))
    reason = _get(message, "stop_reason")
    if reason:
        info.finish_reasons = [str(reason)]
    usage = _get(message, "usage")
    if usage is not None:
        info.usage = message_usage(usage)
    return info


class MessageStreamState:
    """Raw stream events: ``message_start`` (id, model, input usage), ``message_delta`` (stop, output)."""

    def __init__(self) -> None:
        self._info = ResponseInfo()
        self._usage: dict[str, Any] = {}

    def observe(self, event: Any) -> None:
        kind = _get(event, "type")
        if kind == "message_start":
            message = _get(event, "message")
            self._info.response_id = _get(message, "id")
            self._info.response_model = _get(message, "model")
            self._merge(_get(message, "usage"))
        elif kind == "message_delta":
            reason = _get(_get(event, "delta"), "stop_reason")
            if reason:
                self._info.finish_reasons = [str(reason)]
            self._merge(_get(event, "usage"))

    def _merge(self, usage: Any) -> None:
        # message_delta usage is cumulative; a field it leaves out keeps its start value.
        for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
            value = _int(_get(usage, name))
            if value is not None:
                self._usage[name] = value

    def info(self) -> ResponseInfo:
        if self._usage:
            self._info.usage = message_usage(self._usage)
        return self._info


class HelperStreamState(MessageStreamState):
    """The ``messages.stream()`` helper: its own accumulated message, where it has one."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream

    def info(self) -> ResponseInfo:
        getter = getattr(self._stream, "_current_snapshot_or_none", None)
        snapshot = getter() if callable(getter) else getattr(self._stream, "current_message_snapshot", None)
        if snapshot is not None:
            return message_info(snapshot)
        return super().info()


# ---------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------

def _begin(telemetry: Telemetry, kwargs: dict[str, Any]) -> Any:
    try:
        return start_call(telemetry, provider=PROVIDER, api=API_MESSAGES, body=request_body(kwargs))
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not start the anthropic call", exc_info=True)
        return None


def _after(call: Any, result: Any) -> Any:
    try:
        import anthropic
        from ._streams import AsyncStream, SyncStream

        if isinstance(result, anthropic.Stream):
            return SyncStream(result, call, MessageStreamState())
        if isinstance(result, anthropic.AsyncStream):
            return AsyncStream(result, call, MessageStreamState())
        info = None
        try:
            info = message_info(result)
        except Exception:  # noqa: BLE001
            _log.debug("ctxscope: no usage in an anthropic result of type %s", type(result).__name__)
        call.finish(info)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not finish the anthropic call", exc_info=True)
        if not call.ended:
            call.finish(None)
    return result


def _sync_create(telemetry: Telemetry) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = _begin(telemetry, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = call.activate()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call.fail(error)
            raise
        finally:
            call.deactivate(token)
        return _after(call, result)

    return wrapper


def _async_create(telemetry: Telemetry) -> Any:
    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = _begin(telemetry, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        token = call.activate()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            call.fail(error)
            raise
        finally:
            call.deactivate(token)
        return _after(call, result)

    return wrapper


def _helper(telemetry: Telemetry, is_async: bool) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        # The body is taken now: the manager sends it when entered.
        try:
            body = request_body(kwargs)
        except Exception:  # noqa: BLE001
            body = None
        manager = wrapped(*args, **kwargs)
        if body is None:
            return manager
        try:
            from ._streams import AsyncStream, ManagerProxy, SyncStream

            proxy_cls = AsyncStream if is_async else SyncStream

            def wrap(stream: Any, call: Any) -> Any:
                return proxy_cls(stream, call, HelperStreamState(stream))

            return ManagerProxy(manager, start=lambda: _begin(telemetry, dict(body)), wrap=wrap)
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not wrap messages.stream", exc_info=True)
            return manager

    return wrapper


# ---------------------------------------------------------------------------
# The instrumentor
# ---------------------------------------------------------------------------

try:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - the "anthropic" extra brings it
    BaseInstrumentor = object  # type: ignore[assignment,misc]


class AnthropicInstrumentor(BaseInstrumentor):  # type: ignore[misc,valid-type]
    """Context spans for ``anthropic`` messages."""

    _telemetry: Telemetry | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        from wrapt import wrap_function_wrapper

        from ._wrappers import install_processor

        tracer_provider = kwargs.get("tracer_provider")
        install_processor(tracer_provider, kwargs.get("meter_provider"))
        # ``tracker``: a Tracker of one's own (tests, a tokenizer choice); default the process-wide one.
        telemetry = Telemetry(tracer_provider, kwargs.get("tracker"))
        type(self)._telemetry = telemetry
        for module, name, is_async in _CREATE_TARGETS:
            try:
                wrap_function_wrapper(module, name, (_async_create if is_async else _sync_create)(telemetry))
            except (AttributeError, ImportError):  # an SDK version without this method
                _log.debug("ctxscope: %s.%s not found; not instrumented", module, name)
        for module, name, is_async in _HELPER_TARGETS:
            try:
                wrap_function_wrapper(module, name, _helper(telemetry, is_async))
            except (AttributeError, ImportError):
                _log.debug("ctxscope: %s.%s not found; helper not instrumented", module, name)

    def _uninstrument(self, **kwargs: Any) -> None:
        from ._wrappers import unwrap_all

        unwrap_all(_CREATE_TARGETS, _HELPER_TARGETS)
        if type(self)._telemetry is not None:
            type(self)._telemetry.close()
            type(self)._telemetry = None
