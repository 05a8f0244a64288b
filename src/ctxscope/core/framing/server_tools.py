"""Server tools: tools that run at the provider, their hidden part, and the tool-set key that keeps them apart.

A server tool (Anthropic's versioned ``type``, e.g. ``web_search_20250305``; an
OpenAI tool that is not a function) adds a hidden part ``tools/server/<type>``
to the prompt, whose size is Anthropic's published figure where one exists
(the per-tool pages), else learned by :mod:`ctxscope.core.learned_correction`. :func:`tools_key`
marks tool sets with a server tool so self-calibration does not pool them with
the model's other tool sets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ctxscope.core.apis import TEMPLATE_ANTHROPIC, TEMPLATE_OWN

from ctxscope.core.framing.body_fields import openai_function_of, rules_of, tools_of

SERVER_TOOL_PART_PREFIX = "tools/server/"
SERVER_TOOLS_KEY_PREFIX = "s:"  # tools_key of a tool set with a server tool

# Anthropic docs, the per-tool pages: tokens a server or Anthropic-defined tool
# adds besides the tool-use system prompt. Types not listed are learned.
ANTHROPIC_SERVER_TOOL_TOKENS: Mapping[str, int] = {
    "bash": 245,  # "Bash tool": 245 additional input tokens
    "text_editor": 700,  # "Text editor tool": 700 additional input tokens
    "computer": 735,  # "Computer use tool": 735 tokens per tool definition (Claude 4)
}


def is_anthropic_server_tool(tool: Mapping[str, Any]) -> bool:
    """Anthropic-defined tools carry a versioned ``type`` (``web_search_20250305``)."""
    kind = tool.get("type")
    return bool(kind) and kind != "custom"


def server_tool_kind(tool: Mapping[str, Any]) -> str:
    """``web_search_20250305`` -> ``web_search``; OpenAI-compatible ``openrouter:web_search`` -> ``web_search``."""
    kind = str(tool.get("type", "unknown")).rsplit(":", 1)[-1]
    head, _, tail = kind.rpartition("_")
    return head if head and tail.isdigit() else kind


def server_tool_part(tool: Mapping[str, Any]) -> str:
    return SERVER_TOOL_PART_PREFIX + server_tool_kind(tool)


def tools_key(body: Mapping[str, Any]) -> str:
    """A stable key of a request's tool set (names and server tool types), for self-calibration.

    ``-`` without tools; ``s:<digest>`` when a server tool is among them.
    """
    names = []
    for tool in tools_of(body):
        function = openai_function_of(tool)
        if function is not None:
            names.append("fn:" + str(function.get("name", "")))
        elif tool.get("type") in (None, "custom") and "name" in tool:
            names.append("fn:" + str(tool.get("name")))
        else:
            names.append("server:" + str(tool.get("type")))
    if not names:
        return "-"
    digest = hashlib.blake2b("\n".join(sorted(names)).encode(), digest_size=8).hexdigest()
    # Sets with a server tool are marked: their hidden part is their own, so
    # self-calibration does not pool them with the model's other tool sets.
    return (SERVER_TOOLS_KEY_PREFIX + digest) if any(n.startswith("server:") for n in names) else digest


def has_server_tools(body: Mapping[str, Any], api: str) -> bool:
    """Whether a request offers a tool that runs at the provider (its hidden part is unknown)."""
    wire = rules_of(api)
    if wire.template == TEMPLATE_OWN:
        return wire.server_tools(body)
    anthropic = wire.template == TEMPLATE_ANTHROPIC
    for tool in tools_of(body):
        if anthropic:
            if is_anthropic_server_tool(tool):
                return True
        elif openai_function_of(tool) is None:
            return True
    return False
