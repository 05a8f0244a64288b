"""Provider framing rules, each with a value worked out by hand.

Most tests count with ``one`` (every non-empty string is one token) or ``chars``
(one token a character), so that the expected figure follows from the rule
alone and the string lengths written next to it.
"""

from __future__ import annotations

from _paths import ROOT

import pytest

from ctxscope.core import framing
from ctxscope.core.framing import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES
from ctxscope.schema import Category, Item


def one(text: str) -> int:
    return 1 if text else 0


def chars(text: str) -> int:
    return len(text)


def parts(body, api=API_OPENAI_CHAT, count=one, model=None):
    return {p.key: p.tokens for p in framing.framing_parts(body, api, count, model=model)}


USER = {"role": "user", "content": "hi"}
SYSTEM = {"role": "system", "content": "be brief"}
TOOL = {"type": "function", "function": {"name": "get_capital", "description": "",
                                         "parameters": {"type": "object", "properties": {}}}}


def test_chat_per_message_and_reply_priming():
    """Cookbook: 3 tokens a message plus its role (1), and 3 for the reply priming."""
    got = parts({"model": "gpt-4o", "messages": [SYSTEM, USER]})
    assert got == {"messages": 2 * (3 + 1), "priming": 3}


def test_chat_name_costs_one_token():
    """Cookbook: a message with a name costs one more token."""
    got = parts({"model": "gpt-4o", "messages": [{**USER, "name": "ann"}]})
    assert got["messages"] == 3 + 1 + 1


def test_functions_block_framing():
    """hmarr: the namespace block's two wrapper lines plus 9 tokens for the definitions."""
    got = parts({"model": "gpt-4o", "messages": [USER], "tools": [TOOL]})
    assert got["functions"] == 1 + 1 + 9


def test_functions_with_system_message_are_four_fewer():
    """hmarr: with a system message present the functions block costs 4 tokens less."""
    got = parts({"model": "gpt-4o", "messages": [SYSTEM, USER], "tools": [TOOL]})
    assert got["functions"] == 1 + 1 + 9 - 4


@pytest.mark.parametrize("choice, expected", [
    ("auto", None),
    ("none", 1),
    ({"type": "function", "function": {"name": "get_capital"}}, 4 + 1),
])
def test_tool_choice(choice, expected):
    """hmarr: tool_choice none adds 1, a named function 4 plus its name, auto nothing."""
    got = parts({"model": "gpt-4o", "messages": [USER], "tools": [TOOL], "tool_choice": choice})
    assert got.get("tool-choice") == expected


def test_tool_call_and_result_headers():
    """Harmony headers: ' to=functions.get_capital json' (30 chars: the call's item is only its
    arguments); the result authored 'functions.get_capital' (21) instead of 'tool' (4)."""
    body = {"model": "gpt-4o", "messages": [
        USER,
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_capital", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Paris"},
    ]}
    got = parts(body, count=chars)
    per_message = (3 + len("user")) + (3 + len("assistant")) + (3 + len("tool"))
    assert got["messages"] == per_message + 30 + (21 - 4)


def test_render_matches_harmony_guide_example():
    """The namespace rendering reproduces the example of openai/harmony docs/format.md."""
    functions = [
        {"name": "get_location", "description": "Gets the location of the user.",
         "parameters": {"type": "object", "properties": {}}},
        {"name": "get_current_weather", "description": "Gets the current weather in the provided location.",
         "parameters": {"type": "object", "required": ["location"], "properties": {
             "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
             "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}}},
    ]
    assert framing.render_openai_functions(functions) == (
        "namespace functions {\n\n"
        "// Gets the location of the user.\n"
        "type get_location = () => any;\n\n"
        "// Gets the current weather in the provided location.\n"
        "type get_current_weather = (_: {\n"
        "// The city and state, e.g. San Francisco, CA\n"
        "location: string,\n"
        'format?: "celsius" | "fahrenheit", // default: celsius\n'
        "}) => any;\n\n"
        "} // namespace functions")


def test_render_nested_and_array_types():
    """Objects indent by two spaces, arrays append [], integers are numbers."""
    text = framing.render_openai_function({"name": "f", "parameters": {"type": "object", "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}},
        "where": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}})
    assert text == ("type f = (_: {\nids?: number[],\nwhere?: {\n  city: string,\n},\n}) => any;\n\n")


def test_tool_definition_text_per_api():
    """OpenAI tools render as TypeScript, Anthropic client tools as <function> JSON, server tools as sent,
    deferred tools as their name."""
    assert framing.tool_definition_text(API_OPENAI_CHAT, TOOL) == "type get_capital = () => any;\n\n"
    responses_tool = {"type": "function", "name": "get_capital", "parameters": {}}
    assert framing.tool_definition_text(API_OPENAI_RESPONSES, responses_tool) == "type get_capital = () => any;\n\n"
    anthropic_tool = {"name": "f", "description": "d", "input_schema": {"type": "object"}}
    assert framing.tool_definition_text(API_ANTHROPIC, anthropic_tool) == (
        '<function>{"description": "d", "name": "f", "parameters": {"type": "object"}}</function>\n')
    assert framing.tool_definition_text(API_ANTHROPIC, {"type": "web_search_20250305", "name": "web_search"}) == (
        '{"type":"web_search_20250305","name":"web_search"}')
    assert framing.tool_definition_text(API_OPENAI_RESPONSES, {"type": "web_search"}) == '{"type":"web_search"}'
    assert framing.tool_definition_text(API_ANTHROPIC, {**anthropic_tool, "defer_loading": True}) == "f"


def test_reasoning_models_get_the_harmony_system_message_with_functions_only():
    """gpt-5 with functions gets the harmony system message (text 1 + 3 specials + role 1 + channel note 1);
    without functions none (o3-mini "hello" was billed 7 = 3 + user + hello + 2 priming); gpt-4o never."""
    body = {"messages": [USER], "tools": [TOOL]}
    assert "hidden-prompt" not in parts({**body, "model": "gpt-4o"})
    assert parts({**body, "model": "gpt-5-mini"})["hidden-prompt"] == 1 + 3 + 1 + 1
    assert parts({**body, "model": "gpt-5-mini", "messages": [SYSTEM, USER]})["hidden-prompt"] == 1 + 3 + 1 + 1 + 1
    assert parts({"model": "gpt-5-mini", "messages": [USER]}) == {"messages": 3 + 1, "priming": 2}
    assert parts({"model": "o3", "messages": [SYSTEM, USER]}) == {"messages": 2 * (3 + 1), "priming": 2}


def test_reasoning_model_framing_in_real_tokens(tiktoken_ready):
    """o3-mini "hello": <|start|>user<|message|>hello<|end|><|start|>assistant = 7 tokens, as billed (o200k_base).

    With one function and no system message, gpt-5-mini adds the harmony system message
    (its text, 3 specials, "system", the commentary note) and the tools header."""
    from ctxscope.core.tokens import counter_for
    counter = counter_for("o3-mini", "tiktoken")
    body = {"model": "o3-mini", "messages": [{"role": "user", "content": "hello"}]}
    got = parts(body, count=counter.count)
    assert got == {"messages": 3 + 1, "priming": 2}
    assert counter.count("hello") + sum(got.values()) == 7
    with_tools = parts({**body, "model": "gpt-5-mini", "tools": [TOOL]}, count=counter.count)
    system = counter.count(framing.HARMONY_SYSTEM_MESSAGE)
    note = counter.count(framing.HARMONY_FUNCTIONS_CHANNEL_NOTE)
    assert (system, note, counter.count("system")) == (57, 15, 1)
    assert with_tools["hidden-prompt"] == 57 + 15 + 3 + 1
    assert with_tools["priming"] == 2


def test_harmony_functions_get_the_tools_header():
    """Reasoning models' function block carries '# Tools ## functions' (1 with one) on top of hmarr's framing."""
    got = parts({"model": "gpt-5-mini", "messages": [USER], "tools": [TOOL]})
    assert got["functions"] == 1 + 1 + 1 + 9


def test_response_format_is_rendered():
    """A json_schema response format costs its harmony section: header and compact schema, here 72 chars."""
    body = {"model": "gpt-4o", "messages": [USER], "response_format": {
        "type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}}
    header = "# Response Formats\n\n## r\n\n"  # 26 chars
    assert parts(body, count=chars)["response-format"] == len(header) + len('{"type":"object"}')


def test_responses_api_framing():
    """Responses: instructions as a developer message, each input item a message, priming 3."""
    body = {"model": "gpt-4o", "instructions": "be brief", "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"}]}
    got = parts(body, api=API_OPENAI_RESPONSES)
    assert got["priming"] == 3
    # 4 messages of 3 + role (1); call header one(" to=functions.f json") = 1;
    # result author one("functions.f") - one("tool") = 0.
    assert got["messages"] == 4 * (3 + 1) + 1


@pytest.mark.parametrize("model, choice, expected", [
    ("claude-sonnet-4-5", {"type": "auto"}, 496),
    ("claude-sonnet-4-5-20250929", {"type": "none"}, 496),
    ("claude-haiku-4-5", {"type": "tool", "name": "f"}, 588),
    ("claude-sonnet-4-6", None, 497),  # no tool_choice: the API's default, auto
    ("claude-opus-4-6", {"type": "any"}, 589),
    ("claude-opus-4-7", {"type": "auto"}, 675),
    ("claude-opus-4-8", {"type": "any"}, 410),
    ("claude-opus-5", {"type": "auto"}, 286),
    ("claude-sonnet-5", {"type": "tool", "name": "f"}, 474),
    ("claude-opus-4-1", {"type": "any"}, 315),
    ("claude-sonnet-4-0", {"type": "auto"}, 313),
    ("claude-sonnet-4-20250514", {"type": "auto"}, 313),
    ("claude-3-7-sonnet-20250219", {"type": "any"}, 313),
    ("claude-3-5-haiku-20241022", {"type": "any"}, 355),
    ("claude-3-opus-20240229", {"type": "auto"}, 530),
    ("claude-3-opus-20240229", {"type": "any"}, 281),
    ("claude-3-sonnet-20240229", None, 159),
    ("anthropic/claude-sonnet-4.5", {"type": "auto"}, 496),
])
def test_anthropic_tool_use_system_prompt_table(model, choice, expected):
    """Anthropic's published tool use system prompt token count per model and tool_choice."""
    assert framing.anthropic_tool_prompt_tokens(model, choice) == expected


@pytest.mark.parametrize("model, choice, expected", [
    # Not in the table: the newest listed version at or below, of the model's own family
    # when that version lists it, else the first the page lists (Opus).
    ("claude-fable-5", {"type": "auto"}, 286),   # version 5: Opus 5 (no Fable row)
    ("claude-mythos-5", {"type": "any"}, 406),
    ("claude-sonnet-5-5", {"type": "auto"}, 354),  # version 5 of its own family: Sonnet 5
    ("claude-haiku-5-5", {"type": "auto"}, 286),   # no Haiku 5: Opus 5
    ("claude-sonnet-4-7", {"type": "auto"}, 675),  # version 4.7: only Opus 4.7 lists it
    ("glm-4.6", {"type": "auto"}, 286),            # no Claude version: the newest row
])
def test_models_the_table_does_not_list_take_the_nearest_earlier_row(model, choice, expected):
    """A model without a row takes the newest listed version at or below its own (the prompt follows the generation)."""
    assert framing.anthropic_tool_prompt_tokens(model, choice) == expected


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-sonnet-4-6", "claude-sonnet-5",
                                   "claude-opus-4-6", "claude-opus-5"])
def test_context_awareness_tags_are_not_framed(model):
    """The budget tag and usage notes the API injects on Sonnet 4.5/4.6/5 and Haiku 4.5 are not in the reported input.

    A user turn, a call and its result: turns 3 + priming 1 + call 0 + result wrapper 1, nothing else.
    """
    body = {"model": model, "messages": [
        USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    assert parts(body, api=API_ANTHROPIC) == {"messages": 3, "priming": 1, "tool-calls": 1}


def _item(category, part, text="", fixed=None):
    return Item(id=part + ":" + text[:8], category=category, part=part, chars=len(text), text=text,
                fixed_tokens=fixed)


def test_proxy_encoding_by_kind_of_content():
    """Claude's tokenizer over o200k: prose +16%, JSON/code +30%, formula counts untouched.

    Prose: a prompt of 100 and a plain result of 20 = 120 x 0.16 = 19.2; code: a tool
    definition of 50, a JSON result of 10 and call arguments of 5 = 65 x 0.30 = 19.5;
    an image of 1000 (fixed) adds nothing: 38.7 -> 39.
    """
    counted = [
        (_item(Category.PROMPTS, "prompts/text", "hello"), 100),
        (_item(Category.RESULTS, "results/read", "plain words"), 20),
        (_item(Category.TOOLS, "tools/read", "<function>{}</function>"), 50),
        (_item(Category.RESULTS, "results/read", '{"a": 1}'), 10),
        (_item(Category.ASSISTANT, "assistant/calls/read", "{}"), 5),
        (_item(Category.PROMPTS, "prompts/media/image", fixed=1000), 1000),
    ]
    assert framing.proxy_encoding_tokens("claude-sonnet-4-5", counted) == 39
    (item,) = framing.proxy_encoding_items("claude-sonnet-4-5", counted)
    assert (item.id, item.category, item.part, item.fixed_tokens) == (
        "framing:proxy-encoding", Category.OVERHEAD, "overhead", 39)
    assert framing.proxy_encoding_items("anthropic/claude-sonnet-4.5", counted)[0].fixed_tokens == 39
    assert framing.proxy_encoding_items("gpt-4o", counted) == []  # o200k is GPT-4o's own encoding
    assert framing.proxy_encoding_items("claude-sonnet-4-5", []) == []


def test_newer_tokenizer_models_take_the_ratios_times_1_30():
    """Claude 4.7 and later (and Mythos Preview): ~30% more tokens than the previous tokenizer.

    The counts of test_proxy_encoding_by_kind_of_content: prose 120 x (1.16 x 1.30 - 1) = 120 x 0.508
    = 60.96; code 65 x (1.30 x 1.30 - 1) = 65 x 0.69 = 44.85; 105.81 -> 106. Sonnet 4.6 keeps 39.
    """
    counted = [
        (_item(Category.PROMPTS, "prompts/text", "hello"), 120),
        (_item(Category.TOOLS, "tools/read", "<function>{}</function>"), 65),
    ]
    for model in ("claude-opus-4-7", "claude-opus-5", "claude-sonnet-5", "claude-fable-5", "claude-mythos-preview"):
        assert framing.uses_newer_tokenizer(model), model
        assert framing.proxy_encoding_tokens(model, counted) == 106, model
    assert not framing.uses_newer_tokenizer("claude-sonnet-4-6")
    assert framing.proxy_encoding_tokens("claude-sonnet-4-6", counted) == round(120 * 0.16 + 65 * 0.30)  # 38.7
    assert not framing.uses_newer_tokenizer("gpt-5")


@pytest.mark.parametrize("text, kind", [
    ('{"city": "Paris"}', "code"), (" [1, 2]\n", "code"), ("Paris is large.", "prose"),
    ("{not closed", "prose"), ("", "prose"),
])
def test_proxy_kind_of_text(text, kind):
    """Text is JSON (code ratio) when it opens with { or [ and closes with } or ], else prose."""
    assert framing.proxy_kind(_item(Category.RESULTS, "results/x", text)) == kind


def test_anthropic_turns_tool_calls_and_context_awareness():
    """Turns, the documented call format, the anthropic-tools result wrapper, the published tool prompt."""
    body = {"model": "claude-sonnet-4-5", "tools": [{"name": "f", "input_schema": {}}], "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    got = parts(body, api=API_ANTHROPIC)
    assert got["messages"] == 3 and got["priming"] == 1
    # the published figure for Sonnet 4.5 and auto (the <functions> wrapper inside it)
    assert got["tool-use-prompt"] == 496 and "functions" not in got
    # call: one(rendered) - one("{}") = 0 (the input JSON is the call's item); result wrapper: 1
    assert got["tool-calls"] == 1
    assert set(got) == {"messages", "priming", "tool-calls", "tool-use-prompt"}
    older = parts({**body, "model": "claude-sonnet-4-0"}, api=API_ANTHROPIC)
    assert older["tool-use-prompt"] == 313  # the table's Claude Sonnet 4 row


def test_anthropic_tool_call_in_the_documented_format():
    """A call is <function_calls><invoke name=...><parameter name=...>; its wrapper: the rendering less the input JSON.

    chars: rendered = len('<function_calls>\\n<invoke name="get_weather">\\n') 45 + len('<parameter
    name="city">Paris</parameter>\\n') 41 + len('</invoke>\\n</function_calls>') 27 = 113, less
    len('{"city": "Paris"}') 17 = 96.
    """
    block = {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}
    assert framing.anthropic_call_tokens(block, chars) == 45 + 41 + 27 - 17


def test_anthropic_server_tools_get_a_named_hidden_part():
    """Server tools: tools/server/<type>, sized from Anthropic's docs where published, else learned (0)."""
    body = {"model": "claude-sonnet-4-5", "messages": [USER], "tools": [
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}]}
    items = {i.part: i for i in framing.framing_items(body, API_ANTHROPIC, one)}
    assert items["tools/server/web_search"].fixed_tokens == 0
    assert items["tools/server/web_search"].category is Category.TOOLS
    assert items["tools/server/bash"].fixed_tokens == 245
    assert items["tools/server/text_editor"].fixed_tokens == 700
    assert framing.has_server_tools(body, API_ANTHROPIC)


def test_framing_items_land_in_overhead():
    """Every framing piece but server tools is an overhead item with part 'overhead' and a stable id."""
    items = framing.framing_items({"model": "gpt-4o", "messages": [USER], "tools": [TOOL]}, API_OPENAI_CHAT, one)
    assert {i.category for i in items} == {Category.OVERHEAD}
    assert {i.part for i in items} == {"overhead"}
    assert sorted(i.id for i in items) == ["framing:functions", "framing:messages", "framing:priming"]
    assert sum(i.fixed_tokens for i in items) == 4 + 3 + 11


def test_openai_compatible_server_tools_are_named():
    """A router's server tool (openrouter:web_search) is a hidden part tools/server/web_search."""
    body = {"model": "x", "messages": [USER], "tools": [{"type": "openrouter:web_search", "parameters": {}}]}
    items = framing.framing_items(body, API_OPENAI_CHAT, one)
    assert [i.part for i in items if i.category is Category.TOOLS] == ["tools/server/web_search"]


def test_tools_key_ignores_order_and_separates_sets():
    """The tool-set key is the same for the same set in any order, different for another set."""
    a = {"tools": [TOOL, {"type": "web_search_20250305", "name": "web_search"}]}
    b = {"tools": list(reversed(a["tools"]))}
    assert framing.tools_key(a) == framing.tools_key(b)
    assert framing.tools_key(a) != framing.tools_key({"tools": [TOOL]})
    assert framing.tools_key({}) == "-"


@pytest.mark.parametrize("model, version", [
    ("claude-sonnet-4-5", (4, 5)), ("claude-sonnet-4-0", (4, 0)), ("claude-opus-5", (5,)),
    ("claude-3-5-haiku-20241022", (3, 5)), ("claude-sonnet-4-20250514", (4,)), ("gpt-4o", ()),
])
def test_claude_version(model, version):
    """Claude model names parse to their version, the date suffix ignored."""
    assert framing.claude_version(model) == version


def test_pure_modules_import_no_telemetry_or_sdk():
    """framing (every module of the package), selfcal and fidelity load without OpenTelemetry or a provider SDK."""
    import subprocess
    import sys

    code = ("import sys, importlib, pkgutil, ctxscope.core.framing, ctxscope.core.learned_correction, "
            "ctxscope.core.fidelity; "
            "[importlib.import_module(m.name) for m in pkgutil.iter_modules(ctxscope.core.framing.__path__, "
            "'ctxscope.core.framing.')]; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'openai', 'anthropic')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_sdk_message_objects_are_framed_like_dicts():
    """Messages the SDKs hand back (objects read by attribute) get the same framing as their dicts."""
    from types import SimpleNamespace as Obj

    call = Obj(id="c1", type="function", function=Obj(name="get_capital", arguments="{}"))
    as_objects = {"model": "gpt-4o", "messages": [USER, Obj(role="assistant", content=None, tool_calls=[call]),
                                                  {"role": "tool", "tool_call_id": "c1", "content": "Paris"}]}
    as_dicts = {"model": "gpt-4o", "messages": [USER, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_capital", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Paris"}]}
    assert parts(as_objects, count=chars) == parts(as_dicts, count=chars)
    block = Obj(type="tool_use", id="t1", name="f", input={"a": 1})
    anthropic = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"},
                                                           Obj(role="assistant", content=[block])]}
    as_dict = {**anthropic, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}]}
    assert parts(anthropic, API_ANTHROPIC, chars) == parts(as_dict, API_ANTHROPIC, chars)
    assert parts(anthropic, API_ANTHROPIC, chars)["tool-calls"] > 0


_JSON = None


def _json_strategy():
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
            ["role", "content", "tool_calls", "function", "name", "type", "id", "tool_call_id", "input",
             "tool_use_id", "messages", "tools", "tool_choice", "parameters", "properties", "input_schema",
             "required", "items", "enum", "response_format", "json_schema", "schema", "defer_loading"]),
            inner, max_size=5)), max_leaves=25)


def test_odd_bodies_never_raise():
    """Whatever shape a body has, framing returns items and never raises (it runs inside the user's call)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(body=st.dictionaries(st.sampled_from(["model", "messages", "tools", "tool_choice", "input",
                                                 "instructions", "response_format", "text"]),
                                _json_strategy(), max_size=6),
           api=st.sampled_from([API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC]))
    def check(body, api):
        items = framing.framing_items(body, api, chars)
        assert all(i.fixed_tokens is not None for i in items)
        framing.tools_key(body)
        framing.has_server_tools(body, api)
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict):
                framing.tool_definition_text(api, tool)
                function = tool.get("function")
                if isinstance(function, dict):  # schemas of any shape render without raising
                    framing.render_openai_function(function)

    check()


def test_malformed_schema_renders_what_it_can():
    """A schema with a non-object property, a type list and a bad 'required' still renders: any, a union, optional."""
    text = framing.render_openai_function({"name": "f", "parameters": {
        "type": "object", "required": 3, "properties": {"a": 5, "b": {"type": ["string", "null"]}}}})
    assert text == "type f = (_: {\na?: any,\nb?: string | null,\n}) => any;\n\n"


def test_responses_reasoning_model_framing_with_and_without_functions():
    """Responses on gpt-5: instructions are a developer message (3 + 1); without functions nothing else but
    the 2-token priming; with one, the harmony system message (1 + 3 + 1 + 1 note) and its # Instructions
    header (1), and the functions block with the # Tools header (1 + 1 + 1 + 9 - 4)."""
    body = {"model": "gpt-5", "instructions": "be brief", "input": [{"role": "user", "content": "hi"}]}
    assert parts(body, API_OPENAI_RESPONSES) == {"messages": 2 * (3 + 1), "priming": 2}
    tool = {"type": "function", "name": "f", "parameters": {}}
    got = parts({**body, "tools": [tool]}, API_OPENAI_RESPONSES)
    assert got == {"messages": 2 * (3 + 1), "priming": 2, "functions": 1 + 1 + 1 + 9 - 4,
                   "hidden-prompt": 1 + 3 + 1 + 1 + 1}


# What other modules and tests import from ctxscope.core.framing (grep of the tree when framing.py became a package).
USED_OUTSIDE = ("API_ANTHROPIC", "API_OPENAI_CHAT", "API_OPENAI_RESPONSES", "CLAUDE_PROXY_RATIO", "PROXY_CODE",
                "PROXY_PROSE", "HARMONY_SYSTEM_MESSAGE", "HARMONY_FUNCTIONS_CHANNEL_NOTE",
                "anthropic_tool_prompt_tokens", "claude_version", "framing_items",
                "framing_parts", "has_server_tools", "is_claude", "proxy_encoding_items", "proxy_encoding_tokens",
                "proxy_kind", "render_openai_function", "render_openai_functions", "tool_definition_text",
                "tools_key")


def test_the_package_keeps_every_name_of_the_old_module():
    """Each name of ctxscope.core.framing.__all__ resolves, each used outside is in it, each its module's own."""
    import importlib

    assert set(USED_OUTSIDE) <= set(framing.__all__)
    # framing.py's public names, none lost but the reconstructed Claude tool prompt (replaced by
    # Anthropic's published table) and the context-awareness notes (not billed); the per-model
    # Claude rules added
    assert len(framing.__all__) == len(set(framing.__all__)) == 71
    for name in framing.__all__:
        value = getattr(framing, name)
        module = getattr(value, "__module__", None)
        if module and module.startswith("ctxscope.core.framing."):
            assert getattr(importlib.import_module(module), name) is value, name
    assert framing.framing_items.__module__ == "ctxscope.core.framing.request"
    assert framing.tools_key.__module__ == "ctxscope.core.framing.server_tools"


def test_liveframing_is_a_deprecated_alias_of_framing_incremental():
    """The 0.1 path ctxscope.liveframing warns, naming the new module, and is framing.incremental itself."""
    import importlib
    import sys

    from ctxscope.core.framing import incremental

    sys.modules.pop("ctxscope.liveframing", None)
    with pytest.warns(DeprecationWarning, match=r"ctxscope\.core\.framing\.incremental"):
        old = importlib.import_module("ctxscope.liveframing")
    assert old is incremental
    assert old.FramingCache is incremental.FramingCache
    assert old.parts_to_items is framing.parts_to_items



def test_a_framing_digest_is_equal_exactly_when_key_and_tokens_are():
    """messages/3 twice: one digest; messages/4, priming/3 and a text "messages:3" each another."""
    from ctxscope.core.framing.parts import framing_item
    from ctxscope.transcripts import _items

    digest = framing_item("messages", 3).digest
    assert framing_item("messages", 3).digest == digest
    others = [framing_item("messages", 4).digest, framing_item("priming", 3).digest,
              _items.text_item("t", "messages:3", "user").digest, framing_item("messages:3", 3).digest]
    assert digest not in others and len(set(others)) == 4
