"""Anthropic Messages (``POST /v1/messages``), Claude Code transcripts' usage included.

Reported input (SPEC section 4): ``input_tokens + cache_creation_input_tokens
+ cache_read_input_tokens``. A usage with ``iterations`` (server-side
compaction, a server-tool loop, an advisor: one entry per sampling) reports
the context the model saw in its first ``message`` iteration: the top-level
fields sum several samplings and leave a compaction's out, and a compaction
iteration's input is the context before it was compacted.

Provider-side context management: a ``compaction`` iteration (or a
``compaction`` content block in the response) means the server compacted the
context during the call (:func:`compacted`); ``context_management.applied_edits``
lists what context editing cleared before the model saw the prompt, each with
its ``cleared_input_tokens`` (:func:`cleared`). A request's compaction block
replaces everything before it: the API ignores the blocks and messages that
precede it (:func:`after_compaction`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from ctxscope.core.payload import as_list
from ctxscope.core.payload import get as _get

from ctxscope.core.apis import _parts as parts
from ctxscope.core.apis._base import TEMPLATE_ANTHROPIC, WireFormat, field
from ctxscope.core.apis._builder import Builder, content, listed
from ctxscope.core.apis._text import content_text, system_and_first_user
# The usage readers live apart (a transcript reads them alone); the format's names as before.
from ctxscope.core.apis.anthropic_usage import CLEAR_THINKING_PREFIX as CLEAR_THINKING_PREFIX
from ctxscope.core.apis.anthropic_usage import COMPACTION_BLOCK as COMPACTION_BLOCK
from ctxscope.core.apis.anthropic_usage import cleared as cleared
from ctxscope.core.apis.anthropic_usage import compacted as compacted
from ctxscope.core.apis.anthropic_usage import first_sampling as first_sampling
from ctxscope.core.apis.anthropic_usage import is_summary, usage
from ctxscope.core.apis.openai_chat import CHAT_BLOCKS

ID = "anthropic.messages"
PROVIDER = "anthropic"

# Content blocks only Anthropic has.
ANTHROPIC_BLOCKS = frozenset(("tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                              "server_tool_use", "search_result", "mcp_tool_use", "mcp_tool_result"))


def _looks_like(body: Mapping[str, Any]) -> bool | None:
    for tool in as_list(body.get("tools")) or ():
        # Chat tools nest their name under "function"; Anthropic's carry it on top.
        if field(tool, "input_schema") is not None or field(tool, "name") is not None:
            return True
        if field(tool, "function") is not None:
            return False
    choice = body.get("tool_choice")
    if (isinstance(choice, Mapping) and "function" not in choice
            and choice.get("type") in ("auto", "any", "tool", "none")):
        return True
    if "system" in body or "anthropic_version" in body or "thinking" in body:
        return True
    for message in islice(as_list(body.get("messages")) or (), 200):
        if field(message, "tool_calls") is not None or field(message, "role") in ("tool", "developer", "function"):
            return False
        content = field(message, "content")
        for block in (as_list(content) or ()) if not isinstance(content, str) else ():
            kind = field(block, "type")
            if kind in ANTHROPIC_BLOCKS or (kind == "image" and field(block, "source") is not None):
                return True
            if kind in CHAT_BLOCKS:
                return False
    # Plain text conversations look alike: Anthropic requires max_tokens, and its models are named claude-*.
    model = body.get("model")
    return True if "max_tokens" in body and isinstance(model, str) and model.startswith("claude") else None


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else ()


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    return system_and_first_user([content_text(body.get("system"))], _messages(body))


def _body_fits(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("messages"), list) and isinstance(body.get("model"), str)


def after_compaction(messages: Sequence[Any]) -> Sequence[Any]:
    """The messages the model sees: from the last compaction block on (the API drops what precedes it)."""
    for index in range(len(messages) - 1, -1, -1):
        content = field(messages[index], "content")
        blocks = as_list(content) if not isinstance(content, str) else None
        if not blocks:
            continue
        for position in range(len(blocks) - 1, -1, -1):
            if is_summary(blocks[position]):
                if index == 0 and position == 0:
                    return messages
                first = {"role": field(messages[index], "role"), "content": list(blocks[position:])}
                return [first, *messages[index + 1:]]
    return messages


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

def _conversation(body: Mapping[str, Any]) -> list[Any]:
    """The messages the model sees: from the last compaction block on."""
    return list(after_compaction(listed(body, "messages")))


def message(b: Builder, msg: Any) -> None:
    """One message: its content blocks (text, media, thinking, tool use and results, compaction)."""
    content(b, str(_get(msg, "role") or "user"), _get(msg, "content"))


def _head(b: Builder, body: Mapping[str, Any]) -> None:
    """The system prompt (a string or text blocks), MCP connectors and the tool definitions."""
    system = _get(body, "system")
    if isinstance(system, str):
        b.text(system, "system", "system", source_kind="system")
    elif system is not None:
        for block in as_list(system) or ():
            if isinstance(block, str):
                b.text(block, "system", "system", source_kind="system")
            elif _get(block, "type") == "text":
                b.text(_get(block, "text") or "", "system", "system", source_kind="system")
            else:
                b.structured("system", "system", block, source_kind="system")
    for server in as_list(_get(body, "mcp_servers")) or ():
        # The connector's tools are fetched by the provider: their size is
        # unknown here, so the server is an empty item (calibration shows the rest).
        name = str(_get(server, "name") or "mcp")
        b.add(f"tools/mcp/{name}/server", "", role="tool-definition", base=f"tool:mcp/{name}",
              label=name, source_kind="tool_definition")
    b.tools(_get(body, "tools"))


# ---------------------------------------------------------------------------
# Content capture (opt-in, SPEC section 7): the GenAI conventions' parts
# ---------------------------------------------------------------------------

def input_content(body: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(system, messages, tools): the system prompt, the messages' content blocks, the tool definitions."""
    messages = [{"role": str(_get(m, "role") or "user"), "parts": parts.anthropic_parts(_get(m, "content"))}
                for m in parts.listed(body.get("messages"))]
    return parts.system(body.get("system"), parts.anthropic_parts), messages, parts.listed(body.get("tools"))


FORMAT = WireFormat(id=ID, provider=PROVIDER, url_suffixes=("/messages",), looks_like=_looks_like,
                    messages=_messages, session_seed=_seed, usage=usage,
                    conversation=_conversation, message=message, head=_head, media_rules=PROVIDER,
                    template=TEMPLATE_ANTHROPIC, call_id_prefix="toolu_", context_management=True,
                    body_fits=_body_fits, input_content=input_content)
