"""OpenAI chat completions (``POST /v1/chat/completions``), and every OpenAI-compatible server.

Reported input (SPEC section 4): ``usage.prompt_tokens``, which includes the
cached part (``prompt_tokens_details.cached_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import plain as _plain

from ctxscope.core.apis import _parts as parts
from ctxscope.core.apis._base import WireFormat, count, field
from ctxscope.core.apis._builder import Builder, content, listed, tool_name
from ctxscope.core.apis._text import system_and_first_user

ID = "openai.chat"
PROVIDER = "openai"

# Content blocks only chat completions has.
CHAT_BLOCKS = frozenset(("image_url", "input_audio", "file", "refusal"))


def _looks_like(body: Mapping[str, Any]) -> bool | None:
    return None  # decided by the registry's shared rule (apis.detect): chat is the default


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else ()


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    return system_and_first_user([], _messages(body))


def _body_fits(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("messages"), list)


def input_usage(usage: Any, input_name: str, output_name: str, server_tool_calls: int | None = None) -> Usage:
    """OpenAI's usage shape: a total input that includes the cached tokens, told apart in ``<input>_details``."""
    total = count(field(usage, input_name))
    cached = count(field(field(usage, input_name + "_details"), "cached_tokens"))
    uncached = total - cached if total is not None and cached is not None and cached <= total else total
    return Usage(input_tokens=uncached, output_tokens=count(field(usage, output_name)),
                 cache_read_input_tokens=cached, reported_input=total, server_tool_calls=server_tool_calls)


def usage(value: Any) -> Usage | None:
    if value is None or field(value, "prompt_tokens") is None:
        return None
    return input_usage(value, "prompt_tokens", "completion_tokens")


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

def _tool_name(tool: Any) -> tuple[str, str | None]:
    """Chat tools nest their name under ``function`` (or ``custom``); the rest as every format."""
    fn = _get(tool, "function")
    if fn is not None:
        return str(_get(fn, "name") or "function"), None
    custom = _get(tool, "custom")
    if custom is not None:
        return str(_get(custom, "name") or "custom"), None
    return tool_name(tool)


def _conversation(body: Mapping[str, Any]) -> list[Any]:
    return listed(body, "messages")


def _head(b: Builder, body: Mapping[str, Any]) -> None:
    """Chat has no system field (the system prompt is a message): the tool definitions."""
    b.tools(_get(body, "tools"), _tool_name)


def message(b: Builder, msg: Any) -> None:
    """One chat message: its content, reasoning, refusal and tool calls; a tool or function result."""
    role = str(_get(msg, "role") or "user")
    if role == "tool":
        b.result(_get(msg, "tool_call_id"), _get(msg, "content"), name=_get(msg, "name"))
        return
    if role == "function":  # legacy function results
        name = _get(msg, "name")
        b.result(None, _get(msg, "content"), name=name)
        return
    if role == "assistant":
        for key in ("reasoning_content", "reasoning"):
            reasoning = _get(msg, key)
            if isinstance(reasoning, str) and reasoning:
                b.add("assistant/thinking", reasoning, role=role, source_kind="thinking")
        for detail in _as_list(_get(msg, "reasoning_details")) or ():
            text = _get(detail, "text") or _get(detail, "summary")
            if isinstance(text, str) and text:
                b.add("assistant/thinking", text, role=role, source_kind="thinking")
        content(b, role, _get(msg, "content"))
        refusal = _get(msg, "refusal")
        if isinstance(refusal, str) and refusal:
            b.text(refusal, role, "assistant/text", source_kind="refusal")
        for call in _as_list(_get(msg, "tool_calls")) or ():
            fn = _get(call, "function")
            if fn is not None:
                b.call(_get(call, "id"), _get(fn, "name"), _get(fn, "arguments"))
            else:
                custom = _get(call, "custom") or call
                b.call(_get(call, "id"), _get(custom, "name"), _get(custom, "input"))
        legacy = _get(msg, "function_call")
        if legacy is not None:
            b.call(None, _get(legacy, "name"), _get(legacy, "arguments"))
        return
    content(b, role, _get(msg, "content"))


# ---------------------------------------------------------------------------
# Content capture (opt-in, SPEC section 7): the GenAI conventions' parts
# ---------------------------------------------------------------------------

def input_content(body: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(system, messages, tools): chat keeps system and developer messages in the history, as openai-v2 does."""
    messages: list[parts.Message] = []
    for msg in parts.listed(body.get("messages")):
        role = str(_get(msg, "role") or "user")
        found: list[parts.Part] = []
        if role == "tool":
            found.append(parts.response(_get(msg, "tool_call_id"), _plain(_get(msg, "content"))))
        else:
            found.extend(parts.openai_parts(_get(msg, "content")))
            for call in parts.listed(_get(msg, "tool_calls")):
                fn = _get(call, "function")
                found.append(parts.call(_get(call, "id"), _get(fn, "name"), _get(fn, "arguments")))
        messages.append({"role": role, "parts": found})
    return [], messages, parts.listed(body.get("tools"))


FORMAT = WireFormat(id=ID, provider=PROVIDER, url_suffixes=("/chat/completions",), looks_like=_looks_like,
                    messages=_messages, session_seed=_seed, usage=usage,
                    conversation=_conversation, message=message, head=_head, body_fits=_body_fits,
                    input_content=input_content)
