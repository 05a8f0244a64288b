"""Instrumentor of the OpenAI SDK: chat completions and Responses.

Wraps ``create`` (sync and async, ``stream=True`` included) and ``parse``
of ``chat.completions`` and ``responses``, and the streaming helpers
``chat.completions.stream(...)`` / ``responses.stream(...)`` (which call
``create`` themselves). Each call is a GenAI client span ``chat {model}``
carrying the context annotation (see :mod:`._wrappers`).

Reported input (SPEC section 4): chat ``usage.prompt_tokens``, Responses
``usage.input_tokens`` (both include cached tokens). A chat stream reports
usage only when the caller asked for it (``stream_options={"include_usage":
True}``); ctxscope does not add that option, since it would add a chunk to
the caller's stream, so without it the span has no reported input.
"""

from __future__ import annotations

import logging
from typing import Any, Collection

from ._wrappers import ResponseInfo, Telemetry, request_body, start_call, usage_from

_log = logging.getLogger("ctxscope.instrumentation")

PROVIDER = "openai"
API_CHAT = "openai.chat"
API_RESPONSES = "openai.responses"

_INSTRUMENTS = ("openai >= 1.40",)

# (module, class.method, api) wrapped by the instrumentor.
_CREATE_TARGETS = (
    ("openai.resources.chat.completions", "Completions.create", API_CHAT, False),
    ("openai.resources.chat.completions", "AsyncCompletions.create", API_CHAT, True),
    ("openai.resources.responses", "Responses.create", API_RESPONSES, False),
    ("openai.resources.responses", "AsyncResponses.create", API_RESPONSES, True),
    # Structured outputs: parse() posts itself rather than calling create().
    ("openai.resources.chat.completions", "Completions.parse", API_CHAT, False),
    ("openai.resources.chat.completions", "AsyncCompletions.parse", API_CHAT, True),
    ("openai.resources.responses", "Responses.parse", API_RESPONSES, False),
    ("openai.resources.responses", "AsyncResponses.parse", API_RESPONSES, True),
)
_HELPER_TARGETS = (
    ("openai.resources.chat.completions", "Completions.stream"),
    ("openai.resources.chat.completions", "AsyncCompletions.stream"),
    ("openai.resources.responses", "Responses.stream"),
    ("openai.resources.responses", "AsyncResponses.stream"),
)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


# ---------------------------------------------------------------------------
# Responses -> ResponseInfo
# ---------------------------------------------------------------------------

def chat_usage(usage: Any) -> Any:
    prompt = _get(usage, "prompt_tokens")
    cached = _get(_get(usage, "prompt_tokens_details"), "cached_tokens")
    uncached = prompt - cached if isinstance(prompt, int) and isinstance(cached, int) else prompt
    return usage_from(input_tokens=uncached, output_tokens=_get(usage, "completion_tokens"),
                      cache_read=cached, reported_input=prompt)


def chat_info(completion: Any) -> ResponseInfo:
    info = ResponseInfo(response_model=_get(completion, "model"), response_id=_get(completion, "id"))
    usage = _get(completion, "usage")
    if usage is not None:
        info.usage = chat_usage(usage)
    for choice in _get(completion, "choices") or ():
        reason = _get(choice, "finish_reason")
        if reason:
            info.finish_reasons.append(str(reason))
    return info


class ChatStreamState:
    """Chat chunks: id and model from any chunk, finish reasons per choice, usage from the last."""

    def __init__(self) -> None:
        self._info = ResponseInfo()
        self._reasons: dict[int, str] = {}

    def observe(self, chunk: Any) -> None:
        info = self._info
        info.response_id = info.response_id or _get(chunk, "id")
        info.response_model = info.response_model or _get(chunk, "model")
        for choice in _get(chunk, "choices") or ():
            reason = _get(choice, "finish_reason")
            if reason:
                self._reasons[int(_get(choice, "index") or 0)] = str(reason)
        usage = _get(chunk, "usage")
        if usage is not None:
            info.usage = chat_usage(usage)

    def info(self) -> ResponseInfo:
        self._info.finish_reasons = [self._reasons[i] for i in sorted(self._reasons)]
        return self._info


def responses_usage(usage: Any) -> Any:
    total = _get(usage, "input_tokens")
    cached = _get(_get(usage, "input_tokens_details"), "cached_tokens")
    uncached = total - cached if isinstance(total, int) and isinstance(cached, int) else total
    return usage_from(input_tokens=uncached, output_tokens=_get(usage, "output_tokens"),
                      cache_read=cached, reported_input=total)


def _responses_finish(response: Any) -> list[str]:
    status = _get(response, "status")
    if status == "completed":
        calls = any(_get(item, "type") == "function_call" for item in _get(response, "output") or ())
        return ["tool_calls" if calls else "stop"]
    if status == "incomplete":
        reason = _get(_get(response, "incomplete_details"), "reason")
        return [str(reason or "length")]
    if status == "failed":
        return ["error"]
    return []


def responses_info(response: Any) -> ResponseInfo:
    info = ResponseInfo(response_model=_get(response, "model"), response_id=_get(response, "id"),
                        finish_reasons=_responses_finish(response))
    usage = _get(response, "usage")
    if usage is not None:
        info.usage = responses_usage(usage)
    return info


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class ResponsesStreamState:
    """Responses events: the response of the created event, then of the terminal event."""

    def __init__(self) -> None:
        self._info = ResponseInfo()

    def observe(self, event: Any) -> None:
        kind = _get(event, "type")
        response = _get(event, "response")
        if response is None:
            return
        if kind in _TERMINAL:
            self._info = responses_info(response)
        else:
            self._info.response_id = self._info.response_id or _get(response, "id")
            self._info.response_model = self._info.response_model or _get(response, "model")

    def info(self) -> ResponseInfo:
        return self._info


_STATES = {API_CHAT: ChatStreamState, API_RESPONSES: ResponsesStreamState}
_INFOS = {API_CHAT: chat_info, API_RESPONSES: responses_info}


# ---------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------

def _begin(telemetry: Telemetry, api: str, kwargs: dict[str, Any]) -> Any:
    try:
        from ._streams import register_helper_call

        call = start_call(telemetry, provider=PROVIDER, api=api, body=request_body(kwargs))
        if call is not None:
            register_helper_call(call)
        return call
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not start the %s call", api, exc_info=True)
        return None


def _after(call: Any, api: str, result: Any) -> Any:
    """Wrap a stream in a proxy, or finish the call with the response."""
    try:
        import openai
        from ._streams import AsyncStream, SyncStream

        if isinstance(result, openai.Stream):
            return SyncStream(result, call, _STATES[api]())
        if isinstance(result, openai.AsyncStream):
            return AsyncStream(result, call, _STATES[api]())
        info = None
        try:
            info = _INFOS[api](result)
        except Exception:  # noqa: BLE001 - an unexpected response shape (raw response wrappers)
            _log.debug("ctxscope: no usage in a %s result of type %s", api, type(result).__name__)
        call.finish(info)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not finish the %s call", api, exc_info=True)
        if not call.ended:
            call.finish(None)
    return result


def _sync_create(telemetry: Telemetry, api: str) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = _begin(telemetry, api, kwargs)
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
        return _after(call, api, result)

    return wrapper


def _async_create(telemetry: Telemetry, api: str) -> Any:
    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = _begin(telemetry, api, kwargs)
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
        return _after(call, api, result)

    return wrapper


def _helper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    manager = wrapped(*args, **kwargs)
    try:
        from ._streams import ManagerProxy

        return ManagerProxy(manager)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not wrap a streaming helper", exc_info=True)
        return manager


# ---------------------------------------------------------------------------
# The instrumentor
# ---------------------------------------------------------------------------

try:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - the "openai" extra brings it
    BaseInstrumentor = object  # type: ignore[assignment,misc]


class OpenAIInstrumentor(BaseInstrumentor):  # type: ignore[misc,valid-type]
    """Context spans for ``openai`` chat completions and Responses."""

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
        for module, name, api, is_async in _CREATE_TARGETS:
            factory = _async_create if is_async else _sync_create
            try:
                wrap_function_wrapper(module, name, factory(telemetry, api))
            except (AttributeError, ImportError):  # an SDK version without this method
                _log.debug("ctxscope: %s.%s not found; not instrumented", module, name)
        for module, name in _HELPER_TARGETS:
            try:
                wrap_function_wrapper(module, name, _helper)
            except (AttributeError, ImportError):  # an SDK without the helper
                _log.debug("ctxscope: %s.%s not found; helper not instrumented", module, name)

    def _uninstrument(self, **kwargs: Any) -> None:
        from ._wrappers import unwrap_all

        unwrap_all(_CREATE_TARGETS, _HELPER_TARGETS)
        if type(self)._telemetry is not None:
            type(self)._telemetry.close()
            type(self)._telemetry = None
