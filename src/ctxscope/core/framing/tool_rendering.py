"""Tool definitions as the provider renders them into the prompt (counted as ``tools``).

- **OpenAI** (chat and Responses): function definitions are rendered as a
  TypeScript-like ``namespace functions { ... }`` block, as reverse-engineered
  by hmarr/openai-chat-tokens (``src/functions.ts``) and published by OpenAI
  itself in the harmony format guide (openai/harmony ``docs/format.md``,
  "Function calling").
- **Anthropic**: client tools rendered as the JSON ``<function>`` entries of
  Claude's tool prompt.
- A server tool counts its declaration as sent (compact JSON); what the
  provider adds for it is its hidden part (:mod:`ctxscope.core.framing.server_tools`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ctxscope.core.apis import TEMPLATE_ANTHROPIC

from ctxscope.core.framing.body_fields import openai_function_of, rules_of
from ctxscope.core.framing.server_tools import is_anthropic_server_tool


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


def tool_definition_text(api: str, tool: Mapping[str, Any]) -> str:
    """The text a tool definition occupies in the prompt, as the provider renders it.

    Counted as ``tools``. A deferred tool (``defer_loading``) is only its name in
    the catalog until searched for. A server tool counts its declaration as sent
    (compact JSON); what the provider adds for it is the hidden part
    ``tools/server/<type>`` of :func:`ctxscope.core.framing.framing_items`.
    """
    if tool.get("defer_loading") is True:
        return str(tool.get("name") or "")
    if rules_of(api).template == TEMPLATE_ANTHROPIC:
        if is_anthropic_server_tool(tool):
            return _compact_json(tool)
        return render_anthropic_tool(tool)
    function = openai_function_of(tool)
    if function is None:
        return _compact_json(tool)
    return render_openai_function(function)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
