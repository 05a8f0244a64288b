"""OpenAI Responses (``POST /v1/responses``).

Reported input (SPEC section 4): ``usage.input_tokens``, which includes the
cached part (``input_tokens_details.cached_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxscope.core import classify
from ctxscope.core.observation import Usage
from ctxscope.core.payload import ENCRYPTED_BYTES_PER_TOKEN, compact_json
from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import b64_len_tokens as _b64_len_tokens
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import plain as _plain

from ctxscope.core.apis import _parts as parts
from ctxscope.core.apis._base import WireFormat, field
from ctxscope.core.apis._builder import Builder, content, listed, role_part
from ctxscope.core.apis._text import content_text, system_and_first_user
from ctxscope.core.apis.openai_chat import input_usage

ID = "openai.responses"
PROVIDER = "openai"


def _looks_like(body: Mapping[str, Any]) -> bool | None:
    # Responses bodies have ``input`` (or only ``instructions``) where the others have ``messages``.
    if "messages" in body:
        return False
    return True if ("input" in body or "instructions" in body) else None


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    value = body.get("input")
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    return value if isinstance(value, list) else ()


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    return system_and_first_user([content_text(body.get("instructions"))], _messages(body))


def _body_fits(body: Mapping[str, Any]) -> bool:
    value = body.get("input")
    return isinstance(body.get("model"), str) and (isinstance(value, (str, list)) or "instructions" in body)


def _provider_conversation(body: Mapping[str, Any]) -> str | None:
    # ``conversation``: the id, or ``{"id": ...}``.
    conversation = body.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    return conversation if isinstance(conversation, str) and conversation else None


def _previous_response(body: Mapping[str, Any]) -> str | None:
    previous = body.get("previous_response_id")
    return previous if isinstance(previous, str) else None


def _stored_context(body: Mapping[str, Any]) -> bool:
    return bool(body.get("previous_response_id") or body.get("conversation"))


def usage(value: Any) -> Usage | None:
    if value is None or field(value, "input_tokens") is None:
        return None
    return input_usage(value, "input_tokens", "output_tokens")


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

def _conversation(body: Mapping[str, Any]) -> list[Any]:
    value = _get(body, "input")
    if isinstance(value, str):
        return [value]  # one user message (message() reads a string item as one)
    return listed(body, "input")


def _head(b: Builder, body: Mapping[str, Any]) -> None:
    """Instructions (a string, or input items) and the tool definitions."""
    instructions = _get(body, "instructions")
    if isinstance(instructions, str):
        b.text(instructions, "system", "system", source_kind="system")
    elif instructions is not None:
        for item in _as_list(instructions) or ():
            message(b, item)
    b.tools(_get(body, "tools"))


def message(b: Builder, item: Any) -> None:
    """One input item: a message, a call or its output, reasoning, a compaction, an MCP listing..."""
    if isinstance(item, str):
        b.text(item, "user", "prompts/text")
        return
    kind = _get(item, "type")
    role = _get(item, "role")
    if kind in (None, "message") and role is not None:
        content(b, str(role), _get(item, "content"))
    elif kind in ("function_call", "custom_tool_call"):
        args = _get(item, "arguments") if kind == "function_call" else _get(item, "input")
        b.call(_get(item, "call_id") or _get(item, "id"), _get(item, "name"), args)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        b.result(_get(item, "call_id"), _get(item, "output"))
    elif kind == "reasoning":
        texts = [_get(s, "text") or "" for s in _as_list(_get(item, "summary")) or ()]
        texts += [_get(c, "text") or "" for c in _as_list(_get(item, "content")) or ()]
        b.add("assistant/thinking", "\n".join(t for t in texts if t), role="assistant",
              source_kind="thinking")
    elif kind in ("compaction", "compaction_summary"):
        data = _get(item, "encrypted_content")
        b.add("summaries", "", role="assistant", content_key=data or "",
              fixed_tokens=_b64_len_tokens(data, ENCRYPTED_BYTES_PER_TOKEN), source_kind="summary")
    elif kind == "mcp_list_tools":
        server = str(_get(item, "server_label") or "mcp")
        for tool in _as_list(_get(item, "tools")) or ():
            name = str(_get(tool, "name") or "tool")
            b.add(classify.tool_part(name, server), compact_json(tool), role="tool-definition",
                  base=f"tool:{server}/{name}", label=name, source_kind="tool_definition")
    elif kind == "mcp_call":
        cid = _get(item, "id")
        b.call(cid, _get(item, "name"), _get(item, "arguments"))
        if _get(item, "output") is not None or _get(item, "error") is not None:
            b.result(cid, _get(item, "output") or _get(item, "error"))
    elif kind == "item_reference":
        # A stored item the provider expands: its content is not in the body.
        b.add("messages", "", role="reference", base=f"ref:{_get(item, 'id')}", source_kind="item_reference")
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        b.result(_get(item, "call_id") or _get(item, "id"), _get(item, "output"),
                 name=kind[: -len("_call_output")])
    elif isinstance(kind, str) and kind.endswith("_call"):
        # Hosted and local tool calls (web search, file search, computer, shell...).
        name = kind[: -len("_call")]
        value = {k: v for k, v in (_plain(item) or {}).items()
                 if k not in ("type", "id", "call_id", "status")}
        cid = _get(item, "call_id") or _get(item, "id")
        b.call(cid, name, value.get("action", value))
    else:
        b.structured(role_part(str(role or "assistant")), str(role or "assistant"), item,
                     source_kind=str(kind or "unknown"))


# ---------------------------------------------------------------------------
# Content capture (opt-in, SPEC section 7): the GenAI conventions' parts
# ---------------------------------------------------------------------------

def content_message(item: Any) -> parts.Message | None:
    """One input or output item as a message of parts (the output side reads its non-message items so)."""
    kind = _get(item, "type")
    if kind == "function_call":
        return {"role": "assistant", "parts": [parts.call(_get(item, "call_id"), _get(item, "name"),
                                                          _get(item, "arguments"))]}
    if kind == "function_call_output":
        return {"role": "tool", "parts": [parts.response(_get(item, "call_id"), _get(item, "output"))]}
    if kind == "reasoning":
        summary = "".join(str(_get(s, "text") or "") for s in parts.listed(_get(item, "summary")))
        return {"role": "assistant", "parts": [{"type": "reasoning", "content": summary}]}
    role = _get(item, "role")
    if role is not None:  # a message, typed or not
        return {"role": str(role), "parts": parts.openai_parts(_get(item, "content"))}
    return {"role": "user", "parts": [{"type": str(kind or "unknown")}]}


def input_content(body: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(system, messages, tools): the instructions, the input items, the tool definitions."""
    given = body.get("input")
    if isinstance(given, str):
        messages: list[Any] = [{"role": "user", "parts": [parts.text(given)]}]
    else:
        messages = [m for m in (content_message(item) for item in parts.listed(given)) if m is not None]
    return (parts.system(body.get("instructions"), parts.openai_parts), messages,
            parts.listed(body.get("tools")))


FORMAT = WireFormat(id=ID, provider=PROVIDER, url_suffixes=("/responses",), looks_like=_looks_like,
                    messages=_messages, session_seed=_seed, usage=usage,
                    conversation=_conversation, message=message, head=_head,
                    conversation_field="input", instructions_field="instructions", typed_items=True,
                    body_fits=_body_fits, input_content=input_content,
                    server_state=True, provider_conversation=_provider_conversation,
                    previous_response=_previous_response, stored_context=_stored_context)
