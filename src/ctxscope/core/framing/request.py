"""The framing of a whole request: the rules of its API, each repeated text counted once.

Formats of :mod:`ctxscope.core.apis` that carry their own framing model (Gemini,
Ollama: ``TEMPLATE_OWN``) are asked; the others name the template whose rules
are here (:mod:`ctxscope.core.framing.anthropic_messages`, :mod:`ctxscope.core.framing.openai_chat`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxscope.core.apis import TEMPLATE_ANTHROPIC
from ctxscope.schema import Item

from ctxscope.core.framing.anthropic_messages import anthropic_framing
from ctxscope.core.framing.body_fields import rules_of
from ctxscope.core.framing.openai_chat import openai_framing
from ctxscope.core.framing.parts import CountFn, FramingPart, parts_to_items


def _memo(count: CountFn) -> CountFn:
    """Role names, headers and turn prefixes repeat on every message: count each once a request."""
    cache: dict[str, int] = {}

    def counted(text: str) -> int:
        value = cache.get(text)
        if value is None:
            value = cache[text] = count(text)
        return value

    return counted


def framing_parts(body: Mapping[str, Any], api: str, count: CountFn, *, model: str | None = None) -> list[FramingPart]:
    """The framing of a request under a provider API."""
    count = _memo(count)
    wire = rules_of(api)
    if wire.framing is not None:  # ctxscope.core.apis: the format's own framing model
        return [FramingPart(key, tokens) for key, tokens in wire.framing(body, count)]
    if wire.template == TEMPLATE_ANTHROPIC:
        return anthropic_framing(body, count, model=model)
    return openai_framing(body, count, model=model, api=api)


def framing_items(body: Mapping[str, Any], api: str, count: CountFn, *, model: str | None = None) -> list[Item]:
    """Framing as items to append to a request's items (fixed token counts, no text).

    Overhead items have part ``overhead``; a server tool's hidden part is a
    ``tools`` item with part ``tools/server/<type>`` (0 tokens when its size
    is not published: self-calibration learns it).
    """
    return parts_to_items(framing_parts(body, api, count, model=model))
