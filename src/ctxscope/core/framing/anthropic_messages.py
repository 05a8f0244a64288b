"""Anthropic Messages framing: turn prefixes, tool-call wrappers, the tool-use system prompt, context awareness.

- Turns framed as the ``\\n\\nHuman:`` / ``\\n\\nAssistant:`` prompt of Anthropic's
  Text Completions format; tool calls and results wrapped as Claude's tool
  prompt writes them (anthropics/anthropic-tools).
- The tool-use system prompt: for models before 4.5, the sizes Anthropic
  publishes per model and ``tool_choice`` ("Tool use: pricing"). For the models
  with context awareness (Sonnet 4.5, Haiku 4.5 and later) it is Anthropic's
  documented template (``implement-tool-use``: intro, formatting instructions,
  parameter rules, the definitions, the user's system prompt, the tool
  configuration) with the two placeholders filled from the public
  reconstruction of the API's prompt, counted with the proxy ratio
  (:mod:`ctxscope.core.framing.claude_proxy`); older models keep the published table.
- Context awareness ("Context windows: context awareness"): the budget line at
  the start and a usage note after each tool result.
- Server tools get a hidden part (:mod:`ctxscope.core.framing.server_tools`) whose
  size is Anthropic's published figure where one exists, else learned.

Counts are in proxy (o200k) tokens where counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import get as _get
from ctxscope.core.framing.body_fields import messages_of, model_of, tools_of
from ctxscope.core.framing.claude_proxy import PROXY_CODE, PROXY_PROSE, proxy_tokens
from ctxscope.core.framing.parts import CountFn, FramingPart
from ctxscope.core.framing.server_tools import (ANTHROPIC_SERVER_TOOL_TOKENS, is_anthropic_server_tool,
                                               server_tool_kind, server_tool_part)

# Anthropic docs, "Tool use with Claude: pricing" table of the tool-use system
# prompt: (auto or none, any or tool) per model family. Claude 4.x, Sonnet 3.7
# and Haiku 4.5 share the first row; the Claude 3 rows are the legacy table.
ANTHROPIC_TOOL_SYSTEM_PROMPT: tuple[tuple[tuple[str, ...], int, int], ...] = (
    (("claude-3-opus",), 530, 281),
    (("claude-3-sonnet",), 159, 235),
    (("claude-3-haiku", "claude-3-5-haiku"), 264, 340),
    (("claude",), 346, 313),  # Opus 4.x, Sonnet 4.x, Haiku 4.5, Sonnet 3.7 and later
)

# Anthropic's Text Completions prompt format: every turn starts "\n\nHuman: " or
# "\n\nAssistant: "; the Messages API frames turns the same way.
ANTHROPIC_TURN_PREFIX = {"user": "\n\nHuman: ", "assistant": "\n\nAssistant: "}
ANTHROPIC_REPLY_PRIMING = "\n\nAssistant:"

# anthropics/anthropic-tools tool_use_package/prompt_constructors.py: how Claude's
# tool calls and their results are written into the prompt.
ANTHROPIC_CALL_OPEN = "<function_calls>\n<invoke>\n<tool_name>{name}</tool_name>\n<parameters>\n"
ANTHROPIC_CALL_PARAMETER = "<{key}>{value}</{key}>\n"
ANTHROPIC_CALL_CLOSE = "</parameters>\n</invoke>\n</function_calls>"
ANTHROPIC_RESULT_WRAPPER = ("<function_results>\n<result>\n<tool_name>{name}</tool_name>\n<stdout>\n"
                            "\n</stdout>\n</result>\n</function_results>")

# Anthropic docs, "Context windows: context awareness" (Claude Sonnet 4.5, Haiku 4.5
# and later): the model is told its budget at the start and its usage after each
# tool result.
ANTHROPIC_BUDGET_NOTE = "<budget:token_budget>200000</budget:token_budget>"
ANTHROPIC_USAGE_NOTE = "<system_warning>Token usage: 35000/200000; 165000 remaining</system_warning>"
ANTHROPIC_CONTEXT_AWARE_SINCE = (4, 5)

# The tool-use system prompt of the models with context awareness, as segments
# (kind, text). Its frame is Anthropic's documented template (docs "How to
# implement tool use" / "Define tools": "In this environment you have access to a
# set of tools ...", {{ FORMATTING INSTRUCTIONS }}, the parameter rules, "Here are
# the functions available in JSONSchema format:", {{ TOOL DEFINITIONS }},
# {{ USER SYSTEM PROMPT }}, {{ TOOL CONFIGURATION }}). The two placeholders are
# filled from the public reconstruction of the API's hidden prompt (a GitHub note
# "System prompt: When Claude is accessed via the API ...", which ends with the
# context-awareness budget line, i.e. was taken on a 4.5-or-later model; its tail
# also in vladimir-ks/claude-context-manager, research/claude-code-system-prompt/
# 32_json-formatting-instructions.md and 33_final-tool-usage-instructions.md).
# The definitions (``<functions>`` and the tools' entries) and the user's system
# prompt are counted elsewhere; the budget line is the context-awareness part.
ANTHROPIC_TOOL_PROMPT: tuple[tuple[str, str], ...] = (
    (PROXY_PROSE, "In this environment you have access to a set of tools you can use to answer the user's "
                  "question.\nYou can invoke functions by writing a \"<function_calls>\" block like the "
                  "following as part of your reply to the user:\n"),
    (PROXY_CODE, "<function_calls>\n<invoke name=\"$FUNCTION_NAME\">\n<parameter name=\"$PARAMETER_NAME\">"
                 "$PARAMETER_VALUE</parameter>\n...\n</invoke>\n<invoke name=\"$FUNCTION_NAME2\">\n...\n"
                 "</invoke>\n</function_calls>\n"),
    (PROXY_PROSE, "String and scalar parameters should be specified as is, while lists and objects should use "
                  "JSON format. Note that spaces for string values are not stripped. The output is not expected "
                  "to be valid XML and is parsed with regular expressions.\nHere are the functions available in "
                  "JSONSchema format:\n"),
    (PROXY_PROSE, "\n\nWhen making function calls using tools that accept array or object parameters ensure "
                  "those are structured using JSON. For example:\n"),
    (PROXY_CODE, "<function_calls>\n<invoke name=\"example_complex_tool\">\n<parameter name=\"parameter\">"
                 "[{\"color\": \"orange\", \"options\": {\"option_key_1\": true, \"option_key_2\": \"value\"}}, "
                 "{\"color\": \"purple\", \"options\": {\"option_key_1\": true, \"option_key_2\": \"value\"}}]"
                 "</parameter>\n</invoke>\n</function_calls>\n"),
    (PROXY_PROSE, "\nAnswer the user's request using the relevant tool(s), if they are available. Check that "
                  "all the required parameters for each tool call are provided or can reasonably be inferred "
                  "from context. IF there are no relevant tools or there are missing values for required "
                  "parameters, ask the user to supply these values; otherwise proceed with the tool calls. If "
                  "the user provides a specific value for a parameter (for example provided in quotes), make "
                  "sure to use that value EXACTLY. DO NOT make up values for or ask about optional parameters."
                  "\n\nIf you intend to call multiple tools and there are no dependencies between the calls, "
                  "make all of the independent calls in the same <function_calls></function_calls> block, "
                  "otherwise you MUST wait for previous calls to finish first to determine the dependent "
                  "values (do NOT use placeholders or guess missing parameters).\n"),
)


def anthropic_tool_prompt_tokens(model: str | None, tool_choice: Any) -> int:
    """Anthropic's published tool-use system prompt size for a model and tool_choice."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    choice = tool_choice.get("type") if isinstance(tool_choice, Mapping) else tool_choice
    forced = choice in ("any", "tool")
    for prefixes, auto_none, any_tool in ANTHROPIC_TOOL_SYSTEM_PROMPT:
        if name.startswith(prefixes):
            return any_tool if forced else auto_none
    _, auto_none, any_tool = ANTHROPIC_TOOL_SYSTEM_PROMPT[-1]  # unknown families: the current row
    return any_tool if forced else auto_none


def anthropic_tool_prompt(model: str | None, tool_choice: Any, count: CountFn) -> int:
    """Size of the hidden tool-use system prompt of a Claude request with tools.

    Models with context awareness (Sonnet 4.5, Haiku 4.5 and later): the documented
    template filled from the public reconstruction (:data:`ANTHROPIC_TOOL_PROMPT`),
    counted in proxy tokens times the published ratio, for every ``tool_choice``
    (the template is one; what a forced choice adds to the tool configuration is
    not published and is learned at run time). Older models: Anthropic's table
    (:func:`anthropic_tool_prompt_tokens`), which the recordings of Sonnet 4.0
    agree with.
    """
    if claude_version(model) >= ANTHROPIC_CONTEXT_AWARE_SINCE:
        return proxy_tokens(ANTHROPIC_TOOL_PROMPT, count)
    return anthropic_tool_prompt_tokens(model, tool_choice)


def claude_version(model: str | None) -> tuple[int, ...]:
    """``claude-sonnet-4-5`` -> (4, 5); ``claude-3-5-haiku`` -> (3, 5); ``claude-opus-5`` -> (5,); () if none."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    match = re.match(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?", name)
    if not match:
        return ()
    return tuple(int(g) for g in match.groups() if g is not None)


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
                              names: dict[str, str]) -> tuple[int, int, int, int, tuple[str, ...]]:
    """One Anthropic message's framing: turn prefix, call wrappers, result wrappers, results, call ids.

    ``names`` (tool_use id -> tool name) names the results and is filled with
    this message's calls. Call wrappers are counted with ``raw``: argument
    texts differ call to call (a memo of them would only grow).
    Shared by :func:`anthropic_framing` and :mod:`ctxscope.core.framing.incremental`.
    """
    turn = count(ANTHROPIC_TURN_PREFIX.get(str(_get(message, "role")), ANTHROPIC_TURN_PREFIX["user"]))
    calls = results = result_count = 0
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
            result_count += 1
    return turn, calls, results, result_count, tuple(call_ids)


def anthropic_framing(body: Mapping[str, Any], count: CountFn, *, model: str | None = None) -> list[FramingPart]:
    """Framing of an Anthropic Messages request, in proxy (o200k) tokens where counted."""
    model = model_of(body, model)
    messages = messages_of(body)
    parts: list[FramingPart] = []
    names: dict[str, str] = {}
    turns = calls = results = result_count = 0
    for message in messages:
        turn, call_tokens, result_tokens, message_results, _ = anthropic_message_framing(message, count, count, names)
        turns += turn
        calls += call_tokens
        results += result_tokens
        result_count += message_results
    parts.append(FramingPart("messages", turns))
    parts.append(FramingPart("priming", count(ANTHROPIC_REPLY_PRIMING)))
    if calls or results:
        parts.append(FramingPart("tool-calls", max(0, calls + results)))
    if claude_version(model) >= ANTHROPIC_CONTEXT_AWARE_SINCE:
        parts.append(FramingPart("context-awareness",
                                 count(ANTHROPIC_BUDGET_NOTE) + result_count * count(ANTHROPIC_USAGE_NOTE)))
    tools = tools_of(body)
    if tools:
        parts.append(FramingPart("tool-use-prompt", anthropic_tool_prompt(model, body.get("tool_choice"), count)))
        if any(not is_anthropic_server_tool(t) for t in tools):
            parts.append(FramingPart("functions", count("<functions>\n</functions>")))
    for tool in tools:
        if not is_anthropic_server_tool(tool):
            continue
        kind = server_tool_kind(tool)
        known = ANTHROPIC_SERVER_TOOL_TOKENS.get(kind.split("_20")[0])
        parts.append(FramingPart("server:" + kind, known or 0, part=server_tool_part(tool),
                                 learned=known is None))
    return parts
