"""Opt-in message content in the GenAI conventions' shape (SPEC section 7).

Off by default: ctxscope's telemetry carries counts and identities only.
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` opts in, read once when
an instrumentor is turned on, with the values the official instrumentations
accept: ``true`` (the older boolean form) or, as in ``opentelemetry-util-genai``,
``NO_CONTENT``, ``SPAN_ONLY``, ``EVENT_ONLY``, ``SPAN_AND_EVENT`` (any case).

With content on, a call records the current GenAI conventions' structured
attributes: ``gen_ai.system_instructions`` (a list of parts),
``gen_ai.input.messages`` (``{role, parts}``), ``gen_ai.output.messages``
(``{role, parts, finish_reason}``) and ``gen_ai.tool.definitions``. Parts are
``{"type": "text", "content"}``, ``{"type": "tool_call", "id", "name",
"arguments"}``, ``{"type": "tool_call_response", "id", "response"}``,
``{"type": "reasoning", "content"}``, ``{"type": "blob" | "uri", "modality",
"mime_type", "content" | "uri"}``, else ``{"type": <the provider's block type>}``.
On spans they are JSON strings (span attributes cannot hold maps); on the
``gen_ai.client.inference.operation.details`` event they stay structured.

This module is pure: it reads request bodies and responses (dicts or SDK
objects alike) and imports neither OpenTelemetry nor a provider SDK.
"""

from __future__ import annotations

import json
import logging
from enum import Enum
from typing import Any, Mapping

from ctxscope.config import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, settings
from ctxscope.core import apis
# The parts of a content block: the formats' modules read requests with them (WireFormat.input_content),
# the responses below are read with the same.
from ctxscope.core.apis._parts import Message, Part
from ctxscope.core.apis._parts import anthropic_part as _anthropic_part
from ctxscope.core.apis._parts import anthropic_parts as _anthropic_parts
from ctxscope.core.apis._parts import arguments as _arguments
from ctxscope.core.apis._parts import call as _call
from ctxscope.core.apis._parts import listed as _list
from ctxscope.core.apis._parts import openai_parts as _openai_parts
from ctxscope.core.apis._parts import text as _text
from ctxscope.core.apis.openai_responses import content_message as _responses_item
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import plain as _plain
from ctxscope.schema import GenAI

_log = logging.getLogger("ctxscope.instrumentation")


class ContentMode(str, Enum):
    """Where message content goes; the names of ``opentelemetry-util-genai``'s ``ContentCapturingMode``."""

    NO_CONTENT = "NO_CONTENT"
    SPAN_ONLY = "SPAN_ONLY"
    EVENT_ONLY = "EVENT_ONLY"
    SPAN_AND_EVENT = "SPAN_AND_EVENT"

    @property
    def on_spans(self) -> bool:
        return self in (ContentMode.SPAN_ONLY, ContentMode.SPAN_AND_EVENT)

    @property
    def on_events(self) -> bool:
        return self in (ContentMode.EVENT_ONLY, ContentMode.SPAN_AND_EVENT)

    @property
    def captures(self) -> bool:
        return self is not ContentMode.NO_CONTENT


# The boolean form of the older instrumentations (openai-v2 without the
# latest-experimental opt-in): true puts content on ctxscope's span.
_BOOLEANS = {"true": ContentMode.SPAN_ONLY, "false": ContentMode.NO_CONTENT}


def content_mode(value: str | None) -> ContentMode:
    """The mode a value of the variable asks for; unknown values are logged and mean no content."""
    text = (value or "").strip()
    if not text:
        return ContentMode.NO_CONTENT
    if text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    try:
        return ContentMode[text.upper()]
    except KeyError:
        _log.warning("ctxscope: %s=%s is not one of true, false, %s; no content is captured",
                     OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, text,
                     ", ".join(m.value for m in ContentMode))
        return ContentMode.NO_CONTENT


def content_mode_from_env() -> ContentMode:
    """Read once, when an instrumentor is turned on (never per request)."""
    return ContentMode(settings().capture_content)


def span_attributes(content: Mapping[str, list[Any]]) -> dict[str, str]:
    """Span attributes hold no maps: each structured value as compact JSON."""
    return {key: json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
            for key, value in content.items() if value}


# ---------------------------------------------------------------------------
# Tool definitions
# ---------------------------------------------------------------------------

def _tool_definition(tool: Any) -> dict[str, Any]:
    kind = _get(tool, "type")
    # OpenAI chat nests the definition: {"type": "function", "function": {...}} (or "custom").
    inner = _get(tool, "function") or _get(tool, "custom")
    if inner is not None:
        tool = inner
    schema = _get(tool, "parameters")
    if schema is None:
        schema = _get(tool, "input_schema")  # Anthropic
    name = _get(tool, "name")
    if schema is not None or kind in (None, "function", "custom"):
        definition: dict[str, Any] = {"type": "function", "name": name}
        description = _get(tool, "description")
        if description is not None:
            definition["description"] = description
        if schema is not None:
            definition["parameters"] = _plain(schema)
        return definition
    # A provider's own tool (web search, code interpreter...): its type names it.
    return {"type": str(kind), "name": name or str(kind)}


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------

def request_content(api: str, body: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The request's system instructions, input messages and tool definitions, by attribute key
    (each wire format reads its own: ``WireFormat.input_content``; an unknown API has none)."""
    wire = apis.find(api)
    if wire is None:
        return {}
    system, messages, tools = wire.input_content(body)
    content = {GenAI.SYSTEM_INSTRUCTIONS: system, GenAI.INPUT_MESSAGES: messages,
               GenAI.TOOL_DEFINITIONS: [_tool_definition(tool) for tool in tools]}
    return {key: value for key, value in content.items() if value}


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------

def chat_output(completion: Any) -> list[Message]:
    """One assistant message per choice of a chat completion."""
    messages = []
    for choice in _list(_get(completion, "choices")):
        message = _get(choice, "message")
        parts = _openai_parts(_get(message, "content"))
        refusal = _get(message, "refusal")
        if refusal:
            parts.append(_text(str(refusal)))
        for call in _list(_get(message, "tool_calls")):
            function = _get(call, "function")
            parts.append(_call(_get(call, "id"), _get(function, "name"), _get(function, "arguments")))
        messages.append({"role": str(_get(message, "role") or "assistant"), "parts": parts,
                         "finish_reason": str(_get(choice, "finish_reason") or "")})
    return messages


def responses_output(response: Any, finish_reason: str) -> list[Message]:
    """A Responses API response's output items as one assistant message."""
    parts: list[Part] = []
    for item in _list(_get(response, "output")):
        kind = _get(item, "type")
        if kind == "message":
            parts.extend(_openai_parts(_get(item, "content")))
        elif kind == "function_call":
            parts.append(_call(_get(item, "call_id"), _get(item, "name"), _get(item, "arguments")))
        else:
            message = _responses_item(item)
            if message is not None:
                parts.extend(message["parts"])
    if not parts and _get(response, "output") is None:
        return []
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason}]


def anthropic_output(message: Any) -> list[Message]:
    content = _get(message, "content")
    if content is None:
        return []
    return [{"role": str(_get(message, "role") or "assistant"), "parts": _anthropic_parts(content),
             "finish_reason": str(_get(message, "stop_reason") or "")}]


# ---------------------------------------------------------------------------
# Streams: the output assembled from chunks and events
# ---------------------------------------------------------------------------

class ChatOutput:
    """Chat chunks' deltas, per choice: text, refusal, and tool calls by index."""

    def __init__(self) -> None:
        self._choices: dict[int, dict[str, Any]] = {}

    def observe(self, chunk: Any) -> None:
        for choice in _list(_get(chunk, "choices")):
            state = self._choices.setdefault(int(_get(choice, "index") or 0),
                                             {"text": [], "calls": {}, "finish": ""})
            delta = _get(choice, "delta")
            text = _get(delta, "content")
            if text:
                state["text"].append(str(text))
            refusal = _get(delta, "refusal")
            if refusal:
                state["text"].append(str(refusal))
            for call in _list(_get(delta, "tool_calls")):
                entry = state["calls"].setdefault(int(_get(call, "index") or 0), {"id": None, "name": "", "args": []})
                entry["id"] = entry["id"] or _get(call, "id")
                function = _get(call, "function")
                entry["name"] = entry["name"] or _get(function, "name") or ""
                if _get(function, "arguments"):
                    entry["args"].append(str(_get(function, "arguments")))
            if _get(choice, "finish_reason"):
                state["finish"] = str(_get(choice, "finish_reason"))

    def messages(self) -> list[Message]:
        out = []
        for index in sorted(self._choices):
            state = self._choices[index]
            parts = [_text("".join(state["text"]))] if state["text"] else []
            for position in sorted(state["calls"]):
                entry = state["calls"][position]
                parts.append(_call(entry["id"], entry["name"], "".join(entry["args"])))
            out.append({"role": "assistant", "parts": parts, "finish_reason": state["finish"]})
        return out


class AnthropicOutput:
    """Raw message stream events: content blocks started, then their deltas."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stop = ""

    def observe(self, event: Any) -> None:
        kind = _get(event, "type")
        if kind == "content_block_start":
            block = _get(event, "content_block")
            self._blocks[int(_get(event, "index") or 0)] = {"block": block, "text": [], "json": []}
        elif kind == "content_block_delta":
            entry = self._blocks.get(int(_get(event, "index") or 0))
            delta = _get(event, "delta")
            if entry is None:
                return
            delta_kind = _get(delta, "type")
            if delta_kind == "text_delta":
                entry["text"].append(str(_get(delta, "text") or ""))
            elif delta_kind == "thinking_delta":
                entry["text"].append(str(_get(delta, "thinking") or ""))
            elif delta_kind == "input_json_delta":
                entry["json"].append(str(_get(delta, "partial_json") or ""))
        elif kind == "message_delta":
            self._stop = str(_get(_get(event, "delta"), "stop_reason") or self._stop)

    def messages(self) -> list[Message]:
        if not self._blocks:
            return []
        parts = []
        for index in sorted(self._blocks):
            entry = self._blocks[index]
            part = _anthropic_part(entry["block"])
            if part["type"] == "text":
                part["content"] = str(part["content"]) + "".join(entry["text"])
            elif part["type"] == "reasoning":
                part["content"] = str(part["content"]) + "".join(entry["text"])
            elif part["type"] == "tool_call" and entry["json"]:
                part["arguments"] = _arguments("".join(entry["json"]))
            parts.append(part)
        return [{"role": "assistant", "parts": parts, "finish_reason": self._stop}]

