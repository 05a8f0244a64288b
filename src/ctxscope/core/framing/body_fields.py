"""What framing reads of a request body (the model, the messages, the tools, a tool's function) and of its API.

Bodies are dicts or SDK objects (read with :mod:`ctxscope.core.payload`); nothing
here raises on an odd shape, it runs inside the user's call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxscope.core import apis
from ctxscope.core.apis import API_OPENAI_CHAT, WireFormat
from ctxscope.core.payload import as_list as _as_list


def model_of(body: Mapping[str, Any], model: str | None) -> str | None:
    """The model name: the one given, else the body's, if a string."""
    if isinstance(model, str):
        return model
    named = body.get("model")
    return named if isinstance(named, str) else None


def tools_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in _as_list(body.get("tools")) or () if isinstance(t, Mapping)]


def messages_of(body: Mapping[str, Any]) -> list[Any]:
    """The messages of a body: dicts or SDK objects (read with payload.get), never a one-shot iterator."""
    return [m for m in _as_list(body.get("messages")) or () if m is not None and not isinstance(m, (str, int, float))]


def openai_function_of(tool: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The function definition of an OpenAI tool (chat or Responses shape), else None."""
    if tool.get("type", "function") != "function":
        return None
    function = tool.get("function")
    if isinstance(function, Mapping):
        return function  # chat: {"type": "function", "function": {...}}
    if "name" in tool:
        return tool  # Responses: {"type": "function", "name": ..., "parameters": ...}
    return None


def rules_of(api: str) -> WireFormat:
    """The format whose framing rules apply to an API id (its template, where its messages are).

    An id no module defines is framed by chat completions' rules, the shape every
    OpenAI-compatible server takes (as :func:`ctxscope.core.apis.detect` reads such a body).
    """
    return apis.find(api) or apis.get(API_OPENAI_CHAT)
