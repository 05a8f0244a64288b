"""The harmony rendering of OpenAI's reasoning models (gpt-5, o-series, gpt-oss, codex).

Rendered from openai/harmony ``docs/format.md``: the header fields of tool calls
and results (``to=functions.<name>``, content type ``json``, the author
``functions.<name>``), the hidden system message (model identity, knowledge
cutoff, date, reasoning effort, channels) a reasoning model's request with
functions is billed for, the tool and response-format section headers of the
developer message, and the two-token reply priming.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxscope.core.framing.parts import CountFn

# openai/harmony docs/format.md: the header of a tool call names its recipient
# and content type; a tool result is authored by the tool it answers.
HARMONY_CALL_HEADER = " to=functions.{name} json"
HARMONY_RESULT_AUTHOR = "functions.{name}"

# openai/harmony docs/format.md, "System message format" (the message reasoning
# models get before any developer text) and "Developer message format".
HARMONY_SYSTEM_MESSAGE = (
    "You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
)
HARMONY_FUNCTIONS_CHANNEL_NOTE = "\nCalls to these tools must go to the commentary channel: 'functions'."
HARMONY_INSTRUCTIONS_HEADER = "# Instructions\n\n"
HARMONY_TOOLS_HEADER = "# Tools\n\n## functions\n\n"
HARMONY_RESPONSE_FORMATS_HEADER = "# Response Formats\n\n## {name}\n\n"
# <|start|>{role}<|message|> ... <|end|>: three special tokens a message (format.md).
HARMONY_TOKENS_PER_MESSAGE = 3
# openai/harmony docs/format.md, "Prompt to complete" (render_conversation_for_completion):
# a reasoning model's prompt ends with "<|start|>assistant"; the model itself writes
# the channel ("<|channel|>analysis<|message|>..."), so the priming is two tokens, not
# the cookbook's three (<|start|>assistant<|message|>) of gpt-4o.
HARMONY_REPLY_PRIMING = 2

# Model families that are harmony reasoning models with a hidden system message.
_HARMONY_PREFIXES = ("gpt-5", "o1", "o3", "o4", "gpt-oss", "codex")


def is_harmony(model: str | None) -> bool:
    name = (model or "").lower().rsplit("/", 1)[-1]
    return name.startswith(_HARMONY_PREFIXES)


def response_format_text(body: Mapping[str, Any]) -> str:
    """Structured output in the harmony developer message ("Structured output")."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        text = body.get("text")  # Responses: {"text": {"format": {...}}}
        fmt = text.get("format") if isinstance(text, Mapping) else None
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            fmt = {"type": "json_schema", "json_schema": fmt}
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return ""
    spec = fmt.get("json_schema") or {}
    text = HARMONY_RESPONSE_FORMATS_HEADER.format(name=spec.get("name", "response"))
    if spec.get("description"):
        text += f"// {spec['description']}\n"
    return text + json.dumps(spec.get("schema") or {}, separators=(",", ":"))


def harmony_hidden_prompt(count: CountFn, *, has_system: bool) -> int:
    """Tokens of the harmony system message a reasoning model's request with functions is billed for.

    Only a request that declares functions gets it (docs/fidelity.md, "Reasoning
    models"): the system message then names the channels and that calls go to
    the commentary channel, and the developer message holds the instructions
    (the request's system text, counted as an item) under ``# Instructions``
    ahead of the ``# Tools`` section. Without functions the provider bills the
    messages as sent, with no system message of its own.
    """
    system = (count(HARMONY_SYSTEM_MESSAGE) + HARMONY_TOKENS_PER_MESSAGE + count("system")
              + count(HARMONY_FUNCTIONS_CHANNEL_NOTE))
    if has_system:
        system += count(HARMONY_INSTRUCTIONS_HEADER)
    return system
