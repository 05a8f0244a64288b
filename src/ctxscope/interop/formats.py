"""Span attributes of other GenAI instrumentations -> the request they describe.

Three attribute formats are read (docs/other-instrumentations.md):

* **GenAI conventions** (``gen_ai``): ``gen_ai.system_instructions``,
  ``gen_ai.input.messages`` and ``gen_ai.tool.definitions`` as JSON (or as
  structured values), usage in ``gen_ai.usage.*``. Written by the official
  ``opentelemetry-instrumentation-openai-v2`` (through
  ``opentelemetry-util-genai``) and by OpenLLMetry since 0.5x.
* **OpenLLMetry indexed** (``openllmetry``): ``gen_ai.prompt.{i}.role`` /
  ``.content`` / ``.tool_call_id`` / ``.tool_calls.{j}.id|name|arguments`` and
  ``llm.request.functions.{i}.name|description|parameters``, usage in
  ``gen_ai.usage.prompt_tokens`` (older) or ``gen_ai.usage.input_tokens``.
* **OpenInference** (``openinference``): ``llm.input_messages.{i}.message.*``,
  ``llm.tools.{i}.tool.json_schema``, ``llm.token_count.*``, ``session.id``.

Each becomes an OpenAI-chat-shaped request body, so :mod:`ctxscope.core.items`
builds the items with the same part paths and ids as ctxscope's own
instrumentation would from the original request. Pure: no OpenTelemetry, no
provider SDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ctxscope.core.observation import Usage
from ctxscope.schema import GenAI

__all__ = [
    "FORMAT_GEN_AI",
    "FORMAT_OPENINFERENCE",
    "FORMAT_OPENLLMETRY",
    "ForeignCall",
    "parse_attributes",
]

FORMAT_GEN_AI = "gen_ai"
FORMAT_OPENLLMETRY = "openllmetry"
FORMAT_OPENINFERENCE = "openinference"

# Operation names of a model call (GenAI conventions); agent and tool spans are not.
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_OPENLLMETRY_REQUEST_TYPES = frozenset({"chat", "completion"})

# Keys outside schema.GenAI: other projects' names, read only (never written).
OPENLLMETRY_PROMPT = "gen_ai.prompt."
OPENLLMETRY_FUNCTIONS = "llm.request.functions."
OPENLLMETRY_REQUEST_TYPE = "llm.request.type"
OPENLLMETRY_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
OPENLLMETRY_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
OPENLLMETRY_CACHE_READ = "gen_ai.usage.cache_read_input_tokens"
OPENLLMETRY_CACHE_CREATION = "gen_ai.usage.cache_creation_input_tokens"
OI_SPAN_KIND = "openinference.span.kind"
OI_INPUT_MESSAGES = "llm.input_messages."
OI_TOOLS = "llm.tools."
OI_MODEL = "llm.model_name"
OI_PROVIDER = "llm.provider"
OI_SYSTEM = "llm.system"
OI_SESSION = "session.id"
OI_INVOCATION_PARAMETERS = "llm.invocation_parameters"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_CACHE_READ = "llm.token_count.prompt_details.cache_read"
OI_CACHE_WRITE = "llm.token_count.prompt_details.cache_write"


@dataclass(slots=True)
class ForeignCall:
    """One model call as another instrumentation recorded it."""

    format: str
    provider: str | None
    request_model: str | None
    response_model: str | None = None
    response_id: str | None = None
    conversation_id: str | None = None
    # An OpenAI chat request body rebuilt from the attributes; None without content.
    body: dict[str, Any] | None = field(default=None, repr=False)
    # The whole request was seen: its messages and its tool definitions.
    complete: bool = False
    # The request is chained to context the provider keeps (Responses
    # previous_response_id): its history is not all here.
    chained: bool = False
    usage: Usage = field(default_factory=Usage)

    @property
    def model(self) -> str | None:
        return self.request_model or self.response_model


def parse_attributes(attrs: Mapping[str, Any]) -> ForeignCall | None:
    """The model call a span's attributes describe, or None when they describe none.

    Bad content (JSON that does not parse, odd shapes) never raises: the call
    is then returned without content (partial coverage).
    """
    kind = attrs.get(OI_SPAN_KIND)
    if kind is not None:
        return _openinference(attrs) if str(kind).upper() == "LLM" else None
    # Every span of the program passes here: one pass over its keys for both prefixes.
    indexed = _has_prefix(attrs, (OPENLLMETRY_PROMPT, OPENLLMETRY_FUNCTIONS))
    request_type = attrs.get(OPENLLMETRY_REQUEST_TYPE)
    operation = attrs.get(GenAI.OPERATION_NAME)
    if indexed or (operation is None and request_type in _OPENLLMETRY_REQUEST_TYPES):
        return _openllmetry(attrs)
    if operation in _MODEL_OPERATIONS:
        return _gen_ai(attrs)
    return None


# ---------------------------------------------------------------------------
# Reading values
# ---------------------------------------------------------------------------

def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _json(value: Any) -> Any:
    """A JSON string parsed; a structured value (tuple, dict) as plain lists and dicts."""
    if isinstance(value, str):
        return json.loads(value)
    if isinstance(value, (Mapping, list, tuple)):
        return _json_value(value)
    raise ValueError(f"not a JSON value: {type(value).__name__}")


def _json_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def _compact(value: Any) -> str:
    """Tool-call arguments as the provider sent them: compact JSON (a string stays as is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _has_prefix(attrs: Mapping[str, Any], prefix: str | tuple[str, ...]) -> bool:
    return any(key.startswith(prefix) for key in attrs)


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix{i}.rest = v`` attributes as a list of ``{rest: v}`` in index order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix):].partition(".")
        if not index.isdigit() or not rest:
            continue
        found.setdefault(int(index), {})[rest] = value
    return [found[i] for i in sorted(found)]


def _usage(input_tokens: Any, output_tokens: Any, cache_read: Any, cache_creation: Any) -> Usage:
    reported = _int(input_tokens)
    read = _int(cache_read)
    # Every format here counts cached input inside its input total (GenAI
    # conventions: gen_ai.usage.input_tokens includes cached tokens; OpenAI's
    # prompt_tokens does): the uncached part is the difference.
    uncached = reported - read if reported is not None and read is not None else reported
    return Usage(input_tokens=uncached, output_tokens=_int(output_tokens), cache_read_input_tokens=read,
                 cache_creation_input_tokens=_int(cache_creation), reported_input=reported)


def _first(attrs: Mapping[str, Any], key: str, fallback: str) -> Any:
    """The value under ``key`` when the key is there (even as None), else under ``fallback``."""
    return attrs.get(key, attrs.get(fallback))


def _empty_content(role: str) -> None | str:
    """A message's content when it has none: null for an assistant (tool calls only), else ''."""
    return None if role == "assistant" else ""


def _chat_tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """An OpenAI chat assistant's tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _compact(arguments)}}


def _chat_message(role: str, content: Any, *, tool_call_id: Any = None, name: Any = None,
                  calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An OpenAI chat message from an indexed format's entry; optional keys only when set."""
    message: dict[str, Any] = {"role": role, "content": content if content is not None else _empty_content(role)}
    if tool_call_id:
        message["tool_call_id"] = tool_call_id
    if name:
        message["name"] = name
    if calls:
        message["tool_calls"] = calls
    return message


def _body(model: str | None, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model or "", "messages": messages}
    if tools:
        body["tools"] = tools
    return body


def _chat_tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    """An OpenAI chat tool definition, keys in the order the SDK users write them."""
    function: dict[str, Any] = {"name": str(name)}
    if description is not None:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


# ---------------------------------------------------------------------------
# GenAI conventions
# ---------------------------------------------------------------------------

def _gen_ai_parts_text(parts: Iterable[Any]) -> list[str]:
    return [str(p.get("content")) for p in parts
            if isinstance(p, Mapping) and p.get("type") == "text" and p.get("content") is not None]


def _gen_ai_media(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """A blob/uri/file part as a chat content block (images by URL, others as a file)."""
    kind = part.get("type")
    modality = part.get("modality")
    mime = part.get("mime_type") or ""
    if kind == "uri":
        url = str(part.get("uri") or "")
    elif kind == "blob":
        url = f"data:{mime or 'application/octet-stream'};base64,{part.get('content') or ''}"
    else:
        return None
    if modality == "image" or str(mime).startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"file_data": url}}


def _gen_ai_tool_response(part: Mapping[str, Any]) -> dict[str, Any]:
    """A tool_call_response part as a chat tool message."""
    response = _first(part, "response", "result")
    return {"role": "tool", "tool_call_id": part.get("id"), "content": _compact(response)}


def _gen_ai_message(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = str(message.get("role") or "user")
    parts = [p for p in message.get("parts") or () if isinstance(p, Mapping)]
    if role == "tool":
        out = [_gen_ai_tool_response(part) for part in parts if part.get("type") == "tool_call_response"]
        texts = _gen_ai_parts_text(parts)
        if texts and not out:
            out.append({"role": "tool", "content": "\n".join(texts)})
        return out
    blocks: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("content") or "")})
        elif kind == "tool_call":
            calls.append(_chat_tool_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif kind == "tool_call_response":  # some instrumentations put results in a user message
            responses.append(_gen_ai_tool_response(part))
        elif kind in ("blob", "uri"):
            media = _gen_ai_media(part)
            if media is not None:
                blocks.append(media)
        # reasoning parts are not sent back in a chat request: not counted.
    message_out: dict[str, Any] = {"role": role}
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        message_out["content"] = blocks[0]["text"]
    else:
        message_out["content"] = blocks or _empty_content(role)
    if calls:
        message_out["tool_calls"] = calls
    if message.get("name"):
        message_out["name"] = message["name"]
    if responses and not blocks and not calls:
        return responses
    return [message_out, *responses]


def _gen_ai_system(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"role": "system", "content": value}  # a plain string, as some write it
    else:
        parsed = _json(value)
    if isinstance(parsed, str):
        return {"role": "system", "content": parsed}
    texts = _gen_ai_parts_text(parsed if isinstance(parsed, list) else [parsed])
    return {"role": "system", "content": "\n".join(texts)} if texts else None


def _gen_ai_tool(tool: Any) -> dict[str, Any] | None:
    if not isinstance(tool, Mapping):
        return None
    if isinstance(tool.get("function"), Mapping):  # already in chat form
        return dict(tool)
    if tool.get("name") is None:
        return None
    return _chat_tool(tool["name"], tool.get("description"), tool.get("parameters"))


def _gen_ai_identity(attrs: Mapping[str, Any], fmt: str, cache_read: Any, cache_creation: Any) -> ForeignCall:
    """A call from the gen_ai.* identity and usage keys both GenAI formats write.

    The cache figures are passed in: each format prefers its own key for them.
    """
    return ForeignCall(
        format=fmt,
        provider=_str(attrs.get(GenAI.PROVIDER_NAME)) or _str(attrs.get(GenAI.SYSTEM)),
        request_model=_str(attrs.get(GenAI.REQUEST_MODEL)),
        response_model=_str(attrs.get(GenAI.RESPONSE_MODEL)),
        response_id=_str(attrs.get(GenAI.RESPONSE_ID)),
        conversation_id=_str(attrs.get(GenAI.CONVERSATION_ID)),
        usage=_usage(_first(attrs, GenAI.USAGE_INPUT_TOKENS, OPENLLMETRY_PROMPT_TOKENS),
                     _first(attrs, GenAI.USAGE_OUTPUT_TOKENS, OPENLLMETRY_COMPLETION_TOKENS),
                     cache_read, cache_creation),
    )


def _gen_ai(attrs: Mapping[str, Any]) -> ForeignCall:
    call = _gen_ai_identity(attrs, FORMAT_GEN_AI,
                            _first(attrs, GenAI.USAGE_CACHE_READ_INPUT_TOKENS, OPENLLMETRY_CACHE_READ),
                            _first(attrs, GenAI.USAGE_CACHE_CREATION_INPUT_TOKENS, OPENLLMETRY_CACHE_CREATION))
    raw_messages = attrs.get(GenAI.INPUT_MESSAGES)
    raw_system = attrs.get(GenAI.SYSTEM_INSTRUCTIONS)
    raw_tools = attrs.get(GenAI.TOOL_DEFINITIONS)
    if raw_messages is None and raw_system is None:
        return call
    try:
        messages: list[dict[str, Any]] = []
        if raw_system is not None:
            system = _gen_ai_system(raw_system)
            if system is not None:
                messages.append(system)
        for message in _json(raw_messages) if raw_messages is not None else ():
            if isinstance(message, Mapping):
                messages.extend(_gen_ai_message(message))
        tools = [t for t in (_gen_ai_tool(x) for x in (_json(raw_tools) if raw_tools is not None else ()))
                 if t is not None]
    except (ValueError, TypeError, AttributeError):
        return call  # content we cannot read: usage-based figures only
    call.body = _body(call.model, messages, tools)
    # The conventions make tool definitions opt-in: without them we cannot
    # tell "no tools offered" from "tools not recorded".
    call.complete = raw_messages is not None and raw_tools is not None
    return call


# ---------------------------------------------------------------------------
# OpenLLMetry (indexed attributes, before it moved to the GenAI conventions)
# ---------------------------------------------------------------------------

def _maybe_blocks(content: Any) -> Any:
    """OpenLLMetry writes a list content as its JSON text: read it back as blocks."""
    if isinstance(content, str) and content.startswith("["):
        try:
            parsed = json.loads(content)
        except ValueError:
            return content
        if isinstance(parsed, list) and all(isinstance(b, Mapping) and "type" in b for b in parsed):
            return parsed
    return content


def _openllmetry(attrs: Mapping[str, Any]) -> ForeignCall:
    call = _gen_ai_identity(attrs, FORMAT_OPENLLMETRY,
                            _first(attrs, OPENLLMETRY_CACHE_READ, GenAI.USAGE_CACHE_READ_INPUT_TOKENS),
                            _first(attrs, OPENLLMETRY_CACHE_CREATION, GenAI.USAGE_CACHE_CREATION_INPUT_TOKENS))
    prompts = _indexed(attrs, OPENLLMETRY_PROMPT)
    if not prompts:
        return call
    try:
        messages = [_chat_message(str(entry.get("role") or "user"), _maybe_blocks(entry.get("content")),
                                  tool_call_id=entry.get("tool_call_id"),
                                  calls=[_chat_tool_call(c.get("id"), c.get("name"), c.get("arguments", ""))
                                         for c in _indexed(entry, "tool_calls.")])
                    for entry in prompts]
        tools = []
        for fn in _indexed(attrs, OPENLLMETRY_FUNCTIONS):
            if fn.get("name") is None:
                continue
            parameters = fn.get("parameters")
            tools.append(_chat_tool(fn["name"], fn.get("description"),
                                    json.loads(parameters) if isinstance(parameters, str) else parameters))
    except (ValueError, TypeError, AttributeError):
        return call
    call.body = _body(call.model, messages, tools)
    # OpenLLMetry writes llm.request.functions whenever the request has tools.
    call.complete = True
    return call


# ---------------------------------------------------------------------------
# OpenInference
# ---------------------------------------------------------------------------

def _oi_content(entry: Mapping[str, Any]) -> Any:
    contents = _indexed(entry, "message.contents.")
    if not contents:
        return entry.get("message.content")
    blocks: list[dict[str, Any]] = []
    for block in contents:
        kind = block.get("message_content.type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(block.get("message_content.text") or "")})
        elif kind == "image":
            blocks.append({"type": "image_url",
                           "image_url": {"url": str(block.get("message_content.image.image.url") or "")}})
    return blocks


def _openinference(attrs: Mapping[str, Any]) -> ForeignCall:
    model = _str(attrs.get(OI_MODEL))
    call = ForeignCall(
        format=FORMAT_OPENINFERENCE,
        provider=_str(attrs.get(OI_PROVIDER)) or _str(attrs.get(OI_SYSTEM)),
        request_model=model,
        conversation_id=_str(attrs.get(OI_SESSION)) or _str(attrs.get(GenAI.CONVERSATION_ID)),
        usage=_usage(attrs.get(OI_PROMPT_TOKENS), attrs.get(OI_COMPLETION_TOKENS),
                     attrs.get(OI_CACHE_READ), attrs.get(OI_CACHE_WRITE)),
    )
    entries = _indexed(attrs, OI_INPUT_MESSAGES)
    if not entries:
        return call
    try:
        messages = [_chat_message(str(entry.get("message.role") or "user"), _oi_content(entry),
                                  tool_call_id=entry.get("message.tool_call_id"), name=entry.get("message.name"),
                                  calls=[_chat_tool_call(c.get("tool_call.id"), c.get("tool_call.function.name"),
                                                         c.get("tool_call.function.arguments", ""))
                                         for c in _indexed(entry, "message.tool_calls.")])
                    for entry in entries]
        tools = []
        for tool in _indexed(attrs, OI_TOOLS):
            schema = tool.get("tool.json_schema")
            parsed = _gen_ai_tool(json.loads(schema) if isinstance(schema, str) else schema)
            if parsed is not None:
                tools.append(parsed)
    except (ValueError, TypeError, AttributeError):
        return call
    call.body = _body(model, messages, tools)
    # OpenInference writes llm.tools whenever the request has tools; a Responses
    # request chained to stored context shows only its new input.
    call.chained = _chained(attrs.get(OI_INVOCATION_PARAMETERS))
    call.complete = not call.chained
    return call


def _chained(parameters: Any) -> bool:
    """Request parameters naming context the provider prepends (Responses chaining)."""
    try:
        parsed = json.loads(parameters) if isinstance(parameters, str) else parameters
    except ValueError:
        return False
    return isinstance(parsed, Mapping) and bool(parsed.get("previous_response_id") or parsed.get("conversation"))
