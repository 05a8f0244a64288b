"""OpenAI Responses (``POST /v1/responses``).

Reported input (SPEC section 4): ``usage.input_tokens``, which includes the
cached part (``input_tokens_details.cached_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.apis._base import WireFormat, field
from ctxscope.core.apis._text import content_text, system_and_first_user
from ctxscope.core.apis.openai_chat import input_usage

ID = "openai.responses"
PROVIDER = "openai"


def _looks_like(body: Mapping[str, Any]) -> bool | None:
    # Responses bodies have ``input`` (or only ``instructions``) where the others have ``messages``.
    if "messages" in body:
        return False
    return True if ("input" in body or "instructions" in body) else None


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    value = body.get("input")
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    return value if isinstance(value, list) else ()


def _seed(body: Mapping[str, Any]) -> tuple[str, str]:
    return system_and_first_user([content_text(body.get("instructions"))], _messages(body))


def usage(value: Any) -> Usage | None:
    if value is None or field(value, "input_tokens") is None:
        return None
    return input_usage(value, "input_tokens", "output_tokens")


FORMAT = WireFormat(ID, PROVIDER, ("/responses",), _looks_like, _messages, _seed, usage)
