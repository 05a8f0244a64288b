"""What the transport layer reads in each API's responses: one entry per wire format.

The OpenAI and Anthropic entries are the SDK instrumentors' own readers
(:data:`..openai.CHAT`, :data:`..openai.RESPONSES`, :data:`..anthropic.MESSAGES`):
they read plain JSON documents as well as SDK objects, so both layers take
usage, ids and finish reasons from a response by one rule. Gemini and Ollama
come from :mod:`ctxscope.core.apis`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ctxscope.instrumentation._wrappers import ResponseInfo, StreamState, usage_from


@dataclass(frozen=True)
class ResponseFormat:
    info: Callable[[Any], ResponseInfo]  # a whole response document -> usage, ids, finish reasons
    stream_state: Callable[[bool], StreamState]  # a new state for a stream; True: collect the output
    output: Callable[[Any, ResponseInfo], list[dict[str, Any]]]  # content capture only


_FORMATS: dict[str, ResponseFormat] = {}


def register_format(api: str, response_format: ResponseFormat) -> None:
    _FORMATS[api] = response_format


def _builtin() -> None:
    from ctxscope.instrumentation.anthropic import MESSAGES
    from ctxscope.instrumentation.openai import CHAT, RESPONSES

    for api in (CHAT, RESPONSES, MESSAGES):
        _FORMATS.setdefault(api.name, ResponseFormat(api.info, api.stream_state, api.output))


class WireStreamState:
    """A stream of an ctxscope.core.apis format: usage and finish reasons of the last document that has them."""

    def __init__(self, wire: Any, capture: bool = False) -> None:
        self._wire = wire
        self._info = ResponseInfo()
        self._capture = capture
        self._text: list[str] = []
        self._calls: list[dict[str, Any]] = []

    def observe(self, document: Any) -> None:
        info = self._info
        model, response_id, reasons = self._wire.response_fields(document)
        info.response_model = info.response_model or model
        info.response_id = info.response_id or response_id
        if reasons:
            info.finish_reasons = reasons
        counts = self._wire.usage(document)
        if counts is not None:
            info.usage = usage_from(**counts)
        if self._capture:
            for part in self._wire.output_parts(document):
                if part["type"] == "text":
                    self._text.append(part["content"])
                else:
                    self._calls.append(part)

    def info(self) -> ResponseInfo:
        if self._capture:
            parts = ([{"type": "text", "content": "".join(self._text)}] if self._text else []) + self._calls
            self._info.output_messages = [_message(parts, self._info)]
        return self._info


def _message(parts: list[dict[str, Any]], info: ResponseInfo) -> dict[str, Any]:
    return {"role": "assistant", "parts": parts,
            "finish_reason": info.finish_reasons[0] if info.finish_reasons else ""}


def _wire_format(wire: Any) -> ResponseFormat:
    def info(document: Any) -> ResponseInfo:
        model, response_id, reasons = wire.response_fields(document)
        result = ResponseInfo(response_model=model, response_id=response_id, finish_reasons=reasons)
        counts = wire.usage(document)
        if counts is not None:
            result.usage = usage_from(**counts)
        return result

    return ResponseFormat(info, lambda capture: WireStreamState(wire, capture),
                          lambda document, info_: [_message(wire.output_parts(document), info_)])


def format_for(api: str) -> ResponseFormat:
    if api not in _FORMATS:
        from ctxscope.core.apis import format_of

        wire = format_of(api)
        if wire is not None:
            _FORMATS[api] = _wire_format(wire)
        else:
            _builtin()
    return _FORMATS[api]
