"""What the transport layer reads in each API's responses: one entry per wire format.

The OpenAI and Anthropic entries are the SDK instrumentors' own readers
(:data:`..openai.CHAT`, :data:`..openai.RESPONSES`, :data:`..anthropic.MESSAGES`):
they read plain JSON documents as well as SDK objects, so both layers take
usage, ids and finish reasons from a response by one rule. Gemini and Ollama
come from :mod:`ctxscope.apis`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .._wrappers import ResponseInfo, StreamState


@dataclass(frozen=True)
class ResponseFormat:
    info: Callable[[Any], ResponseInfo]  # a whole response document -> usage, ids, finish reasons
    stream_state: Callable[[bool], StreamState]  # a new state for a stream; True: collect the output
    output: Callable[[Any, ResponseInfo], list[dict[str, Any]]]  # content capture only


_FORMATS: dict[str, ResponseFormat] = {}


def register_format(api: str, response_format: ResponseFormat) -> None:
    _FORMATS[api] = response_format


def _builtin() -> None:
    from ..anthropic import MESSAGES
    from ..openai import CHAT, RESPONSES

    for api in (CHAT, RESPONSES, MESSAGES):
        _FORMATS.setdefault(api.name, ResponseFormat(api.info, api.stream_state, api.output))


def format_for(api: str) -> ResponseFormat:
    if api not in _FORMATS:
        _builtin()
    return _FORMATS[api]
