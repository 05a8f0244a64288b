"""Ollama's native chat (``POST /api/chat``): requests -> items, responses -> usage.

The body (as the ``ollama`` client sends it)::

    {"model": "llama3.2", "messages": [{"role": "system" | "user" | "assistant" | "tool",
                                        "content": "...", "images": ["<base64>", ...],
                                        "thinking": "...", "tool_calls": [{"function": {"name", "arguments": {}}}],
                                        "tool_name": "..."}],
     "tools": [{"type": "function", "function": {...}}], "stream": true, "options": {...}}

``stream`` defaults to true: a body without it is answered with a stream of
JSON lines (``application/x-ndjson``), the last with ``"done": true`` and the
counts.

Counting basis (docs/apis.md): the model's own tokenizer is in the model
file, not reachable from here; text is counted with the session's basis
(``auto``: tiktoken ``o200k_base`` as the proxy), a tool definition as the
compact JSON the chat templates insert, an image at a flat 768 tokens (the
order of the vision models' image embeddings). Framing: ChatML-like
templates put about 3 tokens plus the role around each message and 3 to
prime the reply; the real template depends on the model.

Reported input: ``prompt_eval_count``. Ollama counts there only the prompt
tokens it evaluated: when it reuses its cache for a repeated prefix, the
count is below the context's size (docs/apis.md says how calibration takes
that).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from typing import Any, Mapping

from ctxscope.core.payload import compact_json
from ctxscope.core.observation import Usage
from ctxscope.core.payload import get as _get
from ctxscope.core.apis._base import TEMPLATE_OWN, WireFormat
from ctxscope.core.apis._text import system_and_first_user

API = "ollama.chat"
PROVIDER = "ollama"
PATH = "/api/chat"

IMAGE_TOKENS = 768
MESSAGE_TOKENS = 3  # <|im_start|>{role}\n ... <|im_end|>\n and the like
PRIMING_TOKENS = 3


def body_fits(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("messages"), list) and isinstance(body.get("model"), str)


def streamed(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is not False


def message(b: Any, msg: Any) -> None:
    role = str(_get(msg, "role") or "user")
    content = _get(msg, "content")
    if role == "tool":
        b.result(_get(msg, "tool_call_id"), content if isinstance(content, str) else compact_json(content),
                 name=_get(msg, "tool_name") or _get(msg, "name"))
        return
    if role == "assistant":
        thinking = _get(msg, "thinking")
        if isinstance(thinking, str) and thinking:
            b.add("assistant/thinking", thinking, role=role, source_kind="thinking")
    part = {"system": "system", "assistant": "assistant/text"}.get(role, "prompts/text")
    if isinstance(content, str):
        if content or not _get(msg, "tool_calls"):
            b.text(content, "system" if role == "system" else role, part,
                   source_kind="system" if role == "system" else "text")
    elif content is not None:
        b.structured(part, role, content, source_kind="unknown")
    media = "assistant/media/image" if role == "assistant" else "prompts/media/image"
    for image in _get(msg, "images") or ():
        b.add(media, "", role=role, fixed_tokens=IMAGE_TOKENS,
              content_key=image if isinstance(image, str) else compact_json(image), source_kind="image")
    for call in _get(msg, "tool_calls") or ():
        function = _get(call, "function") or {}
        b.call(_get(call, "id"), _get(function, "name"), _get(function, "arguments") or {})


def head(b: Any, body: Mapping[str, Any]) -> None:
    """Tool definitions (Ollama has no system field: the system prompt is a message)."""
    from ctxscope.core import classify

    for tool in body.get("tools") or ():
        function = _get(tool, "function") or tool
        name = str(_get(function, "name") or "function")
        b.add(classify.tool_part(name), compact_json(tool), role="tool-definition", base=f"tool:{name}",
              label=name, source_kind="tool_definition")


def framing(body: Mapping[str, Any], count: Any) -> list[tuple[str, int]]:
    """``(key, tokens)``: each message's markup and the reply priming (ChatML-like templates)."""
    tokens = 0
    for msg in body.get("messages") or ():
        tokens += MESSAGE_TOKENS + count(str(_get(msg, "role") or "user"))
    return [("messages", tokens), ("priming", PRIMING_TOKENS)]


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------

def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage(document: Any) -> dict[str, int | None] | None:
    """The final document's counts: ``prompt_eval_count`` (reported input), ``eval_count`` (output)."""
    prompt = _int(_get(document, "prompt_eval_count"))
    output = _int(_get(document, "eval_count"))
    if prompt is None and output is None:
        return None
    return {"reported_input": prompt, "input_tokens": prompt, "cache_read": None, "output_tokens": output}


def response_fields(document: Any) -> tuple[str | None, str | None, list[str]]:
    """``(model, response id, finish reasons)``: Ollama gives no response id."""
    reason = _get(document, "done_reason")
    if not reason and _get(document, "done") is True:
        reason = "stop"
    return _get(document, "model"), None, [str(reason)] if reason else []


def input_content(body: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """``(system parts, input messages, tool definitions)``, GenAI-shaped; system prompts stay messages."""
    messages = []
    for msg in body.get("messages") or ():
        role = str(_get(msg, "role") or "user")
        content = _get(msg, "content")
        if role == "tool":
            parts: list[dict[str, Any]] = [{"type": "tool_call_response", "id": _get(msg, "tool_call_id"),
                                            "response": content}]
        else:
            parts = [{"type": "text", "content": content}] if isinstance(content, str) and content else []
            for call in _get(msg, "tool_calls") or ():
                function = _get(call, "function") or {}
                parts.append({"type": "tool_call", "id": _get(call, "id"), "name": _get(function, "name"),
                              "arguments": _get(function, "arguments")})
            for image in _get(msg, "images") or ():
                parts.append({"type": "blob", "modality": "image", "content": image})
        messages.append({"role": role, "parts": parts})
    return [], messages, list(body.get("tools") or ())


def output_parts(document: Any) -> list[dict[str, Any]]:
    msg = _get(document, "message") or {}
    out: list[dict[str, Any]] = []
    content = _get(msg, "content")
    if isinstance(content, str) and content:
        out.append({"type": "text", "content": content})
    for call in _get(msg, "tool_calls") or ():
        function = _get(call, "function") or {}
        out.append({"type": "tool_call", "id": _get(call, "id"), "name": _get(function, "name"),
                    "arguments": _get(function, "arguments")})
    return out


# ---------------------------------------------------------------------------
# The registry's view (ctxscope.core.apis.WireFormat): detection, session seed, usage
# ---------------------------------------------------------------------------

def _looks_like(body: Mapping[str, Any]) -> bool | None:
    return None  # a chat-shaped body: Ollama's native API is known by its URL (/api/chat)


def _messages(body: Mapping[str, Any]) -> list[Any]:
    value = body.get("messages")
    return list(value) if isinstance(value, (list, tuple)) else []


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    return system_and_first_user([], _messages(body))


def _usage(document: Any) -> Usage | None:
    counts = usage(document)
    if counts is None:
        return None
    return Usage(input_tokens=counts.get("input_tokens"), output_tokens=counts.get("output_tokens"),
                 cache_read_input_tokens=counts.get("cache_read"), reported_input=counts.get("reported_input"))


def _conversation(body: Mapping[str, Any]) -> list[Any]:
    return list(body.get("messages") or ())


FORMAT = WireFormat(id=API, provider=PROVIDER, url_suffixes=(PATH,), looks_like=_looks_like, messages=_messages,
                    session_seed=_seed, usage=_usage, response_usage=lambda document: document,
                    body_fits=body_fits, conversation=_conversation, message=message, head=head,
                    streamed=lambda path, body: streamed(body),
                    template=TEMPLATE_OWN, framing=framing, stream_framing="ndjson",
                    response_fields=response_fields, usage_counts=usage, output_parts=output_parts,
                    input_content=input_content)
