"""One rule for a tool's part paths: its definition, calls and results name it the same way."""

from __future__ import annotations

import json

import pytest

from ctxscope.core.items import items_from_request


def _chat(name: str) -> dict:
    return {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps({"q": 1})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "result text"},
        ],
    }


@pytest.mark.parametrize("name,segment", [
    ("search", "search"),
    ("my/tool name", "other"),            # a slash and a space would invent levels: its kind's other
    ("mcp__github__create_issue", "mcp/github/create_issue"),
    ("mcp__git hub__x", "other"),
    ("openrouter:web_search", "openrouter:web_search"),
])
def test_definition_call_and_result_share_the_tool_segment(name: str, segment: str):
    parts = {item.part for item in items_from_request(_chat(name), "openai.chat")}
    assert {f"tools/{segment}", f"assistant/calls/{segment}", f"results/{segment}"} <= parts, parts
