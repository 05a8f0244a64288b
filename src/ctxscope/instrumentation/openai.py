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
from typing import Any, Callable

from ctxscope.core.apis import openai_chat
from ctxscope.core.items import API_OPENAI_CHAT as API_CHAT
from ctxscope.core.items import API_OPENAI_RESPONSES as API_RESPONSES
from ctxscope.core.payload import get as _get
from ctxscope.instrumentation._content import ChatOutput, chat_output, responses_output
from ctxscope.instrumentation._instrumentor import ProviderInstrumentor, create_targets, create_wrapper, helper_targets
from ctxscope.instrumentation._wrappers import Api, ResponseInfo, Telemetry

_log = logging.getLogger("ctxscope.instrumentation")

PROVIDER = "openai"
_CHAT_MODULE = "openai.resources.chat.completions"
_RESPONSES_MODULE = "openai.resources.responses"


# ---------------------------------------------------------------------------
# Responses -> ResponseInfo
# ---------------------------------------------------------------------------

# Responses output items of tools that run at the provider: a response holding
# one reports the input of the whole run (searches, results), not one prompt.
SERVER_CALL_ITEMS = frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "tool_search_call",
})


def chat_usage(usage: Any) -> Any:
    # Chat completions offer no server tools: a call never runs one.
    return openai_chat.input_usage(usage, "prompt_tokens", "completion_tokens", 0)


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

    def __init__(self, capture: bool = False) -> None:
        self._info = ResponseInfo()
        self._reasons: dict[int, str] = {}
        self._output = ChatOutput() if capture else None

    def observe(self, chunk: Any) -> None:
        if self._output is not None:
            self._output.observe(chunk)
        info = self._info
        info.response_id = info.response_id or _get(chunk, "id")
        info.response_model = info.response_model or _get(chunk, "model")
        for choice in _get(chunk, "choices") or ():
            reason = _get(choice, "finish_reason")
            if reason:
                self._reasons[int(_get(choice, "index") or 0)] = str(reason)
        # Groq sends a stream's usage under x_groq in the last chunk (the OpenAI SDK keeps the extra field).
        usage = _get(chunk, "usage") or _get(_get(chunk, "x_groq"), "usage")
        if usage is not None:
            info.usage = chat_usage(usage)

    def info(self) -> ResponseInfo:
        self._info.finish_reasons = [self._reasons[i] for i in sorted(self._reasons)]
        if self._output is not None:
            self._info.output_messages = self._output.messages()
        return self._info


def server_call_count(output: Any) -> int:
    """Output items of server-run tools (:data:`SERVER_CALL_ITEMS`) in a response's ``output``."""
    return sum(1 for item in output or () if _get(item, "type") in SERVER_CALL_ITEMS)


def responses_usage(usage: Any, output: Any = ()) -> Any:
    return openai_chat.input_usage(usage, "input_tokens", "output_tokens", server_call_count(output))


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
    output = _get(response, "output")
    if usage is not None:
        info.usage = responses_usage(usage, output)
    # Server-side compaction (context_management.compact_threshold) puts a compaction item in the output.
    info.usage.provider_compaction = any(_get(item, "type") == "compaction" for item in output or ())
    return info


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class ResponsesStreamState:
    """Responses events: the response of the created event, then of the terminal event."""

    def __init__(self, capture: bool = False) -> None:
        self._info = ResponseInfo()
        self._capture = capture

    def observe(self, event: Any) -> None:
        kind = _get(event, "type")
        response = _get(event, "response")
        if response is None:
            return
        if kind in _TERMINAL:
            self._info = responses_info(response)
            if self._capture:
                self._info.output_messages = _responses_content(response, self._info)
        else:
            self._info.response_id = self._info.response_id or _get(response, "id")
            self._info.response_model = self._info.response_model or _get(response, "model")

    def info(self) -> ResponseInfo:
        return self._info


def _responses_content(response: Any, info: ResponseInfo) -> list[dict[str, Any]]:
    return responses_output(response, info.finish_reasons[0] if info.finish_reasons else "")


def _stream_classes() -> tuple[type, type]:
    import openai

    return openai.Stream, openai.AsyncStream


CHAT = Api(API_CHAT, PROVIDER, _stream_classes, chat_info, ChatStreamState, lambda r, _: chat_output(r))
RESPONSES = Api(API_RESPONSES, PROVIDER, _stream_classes, responses_info, ResponsesStreamState, _responses_content)
_APIS = {API_CHAT: CHAT, API_RESPONSES: RESPONSES}


def _sync_create(telemetry: Telemetry, api: str) -> Callable[..., Any]:
    """The wrapper of a synchronous create (kept for bench/bench_overhead.py)."""
    return create_wrapper(telemetry, _APIS[api], is_async=False)


def _helper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``.stream(...)`` helpers call the instrumented ``create``; their manager ends the call at exit."""
    manager = wrapped(*args, **kwargs)
    try:
        from ctxscope.instrumentation._streams import ManagerProxy

        return ManagerProxy(manager)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not wrap a streaming helper", exc_info=True)
        return manager


class OpenAIInstrumentor(ProviderInstrumentor):
    """Context spans for ``openai`` chat completions and Responses."""

    _instruments = ("openai >= 1.40",)
    # Structured outputs: parse() posts itself rather than calling create().
    _create_targets = (create_targets(_CHAT_MODULE, "Completions", ("create", "parse"), CHAT)
                       + create_targets(_RESPONSES_MODULE, "Responses", ("create", "parse"), RESPONSES))
    _helper_targets = helper_targets(_CHAT_MODULE, "Completions") + helper_targets(_RESPONSES_MODULE, "Responses")

    def _helper_wrapper(self, telemetry: Telemetry, is_async: bool) -> Callable[..., Any]:
        return _helper
