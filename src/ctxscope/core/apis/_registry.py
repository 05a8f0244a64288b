"""The registry of the provider APIs (:mod:`ctxscope.core.apis` loads it on first use).

Everything :mod:`ctxscope.core.apis` names is defined here; the package itself
imports it only when one of those names is first asked for, so that reading one
format module (a transcript reads Anthropic's usage alone) does not import them all.

The provider APIs ctxscope reads, one module each; the only place that knows their ids.

:data:`WIRE_FORMATS` lists them; :func:`get` finds one by id, :func:`detect` by a
request body's shape, :func:`for_path` by a request URL's path. A new API is
one module here (its :class:`~ctxscope.core.apis.WireFormat`) plus its entry in
:data:`WIRE_FORMATS`, and the conformance suite (``tests/conformance/test_wire_formats.py``)
runs over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ctxscope.core.observation import Usage
from ctxscope.core.apis import anthropic_messages, gemini, ollama, openai_chat, openai_responses
from ctxscope.core.apis._base import (TEMPLATE_ANTHROPIC, TEMPLATE_OPENAI, TEMPLATE_OWN, WireFormat,  # noqa: F401
                                      count, field)  # (the package re-exports them)

# The names it defines are the package's (``ctxscope.core.apis.__all__``).

API_OPENAI_CHAT: str = openai_chat.ID
API_OPENAI_RESPONSES: str = openai_responses.ID
API_ANTHROPIC: str = anthropic_messages.ID
API_GEMINI: str = gemini.API
API_OLLAMA: str = ollama.API

# Detection by body shape asks the formats in this order (Ollama's native body looks like a chat
# body: it is told apart by its URL, :func:`for_path`); a body with messages that no format
# claims is chat completions, the shape every OpenAI-compatible server takes.
WIRE_FORMATS: tuple[WireFormat, ...] = (gemini.FORMAT, openai_responses.FORMAT, anthropic_messages.FORMAT,
                                        ollama.FORMAT, openai_chat.FORMAT)
# The formats the provider SDK instrumentors and the message-array transcript reader read.
APIS = (API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC)
_BY_ID = {f.id: f for f in WIRE_FORMATS}


def get(api: str) -> WireFormat:
    """The format of an API id; ``KeyError`` for an id no module defines."""
    return _BY_ID[api]


def find(api: str) -> WireFormat | None:
    """The format of an API id, None for an id no module defines."""
    return _BY_ID.get(api)


def known(api: str) -> WireFormat:
    """The format of an API id; ``ValueError`` naming the known ids for any other (a caller's mistake)."""
    wire = _BY_ID.get(api)
    if wire is None:
        raise ValueError(f"unknown api {api!r}: one of {', '.join(sorted(_BY_ID))}")
    return wire


def detect(body: Mapping[str, Any]) -> str:
    """Which API a request body is for; ``ValueError`` when it is a body of none of them."""
    if not isinstance(body, Mapping):
        raise ValueError("a request body must be a JSON object")
    for wire in WIRE_FORMATS:
        if wire.looks_like(body):
            return wire.id
    if "messages" in body:
        return API_OPENAI_CHAT  # plain-text conversations of the OpenAI shape and every compatible server
    raise ValueError("not a request body: no 'messages' (chat, Anthropic), 'input' (Responses) "
                     "or 'contents' (Gemini)")


def for_path(path: str) -> str | None:
    """The API a request path is for (``/v1/chat/completions``, ``/v1beta/models/m:generateContent``), else None."""
    path = path.split("?", 1)[0].rstrip("/")
    for wire in WIRE_FORMATS:
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
    wire = get(api)
    found = wire.usage(wire.response_usage(response))
    return found.reported_input if found is not None else None


# ---------------------------------------------------------------------------
# The live path's view of the formats with a framing model of their own
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ModuleFormat:
    """A :class:`WireFormat` under the names the HTTP transport layer's response readers use
    (``instrumentation/http/_formats.py``): a view of the one registry, not a second one.

    Remove once that reads the WireFormat's own fields (content capture and the endpoint table do);
    :func:`format_of` is None for the formats that the provider SDK instrumentors read (their
    framing is ``ctxscope.core.framing``'s).
    """

    wire: WireFormat

    @property
    def api(self) -> str:
        return self.wire.id

    def __getattr__(self, name: str) -> Any:
        if name == "usage":  # the response document's counts, as a dict (WireFormat.usage gives a Usage)
            return self.wire.usage_counts
        return getattr(self.wire, name)


FORMATS: dict[str, ModuleFormat] = {w.id: ModuleFormat(w) for w in WIRE_FORMATS if w.template == TEMPLATE_OWN}


def format_of(api: str) -> ModuleFormat | None:
    """The :class:`ModuleFormat` view of a format with its own framing model (Gemini, Ollama), else None."""
    return FORMATS.get(api)
