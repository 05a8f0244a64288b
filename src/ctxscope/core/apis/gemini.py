"""Gemini ``generateContent`` / ``streamGenerateContent``: requests -> items, responses -> usage.

The REST body (as ``google-genai`` sends it; the API also takes snake_case
field names, and both are read)::

    {"contents": [{"role": "user" | "model", "parts": [...]}],
     "systemInstruction": {"parts": [{"text": ...}]},
     "tools": [{"functionDeclarations": [{"name", "description", "parameters"}]},
               {"googleSearch": {}}, {"codeExecution": {}}],
     "generationConfig": {...}}

Parts: ``text`` (``thought: true`` marks thinking), ``inlineData``
(``mimeType`` + base64 ``data``), ``fileData`` (a URI), ``functionCall``
(``name``, ``args``, optional ``id``), ``functionResponse`` (``name``,
``response``, optional ``id``), ``executableCode``, ``codeExecutionResult``.
The model is named in the URL (``models/{model}:generateContent``), not the body.

Counting basis (docs/apis.md): Gemini's tokenizer is not public. Text is
counted with the session's basis (``auto``: tiktoken ``o200k_base`` as the
proxy, the same as for every model without a public tokenizer); a function
declaration is its compact JSON; media follow Google's published rates
(an image 258 tokens, 258 per 768 px tile when both sides exceed 384 px; a
PDF page 258; audio 32 tokens a second; video 263 a second). Framing: the
Gemma chat template (the public form of Gemini's turn markup) puts 3 tokens
plus the role around each turn and 3 to prime the reply.

Reported input: ``usageMetadata.promptTokenCount`` (cached content
included; ``cachedContentTokenCount`` is the cached part).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from ctxscope.core.payload import b64_len_tokens, b64_prefix_bytes, compact_json
from ctxscope.core.payload import get as _get
from ctxscope.core.observation import Usage
from ctxscope.core.tokens import image_size
from ctxscope.core.apis._base import TEMPLATE_OWN, WireFormat
from ctxscope.core.apis._text import content_text

API = "gemini.generate_content"
PROVIDER = "gcp.gemini"

IMAGE_TILE_TOKENS = 258  # an image up to 384x384 px, or one 768x768 tile of a larger one
IMAGE_TILE_PX = 768
SMALL_IMAGE_PX = 384
DOCUMENT_PAGE_TOKENS = 258
AUDIO_TOKENS_PER_SECOND = 32
VIDEO_TOKENS_PER_SECOND = 263
# Compressed audio as sent (about 16 kB a second at 128 kbit/s): seconds from the size.
AUDIO_BYTES_PER_SECOND = 16000
VIDEO_BYTES_PER_SECOND = 250000  # about 2 Mbit/s
TURN_TOKENS = 3  # <start_of_turn>{role}\n ... <end_of_turn>\n
PRIMING_TOKENS = 3  # <start_of_turn>model\n

_PATH_RE = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent)$")


def model_and_stream(path: str) -> tuple[str, bool] | None:
    """``(model, streamed)`` of a Gemini endpoint path, or None when the path is not one."""
    match = _PATH_RE.search(path)
    if match is None:
        return None
    return match.group(1), match.group(2) == "streamGenerateContent"


def field(obj: Any, camel: str, snake: str | None = None) -> Any:
    """A field by its camelCase name, else its snake_case one (the REST API takes both)."""
    value = _get(obj, camel)
    if value is None and snake is not None:
        value = _get(obj, snake)
    return value


def body_fits(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("contents"), list)


def contents_of(body: Mapping[str, Any]) -> list[Any]:
    value = body.get("contents")
    return list(value) if isinstance(value, (list, tuple)) else []


def head_key(body: Mapping[str, Any]) -> Any:
    return field(body, "systemInstruction", "system_instruction")


# ---------------------------------------------------------------------------
# Media (Google's published rates)
# ---------------------------------------------------------------------------

def image_tokens(data: str | None) -> int:
    size = image_size(b64_prefix_bytes(data, 87384)) if data else None
    if size is None:
        return IMAGE_TILE_TOKENS
    width, height = size
    if width <= SMALL_IMAGE_PX and height <= SMALL_IMAGE_PX:
        return IMAGE_TILE_TOKENS
    return IMAGE_TILE_TOKENS * math.ceil(width / IMAGE_TILE_PX) * math.ceil(height / IMAGE_TILE_PX)


def pdf_pages(data: str | None) -> int:
    if not data:
        return 1
    raw = b64_prefix_bytes(data, len(data))
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw))
    return pages or max(1, math.ceil(len(raw) / 3000))


def media_tokens(mime_type: str, data: str | None) -> int:
    mime_type = mime_type.lower()
    if mime_type.startswith("image/"):
        return image_tokens(data)
    if mime_type == "application/pdf":
        return pdf_pages(data) * DOCUMENT_PAGE_TOKENS
    if mime_type.startswith("audio/"):
        return b64_len_tokens(data, AUDIO_BYTES_PER_SECOND) * AUDIO_TOKENS_PER_SECOND
    if mime_type.startswith("video/"):
        return b64_len_tokens(data, VIDEO_BYTES_PER_SECOND) * VIDEO_TOKENS_PER_SECOND
    return b64_len_tokens(data, 4)


# ---------------------------------------------------------------------------
# Items (the builder is apis._builder.Builder)
# ---------------------------------------------------------------------------

def _part(b: Any, role: str, part: Any) -> None:
    assistant = role == "assistant"
    if isinstance(part, str):
        b.text(part, role, "assistant/text" if assistant else "prompts/text")
        return
    text = _get(part, "text")
    if isinstance(text, str):
        if _get(part, "thought") is True:
            b.add("assistant/thinking", text, role=role, source_kind="thinking")
        else:
            b.text(text, role, "assistant/text" if assistant else "prompts/text")
        return
    inline = field(part, "inlineData", "inline_data")
    if inline is not None:
        mime = str(field(inline, "mimeType", "mime_type") or "")
        data = _get(inline, "data")
        kind = "image" if mime.startswith("image/") else "document" if mime == "application/pdf" else "media"
        target = ("assistant" if assistant else "prompts") + f"/media/{kind}"
        b.add(target, "", role=role, fixed_tokens=media_tokens(mime, data if isinstance(data, str) else None),
              content_key=data if isinstance(data, str) else "", source_kind=kind)
        return
    file_data = field(part, "fileData", "file_data")
    if file_data is not None:
        mime = str(field(file_data, "mimeType", "mime_type") or "")
        uri = str(field(file_data, "fileUri", "file_uri") or "")
        b.add(("assistant" if assistant else "prompts") + "/media/file", "", role=role,
              fixed_tokens=media_tokens(mime, None), content_key=uri, source_kind="file")
        return
    call = field(part, "functionCall", "function_call")
    if call is not None:
        name = str(_get(call, "name") or "unknown")
        # Without an id the API pairs a response with its call by name (Builder.result_target too).
        b.call(_get(call, "id"), name, _get(call, "args") or {})
        return
    response = field(part, "functionResponse", "function_response")
    if response is not None:
        name = _get(response, "name")
        b.result(_get(response, "id"), compact_json(_get(response, "response")), name=name)
        return
    code = field(part, "executableCode", "executable_code")
    if code is not None:
        b.add("assistant/calls/code_execution", str(_get(code, "code") or ""), role=role,
              source_kind="tool_call", label="code_execution")
        return
    result = field(part, "codeExecutionResult", "code_execution_result")
    if result is not None:
        b.add("results/code_execution", str(_get(result, "output") or ""), role="tool",
              source_kind="tool_result", label="code_execution")
        return
    if field(part, "thoughtSignature", "thought_signature") is not None:
        return  # an opaque signature the API keeps out of the prompt
    # A part kind added after this module: counted as its JSON, never dropped.
    b.structured("assistant/text" if assistant else "prompts/text", role, part, source_kind="unknown")


def message(b: Any, content: Any) -> None:
    """One ``contents`` entry (a turn): role ``model`` is the assistant's."""
    role = str(_get(content, "role") or "user")
    role = "assistant" if role == "model" else role
    parts = _get(content, "parts")
    for part in (parts if isinstance(parts, (list, tuple)) else ()):
        _part(b, role, part)


def head(b: Any, body: Mapping[str, Any]) -> None:
    """System instruction and tool declarations."""
    from ctxscope.core import classify

    system = head_key(body)
    if isinstance(system, str):
        b.text(system, "system", "system", source_kind="system")
    elif system is not None:
        for part in _get(system, "parts") or ():
            text = _get(part, "text") if not isinstance(part, str) else part
            if isinstance(text, str):
                b.text(text, "system", "system", source_kind="system")
            else:
                b.structured("system", "system", part, source_kind="system")
    for tool in body.get("tools") or ():
        declarations = field(tool, "functionDeclarations", "function_declarations")
        if declarations is not None:
            for declaration in declarations:
                name = str(_get(declaration, "name") or "function")
                b.add(classify.tool_part(name), compact_json(declaration), role="tool-definition",
                      base=f"tool:{name}", label=name, source_kind="tool_definition")
            continue
        # A built-in tool (googleSearch, codeExecution, urlContext, ...): its declaration as sent.
        kinds = [k for k in (tool.keys() if isinstance(tool, Mapping) else ())] or ["tool"]
        kind = str(kinds[0])
        b.add(f"tools/server/{kind}", compact_json(tool), role="tool-definition", base=f"tool:{kind}",
              label=kind, source_kind="tool_definition")


def framing(body: Mapping[str, Any], count: Any) -> list[tuple[str, int]]:
    """``(key, tokens)``: the turn markup of every content and the reply priming (Gemma's template)."""
    turns = 0
    for content in contents_of(body):
        role = str(_get(content, "role") or "user")
        turns += TURN_TOKENS + count(role)
    if head_key(body) is not None:
        turns += TURN_TOKENS + count("user")  # the system instruction rides in a first user turn
    return [("messages", turns), ("priming", PRIMING_TOKENS)]


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------

def usage(document: Any) -> dict[str, int | None] | None:
    """``usageMetadata`` -> reported input (promptTokenCount), cached, uncached and output tokens."""
    meta = field(document, "usageMetadata", "usage_metadata")
    if meta is None:
        return None
    prompt = field(meta, "promptTokenCount", "prompt_token_count")
    cached = field(meta, "cachedContentTokenCount", "cached_content_token_count")
    output = field(meta, "candidatesTokenCount", "candidates_token_count")
    thoughts = field(meta, "thoughtsTokenCount", "thoughts_token_count")
    ints = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in (prompt, cached, output, thoughts)]
    prompt, cached, output, thoughts = ints
    return {
        "reported_input": prompt,
        "cache_read": cached,
        "input_tokens": prompt - cached if prompt is not None and cached is not None else prompt,
        "output_tokens": (output or 0) + (thoughts or 0) if output is not None or thoughts is not None else None,
    }


_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter"}


def response_fields(document: Any) -> tuple[str | None, str | None, list[str]]:
    """``(model version, response id, finish reasons)`` of a response or stream chunk."""
    reasons = []
    for candidate in _get(document, "candidates") or ():
        reason = field(candidate, "finishReason", "finish_reason")
        if reason:
            reasons.append(_FINISH.get(str(reason), str(reason).lower()))
    return (field(document, "modelVersion", "model_version"), field(document, "responseId", "response_id"),
            reasons)


def _content_parts(parts: Any) -> list[dict[str, Any]]:
    """Gemini parts as GenAI message parts (content capture only)."""
    out: list[dict[str, Any]] = []
    for part in parts if isinstance(parts, (list, tuple)) else ():
        text = _get(part, "text")
        call = field(part, "functionCall", "function_call")
        response = field(part, "functionResponse", "function_response")
        inline = field(part, "inlineData", "inline_data")
        if isinstance(text, str):
            out.append({"type": "reasoning" if _get(part, "thought") is True else "text", "content": text})
        elif call is not None:
            out.append({"type": "tool_call", "id": _get(call, "id"), "name": _get(call, "name"),
                        "arguments": _get(call, "args")})
        elif response is not None:
            out.append({"type": "tool_call_response", "id": _get(response, "id"),
                        "response": _get(response, "response")})
        elif inline is not None:
            out.append({"type": "blob", "mime_type": field(inline, "mimeType", "mime_type"),
                        "modality": str(field(inline, "mimeType", "mime_type") or "").split("/")[0],
                        "content": _get(inline, "data")})
    return out


def input_content(body: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """``(system instruction parts, input messages, tool definitions)``, GenAI-shaped (content capture only)."""
    system = head_key(body)
    system_parts = ([{"type": "text", "content": system}] if isinstance(system, str)
                    else _content_parts(_get(system, "parts")) if system is not None else [])
    messages = []
    for content in contents_of(body):
        role = str(_get(content, "role") or "user")
        messages.append({"role": "assistant" if role == "model" else role,
                         "parts": _content_parts(_get(content, "parts"))})
    tools: list[Any] = []
    for tool in body.get("tools") or ():
        declarations = field(tool, "functionDeclarations", "function_declarations")
        tools.extend(declarations if declarations is not None else [{"type": next(iter(tool), "tool")}])
    return system_parts, messages, tools


def output_parts(document: Any) -> list[dict[str, Any]]:
    """The first candidate's parts as GenAI message parts (content capture only)."""
    out: list[dict[str, Any]] = []
    for candidate in (_get(document, "candidates") or ())[:1]:
        for part in _get(_get(candidate, "content"), "parts") or ():
            text = _get(part, "text")
            call = field(part, "functionCall", "function_call")
            if isinstance(text, str) and _get(part, "thought") is not True:
                out.append({"type": "text", "content": text})
            elif call is not None:
                out.append({"type": "tool_call", "id": _get(call, "id"), "name": _get(call, "name"),
                            "arguments": _get(call, "args")})
    return out


# ---------------------------------------------------------------------------
# The registry's view (ctxscope.core.apis.WireFormat): detection, session seed, usage
# ---------------------------------------------------------------------------

def _looks_like(body: Mapping[str, Any]) -> bool | None:
    return True if body_fits(body) else None


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    """System instruction text and the first user turn's text (SPEC section 1)."""
    system = content_text(_get(head_key(body), "parts"))
    first_user = ""
    for content in contents_of(body):
        if (_get(content, "role") or "user") == "user":
            first_user = content_text(_get(content, "parts"))
            break
    return system, first_user


def _usage(document: Any) -> Usage | None:
    """``usageMetadata`` of a response document, or of a usage object handed over alone."""
    counts = usage(document) if field(document, "usageMetadata", "usage_metadata") is not None else \
        usage({"usageMetadata": document}) if field(document, "promptTokenCount", "prompt_token_count") is not None \
        else None
    if counts is None:
        return None
    return Usage(input_tokens=counts["input_tokens"], output_tokens=counts["output_tokens"],
                 cache_read_input_tokens=counts["cache_read"], reported_input=counts["reported_input"])


def _server_tools(body: Mapping[str, Any]) -> bool:
    """A tool entry without function declarations (googleSearch, codeExecution...) runs at Google."""
    return any(field(t, "functionDeclarations", "function_declarations") is None for t in body.get("tools") or ())


def _streamed(path: str, body: Mapping[str, Any]) -> bool:
    found = model_and_stream(path.split("?", 1)[0])
    return bool(found and found[1])


def _path_model(path: str) -> str | None:
    found = model_and_stream(path.split("?", 1)[0])
    return found[0] if found else None


FORMAT = WireFormat(id=API, provider=PROVIDER, url_suffixes=(":generateContent", ":streamGenerateContent"),
                    looks_like=_looks_like, messages=contents_of, session_seed=_seed, usage=_usage,
                    response_usage=lambda document: document,
                    body_fits=body_fits, conversation=contents_of, message=message, head=head,
                    streamed=_streamed, path_model=_path_model,
                    template=TEMPLATE_OWN, conversation_field="contents", framing=framing,
                    server_tools=_server_tools, stream_framing="json-array", response_fields=response_fields,
                    usage_counts=usage, output_parts=output_parts, input_content=input_content)
