"""OpenAI chat completions (``POST /v1/chat/completions``), and every OpenAI-compatible server.

Reported input (SPEC section 4): ``usage.prompt_tokens``, which includes the
cached part (``prompt_tokens_details.cached_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.apis._base import WireFormat, count, field
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


FORMAT = WireFormat(ID, PROVIDER, ("/chat/completions",), _looks_like, _messages, _seed, usage)
