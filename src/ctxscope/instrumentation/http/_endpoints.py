"""Which HTTP requests are model calls: the endpoint's path, then the body's shape.

:func:`endpoint_for_path` is the cheap test every request through an
instrumented client pays (method and path only, no body, no header); only a
request it accepts has its body read, and :func:`recognise` then checks that
the body is the JSON that API takes. Anything else is passed on untouched.

Pure: no OpenTelemetry, no HTTP library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ctxscope.core import apis
from ctxscope.core.apis import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES

# Framings of a response body, as the provider sends it.
JSON = "json"  # one JSON document
SSE = "sse"  # server-sent events, one JSON document per ``data:`` field
NDJSON = "ndjson"  # one JSON document per line (Ollama)
JSON_ARRAY = "json-array"  # a JSON array streamed element by element (Gemini without ``alt=sse``)

MAX_BODY_BYTES = 32 * 1024 * 1024
"""A request or response body larger than this passes through unread (SPEC: nothing is copied to telemetry)."""


@dataclass(frozen=True)
class Endpoint:
    """A model endpoint one request was sent to."""

    api: str  # items.API_*: the request format the tracker reads
    default_provider: str  # gen_ai.provider.name when the host is not a known provider's
    streamed_always: bool = False  # the path itself asks for a stream (Gemini streamGenerateContent)
    stream_default: bool = False  # a body without "stream" is answered with a stream (Ollama)
    model_in_path: bool = False  # the model is named in the URL, not the body (Gemini)
    conversation: str = "messages"  # the body's field holding the conversation (a JSON array)


CHAT = Endpoint(API_OPENAI_CHAT, "openai")
RESPONSES = Endpoint(API_OPENAI_RESPONSES, "openai", conversation="input")
MESSAGES = Endpoint(API_ANTHROPIC, "anthropic")

# Path endings, tested in order. OpenAI-compatible servers (Azure, Groq, Together,
# DeepSeek, OpenRouter, vLLM, the LiteLLM proxy, Ollama's /v1, Mistral) all
# serve .../chat/completions; Anthropic's count_tokens ends otherwise.
_SUFFIXES: tuple[tuple[str, Endpoint], ...] = (
    ("/chat/completions", CHAT),
    ("/responses", RESPONSES),
    ("/messages", MESSAGES),
)

# gen_ai.provider.name of the hosts the GenAI conventions name (well-known values),
# matched on the end of the host name.
_HOST_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
)

_extra_endpoints: list[tuple[str, Endpoint]] = []
_extra_matchers: list[Any] = []


def register(suffix: str | None, endpoint: Endpoint, matcher: Any = None, ending: str | None = None) -> None:
    """Add an endpoint: by path ending, or by ``matcher(path) -> Endpoint | None`` for paths with ``ending``."""
    global _ENDINGS
    if suffix is not None:
        _extra_endpoints.append((suffix, endpoint))
    if matcher is not None:
        _extra_matchers.append(matcher)
    _ENDINGS = _ENDINGS + tuple(e for e in (suffix, ending) if e is not None)


# Every ending a model endpoint's path can have: one C-level test turns all other paths away.
_ENDINGS: tuple[str, ...] = tuple(suffix for suffix, _ in _SUFFIXES)


def may_be_model_path(path: str) -> bool:
    """True when ``path`` ends like a model endpoint's (registered ones too): the cheap first test."""
    return path.endswith(_ENDINGS)


def may_be_model_url(url: str) -> bool:
    """:func:`may_be_model_path` on a whole URL string: one C-level test for one without query or escapes."""
    if url.endswith(_ENDINGS):
        if "?" not in url and "#" not in url:
            return True
    elif "?" not in url and "#" not in url and "%" not in url:
        return False
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path).endswith(_ENDINGS)


def endpoint_for_path(path: str) -> Endpoint | None:
    """The model endpoint a POST to ``path`` (no query) is, or None: the test every request pays."""
    if not path.endswith(_ENDINGS):
        return None
    for suffix, endpoint in _SUFFIXES:
        if path.endswith(suffix):
            return endpoint
    for suffix, endpoint in _extra_endpoints:
        if path.endswith(suffix):
            return endpoint
    for matcher in _extra_matchers:
        endpoint = matcher(path)
        if endpoint is not None:
            return endpoint
    return None


def provider_for(host: str, endpoint: Endpoint) -> str:
    """gen_ai.provider.name: the host's provider where the conventions name one, else the endpoint's."""
    host = host.lower()
    for ending, provider in _HOST_PROVIDERS:
        if host == ending.lstrip(".") or host.endswith(ending):
            return provider
    return endpoint.default_provider


def body_fits(endpoint: Endpoint, body: Any) -> bool:
    """Whether a parsed request body has the shape of the endpoint's API (not merely its path):
    its wire format says (``WireFormat.body_fits``); an API no format defines is not read."""
    if not isinstance(body, Mapping):
        return False
    wire = apis.find(endpoint.api)
    return wire is not None and bool(wire.body_fits(body))


def streamed(endpoint: Endpoint, body: Mapping[str, Any]) -> bool:
    """Whether the answer is a stream: the body's ``stream`` flag, or the path (Gemini)."""
    if endpoint.streamed_always:
        return True
    flag = body.get("stream")
    return endpoint.stream_default if flag is None else flag is True


def framing(endpoint: Endpoint, is_stream: bool, content_type: str) -> str:
    """How a response body is framed, from the endpoint and the response's content type."""
    content_type = content_type.lower()
    if "text/event-stream" in content_type:
        return SSE
    if "ndjson" in content_type or "jsonl" in content_type:
        return NDJSON
    if is_stream:
        # The wire format's own (Ollama: NDJSON; Gemini: a JSON array), else server-sent events.
        wire = apis.find(endpoint.api)
        return wire.stream_framing if wire is not None else SSE
    return JSON


# ---------------------------------------------------------------------------
# The wire formats of ctxscope.core.apis (Gemini, Ollama)
# ---------------------------------------------------------------------------

def _register_wire_formats() -> None:
    from ctxscope.core.apis import gemini, ollama

    generate = Endpoint(gemini.API, gemini.PROVIDER, model_in_path=True, conversation="contents")
    stream_generate = Endpoint(gemini.API, gemini.PROVIDER, streamed_always=True, model_in_path=True,
                               conversation="contents")

    def gemini_endpoint(path: str) -> Endpoint | None:
        # models/{model}:generateContent, or :streamGenerateContent (tunedModels too).
        if not path.endswith("enerateContent"):
            return None
        found = gemini.model_and_stream(path)
        if found is None:
            return None
        return stream_generate if found[1] else generate

    register(ollama.PATH, Endpoint(ollama.API, ollama.PROVIDER, stream_default=True))
    register(None, generate, gemini_endpoint, ending="enerateContent")


def model_from_path(path: str) -> str | None:
    """The model a Gemini path names (``.../models/gemini-2.0-flash:generateContent``)."""
    from ctxscope.core.apis import gemini

    found = gemini.model_and_stream(path)
    return found[0] if found else None


_register_wire_formats()
