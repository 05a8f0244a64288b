"""What every wire format module provides, and the small readers they share.

A wire format is one provider API's request and response shape (OpenAI chat
completions, OpenAI Responses, Anthropic Messages). Its module answers, for
that API alone: is this body mine, where are its messages, what is its
reported input (SPEC section 4), and what seeds its session fingerprint
(SPEC section 1). Code that used to branch on the API asks the format.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.payload import get as payload_get

__all__ = ["WireFormat", "count", "field"]


def field(obj: Any, name: str) -> Any:
    """A field of a dict or of an SDK object (pydantic model) alike."""
    return payload_get(obj, name)


def count(value: Any) -> int | None:
    """A token count as the provider reported it: a whole number >= 0, else None (not a count).

    Booleans, negative numbers, NaN and infinities are not counts; a float
    with no fraction (``12.0``, as some relays write) is.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value == int(value):
        return int(value)
    return None


@dataclass(frozen=True)
class WireFormat:
    """One provider API. Instances live in the format modules; :mod:`ctxscope.core.apis` lists them."""

    id: str  # the API id used everywhere (``openai.chat``)
    provider: str  # gen_ai.provider.name
    url_suffixes: tuple[str, ...]  # request paths that are this API
    looks_like: Callable[[Mapping[str, Any]], bool | None]  # True/False when the body tells, None when unsure
    messages: Callable[[Mapping[str, Any]], Sequence[Any]]  # the conversation of a body
    session_seed: Callable[[Mapping[str, Any]], tuple[str, str]]  # (system text, first user text)
    usage: Callable[[Any], Usage | None]  # a response's usage object or dict -> Usage (None: no usage)
    # Where a response document keeps that usage: its ``usage`` field, or the document itself
    # (Gemini's usageMetadata, Ollama's counts sit on the document).
    response_usage: Callable[[Any], Any] = lambda response: field(response, "usage")
