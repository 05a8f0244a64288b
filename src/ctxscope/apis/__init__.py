"""Wire formats, one module each: how a request body becomes items, and what a response reports.

Gemini ``generateContent`` (:mod:`.gemini`) and Ollama's native chat
(:mod:`.ollama`) live here; OpenAI chat completions, Responses and Anthropic
Messages are still in :mod:`ctxscope.request_formats` (they move here later).
Each format is described once, by a :class:`WireFormat`, and the engines
ask it: :mod:`ctxscope.request_formats` (items), :mod:`ctxscope.framing`
(framing), the HTTP transport layer (endpoint, body shape, stream framing,
usage). The counting basis of each is in docs/apis.md.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import gemini, ollama

__all__ = ["FORMATS", "WireFormat", "format_of"]


@dataclass(frozen=True)
class WireFormat:
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


GEMINI = WireFormat(gemini.API, gemini.PROVIDER, gemini.body_fits, gemini.contents_of, gemini.message,
                    gemini.head, gemini.framing, gemini.usage, gemini.response_fields, gemini.output_parts,
                    "json-array", _gemini_server_tools, gemini.input_content)
OLLAMA = WireFormat(ollama.API, ollama.PROVIDER, ollama.body_fits,
                    lambda body: list(body.get("messages") or ()), ollama.message, ollama.head, ollama.framing,
                    ollama.usage, ollama.response_fields, ollama.output_parts, "ndjson", lambda body: False,
                    ollama.input_content)

FORMATS: dict[str, WireFormat] = {f.api: f for f in (GEMINI, OLLAMA)}


def format_of(api: str) -> WireFormat | None:
    return FORMATS.get(api)
