"""OpenAI chat and Responses framing: per-message tokens, reply priming, the functions block.

- **OpenAI chat** (``API_OPENAI_CHAT``): OpenAI cookbook "How to count tokens with
  tiktoken": 3 tokens a message plus its role, 1 more for a ``name``, 3 for the
  reply priming (``<|start|>assistant<|message|>``). The functions block
  (:mod:`ctxscope.core.framing.tool_rendering`): hmarr/openai-chat-tokens adds 9
  tokens for the block's framing, 4 fewer when a system message exists, 1 for
  ``tool_choice: none`` and 4 + the name for a named choice. Tool calls and
  tool results carry the harmony header fields (``to=functions.<name>``,
  content type ``json``, the author ``functions.<name>``).
- **Reasoning models** (gpt-5, o-series): the harmony rendering
  (:mod:`ctxscope.core.framing.harmony`) on top: its priming, tool section header
  and hidden system message.
- **OpenAI Responses** (``API_OPENAI_RESPONSES``): the same renderer; the Responses
  API is what harmony mimics (``docs/format.md``, first paragraph). Its input
  items are read as chat-like messages (:func:`responses_message`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxscope.core.apis import API_OPENAI_CHAT, WireFormat
from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import get as _get

from ctxscope.core.framing.body_fields import messages_of, model_of, openai_function_of, rules_of, tools_of
from ctxscope.core.framing.harmony import (
    HARMONY_CALL_HEADER,
    HARMONY_REPLY_PRIMING,
    HARMONY_RESULT_AUTHOR,
    HARMONY_TOOLS_HEADER,
    harmony_hidden_prompt,
    is_harmony,
    response_format_text,
)
from ctxscope.core.framing.parts import CountFn, FramingPart
from ctxscope.core.framing.server_tools import server_tool_kind, server_tool_part
from ctxscope.core.framing.tool_rendering import OPENAI_NAMESPACE_CLOSE, OPENAI_NAMESPACE_OPEN

# OpenAI cookbook, "How to count tokens with tiktoken", num_tokens_from_messages:
# every message is <|start|>{role}<|message|>{content}<|end|>: 3 tokens besides the role.
OPENAI_TOKENS_PER_MESSAGE = 3
# Same source: a ``name`` field costs one token besides its text.
OPENAI_TOKENS_PER_NAME = 1
# Same source: "every reply is primed with <|start|>assistant<|message|>".
OPENAI_REPLY_PRIMING = 3
# hmarr/openai-chat-tokens src/index.ts functionsTokensEstimate: "Add nine per completion".
OPENAI_FUNCTIONS_FRAMING = 9
# Same source: with a system message present the functions reuse it: 4 fewer tokens.
OPENAI_FUNCTIONS_WITH_SYSTEM = -4
# Same source: function_call "none" adds 1; a named call adds 4 + the name's tokens.
OPENAI_TOOL_CHOICE_NONE = 1
OPENAI_TOOL_CHOICE_NAMED = 4


def tool_call_name(call: Any) -> str:
    """The function name of an OpenAI chat tool call (dict or SDK object), '' without one."""
    return str(_get(_get(call, "function"), "name") or "")


def _chat_tool_call_names(messages: Sequence[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in _as_list(_get(message, "tool_calls")) or ():
            names[str(_get(call, "id"))] = tool_call_name(call)
    return names


def _choice_parts(tool_choice: Any, count: CountFn) -> list[FramingPart]:
    if tool_choice == "none":
        return [FramingPart("tool-choice", OPENAI_TOOL_CHOICE_NONE)]
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function") or tool_choice
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if name:
            return [FramingPart("tool-choice", OPENAI_TOOL_CHOICE_NAMED + count(str(name)))]
    return []


def openai_message_framing(message: Any, count: CountFn, names: dict[str, str], *,
                           register: bool = False) -> tuple[int, str, tuple[str, ...]]:
    """One OpenAI message's framing: its tokens (3 + role, +1 for a name, call headers, result
    author), its role, and (with ``register``) the ids of its tool calls.

    ``names`` (tool call id -> name) names a tool result; with ``register`` the
    message's own calls are added to it first (the incremental cache builds it
    message by message; :func:`openai_framing` passes the names of the whole request).
    """
    role = str(_get(message, "role") or "user")
    tokens = OPENAI_TOKENS_PER_MESSAGE + count(role)
    if _get(message, "name"):
        tokens += OPENAI_TOKENS_PER_NAME
    call_ids: list[str] = []
    for call in _as_list(_get(message, "tool_calls")) or ():
        name = tool_call_name(call)
        if register:
            call_id = str(_get(call, "id"))
            call_ids.append(call_id)
            names[call_id] = name
        # The call's item is its arguments (ctxscope.core.items): the header holds the name.
        tokens += count(HARMONY_CALL_HEADER.format(name=name))
    if role == "tool":
        name = names.get(str(_get(message, "tool_call_id")), "")
        tokens += count(HARMONY_RESULT_AUTHOR.format(name=name)) - count(role)
    return tokens, role, tuple(call_ids)


def openai_framing(body: Mapping[str, Any], count: CountFn, *, model: str | None = None,
                   api: str = API_OPENAI_CHAT) -> list[FramingPart]:
    """Framing of an OpenAI chat or Responses request, in the model's tokens."""
    model = model_of(body, model)
    wire = rules_of(api)
    if wire.typed_items:
        messages = _typed_messages(body, wire)
    else:
        messages = messages_of(body)
    functions = [f for f in (openai_function_of(t) for t in tools_of(body)) if f is not None]
    parts: list[FramingPart] = []

    per_message = 0
    has_system = False
    call_names = _chat_tool_call_names(messages)
    for message in messages:
        tokens, role, _ = openai_message_framing(message, count, call_names)
        has_system = has_system or role in ("system", "developer")
        per_message += tokens
    parts.append(FramingPart("messages", per_message))
    harmony = is_harmony(model)
    parts.append(FramingPart("priming", HARMONY_REPLY_PRIMING if harmony else OPENAI_REPLY_PRIMING))

    if functions:
        block = count(OPENAI_NAMESPACE_OPEN) + count(OPENAI_NAMESPACE_CLOSE)
        if harmony:
            block += count(HARMONY_TOOLS_HEADER)
        block += OPENAI_FUNCTIONS_FRAMING
        if has_system:
            block += OPENAI_FUNCTIONS_WITH_SYSTEM
        parts.append(FramingPart("functions", block))
        parts.extend(_choice_parts(body.get("tool_choice"), count))
    response_format = response_format_text(body)
    if response_format:
        parts.append(FramingPart("response-format", count(response_format)))
    if harmony and functions:
        parts.append(FramingPart("hidden-prompt", harmony_hidden_prompt(count, has_system=has_system)))
    for tool in tools_of(body):
        if openai_function_of(tool) is None:
            parts.append(FramingPart("server:" + server_tool_kind(tool), 0,
                                     part=server_tool_part(tool), learned=True))
    return parts


def _typed_messages(body: Mapping[str, Any], wire: WireFormat) -> list[Mapping[str, Any]]:
    """Typed input items (Responses ``input``) as chat-like messages: role per item, calls and outputs."""
    out: list[Mapping[str, Any]] = []
    if wire.instructions_field and body.get(wire.instructions_field):
        out.append({"role": "developer"})
    items = body.get(wire.conversation_field)
    if isinstance(items, str):
        return out + [{"role": "user"}]
    for item in _as_list(items) or ():
        message = responses_message(item)
        if message is not None:
            out.append(message)
    return out


def responses_message(item: Any) -> Mapping[str, Any] | None:
    """One Responses input item as the chat-like message framing counts (None: no message of its own).

    Only what framing reads is kept: the role, a call's id and name, a result's call id.
    """
    kind = _get(item, "type") or "message"
    if kind == "function_call":
        return {"role": "assistant", "tool_calls": [
            {"id": _get(item, "call_id"), "function": {"name": _get(item, "name") or ""}}]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": _get(item, "call_id")}
    if kind == "message" or _get(item, "role"):
        return {"role": _get(item, "role") or "user"}
    return None  # reasoning items and the like
