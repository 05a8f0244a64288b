"""Message arrays and request bodies (OpenAI chat, Anthropic Messages) -> calls.

Accepted shapes, as one JSON document or as JSONL (one per line):

- a request body (``{"model", "messages", "tools", "system"...}``): one call;
- a recorded pair ``{"request": body, "response": answer}``: one call whose
  reported input is the answer's usage (OpenAI ``prompt_tokens``; Anthropic
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``);
- an exported history (a bare message array, ``{"messages": [...]}`` with a
  final ``usage`` but no request semantics, or SWE-agent's ``history``): one
  call per assistant message, whose context is the messages before it.

Calls are grouped into sessions by the SPEC fingerprint: the system prompt and
the first user message. OpenAI's ``developer`` role counts as system,
``reasoning_content`` as assistant thinking, tool definitions as tools.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from ..observation import Usage
from ..schema import Item
from . import _items
from .model import FORMAT_MESSAGES, Problem, TranscriptCall, as_int, dumps


class MessagesReader:
    """Incremental reader: each record is a body, a pair, or a history."""

    format = FORMAT_MESSAGES

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.records = 0
        self.problems: list[Problem] = []
        self._sessions: dict[str, int] = {}
        self._previous: dict[str, list[Item]] = {}

    def feed(self, record: Any, line: int) -> list[TranscriptCall]:
        if isinstance(record, list):
            self.records += 1
            return self._history(record, None, None, line)
        if not isinstance(record, dict):
            self.problems.append(Problem(line, f"expected a JSON object or array, got {type(record).__name__}"))
            return []
        if isinstance(record.get("request"), dict):
            self.records += 1
            return [self._call(record["request"], record.get("response"), line)]
        if isinstance(record.get("history"), list):
            self.records += 1
            return self._history(record["history"], None, record.get("model"), line)
        if isinstance(record.get("messages"), list):
            self.records += 1
            messages = record["messages"]
            last = messages[-1] if messages else None
            # A request ends with what the model must answer; an exported
            # transcript ends with the model's answer (or carries its usage).
            if "usage" in record or (isinstance(last, dict) and last.get("role") == "assistant"
                                     and "max_tokens" not in record and "stream" not in record):
                # An exported transcript: a history, its usage (if any) for the last call.
                return self._history(record["messages"], record, record.get("model"), line)
            return [self._call(record, None, line)]
        self.problems.append(Problem(line, "no messages, request or history in this record, skipped"))
        return []

    def finish(self) -> list[TranscriptCall]:
        return []

    # -- calls -----------------------------------------------------------------

    def _call(self, body: Mapping[str, Any], response: Any, line: int) -> TranscriptCall:
        items, provider = body_items(body)
        usage = _usage(response.get("usage") if isinstance(response, dict) else None)
        model = body.get("model")
        return self._emit(items, provider, model if isinstance(model, str) else None, usage, line)

    def _history(self, messages: list[Any], body: Mapping[str, Any] | None, model: Any,
                 line: int) -> list[TranscriptCall]:
        base = dict(body) if body is not None else {}
        out: list[TranscriptCall] = []
        for index, message in enumerate(messages):
            if isinstance(message, dict) and message.get("role") == "assistant" and index > 0:
                base["messages"] = messages[:index]
                items, provider = body_items(base)
                out.append(self._emit(items, provider, model if isinstance(model, str) else None, None, line))
        if body is not None and out:
            out[-1].usage = _usage(body.get("usage"))
        return out

    def _emit(self, items: list[Item], provider: str, model: str | None, usage: Usage | None,
              line: int) -> TranscriptCall:
        session = _fingerprint(items)
        index = self._sessions.get(session, 0)
        self._sessions[session] = index + 1
        previous = self._previous.get(session, [])
        # Append-only growth keeps ids in place: the new items are the tail.
        prefix = len(previous) <= len(items) and all(a.id == b.id and a.digest == b.digest
                                                     for a, b in zip(previous, items))
        self._previous[session] = items
        return TranscriptCall(session_id=session, index=index, items=items,
                              added=items[len(previous):] if prefix and index else items,
                              reset=not (prefix and index), provider=provider, model=model,
                              usage=usage, line=line)


def body_items(body: Mapping[str, Any]) -> tuple[list[Item], str]:
    """The items of a request body or message list, and its provider (``openai`` or ``anthropic``)."""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    anthropic = "system" in body and not any(isinstance(m, dict) and m.get("role") == "system" for m in messages)
    anthropic = anthropic or any(
        isinstance(m, dict) and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in m["content"])
        for m in messages)
    tools = body.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        anthropic = True
    provider = "anthropic" if anthropic else "openai"
    out: list[Item] = []
    system = body.get("system")
    if isinstance(system, str) and system:
        out.extend(_items.text_items("system:0", system, "system"))
    elif isinstance(system, list):
        for index, block in enumerate(system):
            text = block.get("text") if isinstance(block, dict) else block if isinstance(block, str) else None
            if isinstance(text, str) and text:
                out.extend(_items.text_items(f"system:{index}", text, "system"))
    if isinstance(tools, list):
        for index, tool in enumerate(tools):
            if isinstance(tool, dict):
                fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
                name = fn.get("name") if isinstance(fn.get("name"), str) else f"tool{index}"
                out.append(_items.tool_definition_item(name, tool))
    names: dict[str, tuple[str, str | None]] = {}
    for position, message in enumerate(messages):
        if isinstance(message, dict):
            out.extend(_message_items(position, message, provider, names))
    return out, provider


def _message_items(position: int, message: Mapping[str, Any], provider: str,
                   names: dict[str, tuple[str, str | None]]) -> list[Item]:
    role = message.get("role")
    role = role if isinstance(role, str) else "user"
    prefix = f"m{position}"
    out: list[Item] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.append(_items.thinking_item(f"{prefix}:reasoning", reasoning))
    content = message.get("content")
    if role == "tool":
        call_id = message.get("tool_call_id")
        name, ref = names.get(call_id, (message.get("name") or "unknown", None)) if isinstance(call_id, str) else ("unknown", None)
        out.append(_items.result_item(f"result:{call_id}" if isinstance(call_id, str) else prefix, str(name),
                                      _items.block_text(content), call_id if isinstance(call_id, str) else None, ref))
        if isinstance(content, list):
            for index, part in enumerate(content):
                if isinstance(part, dict) and part.get("type") in ("image_url", "image"):
                    out.append(_items.image_item(f"{prefix}:{index}", part.get("image_url") or part.get("source"), provider, "tool"))
        return out
    if isinstance(content, str):
        if content:
            out.extend(_items.text_items(f"{prefix}:0", content, role))
    elif isinstance(content, list):
        for index, block in enumerate(content):
            if isinstance(block, str):
                block = {"type": "text", "text": block}
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            item_id = f"{prefix}:{index}"
            if kind in ("text", "input_text", "output_text"):
                text = block.get("text")
                if isinstance(text, str) and text:
                    out.extend(_items.text_items(item_id, text, role))
            elif kind in ("thinking", "redacted_thinking"):
                text = block.get("thinking") or block.get("data")
                if isinstance(text, str) and text:
                    out.append(_items.thinking_item(item_id, text))
            elif kind in ("image", "image_url", "input_image", "document", "file", "input_audio"):
                media = "document" if kind in ("document", "file") else "audio" if kind == "input_audio" else "image"
                out.append(_items.image_item(item_id, block.get("source") or block.get("image_url"), provider,
                                             role if role != "user" else "user", media))
            elif kind in ("tool_use", "server_tool_use"):
                call_id = block.get("id") if isinstance(block.get("id"), str) else item_id
                name = str(block.get("name") or "unknown")
                item, ref = _items.call_item(call_id, name, block.get("input") or {})
                names[call_id] = (name, ref)
                out.append(item)
            elif kind == "tool_result" or (isinstance(kind, str) and kind.endswith("_tool_result")):
                call_id = block.get("tool_use_id")
                name, ref = names.get(call_id, ("unknown", None)) if isinstance(call_id, str) else ("unknown", None)
                body = block.get("content")
                out.append(_items.result_item(f"result:{call_id}" if isinstance(call_id, str) else item_id, name,
                                              _items.block_text(body), call_id if isinstance(call_id, str) else None, ref))
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for index, call in enumerate(tool_calls):
            if not isinstance(call, dict):
                continue
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            name = str(fn.get("name") or "unknown")
            call_id = call.get("id") if isinstance(call.get("id"), str) else f"{prefix}:call{index}"
            item, ref = _items.call_item(call_id, name, fn.get("arguments") if fn.get("arguments") is not None else {})
            names[call_id] = (name, ref)
            out.append(item)
    return out


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage:  # OpenAI chat: cached input is inside prompt_tokens
        prompt = as_int(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        return Usage(input_tokens=prompt, output_tokens=as_int(usage.get("completion_tokens")),
                     cache_read_input_tokens=cached, reported_input=prompt)
    if "input_tokens" in usage:
        uncached = as_int(usage.get("input_tokens"))
        created = as_int(usage.get("cache_creation_input_tokens"))
        read = as_int(usage.get("cache_read_input_tokens"))
        return Usage(input_tokens=uncached, output_tokens=as_int(usage.get("output_tokens")),
                     cache_read_input_tokens=read, cache_creation_input_tokens=created,
                     reported_input=uncached + created + read)
    return None


def _has_assistant(messages: list[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)


def _fingerprint(items: list[Item]) -> str:
    """SPEC section 1: a session without an id is the system prompt and the first user message."""
    system = "".join(i.digest for i in items if i.source_kind in ("system", "developer"))
    first = next((i.digest for i in items if i.source_kind == "user"), "")
    return "fp-" + hashlib.blake2b((system + "|" + first).encode(), digest_size=6).hexdigest()


__all__ = ["MessagesReader", "body_items", "dumps"]
