"""Provider framing models: what a provider adds to a request before the model sees it.

A request body is not what the model reads. The provider wraps every message in
special tokens, renders tool definitions into a prompt language of its own, adds
a reply priming and, for some model families, a fixed hidden prompt. This module
models that, each rule and constant with its public source (see
``docs/fidelity.md``):

- **OpenAI chat** (``API_OPENAI_CHAT``): OpenAI cookbook "How to count tokens with
  tiktoken": 3 tokens a message plus its role, 1 more for a ``name``, 3 for the
  reply priming (``<|start|>assistant<|message|>``). Function definitions are
  rendered as a TypeScript-like ``namespace functions { ... }`` block, as
  reverse-engineered by hmarr/openai-chat-tokens (``src/functions.ts``) and
  published by OpenAI itself in the harmony format guide (openai/harmony
  ``docs/format.md``, "Function calling"); hmarr adds 9 tokens for the block's
  framing, 4 fewer when a system message exists, 1 for ``tool_choice: none`` and
  4 + the name for a named choice. Tool calls and tool results carry the
  harmony header fields (``to=functions.<name>``, content type ``json``, the
  author ``functions.<name>``).
- **gpt-5 / o-series** (reasoning models): the harmony system message (model
  identity, knowledge cutoff, date, reasoning effort, channels) and the tool
  section headers, rendered from openai/harmony ``docs/format.md``.
- **OpenAI Responses** (``API_OPENAI_RESPONSES``): the same renderer; the Responses
  API is what harmony mimics (``docs/format.md``, first paragraph).
- **Anthropic** (``API_ANTHROPIC``): for models before 4.5, the tool-use system
  prompt sizes Anthropic publishes per model and ``tool_choice`` ("Tool use:
  pricing"); tools rendered
  as the JSON ``<function>`` entries of Claude's tool prompt; turns framed as the
  ``\\n\\nHuman:`` / ``\\n\\nAssistant:`` prompt of Anthropic's Text Completions
  format; Claude text counted with o200k_base as a documented proxy (Claude's
  tokenizer is not public) and converted to Claude tokens by a published
  ratio per kind of content: VentureBeat's measurement of Claude 3.5 Sonnet
  against GPT-4o (o200k_base), 2025-05-01, "Hidden costs in AI deployment: why
  Claude models may be 20-30% more expensive than GPT in enterprise settings":
  English articles +16%, math +21%, Python code +30%; prose takes the first,
  JSON and code the last (:func:`proxy_encoding_items`). What remains is
  learned at run time by :mod:`ctxscope.selfcal`. For the models with context
  awareness (Sonnet 4.5, Haiku 4.5 and later) the tool-use system prompt is
  Anthropic's documented template (``implement-tool-use``: intro, formatting
  instructions, parameter rules, the definitions, the user's system prompt,
  the tool configuration) with the two placeholders filled from the public
  reconstruction of the API's prompt, counted with that ratio; older models
  keep the published table. Server tools get a hidden part
  ``tools/server/<type>`` whose size is Anthropic's published figure where one
  exists, else learned.

Framing lands in ``overhead`` (part ``overhead``), tool rendering in ``tools``.
Pure: imports neither OpenTelemetry nor a provider SDK.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from .payload import as_list as _as_list
from .payload import get as _get
from .schema import Category, Item
from .apis import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES

OVERHEAD_PART = Category.OVERHEAD.value
SERVER_TOOL_PART_PREFIX = "tools/server/"
SERVER_TOOLS_KEY_PREFIX = "s:"  # tools_key of a tool set with a server tool

CountFn = Callable[[str], int]

# ---------------------------------------------------------------------------
# OpenAI chat: cookbook and hmarr constants
# ---------------------------------------------------------------------------

# OpenAI cookbook, "How to count tokens with tiktoken", num_tokens_from_messages:
# every message is <|start|>{role}<|message|>{content}<|end|>: 3 tokens besides the role.
OPENAI_TOKENS_PER_MESSAGE = 3
# Same source: a ``name`` field costs one token besides its text.
OPENAI_TOKENS_PER_NAME = 1
# Same source: "every reply is primed with <|start|>assistant<|message|>".
OPENAI_REPLY_PRIMING = 3
# hmarr/openai-chat-tokens src/index.ts functionsTokensEstimate: "Add nine per completion".
OPENAI_FUNCTIONS_FRAMING = 9
# Same source: with a system message present the functions reuse it: 4 fewer tokens.
OPENAI_FUNCTIONS_WITH_SYSTEM = -4
# Same source: function_call "none" adds 1; a named call adds 4 + the name's tokens.
OPENAI_TOOL_CHOICE_NONE = 1
OPENAI_TOOL_CHOICE_NAMED = 4

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

# ---------------------------------------------------------------------------
# Anthropic
# ---------------------------------------------------------------------------

# Anthropic docs, "Tool use with Claude: pricing" table of the tool-use system
# prompt: (auto or none, any or tool) per model family. Claude 4.x, Sonnet 3.7
# and Haiku 4.5 share the first row; the Claude 3 rows are the legacy table.
ANTHROPIC_TOOL_SYSTEM_PROMPT: tuple[tuple[tuple[str, ...], int, int], ...] = (
    (("claude-3-opus",), 530, 281),
    (("claude-3-sonnet",), 159, 235),
    (("claude-3-haiku", "claude-3-5-haiku"), 264, 340),
    (("claude",), 346, 313),  # Opus 4.x, Sonnet 4.x, Haiku 4.5, Sonnet 3.7 and later
)

# Anthropic docs, the per-tool pages: tokens a server or Anthropic-defined tool
# adds besides the tool-use system prompt. Types not listed are learned.
ANTHROPIC_SERVER_TOOL_TOKENS: Mapping[str, int] = {
    "bash": 245,  # "Bash tool": 245 additional input tokens
    "text_editor": 700,  # "Text editor tool": 700 additional input tokens
    "computer": 735,  # "Computer use tool": 735 tokens per tool definition (Claude 4)
}

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

# Claude's tokenizer against o200k_base (the proxy encoding), per kind of content:
# VentureBeat, 2025-05-01, "Hidden costs in AI deployment: why Claude models may be
# 20-30% more expensive than GPT in enterprise settings" (Claude 3.5 Sonnet against
# GPT-4o on the same inputs): English articles ~16% more tokens, math ~21%, Python
# code ~30%. JSON (tool schemas, call arguments, JSON results) is structured
# technical text: it takes the code figure, as the article's explanation (symbols
# and structure split into smaller units) says of code and math.
PROXY_PROSE = "prose"
PROXY_MATH = "math"
PROXY_CODE = "code"
CLAUDE_PROXY_RATIO: Mapping[str, float] = {PROXY_PROSE: 1.16, PROXY_MATH: 1.21, PROXY_CODE: 1.30}
PROXY_ENCODING_KEY = "proxy-encoding"

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


# ---------------------------------------------------------------------------
# Tool rendering
# ---------------------------------------------------------------------------

def _ts_type(schema: Mapping[str, Any], indent: int) -> str:
    """A JSON schema as the TypeScript-like type OpenAI renders (hmarr formatType)."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_ts_type(s, indent) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, indent) for k in kind)
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind in ("boolean", "null"):
        return kind
    if kind == "object":
        if not isinstance(schema.get("properties"), Mapping) or not schema["properties"]:
            return "object"
        return "{\n" + _ts_properties(schema, indent + 2) + "\n" + " " * indent + "}"
    if kind == "array":
        items = schema.get("items")
        return (_ts_type(items, indent) if isinstance(items, Mapping) else "any") + "[]"
    return "any"


def _ts_properties(schema: Mapping[str, Any], indent: int) -> str:
    required = schema.get("required")
    required = required if isinstance(required, (list, tuple)) else ()
    properties = schema.get("properties")
    lines: list[str] = []
    for name, prop in properties.items() if isinstance(properties, Mapping) else ():
        if isinstance(prop, Mapping) and prop.get("description"):
            lines.append(f"// {prop['description']}")
        optional = "" if name in required else "?"
        line = f"{name}{optional}: {_ts_type(prop, indent)},"
        if isinstance(prop, Mapping) and "default" in prop:
            line += f" // default: {prop['default']}"
        lines.append(line)
    return "\n".join(" " * indent + line for line in lines)


def render_openai_function(function: Mapping[str, Any]) -> str:
    """One function as it appears inside ``namespace functions { ... }``.

    hmarr/openai-chat-tokens ``formatFunctionDefinitions`` and openai/harmony
    ``docs/format.md``: the description as a ``//`` comment, then
    ``type name = (_: { ... }) => any;`` (``() => any`` without parameters),
    then an empty line.
    """
    name = str(function.get("name", ""))
    lines: list[str] = []
    if function.get("description"):
        lines.append(f"// {function['description']}")
    params = function.get("parameters") or {}
    if isinstance(params, Mapping) and isinstance(params.get("properties"), Mapping) and params["properties"]:
        lines.append(f"type {name} = (_: {{")
        lines.append(_ts_properties(params, 0))
        lines.append("}) => any;")
    else:
        lines.append(f"type {name} = () => any;")
    lines.append("")
    return "\n".join(lines) + "\n"


OPENAI_NAMESPACE_OPEN = "namespace functions {\n\n"
OPENAI_NAMESPACE_CLOSE = "} // namespace functions"


def render_openai_functions(functions: Iterable[Mapping[str, Any]]) -> str:
    """The whole ``namespace functions { ... }`` block of a request's functions."""
    return OPENAI_NAMESPACE_OPEN + "".join(render_openai_function(f) for f in functions) + OPENAI_NAMESPACE_CLOSE


def render_anthropic_tool(tool: Mapping[str, Any]) -> str:
    """A client tool as Claude's tool prompt lists it: ``<function>{json}</function>``."""
    entry = {"description": tool.get("description", ""), "name": tool.get("name", ""),
             "parameters": tool.get("input_schema") or {}}
    return "<function>" + json.dumps(entry, ensure_ascii=False) + "</function>\n"


def openai_function_of(tool: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The function definition of an OpenAI tool (chat or Responses shape), else None."""
    if tool.get("type", "function") != "function":
        return None
    function = tool.get("function")
    if isinstance(function, Mapping):
        return function  # chat: {"type": "function", "function": {...}}
    if "name" in tool:
        return tool  # Responses: {"type": "function", "name": ..., "parameters": ...}
    return None


def is_anthropic_server_tool(tool: Mapping[str, Any]) -> bool:
    """Anthropic-defined tools carry a versioned ``type`` (``web_search_20250305``)."""
    kind = tool.get("type")
    return bool(kind) and kind != "custom"


def server_tool_kind(tool: Mapping[str, Any]) -> str:
    """``web_search_20250305`` -> ``web_search``; OpenAI-compatible ``openrouter:web_search`` -> ``web_search``."""
    kind = str(tool.get("type", "unknown")).rsplit(":", 1)[-1]
    head, _, tail = kind.rpartition("_")
    return head if head and tail.isdigit() else kind


def server_tool_part(tool: Mapping[str, Any]) -> str:
    return SERVER_TOOL_PART_PREFIX + server_tool_kind(tool)


def tool_definition_text(api: str, tool: Mapping[str, Any]) -> str:
    """The text a tool definition occupies in the prompt, as the provider renders it.

    Counted as ``tools``. A deferred tool (``defer_loading``) is only its name in
    the catalog until searched for. A server tool counts its declaration as sent
    (compact JSON); what the provider adds for it is the hidden part
    ``tools/server/<type>`` of :func:`framing_items`.
    """
    if tool.get("defer_loading") is True:
        return str(tool.get("name") or "")
    if api == API_ANTHROPIC:
        if is_anthropic_server_tool(tool):
            return _compact_json(tool)
        return render_anthropic_tool(tool)
    function = openai_function_of(tool)
    if function is None:
        return _compact_json(tool)
    return render_openai_function(function)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------
# Framing items
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FramingPart:
    """One named piece of framing: tokens with the rule that produced them."""

    key: str  # stable within a request: "messages", "priming", "functions", "hidden-prompt", ...
    tokens: int
    part: str = OVERHEAD_PART
    learned: bool = False  # size unknown from any source: self-calibration learns it


def _model_of(body: Mapping[str, Any], model: str | None) -> str | None:
    """The model name: the one given, else the body's, if a string."""
    if isinstance(model, str):
        return model
    named = body.get("model")
    return named if isinstance(named, str) else None


def _is_harmony(model: str | None) -> bool:
    name = (model or "").lower().rsplit("/", 1)[-1]
    return name.startswith(_HARMONY_PREFIXES)


def _tools_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in _as_list(body.get("tools")) or () if isinstance(t, Mapping)]


def _messages(body: Mapping[str, Any]) -> list[Any]:
    """The messages of a body: dicts or SDK objects (read with payload.get), never a one-shot iterator."""
    return [m for m in _as_list(body.get("messages")) or () if m is not None and not isinstance(m, (str, int, float))]


def tool_call_name(call: Any) -> str:
    """The function name of an OpenAI chat tool call (dict or SDK object), '' without one."""
    return str(_get(_get(call, "function"), "name") or "")


def _chat_tool_call_names(messages: Sequence[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in _as_list(_get(message, "tool_calls")) or ():
            names[str(_get(call, "id"))] = tool_call_name(call)
    return names


def _choice_parts(tool_choice: Any, count: CountFn) -> list[FramingPart]:
    if tool_choice == "none":
        return [FramingPart("tool-choice", OPENAI_TOOL_CHOICE_NONE)]
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function") or tool_choice
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if name:
            return [FramingPart("tool-choice", OPENAI_TOOL_CHOICE_NAMED + count(str(name)))]
    return []


def _response_format_text(body: Mapping[str, Any]) -> str:
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


def openai_message_framing(message: Any, count: CountFn, names: dict[str, str], *,
                           register: bool = False) -> tuple[int, str, tuple[str, ...]]:
    """One OpenAI message's framing: its tokens (3 + role, +1 for a name, call headers, result
    author), its role, and (with ``register``) the ids of its tool calls.

    ``names`` (tool call id -> name) names a tool result; with ``register`` the
    message's own calls are added to it first (liveframing builds it message by
    message; :func:`openai_framing` passes the names of the whole request).
    """
    role = str(_get(message, "role") or "user")
    tokens = OPENAI_TOKENS_PER_MESSAGE + count(role)
    if _get(message, "name"):
        tokens += OPENAI_TOKENS_PER_NAME
    call_ids: list[str] = []
    for call in _as_list(_get(message, "tool_calls")) or ():
        name = tool_call_name(call)
        if register:
            call_id = str(_get(call, "id"))
            call_ids.append(call_id)
            names[call_id] = name
        # The call's item is its arguments (ctxscope.items): the header holds the name.
        tokens += count(HARMONY_CALL_HEADER.format(name=name))
    if role == "tool":
        name = names.get(str(_get(message, "tool_call_id")), "")
        tokens += count(HARMONY_RESULT_AUTHOR.format(name=name)) - count(role)
    return tokens, role, tuple(call_ids)


def openai_framing(body: Mapping[str, Any], count: CountFn, *, model: str | None = None,
                   api: str = API_OPENAI_CHAT) -> list[FramingPart]:
    """Framing of an OpenAI chat or Responses request, in the model's tokens."""
    model = _model_of(body, model)
    if api == API_OPENAI_RESPONSES:
        messages = _responses_messages(body)
    else:
        messages = _messages(body)
    functions = [f for f in (openai_function_of(t) for t in _tools_of(body)) if f is not None]
    parts: list[FramingPart] = []

    per_message = 0
    has_system = False
    call_names = _chat_tool_call_names(messages)
    for message in messages:
        tokens, role, _ = openai_message_framing(message, count, call_names)
        has_system = has_system or role in ("system", "developer")
        per_message += tokens
    parts.append(FramingPart("messages", per_message))
    harmony = _is_harmony(model)
    parts.append(FramingPart("priming", HARMONY_REPLY_PRIMING if harmony else OPENAI_REPLY_PRIMING))

    if functions:
        block = count(OPENAI_NAMESPACE_OPEN) + count(OPENAI_NAMESPACE_CLOSE)
        if harmony:
            block += count(HARMONY_TOOLS_HEADER)
        block += OPENAI_FUNCTIONS_FRAMING
        if has_system:
            block += OPENAI_FUNCTIONS_WITH_SYSTEM
        parts.append(FramingPart("functions", block))
        parts.extend(_choice_parts(body.get("tool_choice"), count))
    response_format = _response_format_text(body)
    if response_format:
        parts.append(FramingPart("response-format", count(response_format)))
    if harmony and functions:
        parts.append(FramingPart("hidden-prompt", harmony_hidden_prompt(count, has_system=has_system)))
    for tool in _tools_of(body):
        if openai_function_of(tool) is None:
            parts.append(FramingPart("server:" + server_tool_kind(tool), 0,
                                     part=server_tool_part(tool), learned=True))
    return parts


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


def _responses_messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Responses ``input`` as chat-like messages: role per item, calls and outputs."""
    out: list[Mapping[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "developer"})
    items = body.get("input")
    if isinstance(items, str):
        return out + [{"role": "user"}]
    for item in _as_list(items) or ():
        message = responses_message(item)
        if message is not None:
            out.append(message)
    return out


def responses_message(item: Any) -> Mapping[str, Any] | None:
    """One Responses input item as the chat-like message framing counts (None: no message of its own).

    Only what framing reads is kept: the role, a call's id and name, a result's call id.
    """
    kind = _get(item, "type") or "message"
    if kind == "function_call":
        return {"role": "assistant", "tool_calls": [
            {"id": _get(item, "call_id"), "function": {"name": _get(item, "name") or ""}}]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": _get(item, "call_id")}
    if kind == "message" or _get(item, "role"):
        return {"role": _get(item, "role") or "user"}
    return None  # reasoning items and the like


def anthropic_tool_prompt_tokens(model: str | None, tool_choice: Any) -> int:
    """Anthropic's published tool-use system prompt size for a model and tool_choice."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    choice = tool_choice.get("type") if isinstance(tool_choice, Mapping) else tool_choice
    forced = choice in ("any", "tool")
    for prefixes, auto_none, any_tool in ANTHROPIC_TOOL_SYSTEM_PROMPT:
        if name.startswith(prefixes):
            return any_tool if forced else auto_none
    return ANTHROPIC_TOOL_SYSTEM_PROMPT[-1][2 if forced else 1]


def proxy_tokens(segments: Iterable[tuple[str, str]], count: CountFn) -> int:
    """Claude tokens of text counted with the proxy encoding: each segment's count times its kind's ratio."""
    return round(sum(count(text) * CLAUDE_PROXY_RATIO[kind] for kind, text in segments))


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


def is_claude(model: str | None) -> bool:
    """Whether a model name is a Claude model (any host: ``anthropic/claude-...`` on a router too)."""
    return "claude" in (model or "").lower()


def _looks_like_json(text: str) -> bool:
    # A cheap test (no parse: results can be large and this runs on the live path).
    head, tail = text[:1], text[-1:]
    if head in ("{", "[") and tail in ("}", "]"):
        return True
    stripped = text.strip()
    return stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]")


def proxy_kind(item: Item) -> str:
    """The kind of content of an item for the proxy ratio: code (JSON, schemas, call arguments) or prose.

    Tool definitions (Claude renders them as JSON) and tool-call arguments are
    JSON; any other text is JSON when it starts with ``{``/``[`` and ends with
    ``}``/``]``; the rest is prose.
    """
    if item.category is Category.TOOLS or item.part.startswith("assistant/calls"):
        return PROXY_CODE
    return PROXY_CODE if _looks_like_json(item.text) else PROXY_PROSE


def proxy_encoding_tokens(model: str | None, counted: Iterable[tuple[Item, int]]) -> int:
    """Tokens Claude's tokenizer adds to the proxy count of a request's items.

    ``counted`` pairs each item with its count under the proxy encoding. Items
    with fixed tokens (images, documents by formula, framing) are already in
    the provider's tokens and are skipped. 0 for a model that is not Claude.
    """
    if not is_claude(model):
        return 0
    extra = 0.0
    for item, tokens in counted:
        if item.fixed_tokens is not None or not tokens:
            continue
        extra += tokens * (CLAUDE_PROXY_RATIO[proxy_kind(item)] - 1.0)
    return round(extra)


def proxy_encoding_items(model: str | None, counted: Iterable[tuple[Item, int]]) -> list[Item]:
    """The proxy-encoding correction as a framing item (overhead, id ``framing:proxy-encoding``), or none.

    Item counts stay exact under their basis (SPEC section 3); the difference
    between Claude's tokenizer and the proxy is what the provider's count
    adds on top, so it is framing: append it to the request's items with the
    other framing items (:func:`framing_items`).
    """
    tokens = proxy_encoding_tokens(model, counted)
    if not tokens:
        return []
    return parts_to_items([FramingPart(PROXY_ENCODING_KEY, tokens)])


def claude_version(model: str | None) -> tuple[int, ...]:
    """``claude-sonnet-4-5`` -> (4, 5); ``claude-3-5-haiku`` -> (3, 5); ``claude-opus-5`` -> (5,); () if none."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    match = re.match(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?", name)
    if not match:
        return ()
    return tuple(int(g) for g in match.groups() if g is not None)


def anthropic_call_tokens(block: Any, count: CountFn) -> int:
    """Tokens the tool-call wrapper adds besides the input JSON (the call's item, ctxscope.items)."""
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
    Shared by :func:`anthropic_framing` and :mod:`ctxscope.liveframing`.
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
    model = _model_of(body, model)
    messages = _messages(body)
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
    tools = _tools_of(body)
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


def _memo(count: CountFn) -> CountFn:
    """Role names, headers and turn prefixes repeat on every message: count each once a request."""
    cache: dict[str, int] = {}

    def counted(text: str) -> int:
        value = cache.get(text)
        if value is None:
            value = cache[text] = count(text)
        return value

    return counted


def framing_parts(body: Mapping[str, Any], api: str, count: CountFn, *, model: str | None = None) -> list[FramingPart]:
    """The framing of a request under a provider API."""
    count = _memo(count)
    wire = _wire_format(api)
    if wire is not None:  # ctxscope.apis: the format's own framing model
        return [FramingPart(key, tokens) for key, tokens in wire.framing(body, count)]
    if api == API_ANTHROPIC:
        return anthropic_framing(body, count, model=model)
    return openai_framing(body, count, model=model, api=api)


def framing_items(body: Mapping[str, Any], api: str, count: CountFn, *, model: str | None = None) -> list[Item]:
    """Framing as items to append to a request's items (fixed token counts, no text).

    Overhead items have part ``overhead``; a server tool's hidden part is a
    ``tools`` item with part ``tools/server/<type>`` (0 tokens when its size
    is not published: self-calibration learns it).
    """
    return parts_to_items(framing_parts(body, api, count, model=model))


def parts_to_items(pieces: Iterable[FramingPart]) -> list[Item]:
    """Framing parts as items (liveframing builds its items here too, so both agree)."""
    items: list[Item] = []
    for piece in pieces:
        category = Category.OVERHEAD if piece.part == OVERHEAD_PART else Category.TOOLS
        label = piece.key if category is Category.OVERHEAD else piece.part
        items.append(Item(
            id="framing:" + piece.key, category=category, part=piece.part, chars=0,
            fixed_tokens=piece.tokens, label=label, source_kind="framing",
            digest=hashlib.blake2b(f"{piece.key}:{piece.tokens}".encode(), digest_size=8).hexdigest()))
    return items


def tools_key(body: Mapping[str, Any]) -> str:
    """A stable key of a request's tool set (names and server tool types), for self-calibration.

    ``-`` without tools; ``s:<digest>`` when a server tool is among them.
    """
    names = []
    for tool in _tools_of(body):
        function = openai_function_of(tool)
        if function is not None:
            names.append("fn:" + str(function.get("name", "")))
        elif tool.get("type") in (None, "custom") and "name" in tool:
            names.append("fn:" + str(tool.get("name")))
        else:
            names.append("server:" + str(tool.get("type")))
    if not names:
        return "-"
    digest = hashlib.blake2b("\n".join(sorted(names)).encode(), digest_size=8).hexdigest()
    # Sets with a server tool are marked: their hidden part is their own, so
    # self-calibration does not pool them with the model's other tool sets.
    return (SERVER_TOOLS_KEY_PREFIX + digest) if any(n.startswith("server:") for n in names) else digest


def has_server_tools(body: Mapping[str, Any], api: str) -> bool:
    """Whether a request offers a tool that runs at the provider (its hidden part is unknown)."""
    wire = _wire_format(api)
    if wire is not None:
        return wire.server_tools(body)
    for tool in _tools_of(body):
        if api == API_ANTHROPIC:
            if is_anthropic_server_tool(tool):
                return True
        elif openai_function_of(tool) is None:
            return True
    return False


def _wire_format(api: str) -> Any:
    """The ctxscope.apis module of an API that has one (Gemini, Ollama), else None."""
    from .apis import format_of

    return format_of(api)
