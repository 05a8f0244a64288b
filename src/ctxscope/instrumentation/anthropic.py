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
from typing import Any, Callable, Mapping

from ctxscope.core.apis import anthropic_messages
from ctxscope.core.items import API_ANTHROPIC as API_MESSAGES
from ctxscope.core.payload import get as _get
from ctxscope.instrumentation._content import AnthropicOutput, anthropic_output
from ctxscope.instrumentation._instrumentor import ProviderInstrumentor, begin, create_targets, helper_targets
from ctxscope.instrumentation._wrappers import Api, ResponseInfo, Telemetry, active_call, request_body, usage_from

_log = logging.getLogger("ctxscope.instrumentation")

PROVIDER = "anthropic"
# Content blocks of a run at the provider: a server tool (web search, web fetch,
# code execution) or a tool of an MCP server the API connects to (mcp_servers).
SERVER_RUN_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_MODULES = ("anthropic.resources.messages", "anthropic.resources.beta.messages")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def server_tool_requests(server_tool_use: Any) -> int | None:
    """The sum of ``usage.server_tool_use``'s counters (web_search_requests, web_fetch_requests, ...).

    None when the usage has no ``server_tool_use`` (unknown, not zero); every
    numeric field is summed, so a counter added by a later API version counts too.
    """
    if server_tool_use is None:
        return None
    if isinstance(server_tool_use, Mapping):
        fields = server_tool_use
    else:
        dump = getattr(server_tool_use, "model_dump", None)  # the SDK's pydantic ServerToolUsage
        fields = dump() if callable(dump) else vars(server_tool_use)
    return sum(v for v in fields.values() if isinstance(v, int) and not isinstance(v, bool))


def _server_calls(requests: int | None, blocks: int) -> int | None:
    # Code execution and MCP connector runs are blocks that usage.server_tool_use
    # does not count: the larger of the two, so neither kind of run is missed.
    if requests is None:
        return blocks or None
    return max(requests, blocks)


def message_usage(usage: Any, server_blocks: int = 0) -> Any:
    calls = _server_calls(server_tool_requests(_get(usage, "server_tool_use")), server_blocks)
    # A usage without input (a stream cut before message_start) still has its output and server runs.
    return (anthropic_messages.usage(usage, calls)
            or usage_from(output_tokens=_get(usage, "output_tokens"), server_tool_calls=calls))


def _server_blocks(content: Any) -> int:
    return sum(1 for block in content or () if _get(block, "type") in SERVER_RUN_BLOCKS)


def message_info(message: Any) -> ResponseInfo:
    info = ResponseInfo(response_model=_get(message, "model"), response_id=_get(message, "id"))
    reason = _get(message, "stop_reason")
    if reason:
        info.finish_reasons = [str(reason)]
    usage = _get(message, "usage")
    content = _get(message, "content")
    if usage is not None:
        info.usage = message_usage(usage, _server_blocks(content))
    _context_management(info.usage, anthropic_messages.compacted(usage, content),
                        _get(message, "context_management"))
    return info


def _context_management(usage: Any, compacted: bool, context_management: Any) -> None:
    """What the server did to the context during the call (ctxscope.core.apis.anthropic_messages)."""
    usage.provider_compaction = usage.provider_compaction or compacted
    edits = anthropic_messages.cleared(context_management)
    if edits:
        usage.cleared = edits


class MessageStreamState:
    """Raw stream events: ``message_start`` (id, model, input usage), ``message_delta`` (stop, output)."""

    def __init__(self, capture: bool = False) -> None:
        self._info = ResponseInfo()
        self._usage: dict[str, Any] = {}
        self._server_blocks = 0
        self._compacted = False
        self._context_management: Any = None
        self._output = AnthropicOutput() if capture else None

    def observe(self, event: Any) -> None:
        if self._output is not None:
            self._output.observe(event)
        kind = _get(event, "type")
        if kind == "message_start":
            message = _get(event, "message")
            self._info.response_id = _get(message, "id")
            self._info.response_model = _get(message, "model")
            self._merge(_get(message, "usage"))
            self._context_management = _get(message, "context_management") or self._context_management
        elif kind == "message_delta":
            self._context_management = _get(event, "context_management") or self._context_management
            reason = _get(_get(event, "delta"), "stop_reason")
            if reason:
                self._info.finish_reasons = [str(reason)]
            self._merge(_get(event, "usage"))
        elif kind == "content_block_start":
            block_type = _get(_get(event, "content_block"), "type")
            if block_type in SERVER_RUN_BLOCKS:
                self._server_blocks += 1
            elif block_type == anthropic_messages.COMPACTION_BLOCK:
                self._compacted = True

    def _merge(self, usage: Any) -> None:
        # message_delta usage is cumulative; a field it leaves out keeps its start value.
        for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
            value = _int(_get(usage, name))
            if value is not None:
                self._usage[name] = value
        server = _get(usage, "server_tool_use")
        if server is not None:
            self._usage["server_tool_use"] = server
        iterations = _get(usage, "iterations")
        if iterations:  # the final message_delta's breakdown (see ctxscope.core.apis.anthropic_messages.first_sampling)
            self._usage["iterations"] = iterations

    def info(self) -> ResponseInfo:
        if self._usage:
            self._info.usage = message_usage(self._usage, self._server_blocks)
        _context_management(self._info.usage, self._compacted, self._context_management)
        if self._output is not None:
            self._info.output_messages = self._output.messages()
        return self._info


class HelperStreamState(MessageStreamState):
    """The ``messages.stream()`` helper: its own accumulated message, where it has one."""

    def __init__(self, stream: Any, capture: bool = False) -> None:
        super().__init__()
        self._stream = stream
        self._capture = capture

    def info(self) -> ResponseInfo:
        getter = getattr(self._stream, "_current_snapshot_or_none", None)
        snapshot = getter() if callable(getter) else getattr(self._stream, "current_message_snapshot", None)
        if snapshot is None:
            return super().info()
        info = message_info(snapshot)
        if self._capture:
            info.output_messages = anthropic_output(snapshot)
        return info


def _stream_classes() -> tuple[type, type]:
    import anthropic

    return anthropic.Stream, anthropic.AsyncStream


MESSAGES = Api(API_MESSAGES, PROVIDER, _stream_classes, message_info, MessageStreamState,
               lambda message, _: anthropic_output(message))


def _helper(telemetry: Telemetry, is_async: bool) -> Callable[..., Any]:
    """``messages.stream(...)`` sends its request itself: the manager opens the call when entered."""
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
            from ctxscope.instrumentation._streams import AsyncStream, ManagerProxy, SyncStream

            proxy_cls = AsyncStream if is_async else SyncStream

            def wrap(stream: Any, call: Any) -> Any:
                return proxy_cls(stream, call, HelperStreamState(stream, call.captures_content))

            return ManagerProxy(manager, start=lambda: begin(telemetry, MESSAGES, dict(body), instance), wrap=wrap)
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not wrap messages.stream", exc_info=True)
            return manager

    return wrapper


class AnthropicInstrumentor(ProviderInstrumentor):
    """Context spans for ``anthropic`` messages."""

    _instruments = ("anthropic >= 0.40",)
    # parse() posts itself rather than calling create(); beta.messages is the same API
    # with beta features (what agent harnesses such as Claude Code call).
    _create_targets = sum((create_targets(module, "Messages", ("create", "parse"), MESSAGES)
                           for module in _MODULES), ())
    _helper_targets = sum((helper_targets(module, "Messages") for module in _MODULES), ())

    def _helper_wrapper(self, telemetry: Telemetry, is_async: bool) -> Callable[..., Any]:
        return _helper(telemetry, is_async)

    def _instrument(self, **kwargs: Any) -> None:
        super()._instrument(**kwargs)
        try:
            from wrapt import wrap_function_wrapper

            wrap_function_wrapper(_SDK_CALL_SPAN[0], _SDK_CALL_SPAN[1], _one_llm_span)
        except (AttributeError, ImportError):  # an SDK without built-in tracing: nothing to keep apart
            _log.debug("ctxscope: the anthropic SDK has no call span of its own here")

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        try:
            import importlib

            from opentelemetry.instrumentation.utils import unwrap

            unwrap(importlib.import_module(_SDK_CALL_SPAN[0]), _SDK_CALL_SPAN[1])
        except Exception:  # noqa: BLE001 - not wrapped
            pass


# Recent anthropic SDKs make a CLIENT span of their own per call (scope com.anthropic.sdk.python,
# gen_ai.operation.name chat), started by this function; its docstring allows None ("the call goes on
# without one"). During a call ctxscope instruments, ctxscope's span is the call's one LLM span.
_SDK_CALL_SPAN = ("anthropic._base_client", "start_api_call_span")


def _one_llm_span(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    call = active_call()
    try:
        ours = call is not None and call.provider == PROVIDER and call.span.is_recording()
    except Exception:  # noqa: BLE001 - let the SDK decide
        ours = False
    if ours:
        return None
    return wrapped(*args, **kwargs)
