"""Content blocks as the GenAI conventions' message parts: opt-in content capture (SPEC section 7).

The three SDK formats' modules read a request's system prompt and messages
into these parts (``WireFormat.input_content``), and the instrumentation reads
responses with the same builders (``ctxscope.instrumentation._content``).
Parts are ``{"type": "text", "content"}``, ``{"type": "tool_call", "id",
"name", "arguments"}``, ``{"type": "tool_call_response", "id", "response"}``,
``{"type": "reasoning", "content"}``, ``{"type": "blob" | "uri" | "file",
"modality", ...}``, else ``{"type": <the provider's block type>}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxscope.core.payload import as_list
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import plain as _plain

__all__ = ["Message", "Part", "anthropic_part", "anthropic_parts", "arguments", "call", "listed", "openai_parts",
           "response", "system", "text"]

Part = dict[str, Any]
Message = dict[str, Any]


def arguments(value: Any) -> Any:
    """Tool-call arguments as an object where they are JSON text (OpenAI sends a string)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return _plain(value)


def text(content: str) -> Part:
    return {"type": "text", "content": content}


def call(call_id: Any, name: Any, args: Any) -> Part:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments(args)}


def response(call_id: Any, value: Any) -> Part:
    return {"type": "tool_call_response", "id": call_id, "response": _plain(value)}


def listed(value: Any) -> list[Any]:
    return as_list(value) or []


def system(value: Any, parts: Callable[[Any], list[Part]]) -> list[Part]:
    """A system prompt or instructions: a string, or blocks read by ``parts``."""
    if isinstance(value, str):
        return [text(value)] if value else []
    return parts(value)


def _openai_part(block: Any) -> Part:
    """A content block of OpenAI chat or Responses."""
    if isinstance(block, str):
        return text(block)
    kind = _get(block, "type")
    if kind in ("text", "input_text", "output_text"):
        return text(str(_get(block, "text") or ""))
    if kind == "refusal":
        return text(str(_get(block, "refusal") or ""))
    if kind == "image_url":
        return {"type": "uri", "modality": "image", "mime_type": None, "uri": _get(_get(block, "image_url"), "url")}
    if kind == "input_image":
        url = _get(block, "image_url")
        if url:
            return {"type": "uri", "modality": "image", "mime_type": None, "uri": url}
        return {"type": "file", "modality": "image", "mime_type": None, "file_id": _get(block, "file_id")}
    if kind in ("input_audio",):
        audio = _get(block, "input_audio")
        return {"type": "blob", "modality": "audio", "mime_type": f"audio/{_get(audio, 'format') or 'wav'}",
                "content": _get(audio, "data")}
    return {"type": str(kind or "unknown")}


def openai_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text(content)] if content else []
    return [_openai_part(block) for block in listed(content)]


def anthropic_part(block: Any) -> Part:
    if isinstance(block, str):
        return text(block)
    kind = _get(block, "type")
    if kind == "text":
        return text(str(_get(block, "text") or ""))
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        return call(_get(block, "id"), _get(block, "name"), _get(block, "input"))
    if kind == "tool_result":
        content = _get(block, "content")
        if not isinstance(content, str):
            parts = [anthropic_part(b) for b in listed(content)]
            content = "".join(p["content"] for p in parts if p["type"] == "text") if all(
                p["type"] == "text" for p in parts) else parts
        return response(_get(block, "tool_use_id"), content)
    if kind == "thinking":
        return {"type": "reasoning", "content": str(_get(block, "thinking") or "")}
    if kind in ("image", "document"):
        source = _get(block, "source")
        modality = "image" if kind == "image" else "document"
        if _get(source, "type") == "base64":
            return {"type": "blob", "modality": modality, "mime_type": _get(source, "media_type"),
                    "content": _get(source, "data")}
        if _get(source, "type") == "url":
            return {"type": "uri", "modality": modality, "mime_type": None, "uri": _get(source, "url")}
        if _get(source, "type") == "text":
            return text(str(_get(source, "data") or ""))
    return {"type": str(kind or "unknown")}


def anthropic_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text(content)] if content else []
    return [anthropic_part(block) for block in listed(content)]
