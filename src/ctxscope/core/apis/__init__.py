"""The provider APIs ctxscope reads, one module each; the only place that knows their ids.

:data:`WIRE_FORMATS` lists them; :func:`get` finds one by id, :func:`detect` by a
request body's shape, :func:`for_path` by a request URL's path. A new API is
one module here (its :class:`~ctxscope.core.apis.WireFormat`) plus its entry in
:data:`WIRE_FORMATS` (``_registry.py``), and the conformance suite
(``tests/conformance/test_wire_formats.py``) runs over it.

The names below load on first use (``_registry.py`` imports every format): a
format module read alone, as a transcript reads Anthropic's usage
(:mod:`~ctxscope.core.apis.anthropic_usage`), imports none of the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - at run time the registry loads on first use (__getattr__)
    from ctxscope.core.apis._registry import (API_ANTHROPIC, API_GEMINI, API_OLLAMA, API_OPENAI_CHAT,
                                              API_OPENAI_RESPONSES, APIS, FORMATS, TEMPLATE_ANTHROPIC,
                                              TEMPLATE_OPENAI, TEMPLATE_OWN, WIRE_FORMATS, ModuleFormat,
                                              WireFormat, count, detect, field, find, for_path, format_of, get,
                                              known, reported_input, usage, usage_by_shape)

__all__ = [
    "API_ANTHROPIC",
    "API_GEMINI",
    "API_OLLAMA",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    "APIS",
    "FORMATS",
    "ModuleFormat",
    "TEMPLATE_ANTHROPIC",
    "TEMPLATE_OPENAI",
    "TEMPLATE_OWN",
    "WIRE_FORMATS",
    "format_of",
    "WireFormat",
    "count",
    "detect",
    "field",
    "find",
    "for_path",
    "get",
    "known",
    "reported_input",
    "usage",
    "usage_by_shape",
]

_PUBLIC = frozenset(__all__)
# The format modules: attributes of the package once the registry has imported them.
_FORMAT_MODULES = frozenset(("anthropic_messages", "gemini", "ollama", "openai_chat", "openai_responses"))


def __getattr__(name: str) -> Any:
    if name in _FORMAT_MODULES:  # ``apis.gemini`` before anything imported it: the module itself
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    registry = importlib.import_module(f"{__name__}._registry")
    names = globals()
    for public in __all__:  # all of them at once: later reads are plain module attributes
        names[public] = getattr(registry, public)
    return names[name]
