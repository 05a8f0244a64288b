"""Deprecated: each API's walker moved to its module of :mod:`ctxscope.core.apis` (this shim goes after one release).

The item builder is :mod:`ctxscope.core.apis._builder` (``Builder``, ``Ids``,
``keyed_hash``); a format's walkers are its :class:`~ctxscope.core.apis.WireFormat`'s
``message``, ``head`` and ``conversation``. Importing this module warns once
(``DeprecationWarning``); its names are the very objects of the new modules, or
thin forwards to them.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ctxscope.core import apis
from ctxscope.core.apis import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES, APIS
from ctxscope.core.apis._builder import Builder, Ids, ToolText, keyed_hash

__all__ = ["API_ANTHROPIC", "API_OPENAI_CHAT", "API_OPENAI_RESPONSES", "APIS", "MESSAGE_FN", "Builder", "Ids",
           "ToolText", "head", "keyed_hash", "messages_of"]

# One message's walker by API id: the formats' own.
MESSAGE_FN: dict[str, Callable[[Builder, Any], None]] = {wire.id: wire.message for wire in apis.WIRE_FORMATS}


def head(b: Builder, body: Mapping[str, Any]) -> None:
    """Items before the conversation (the builder's format's ``head``)."""
    apis.get(b.api).head(b, body)


def messages_of(body: Mapping[str, Any], api: str) -> list[Any]:
    """The conversation of a body as a list (the format's ``conversation``)."""
    return apis.get(api).conversation(body)


warnings.warn("ctxscope.request_formats is deprecated: a format's walkers are its "
              "ctxscope.core.apis WireFormat's "
              "(message, head, conversation); the builder is ctxscope.core.apis._builder",
              DeprecationWarning, stacklevel=2)
