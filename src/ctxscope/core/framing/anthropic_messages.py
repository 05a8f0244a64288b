"""Anthropic Messages framing: turn prefixes, tool-call and result wrappers, the tool-use system prompt.

- Turns framed as the ``\\n\\nHuman:`` / ``\\n\\nAssistant:`` prompt of Anthropic's
  Text Completions format; tool calls in the format Anthropic documents
  (``<function_calls>`` / ``<invoke name=...>`` / ``<parameter name=...>``),
  results in the anthropics/anthropic-tools wrapper.
- The tool-use system prompt: the count Anthropic publishes per model and
  ``tool_choice`` ("Tool use with Claude", Pricing), in Claude tokens; a model
  the table does not list takes the nearest earlier row.
- Context awareness is not framed: the tags the API injects are not in the
  reported input (the comment after :data:`ANTHROPIC_RESULT_WRAPPER`).
- Server tools get a hidden part (:mod:`ctxscope.core.framing.server_tools`) whose
  size is Anthropic's published figure where one exists, else learned.

Counts are in proxy (o200k) tokens where counted, but the published prompt sizes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import get as _get
from ctxscope.core.framing.body_fields import messages_of, model_of, tools_of
from ctxscope.core.framing.claude_proxy import claude_version  # the one parser of model versions
from ctxscope.core.framing.parts import CountFn, FramingPart
from ctxscope.core.framing.server_tools import (ANTHROPIC_SERVER_TOOL_TOKENS, is_anthropic_server_tool,
                                                server_tool_kind, server_tool_part)

# Anthropic docs, "Tool use with Claude", section "Pricing"
# (https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview, the version that
# lists Claude Opus 5): the tool use system prompt token count per model, for tool_choice
# auto or none and for any or tool. "The number of tool use tokens required for each model
# ... (excluding the additional tokens listed above)": everything tools add to the prompt
# besides the definitions themselves (the tools parameter) and the tool_use / tool_result
# blocks. Rows (family, version, auto or none, any or tool), newest first within a family,
# as the page lists them; the Claude 3 rows and Sonnet 3.5/3.7 from the page's earlier
# versions (docs.anthropic.com/en/docs/build-with-claude/tool-use, 2024-2025).
ANTHROPIC_TOOL_SYSTEM_PROMPT: tuple[tuple[str, tuple[int, ...], int, int], ...] = (
    ("opus", (5,), 286, 406),
    ("opus", (4, 8), 290, 410),
    ("opus", (4, 7), 675, 804),
    ("opus", (4, 6), 497, 589),
    ("opus", (4, 5), 496, 588),
    ("opus", (4, 1), 313, 315),
    ("opus", (4,), 313, 315),
    ("sonnet", (5,), 354, 474),
    ("sonnet", (4, 6), 497, 589),
    ("sonnet", (4, 5), 496, 588),
    ("sonnet", (4,), 313, 315),
    ("sonnet", (3, 7), 346, 313),
    ("sonnet", (3, 5), 346, 313),  # 3.5 (Oct); the June 3.5 model was 294 / 261
    ("haiku", (4, 5), 496, 588),
    ("haiku", (3, 5), 264, 355),
    ("opus", (3,), 530, 281),
    ("sonnet", (3,), 159, 235),
    ("haiku", (3,), 264, 340),
)

# Anthropic's Text Completions prompt format: every turn starts "\n\nHuman: " or
# "\n\nAssistant: "; the Messages API frames turns the same way.
ANTHROPIC_TURN_PREFIX = {"user": "\n\nHuman: ", "assistant": "\n\nAssistant: "}
ANTHROPIC_REPLY_PRIMING = "\n\nAssistant:"

# A tool call as Claude writes it: Anthropic's docs, "How to implement tool use" (the
# tool-use system prompt's formatting instructions: "You can invoke functions by writing a
# "<function_calls>" block like the following ...: <function_calls> <invoke
# name="$FUNCTION_NAME"> <parameter name="$PARAMETER_NAME">$PARAMETER_VALUE</parameter> ...
# </invoke> </function_calls>"), the format the Claude 4 system card shows too.
ANTHROPIC_CALL_OPEN = "<function_calls>\n<invoke name=\"{name}\">\n"
ANTHROPIC_CALL_PARAMETER = "<parameter name=\"{key}\">{value}</parameter>\n"
ANTHROPIC_CALL_CLOSE = "</invoke>\n</function_calls>"
# A tool result: anthropics/anthropic-tools tool_use_package/prompt_constructors.py (the
# only published rendering of a result; Anthropic documents none for the current models).
ANTHROPIC_RESULT_WRAPPER = ("<function_results>\n<result>\n<tool_name>{name}</tool_name>\n<stdout>\n"
                            "\n</stdout>\n</result>\n</function_results>")

# Context awareness (Anthropic docs, "Context windows": on Sonnet 5, Sonnet 4.6, Sonnet 4.5
# and Haiku 4.5 "the API injects" a token-budget tag in the system prompt and a usage note
# after each tool call) is not framed: the injected tags are not in the reported input. On
# one body sent to Claude Sonnet 5 (which gets the tags) and Claude Opus 5 (which does not;
# both have the newer tokenizer), the reported inputs differ by 68 tokens, exactly the
# published tool-prompt difference 354 - 286 (docs/fidelity.md, "The Claude target").

def claude_family(model: str | None) -> str:
    """``claude-sonnet-4-5`` -> ``sonnet``; ``claude-3-5-haiku-20241022`` -> ``haiku``; ``""`` if none."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    match = re.match(r"claude-(?:\d+[-.](?:\d[-.])?)?([a-z]+)", name)
    return match.group(1) if match else ""


def _tool_prompt_row(model: str | None) -> tuple[int, int]:
    """The published (auto or none, any or tool) row of a model.

    A model the table lists takes its row. One it does not list yet (Claude Fable 5,
    a newer version) takes the row of the newest listed version at or below its own,
    of its own family when that version lists it, else the first the page lists
    (Opus): the hidden prompt follows the generation (every 4.5 model 496, every
    4.6 model 497), not the family. A name with no version (a compatible endpoint's
    model on the Messages API) takes the newest row.
    """
    family, version = claude_family(model), claude_version(model)
    below = [row for row in ANTHROPIC_TOOL_SYSTEM_PROMPT if row[1] <= version] if version else []
    if not below:
        return ANTHROPIC_TOOL_SYSTEM_PROMPT[0][2:]
    newest = max(row[1] for row in below)
    same = [row for row in below if row[1] == newest]
    row = next((r for r in same if r[0] == family), same[0])
    return row[2], row[3]


def anthropic_tool_prompt_tokens(model: str | None, tool_choice: Any) -> int:
    """Anthropic's published tool-use system prompt size for a model and ``tool_choice``.

    ``auto`` and ``none`` (and no choice: the API's default is auto) take the first
    figure, ``any`` and ``tool`` the second (:data:`ANTHROPIC_TOOL_SYSTEM_PROMPT`).
    """
    choice = tool_choice.get("type") if isinstance(tool_choice, Mapping) else tool_choice
    auto_none, any_tool = _tool_prompt_row(model)
    return any_tool if choice in ("any", "tool") else auto_none


def anthropic_call_tokens(block: Any, count: CountFn) -> int:
    """Tokens the tool-call wrapper adds besides the input JSON (the call's item, ctxscope.core.items)."""
    name = str(_get(block, "name") or "")
    arguments = _get(block, "input")
    arguments = arguments if isinstance(arguments, Mapping) else {}
    rendered = ANTHROPIC_CALL_OPEN.format(name=name) + "".join(
        ANTHROPIC_CALL_PARAMETER.format(key=k, value=v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
        for k, v in arguments.items()) + ANTHROPIC_CALL_CLOSE
    return count(rendered) - count(json.dumps(arguments, ensure_ascii=False))


def anthropic_message_framing(message: Any, count: CountFn, raw: CountFn,
                              names: dict[str, str]) -> tuple[int, int, int, tuple[str, ...]]:
    """One Anthropic message's framing: turn prefix, call wrappers, result wrappers, call ids.

    ``names`` (tool_use id -> tool name) names the results and is filled with
    this message's calls. Call wrappers are counted with ``raw``: argument
    texts differ call to call (a memo of them would only grow).
    Shared by :func:`anthropic_framing` and :mod:`ctxscope.core.framing.incremental`.
    """
    turn = count(ANTHROPIC_TURN_PREFIX.get(str(_get(message, "role")), ANTHROPIC_TURN_PREFIX["user"]))
    calls = results = 0
    call_ids: list[str] = []
    content = _get(message, "content")
    for block in () if isinstance(content, str) else (_as_list(content) or ()):
        kind = _get(block, "type")
        if kind == "tool_use":
            call_id = str(_get(block, "id"))
            call_ids.append(call_id)
            names[call_id] = str(_get(block, "name") or "")
            calls += anthropic_call_tokens(block, raw)
        elif kind == "tool_result":
            name = names.get(str(_get(block, "tool_use_id")), "")
            results += count(ANTHROPIC_RESULT_WRAPPER.format(name=name))
    return turn, calls, results, tuple(call_ids)


def anthropic_framing(body: Mapping[str, Any], count: CountFn, *, model: str | None = None) -> list[FramingPart]:
    """Framing of an Anthropic Messages request, in proxy (o200k) tokens where counted."""
    model = model_of(body, model)
    messages = messages_of(body)
    parts: list[FramingPart] = []
    names: dict[str, str] = {}
    turns = calls = results = 0
    for message in messages:
        turn, call_tokens, result_tokens, _ = anthropic_message_framing(message, count, count, names)
        turns += turn
        calls += call_tokens
        results += result_tokens
    parts.append(FramingPart("messages", turns))
    parts.append(FramingPart("priming", count(ANTHROPIC_REPLY_PRIMING)))
    if calls or results:
        parts.append(FramingPart("tool-calls", max(0, calls + results)))
    tools = tools_of(body)
    if tools:
        # The published figure is everything tools add besides the definitions (the
        # <functions> wrapper included): Anthropic's Claude tokens, not proxy tokens.
        parts.append(FramingPart("tool-use-prompt", anthropic_tool_prompt_tokens(model, body.get("tool_choice"))))
    for tool in tools:
        if not is_anthropic_server_tool(tool):
            continue
        kind = server_tool_kind(tool)
        known = ANTHROPIC_SERVER_TOOL_TOKENS.get(kind.split("_20")[0])
        parts.append(FramingPart("server:" + kind, known or 0, part=server_tool_part(tool),
                                 learned=known is None))
    return parts
