"""The provider APIs ctxscope reads, one module each; the only place that knows their ids.

:data:`FORMATS` lists them; :func:`get` finds one by id, :func:`detect` by a
request body's shape, :func:`for_path` by a request URL's path. A new API is
one module here (its :class:`~ctxscope.apis.WireFormat`) plus its entry in
:data:`FORMATS`, and the conformance suite (``tests/core/test_wire_formats.py``)
runs over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..observation import Usage
from . import anthropic_messages, openai_chat, openai_responses
from ._base import WireFormat, count, field

__all__ = [
    "API_ANTHROPIC",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    "APIS",
    "FORMATS",
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

# Detection asks the formats in this order; the last is the default.
FORMATS: tuple[WireFormat, ...] = (openai_responses.FORMAT, anthropic_messages.FORMAT, openai_chat.FORMAT)
APIS = (API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC)
_BY_ID = {f.id: f for f in FORMATS}


def get(api: str) -> WireFormat:
    """The format of an API id; ``KeyError`` for an id no module defines."""
    return _BY_ID[api]


def detect(body: Mapping[str, Any]) -> str:
    """Which API a request body is for; ``ValueError`` when it is a body of none of them."""
    if not isinstance(body, Mapping):
        raise ValueError("a request body must be a JSON object")
    if "messages" not in body and not openai_responses.FORMAT.looks_like(body):
        raise ValueError("not a request body: no 'messages' (chat, Anthropic) or 'input' (Responses)")
    for wire in FORMATS:
        verdict = wire.looks_like(body)
        if verdict:
            return wire.id
    return API_OPENAI_CHAT  # plain-text conversations of the OpenAI shape and every compatible server


def for_path(path: str) -> str | None:
    """The API a request path is for (``/v1/chat/completions``), else None."""
    path = path.rstrip("/")
    for wire in FORMATS:
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
    found = usage(api, field(response, "usage"))
    return found.reported_input if found is not None else None
