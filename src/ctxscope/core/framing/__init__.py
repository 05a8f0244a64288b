"""Provider framing models: what a provider adds to a request before the model sees it.

A request body is not what the model reads. The provider wraps every message in
special tokens, renders tool definitions into a prompt language of its own, adds
a reply priming and, for some model families, a fixed hidden prompt. This
package models that, each rule and constant with its public source (see
``docs/fidelity.md``), one module a job:

- :mod:`~ctxscope.core.framing.openai_chat`: OpenAI chat and Responses (cookbook
  per-message rule, hmarr's functions block, tool-call headers);
- :mod:`~ctxscope.core.framing.harmony`: the harmony rendering of reasoning models
  (gpt-5, o-series): hidden system message, section headers, priming;
- :mod:`~ctxscope.core.framing.tool_rendering`: tool definitions as the provider
  renders them into the prompt;
- :mod:`~ctxscope.core.framing.anthropic_messages`: Anthropic (turn prefixes, call
  and result wrappers, the tool-use system prompt, context awareness);
- :mod:`~ctxscope.core.framing.server_tools`: tools that run at the provider, their
  hidden part, the tool-set key of self-calibration;
- :mod:`~ctxscope.core.framing.claude_proxy`: Claude's tokens from the o200k_base
  proxy and a published ratio per kind of content;
- :mod:`~ctxscope.core.framing.parts`: framing parts and the one place they become items;
- :mod:`~ctxscope.core.framing.request`: a whole request's framing under its API;
- :mod:`~ctxscope.core.framing.incremental`: the same for a session's successive
  requests, in proportion to what is new (the tracker's);
- :mod:`~ctxscope.core.framing.body_fields`: what framing reads of a body.

Framing lands in ``overhead`` (part ``overhead``), tool rendering in ``tools``.
Pure: imports neither OpenTelemetry nor a provider SDK. The names below are
the package's public surface (every one importable as ``ctxscope.core.framing.<name>``),
each loaded with its module on first use: a transcript command needs Claude's
proxy encoding alone, not the request framing models and the wire formats behind them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - at run time each name loads with its module (__getattr__)
    from ctxscope.core.apis import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES
    from ctxscope.core.framing.anthropic_messages import (
        ANTHROPIC_CALL_CLOSE,
        ANTHROPIC_CALL_OPEN,
        ANTHROPIC_CALL_PARAMETER,
        ANTHROPIC_REPLY_PRIMING,
        ANTHROPIC_RESULT_WRAPPER,
        ANTHROPIC_TOOL_SYSTEM_PROMPT,
        ANTHROPIC_TURN_PREFIX,
        anthropic_call_tokens,
        anthropic_framing,
        anthropic_message_framing,
        anthropic_tool_prompt_tokens,
        claude_family,
        claude_version,
    )
    from ctxscope.core.framing.body_fields import openai_function_of
    from ctxscope.core.framing.claude_proxy import (
        CLAUDE_NEWER_TOKENIZER_RATIO,
        CLAUDE_PROXY_RATIO,
        PROXY_CODE,
        PROXY_ENCODING_KEY,
        PROXY_MATH,
        PROXY_PROSE,
        is_claude,
        proxy_encoding_items,
        proxy_encoding_tokens,
        proxy_kind,
        proxy_ratio,
        proxy_tokens,
        uses_newer_tokenizer,
    )
    from ctxscope.core.framing.harmony import (
        HARMONY_CALL_HEADER,
        HARMONY_FUNCTIONS_CHANNEL_NOTE,
        HARMONY_INSTRUCTIONS_HEADER,
        HARMONY_REPLY_PRIMING,
        HARMONY_RESPONSE_FORMATS_HEADER,
        HARMONY_RESULT_AUTHOR,
        HARMONY_SYSTEM_MESSAGE,
        HARMONY_TOKENS_PER_MESSAGE,
        HARMONY_TOOLS_HEADER,
        harmony_hidden_prompt,
    )
    from ctxscope.core.framing.openai_chat import (
        OPENAI_FUNCTIONS_FRAMING,
        OPENAI_FUNCTIONS_WITH_SYSTEM,
        OPENAI_REPLY_PRIMING,
        OPENAI_TOKENS_PER_MESSAGE,
        OPENAI_TOKENS_PER_NAME,
        OPENAI_TOOL_CHOICE_NAMED,
        OPENAI_TOOL_CHOICE_NONE,
        openai_framing,
        openai_message_framing,
        responses_message,
        tool_call_name,
    )
    from ctxscope.core.framing.parts import OVERHEAD_PART, CountFn, FramingPart, parts_to_items
    from ctxscope.core.framing.request import framing_items, framing_parts
    from ctxscope.core.framing.server_tools import (
        ANTHROPIC_SERVER_TOOL_TOKENS,
        SERVER_TOOL_PART_PREFIX,
        SERVER_TOOLS_KEY_PREFIX,
        has_server_tools,
        is_anthropic_server_tool,
        server_tool_kind,
        server_tool_part,
        tools_key,
    )
    from ctxscope.core.framing.tool_rendering import (
        OPENAI_NAMESPACE_CLOSE,
        OPENAI_NAMESPACE_OPEN,
        render_anthropic_tool,
        render_openai_function,
        render_openai_functions,
        tool_definition_text,
    )

__all__ = [
    # API ids (ctxscope.core.apis), importable from here as before the split
    "API_ANTHROPIC",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    # parts and items
    "OVERHEAD_PART",
    "CountFn",
    "FramingPart",
    "parts_to_items",
    # a whole request
    "framing_items",
    "framing_parts",
    # OpenAI chat and Responses
    "OPENAI_FUNCTIONS_FRAMING",
    "OPENAI_FUNCTIONS_WITH_SYSTEM",
    "OPENAI_REPLY_PRIMING",
    "OPENAI_TOKENS_PER_MESSAGE",
    "OPENAI_TOKENS_PER_NAME",
    "OPENAI_TOOL_CHOICE_NAMED",
    "OPENAI_TOOL_CHOICE_NONE",
    "openai_framing",
    "openai_message_framing",
    "responses_message",
    "tool_call_name",
    # harmony
    "HARMONY_CALL_HEADER",
    "HARMONY_FUNCTIONS_CHANNEL_NOTE",
    "HARMONY_INSTRUCTIONS_HEADER",
    "HARMONY_REPLY_PRIMING",
    "HARMONY_RESPONSE_FORMATS_HEADER",
    "HARMONY_RESULT_AUTHOR",
    "HARMONY_SYSTEM_MESSAGE",
    "HARMONY_TOKENS_PER_MESSAGE",
    "HARMONY_TOOLS_HEADER",
    "harmony_hidden_prompt",
    # tool rendering
    "OPENAI_NAMESPACE_CLOSE",
    "OPENAI_NAMESPACE_OPEN",
    "openai_function_of",
    "render_anthropic_tool",
    "render_openai_function",
    "render_openai_functions",
    "tool_definition_text",
    # Anthropic
    "ANTHROPIC_CALL_CLOSE",
    "ANTHROPIC_CALL_OPEN",
    "ANTHROPIC_CALL_PARAMETER",
    "ANTHROPIC_REPLY_PRIMING",
    "ANTHROPIC_RESULT_WRAPPER",
    "ANTHROPIC_TOOL_SYSTEM_PROMPT",
    "ANTHROPIC_TURN_PREFIX",
    "anthropic_call_tokens",
    "anthropic_framing",
    "anthropic_message_framing",
    "anthropic_tool_prompt_tokens",
    "claude_family",
    "claude_version",
    # server tools
    "ANTHROPIC_SERVER_TOOL_TOKENS",
    "SERVER_TOOLS_KEY_PREFIX",
    "SERVER_TOOL_PART_PREFIX",
    "has_server_tools",
    "is_anthropic_server_tool",
    "server_tool_kind",
    "server_tool_part",
    "tools_key",
    # Claude's proxy encoding
    "CLAUDE_NEWER_TOKENIZER_RATIO",
    "CLAUDE_PROXY_RATIO",
    "PROXY_CODE",
    "PROXY_ENCODING_KEY",
    "PROXY_MATH",
    "PROXY_PROSE",
    "is_claude",
    "proxy_encoding_items",
    "proxy_encoding_tokens",
    "proxy_kind",
    "proxy_ratio",
    "proxy_tokens",
    "uses_newer_tokenizer",
]


# Where a name is looked for on first use: Claude's proxy encoding and the parts first (what
# the transcript commands use), then the rest in the order the package used to import them.
_SEARCH = ("claude_proxy", "parts", "anthropic_messages", "body_fields", "harmony", "openai_chat",
           "request", "server_tools", "tool_rendering")
_FROM_APIS = frozenset(("API_ANTHROPIC", "API_OPENAI_CHAT", "API_OPENAI_RESPONSES"))
_PUBLIC = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _FROM_APIS:
        value = getattr(importlib.import_module("ctxscope.core.apis"), name)
    else:
        for module in _SEARCH:
            found = importlib.import_module(f"{__name__}.{module}")
            if name in found.__dict__:
                value = found.__dict__[name]
                break
        else:  # pragma: no cover - every public name is defined in one of them (tests/core/test_framing.py)
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once: later reads are plain module attributes
    return value
