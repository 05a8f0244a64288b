"""The provider APIs ctxscope reads, one module each; the only place that knows their ids.

:data:`WIRE_FORMATS` lists them; :func:`get` finds one by id, :func:`detect` by a
request body's shape, :func:`for_path` by a request URL's path. A new API is
one module here (its :class:`~ctxscope.core.apis.WireFormat`) plus its entry in
:data:`WIRE_FORMATS`, and the conformance suite (``tests/conformance/test_wire_formats.py``)
runs over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ctxscope.core.observation import Usage
from ctxscope.core.apis import anthropic_messages, gemini, ollama, openai_chat, openai_responses
from ctxscope.core.apis._base import WireFormat, count, field

__all__ = [
    "API_ANTHROPIC",
    "API_GEMINI",
    "API_OLLAMA",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    "APIS",
    "FORMATS",
    "ModuleFormat",
    "WIRE_FORMATS",
    "format_of",
    "WireFormat",
    "count",
    "detect",
    "field",
    "for_path",
    "get",
    "reported_input",
    "usage",
    "usage_by_shape",
]

API_OPENAI_CHAT = openai_chat.ID
API_OPENAI_RESPONSES = openai_responses.ID
API_ANTHROPIC = anthropic_messages.ID
API_GEMINI = gemini.API
API_OLLAMA = ollama.API

# Detection by body shape asks the formats in this order (Ollama's native body looks like a chat
# body: it is told apart by its URL, :func:`for_path`); a body with messages that no format
# claims is chat completions, the shape every OpenAI-compatible server takes.
WIRE_FORMATS: tuple[WireFormat, ...] = (gemini.FORMAT, openai_responses.FORMAT, anthropic_messages.FORMAT,
                                        ollama.FORMAT, openai_chat.FORMAT)
APIS = (API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC)  # the formats walked by ctxscope.core.request_items
_BY_ID = {f.id: f for f in WIRE_FORMATS}


def get(api: str) -> WireFormat:
    """The format of an API id; ``KeyError`` for an id no module defines."""
    return _BY_ID[api]


def detect(body: Mapping[str, Any]) -> str:
    """Which API a request body is for; ``ValueError`` when it is a body of none of them."""
    if not isinstance(body, Mapping):
        raise ValueError("a request body must be a JSON object")
    for wire in WIRE_FORMATS:
        if wire.looks_like(body):
            return wire.id
    if "messages" in body:
        return API_OPENAI_CHAT  # plain-text conversations of the OpenAI shape and every compatible server
    raise ValueError("not a request body: no 'messages' (chat, Anthropic), 'input' (Responses) "
                     "or 'contents' (Gemini)")


def for_path(path: str) -> str | None:
    """The API a request path is for (``/v1/chat/completions``, ``/v1beta/models/m:generateContent``), else None."""
    path = path.split("?", 1)[0].rstrip("/")
    for wire in WIRE_FORMATS:
        if any(path.endswith(suffix) for suffix in wire.url_suffixes):
            return wire.id
    return None


def usage(api: str, value: Any) -> Usage | None:
    """A response's usage (dict or SDK object) as ctxscope's :class:`Usage`; None without usage."""
    return get(api).usage(value)


def usage_by_shape(value: Any) -> Usage | None:
    """A usage whose API is not known (an exported transcript), read by the fields it has."""
    if field(value, "prompt_tokens") is not None:
        return openai_chat.usage(value)
    if field(value, "input_tokens_details") is not None and field(value, "cache_creation_input_tokens") is None:
        return openai_responses.usage(value)
    return anthropic_messages.usage(value)


def reported_input(api: str, response: Any) -> int | None:
    """SPEC section 4 reported input of a response (dict or SDK object); None when it has no usage."""
    wire = get(api)
    found = wire.usage(wire.response_usage(response))
    return found.reported_input if found is not None else None


# ---------------------------------------------------------------------------
# Formats whose items and framing live in their module
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ModuleFormat:
    """A format whose items, framing and stream live in its own module (Gemini, Ollama).

    The three older formats are walked by :mod:`ctxscope.core.request_items` and
    :mod:`ctxscope.core.framing` until they move here too; :func:`format_of` is None for them.
    """

    api: str  # the API name (as items.API_*)
    provider: str  # gen_ai.provider.name by default
    body_fits: Callable[[Mapping[str, Any]], bool]  # a body of this API's shape
    messages_of: Callable[[Mapping[str, Any]], list[Any]]  # the conversation
    message: Callable[[Any, Any], None]  # (Builder, one message) -> items
    head: Callable[[Any, Mapping[str, Any]], None]  # (Builder, body) -> system and tool items
    framing: Callable[[Mapping[str, Any], Callable[[str], int]], list[tuple[str, int]]]  # (key, tokens)
    usage: Callable[[Any], "dict[str, int | None] | None"]  # a response document -> counts
    response_fields: Callable[[Any], tuple[Any, Any, list[str]]]  # -> (model, id, finish reasons)
    output_parts: Callable[[Any], list[dict[str, Any]]]  # content capture only
    stream_framing: str  # how its stream is framed when the content type does not say: "sse", "ndjson", "json-array"
    server_tools: Callable[[Mapping[str, Any]], bool]  # a tool that runs at the provider is offered
    input_content: Callable[[Mapping[str, Any]], tuple[list[Any], list[Any], list[Any]]]  # (system, messages, tools)


def _gemini_server_tools(body: Mapping[str, Any]) -> bool:
    return any(gemini.field(t, "functionDeclarations", "function_declarations") is None
               for t in body.get("tools") or ())


GEMINI = ModuleFormat(gemini.API, gemini.PROVIDER, gemini.body_fits, gemini.contents_of, gemini.message,
                    gemini.head, gemini.framing, gemini.usage, gemini.response_fields, gemini.output_parts,
                    "json-array", _gemini_server_tools, gemini.input_content)
OLLAMA = ModuleFormat(ollama.API, ollama.PROVIDER, ollama.body_fits,
                    lambda body: list(body.get("messages") or ()), ollama.message, ollama.head, ollama.framing,
                    ollama.usage, ollama.response_fields, ollama.output_parts, "ndjson", lambda body: False,
                    ollama.input_content)

FORMATS: dict[str, ModuleFormat] = {f.api: f for f in (GEMINI, OLLAMA)}


def format_of(api: str) -> ModuleFormat | None:
    return FORMATS.get(api)
