"""Anthropic Messages (``POST /v1/messages``), Claude Code transcripts' usage included.

Reported input (SPEC section 4): ``input_tokens + cache_creation_input_tokens
+ cache_read_input_tokens``. A usage with ``iterations`` (server-side
compaction, a server-tool loop, an advisor: one entry per sampling) reports
the context the model saw in its first ``message`` iteration: the top-level
fields sum several samplings and leave a compaction's out, and a compaction
iteration's input is the context before it was compacted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from ..observation import Usage
from ..payload import as_list
from ._base import WireFormat, count, field
from ._text import content_text, system_and_first_user
from .openai_chat import CHAT_BLOCKS

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


def first_sampling(value: Any) -> Any:
    """The usage of the request's own sampling: the first ``message`` entry of ``iterations``, else the usage."""
    iterations = field(value, "iterations")
    if isinstance(iterations, (list, tuple)):
        for entry in iterations:
            if field(entry, "type") == "message" and count(field(entry, "input_tokens")) is not None:
                return entry
    return value


def usage(value: Any, server_tool_calls: int | None = None) -> Usage | None:
    if value is None:
        return None
    sampled = first_sampling(value)
    first_uncached = count(field(sampled, "input_tokens"))
    if first_uncached is None:
        return None
    reported = (first_uncached + (count(field(sampled, "cache_creation_input_tokens")) or 0)
                + (count(field(sampled, "cache_read_input_tokens")) or 0))
    # The other counts are the call's own, as billed: the top-level fields.
    return Usage(input_tokens=count(field(value, "input_tokens")), output_tokens=count(field(value, "output_tokens")),
                 cache_read_input_tokens=count(field(value, "cache_read_input_tokens")),
                 cache_creation_input_tokens=count(field(value, "cache_creation_input_tokens")),
                 reported_input=reported, server_tool_calls=server_tool_calls)


FORMAT = WireFormat(ID, PROVIDER, ("/messages",), _looks_like, _messages, _seed, usage)
