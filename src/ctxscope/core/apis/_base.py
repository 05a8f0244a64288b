"""What every wire format module provides, and the small readers they share.

A wire format is one provider API's request and response shape (OpenAI chat
completions, OpenAI Responses, Anthropic Messages, Gemini, Ollama). Its module
answers, for that API alone: is this body mine, where are its messages and how
are they walked into items, which framing rules apply, what is its reported
input (SPEC section 4), and what seeds its session fingerprint (SPEC
section 1). Code that used to branch on the API asks the format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.apis._fields import count, field

__all__ = ["TEMPLATE_ANTHROPIC", "TEMPLATE_OPENAI", "TEMPLATE_OWN", "WireFormat", "count", "field"]


# How a format's requests are framed (ctxscope.core.framing): the prompt template whose rules apply.
TEMPLATE_OPENAI = "openai"  # per-message tokens, the functions namespace (chat completions, Responses)
TEMPLATE_ANTHROPIC = "anthropic"  # Claude's turns and tool prompt; the system prompt is no message
TEMPLATE_OWN = "own"  # the format module's own whole-request model (WireFormat.framing)


def _none(*args: Any) -> None:
    return None


@dataclass(frozen=True, kw_only=True)
class WireFormat:
    """One provider API. Instances live in the format modules; :mod:`ctxscope.core.apis` lists them.

    Code that used to branch on an API id asks these fields instead; a new API
    fills them in its own module.
    """

    id: str  # the API id used everywhere (``openai.chat``)
    provider: str  # gen_ai.provider.name
    url_suffixes: tuple[str, ...]  # request paths that are this API
    looks_like: Callable[[Mapping[str, Any]], bool | None]  # True/False when the body tells, None when unsure
    messages: Callable[[Mapping[str, Any]], Sequence[Any]]  # the conversation of a body, as the fingerprint reads it
    session_seed: Callable[[Mapping[str, Any]], tuple[str, str]]  # (system text, first user text)
    usage: Callable[[Any], Usage | None]  # a response's usage object or dict -> Usage (None: no usage)
    # Where a response document keeps that usage: its ``usage`` field, or the document itself
    # (Gemini's usageMetadata, Ollama's counts sit on the document).
    response_usage: Callable[[Any], Any] = lambda response: field(response, "usage")

    # -- items (ctxscope.core.items walks a body with these and apis._builder.Builder) --
    # The conversation as items walks it: a list (ValueError for a one-shot iterator: the SDK still reads it).
    conversation: Callable[[Mapping[str, Any]], list[Any]]
    message: Callable[[Any, Any], None]  # (Builder, one message or input item): its items
    head: Callable[[Any, Mapping[str, Any]], None]  # (Builder, body): system prompt, instructions, tool definitions
    # Whose published media formulas price its images and documents (ctxscope.core.media): "openai" or
    # "anthropic"; a format without published rates of its own counts media in its walker.
    media_rules: str = "openai"

    # -- framing (ctxscope.core.framing) --
    template: str = TEMPLATE_OPENAI
    conversation_field: str = "messages"  # the body field that holds the conversation
    # A top-level text the template frames as a message of its own (Responses' instructions:
    # a developer message), else None.
    instructions_field: str | None = None
    # Conversation entries are typed input items (Responses), framed as the chat messages they stand for.
    typed_items: bool = False
    # TEMPLATE_OWN: (body, count) -> [(framing key, tokens)] of the whole request.
    framing: Callable[[Mapping[str, Any], Callable[[str], int]], list[tuple[str, int]]] | None = None
    # TEMPLATE_OWN: whether a tool that runs at the provider is offered (its hidden part is learned).
    server_tools: Callable[[Mapping[str, Any]], bool] = lambda body: False

    # -- the call --
    call_id_prefix: str = "call_"  # how the provider's tool call ids start (Anthropic's: toolu_)
    # -- conversation state the provider keeps (Responses: stored responses, conversation objects) --
    # A body may name state kept at the provider, and a later request may continue from a call's
    # response by its id: the live tracker then keys sessions by that state (the three readers below).
    server_state: bool = False
    # The provider's conversation object a body names (its id), else None: the session's natural key.
    provider_conversation: Callable[[Mapping[str, Any]], str | None] = _none
    # The earlier response a body continues from (its id), else None: that response's session.
    previous_response: Callable[[Mapping[str, Any]], str | None] = _none
    # The provider prepends context the body does not show (a stored response or conversation):
    # the body is a partial view of the request (SPEC section 4, coverage).
    stored_context: Callable[[Mapping[str, Any]], bool] = lambda body: False
    # The provider compacts or edits the context on its side (Anthropic: compaction blocks, context_management).
    context_management: bool = False
    # (URL path, body) -> whether the answer is a stream: the body's flag (Gemini: the path; Ollama: unless
    # the body says no).
    streamed: Callable[[str, Mapping[str, Any]], bool] = lambda path, body: bool(body.get("stream"))
    path_model: Callable[[str], str | None] = lambda path: None  # the model a URL names (Gemini), else None
    # A body sent to one of its URLs has its shape (the transport layer checks it before reading).
    body_fits: Callable[[Mapping[str, Any]], bool] = lambda body: True

    # -- responses as the HTTP transport layer reads them (formats the provider SDK instrumentors do not cover) --
    stream_framing: str = "sse"  # when the content type does not say: "sse", "ndjson", "json-array"
    response_fields: Callable[[Any], tuple[Any, Any, list[str]]] = lambda document: (None, None, [])
    usage_counts: Callable[[Any], "dict[str, int | None] | None"] = _none  # a response document -> counts
    output_parts: Callable[[Any], list[dict[str, Any]]] = lambda document: []  # content capture only
    input_content: Callable[[Mapping[str, Any]], tuple[list[Any], list[Any], list[Any]]] = \
        lambda body: ([], [], [])  # (system, messages, tools), content capture only
