"""Request bodies -> items: categories, parts, ids, chars and media, with values worked out by hand."""

from __future__ import annotations

from _paths import ROOT

import base64
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxscope.core.items import (
    API_ANTHROPIC,
    API_OPENAI_CHAT,
    API_OPENAI_RESPONSES,
    RequestExtractor,
    detect_api,
    items_from_request,
    tool_definition_text,
)
from ctxscope.schema import Category



def png(width: int, height: int) -> str:
    """Base64 of a PNG header declaring ``width`` x ``height`` (all the size reader needs)."""
    header = (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + width.to_bytes(4, "big")
              + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00" + b"\x00" * 8)
    return base64.b64encode(header).decode()


# 1024 x 768: OpenAI 2x2 tiles -> 85 + 4 * 170 = 765; Anthropic 786,432 px / 750 -> 1,049.
IMG = png(1024, 768)
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<</Type /Pages>>\n2 0 obj<</Type /Page>>\n3 0 obj<</Type/Page>>\n").decode()


def rows(items):
    return [(i.id, i.part, i.chars, i.label) for i in items]


# ---------------------------------------------------------------------------
# OpenAI chat completions
# ---------------------------------------------------------------------------

CHAT = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\ncwd: /repo\n</system-reminder>\nWhat is in a.py?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMG}", "detail": "high"}},
        ]},
        {"role": "assistant", "content": None, "reasoning_content": "Look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path":"./a.py"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "Bash", "arguments": '{"command":"ls  -la"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "a.py"},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "assistant", "content": "It prints 1."},
    ],
    "tools": [{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}],
}


def test_chat_body_every_block_kind():
    """System, reminder split from user text, image by formula, calls, results by tool, text, tools."""
    items = items_from_request(CHAT)
    got = rows(items)
    tool_text = "type Read = () => any;\n\n"  # OpenAI's rendering (framing.tool_definition_text)
    assert [(r[1], r[2], r[3]) for r in got] == [
        ("tools/Read", len(tool_text), "Read"),
        ("system", 9, None),
        ("environment", len("<system-reminder>\ncwd: /repo\n</system-reminder>"), None),
        ("prompts/text", len("\nWhat is in a.py?"), None),
        ("prompts/media/image", 0, None),
        ("assistant/thinking", 5, None),
        ("assistant/calls/Read", len('{"file_path":"./a.py"}'), "Read"),
        ("assistant/calls/Bash", len('{"command":"ls  -la"}'), "Bash"),
        ("results/Bash", 4, "Bash"),
        ("results/Read", 8, "Read"),
        ("assistant/text", 12, None),
    ]
    ids = [r[0] for r in got]
    assert ids[0] == "tool:Read"
    assert ids[6:10] == ["call_1", "call_2", "call_2:result", "call_1:result"]
    image = items[4]
    assert image.fixed_tokens == 765 and image.text == "" and image.category is Category.PROMPTS
    assert items[6].reference == "Read:file_path=a.py"
    assert items[7].reference == "Bash:command=ls -la"
    assert items[9].reference == "Read:file_path=a.py" and items[9].source_call_id == "call_1"
    assert items[9].source_kind == "tool_result" and items[9].category is Category.RESULTS
    assert items[0].text == tool_definition_text(API_OPENAI_CHAT, CHAT["tools"][0]) == tool_text


def test_hash_ids_never_hold_content_and_repeat_gets_occurrence_suffix():
    """Two identical user texts get ids h:<hex> and h:<hex>#2; the text is not in the id."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "same words"},
                                            {"role": "user", "content": "same words"}]}
    first, second = items_from_request(body)
    assert first.id.startswith("h:") and len(first.id) == 18
    assert second.id == first.id + "#2"
    assert "same" not in first.id and first.digest == second.digest


def test_ids_stable_across_calls_and_keyed_by_environment():
    """The same body gives the same ids; another CTXSCOPE_HASH_KEY gives other hash ids."""
    assert rows(items_from_request(CHAT)) == rows(items_from_request(json.loads(json.dumps(CHAT))))
    code = ("import json,sys; from ctxscope.core.items import items_from_request; "
            "print(json.dumps([i.id for i in items_from_request(json.load(sys.stdin))]))")
    env = {**os.environ, "CTXSCOPE_HASH_KEY": "another key"}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(CHAT), capture_output=True,
                         text=True, env=env, check=True, cwd=ROOT)
    keyed = json.loads(out.stdout)
    plain = [i.id for i in items_from_request(CHAT)]
    assert keyed[0] == plain[0] == "tool:Read"             # provider ids do not depend on the key
    assert keyed[1] != plain[1] and keyed[1].startswith("h:")


def test_chat_with_sdk_objects_and_tuples():
    """An openai ChatCompletionMessage appended to a tuple of messages reads like its dict."""
    from openai.types.chat import ChatCompletionMessage

    reply = ChatCompletionMessage(role="assistant", content=None, tool_calls=[
        {"id": "call_9", "type": "function", "function": {"name": "Read", "arguments": '{"file_path":"b.py"}'}}])
    body = {"model": "gpt-4o", "messages": ({"role": "user", "content": "read b"}, reply,
                                            {"role": "tool", "tool_call_id": "call_9", "content": "x = 2"})}
    items = items_from_request(body, API_OPENAI_CHAT)
    assert [(i.id[:2] if i.id.startswith("h:") else i.id, i.part, i.chars, i.reference) for i in items] == [
        ("h:", "prompts/text", 6, None),
        ("call_9", "assistant/calls/Read", 20, "Read:file_path=b.py"),
        ("call_9:result", "results/Read", 5, "Read:file_path=b.py"),
    ]
    # The same conversation written as a list of dicts gives the same items, hash ids included.
    as_dicts = {"model": "gpt-4o", "messages": [body["messages"][0], reply.model_dump(exclude_none=True),
                                                body["messages"][2]]}
    assert rows(items) == rows(items_from_request(as_dicts, API_OPENAI_CHAT))


def test_result_without_its_call_goes_to_results_unknown():
    """A tool message whose call is not in the request is still counted, under results/unknown."""
    body = {"model": "gpt-4o", "messages": [{"role": "tool", "tool_call_id": "gone", "content": "old"}]}
    (item,) = items_from_request(body, API_OPENAI_CHAT)
    assert (item.id, item.part, item.label, item.chars) == ("gone:result", "results/unknown", "unknown", 3)


# ---------------------------------------------------------------------------
# OpenAI Responses
# ---------------------------------------------------------------------------

RESPONSES = {
    "model": "gpt-5",
    "instructions": "You are Codex.",
    "input": [
        {"role": "user", "content": [{"type": "input_text",
                                      "text": "<environment_context>\n  <cwd>/r</cwd>\n</environment_context>"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "fix it"},
                                     {"type": "input_image", "image_url": f"data:image/png;base64,{IMG}",
                                      "detail": "low"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}],
         "encrypted_content": "zzz"},
        {"type": "function_call", "call_id": "call_a", "name": "shell",
         "arguments": '{"command":["bash","-lc","cat x"]}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "hello"},
        {"type": "custom_tool_call", "call_id": "call_b", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_b", "output": "Done!"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]},
    ],
    "tools": [{"type": "function", "name": "shell", "parameters": {}}, {"type": "web_search"}],
}


def test_responses_body_every_item_kind():
    """Instructions, environment, image (low detail on gpt-5: its base of 70), reasoning, calls and outputs by tool."""
    items = items_from_request(RESPONSES)
    assert detect_api(RESPONSES) == API_OPENAI_RESPONSES
    assert [(i.part, i.chars, i.label) for i in items] == [
        ("system", 14, None),
        ("tools/shell", len("type shell = () => any;\n\n"), "shell"),
        ("tools/web_search", len('{"type":"web_search"}'), "web_search"),
        ("environment", len("<environment_context>\n  <cwd>/r</cwd>\n</environment_context>"), None),
        ("prompts/text", 6, None),
        ("prompts/media/image", 0, None),
        ("assistant/thinking", 5, None),
        ("assistant/calls/shell", 34, "shell"),
        ("results/shell", 5, "shell"),
        ("assistant/calls/apply_patch", 15, "apply_patch"),
        ("results/apply_patch", 5, "apply_patch"),
        ("assistant/text", 6, None),
    ]
    assert items[5].fixed_tokens == 70  # vision guide: gpt-5 tiles are 70 + 140 a tile
    assert [i.id for i in items[7:11]] == ["call_a", "call_a:result", "call_b", "call_b:result"]
    assert items[8].reference == "shell:command=cat x"
    assert items[9].reference == "apply_patch:input=*** Begin Patch"


def test_responses_string_input_is_one_prompt():
    """``input`` as a plain string is the user's prompt."""
    (item,) = items_from_request({"model": "gpt-5", "input": "hello there"})
    assert (item.part, item.chars, item.text) == ("prompts/text", 11, "hello there")


# ---------------------------------------------------------------------------
# Anthropic Messages
# ---------------------------------------------------------------------------

# Claude Code's context reminder: the CLAUDE.md section is rules, the rest environment.
REMINDER_HEAD = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
                 "# claudeMd\nCodebase and user instructions are shown below.\n\n")
RULES = "Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\nUse uv.\n"
REMINDER_TAIL = "# currentDate\nToday's date is 2025-01-01.\n</system-reminder>\n"
CLAUDE_MD = REMINDER_HEAD + RULES + REMINDER_TAIL

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are Claude Code."}],
    "tools": [
        {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
        {"name": "mcp__github__get_issue", "description": "Get an issue", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": CLAUDE_MD},
            {"type": "text", "text": "Summarise the PDF."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMG}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain doc"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Read it.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "AAAAAAAAAAAAAAAA"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "src/../a.py"}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "uv"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
             "content": [{"type": "web_search_result", "title": "uv", "url": "https://u", "encrypted_content": "e"}]},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "x = 1"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMG}},
            ]},
        ]},
    ],
}


def test_anthropic_body_every_block_kind():
    """System, tools (MCP and server), CLAUDE.md as rules, media, thinking, calls and results."""
    items = items_from_request(ANTHROPIC)
    assert detect_api(ANTHROPIC) == API_ANTHROPIC
    got = [(i.part, i.chars, i.label) for i in items]
    search_result = '[{"type":"web_search_result","title":"uv","url":"https://u"}]'
    assert got == [
        ("system", 20, None),
        ("tools/Read", len(tool_definition_text(API_ANTHROPIC, ANTHROPIC["tools"][0])), "Read"),
        ("tools/mcp/github/get_issue", len(tool_definition_text(API_ANTHROPIC, ANTHROPIC["tools"][1])),
         "mcp__github__get_issue"),
        ("tools/web_search", len('{"type":"web_search_20250305","name":"web_search"}'), "web_search"),
        ("environment", len(REMINDER_HEAD), None),
        ("rules/CLAUDE.md", len(RULES), "CLAUDE.md"),
        ("environment", len(REMINDER_TAIL), None),
        ("prompts/text", 18, None),
        ("prompts/media/image", 0, None),
        ("prompts/media/document", 0, None),
        ("prompts/media/document", 9, None),
        ("assistant/thinking", 8, None),
        ("assistant/thinking", 0, None),
        ("assistant/calls/Read", len('{"file_path":"src/../a.py"}'), "Read"),
        ("assistant/calls/web_search", len('{"query":"uv"}'), "web_search"),
        ("results/web_search", len(search_result), "web_search"),
        ("results/Read", 5, "Read"),
        ("results/Read", 0, "Read"),
    ]
    assert [i.text for i in items[4:7]] == [REMINDER_HEAD, RULES, REMINDER_TAIL]
    by_part = {i.part: i for i in items}
    assert items[8].fixed_tokens == 1049                      # Anthropic formula, 1024 x 768
    # Two /Type /Page objects, no MediaBox (US Letter): each page an image at Claude's 1.15 MP cap,
    # 612x792 pt at 150 dpi = 1275x1650 px, scaled by sqrt(1.15e6 / 2103750): 1,150,000 / 750 -> 1534.
    assert items[9].fixed_tokens == 2 * 1534
    assert items[12].fixed_tokens == 3                        # 16 base64 chars -> 12 bytes -> 3
    assert by_part["results/web_search"].text == search_result
    assert [i.id for i in items[-5:]] == ["toolu_1", "srvtoolu_1", "srvtoolu_1:result", "toolu_1:result",
                                          "toolu_1:result:1"]
    assert items[-1].fixed_tokens == 1049 and items[-1].category is Category.RESULTS
    assert items[-1].source_kind == "tool_result" and items[-1].label == "Read"
    assert items[-2].reference == "Read:file_path=a.py"


def test_anthropic_sdk_block_objects():
    """Anthropic SDK content blocks (TextBlock, ToolUseBlock) read like their dicts."""
    from anthropic.types import TextBlock, ToolUseBlock

    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [TextBlock(type="text", text="Sure."),
                                          ToolUseBlock(type="tool_use", id="toolu_7", name="Read",
                                                       input={"file_path": "a"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": "A"}]},
    ]}
    items = items_from_request(body, API_ANTHROPIC)
    assert [(i.id[:2] if i.id.startswith("h:") else i.id, i.part, i.chars) for i in items] == [
        ("h:", "prompts/text", 6), ("h:", "assistant/text", 5),
        ("toolu_7", "assistant/calls/Read", len('{"file_path":"a"}')), ("toolu_7:result", "results/Read", 1)]


def test_unknown_block_is_kept_by_role():
    """A block type ctxscope does not know is counted as compact JSON in its role's part."""
    body = {"model": "claude-x", "max_tokens": 5, "system": "s", "messages": [
        {"role": "user", "content": [{"type": "hologram", "shape": "cube"}]}]}
    item = items_from_request(body)[-1]
    assert (item.part, item.text) == ("prompts/text", '{"type":"hologram","shape":"cube"}')


def test_detect_api_rejects_other_json():
    """A JSON object that is no request body raises ValueError naming what is missing."""
    with pytest.raises(ValueError, match="messages"):
        detect_api({"prompt": "hi"})


# ---------------------------------------------------------------------------
# RequestExtractor
# ---------------------------------------------------------------------------

def _turns(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(n)]


def test_extractor_reuses_item_objects_of_unchanged_messages():
    """Appending a message returns the very same Item objects for the old ones, new ones after."""
    extractor = RequestExtractor()
    messages = _turns(4)
    first = extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    messages = messages + [{"role": "user", "content": "message 4"}]
    second = extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    assert len(first) == 4 and len(second) == 5
    assert all(a is b for a, b in zip(first, second))
    assert second[4].text == "message 4"
    assert second is not first                      # a new list each call: the ledger keeps the old one


def test_extractor_notices_in_place_edit_of_content():
    """Replacing an old message's content in place yields a new item (new digest) for it only."""
    extractor = RequestExtractor()
    messages = _turns(3)
    first = extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    messages[1]["content"] = "edited"
    second = extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    assert second[0] is first[0] and second[2] is first[2]
    assert second[1] is not first[1] and second[1].text == "edited" and second[1].digest != first[1].digest


def test_extractor_notices_in_place_edit_of_a_block_text():
    """Changing the text inside a content block of an old message is noticed too."""
    extractor = RequestExtractor()
    messages = [{"role": "user", "content": [{"type": "text", "text": "one"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "two"}]}]
    body = {"model": "claude-x", "max_tokens": 5, "system": "s", "messages": messages}
    first = extractor.extract(body, API_ANTHROPIC)
    messages[0]["content"][0]["text"] = "uno"
    second = extractor.extract(body, API_ANTHROPIC)
    assert [i.text for i in second] == ["s", "uno", "two"]
    assert second[0] is first[0] and second[2] is first[2] and second[1] is not first[1]


def test_extractor_handles_rewritten_history():
    """Dropping the oldest messages (a rewrite) gives the items of the new history, ids as a fresh pass."""
    extractor = RequestExtractor()
    messages = _turns(6)
    extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "summary"}] + messages[4:]}
    again = extractor.extract(body, API_OPENAI_CHAT)
    assert rows(again) == rows(items_from_request(body, API_OPENAI_CHAT))


def test_extractor_rebuilds_when_tools_change():
    """A new tool list yields its new definition item and keeps the message items' ids."""
    extractor = RequestExtractor()
    body = {"model": "gpt-4o", "messages": _turns(2),
            "tools": [{"type": "function", "function": {"name": "a", "parameters": {}}}]}
    first = extractor.extract(body, API_OPENAI_CHAT)
    body["tools"].append({"type": "function", "function": {"name": "b", "parameters": {}}})
    second = extractor.extract(body, API_OPENAI_CHAT)
    assert [i.id for i in second[:2]] == ["tool:a", "tool:b"]
    assert second[2] is first[1] and second[3] is first[2]


def test_pure_modules_import_no_telemetry_or_sdk():
    """items, request_formats, payload and classify load without OpenTelemetry or a provider SDK."""
    code = ("import sys, ctxscope.core.items, ctxscope.core.apis._builder, ctxscope.core.payload, "
            "ctxscope.core.classify; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'openai', 'anthropic')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_request_formats_is_a_deprecated_alias_of_the_format_modules():
    """Importing ctxscope.request_formats warns, naming core.apis, and its names are the formats' own."""
    import importlib

    from ctxscope.core import apis
    from ctxscope.core.apis import _builder

    sys.modules.pop("ctxscope.request_formats", None)
    with pytest.warns(DeprecationWarning, match=r"ctxscope\.core\.apis"):
        old = importlib.import_module("ctxscope.request_formats")
    assert old.Builder is _builder.Builder and old.Ids is _builder.Ids and old.keyed_hash is _builder.keyed_hash
    assert old.MESSAGE_FN == {wire.id: wire.message for wire in apis.WIRE_FORMATS}
    body = {"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    builder = old.Builder(API_ANTHROPIC, old.Ids(), lambda api, tool: "")
    old.head(builder, body)
    assert [(i.part, i.text) for i in builder.out] == [("system", "Be brief.")]
    assert old.messages_of(body, API_ANTHROPIC) == body["messages"]


def test_an_unknown_api_is_a_value_error_naming_the_known_ones():
    known = r"anthropic\.messages, gemini\.generate_content, ollama\.chat, openai\.chat, openai\.responses$"
    with pytest.raises(ValueError, match=r"unknown api 'openai\.chat\.v9': one of " + known):
        items_from_request({"messages": []}, "openai.chat.v9")


# ---------------------------------------------------------------------------
# Property: incremental extraction agrees with a fresh one after any edits
# ---------------------------------------------------------------------------


_WORDS = st.sampled_from(["alpha", "beta", "alpha", "<system-reminder>\nx\n</system-reminder>\nhi", ""])


def _anthropic_msg(draw, i: int) -> dict:
    if draw(st.booleans()):
        return {"role": "user", "content": draw(_WORDS)}
    return {"role": "assistant", "content": [{"type": "text", "text": draw(_WORDS)},
                                             {"type": "tool_use", "id": f"t{i}", "name": "Read",
                                              "input": {"file_path": draw(_WORDS)}}]}


@st.composite
def _histories(draw):
    messages = [_anthropic_msg(draw, i) for i in range(draw(st.integers(1, 6)))]
    steps = []
    for step in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["append", "edit", "edit_block", "delete", "insert", "rebuild"]))
        steps.append((op, draw(st.integers(0, 20)), _anthropic_msg(draw, 100 + step), draw(_WORDS)))
    return messages, steps


def _view(items):
    return [(i.id.partition("#")[0], i.part, i.chars, i.digest, i.label, i.reference) for i in items]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories())
def test_incremental_extraction_matches_fresh_extraction(history):
    """After appends, in-place edits, deletions, insertions and rebuilt dicts: same items as a fresh pass."""
    messages, steps = history
    extractor = RequestExtractor()
    body = {"model": "claude-x", "max_tokens": 5, "system": "sys", "messages": messages}
    before = extractor.extract(body, API_ANTHROPIC)
    for op, index, new, words in steps:
        old_len = len(messages)
        i = index % max(1, len(messages))
        if op == "append" or not messages:
            messages.append(new)
        elif op == "edit":
            messages[i]["content"] = words
        elif op == "edit_block" and isinstance(messages[i]["content"], list):
            messages[i]["content"][0]["text"] = words + "!"
        elif op == "delete":
            del messages[i]
        elif op == "insert":
            messages.insert(i, new)
        elif op == "rebuild":
            messages[:] = json.loads(json.dumps(messages))
        after = extractor.extract(body, API_ANTHROPIC)
        fresh = items_from_request(body, API_ANTHROPIC)
        assert _view(after) == _view(fresh)
        assert len({i.id for i in after}) == len(after)
        if op == "append" and old_len:
            assert all(a is b for a, b in zip(before, after[:len(before)]))
        before = after


def test_one_shot_iterator_is_refused_not_consumed():
    """A generator of messages is left for the SDK: ValueError, and the generator is untouched."""
    messages = iter([{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match="one-shot iterator"):
        items_from_request({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    assert next(messages) == {"role": "user", "content": "hi"}


def test_reused_item_whose_id_a_new_item_took_is_extracted_again():
    """Old [a, x], new [x as a block, x]: the new first item takes x's id, so the kept x becomes #2."""
    extractor = RequestExtractor()
    a = {"role": "user", "content": "a"}
    x = {"role": "user", "content": "x"}
    first = extractor.extract({"model": "gpt-4o", "messages": [a, x]}, API_OPENAI_CHAT)
    block = {"role": "user", "content": [{"type": "text", "text": "x"}]}
    second = extractor.extract({"model": "gpt-4o", "messages": [block, x]}, API_OPENAI_CHAT)
    assert [i.id for i in second] == [first[1].id, first[1].id + "#2"]
    assert second[1] is not first[1]          # extracted again, since its id was taken


def test_image_by_url_counts_default_or_low_detail_flat():
    """An image by URL: SPEC default 1,600; with OpenAI detail low: the flat 85."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "low"}}]}]}
    assert [i.fixed_tokens for i in items_from_request(body)] == [1600, 85]


def test_malformed_blocks_are_counted_not_fatal():
    """Non-string texts and thinking are counted as their JSON; nothing raises."""
    body = {"model": "claude-x", "max_tokens": 5, "system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": 42}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": ["a"]}]}]}
    assert [(i.part, i.text) for i in items_from_request(body)][1:] == [
        ("prompts/text", "42"), ("assistant/thinking", '["a"]')]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["text", "image", "tool_use", "tool_result", "image_url", "function_call",
                       "reasoning", "document", "input_image", "web_search_tool_result"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "role", "content", "text", "id", "name", "input", "source", "data",
                         "tool_use_id", "tool_calls", "function", "arguments", "call_id", "output",
                         "image_url", "url", "summary", "thinking"]), inner, max_size=5),
    max_leaves=20)


@pytest.mark.parametrize("api", [API_OPENAI_CHAT, API_ANTHROPIC])
def test_a_block_whose_type_is_a_list_is_unknown_content(api):
    """``{"type": []}`` (hypothesis found it) raised TypeError: now counted whole as unknown content."""
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": [], "x": "abcd"}]}]}
    [item] = items_from_request(body, api)
    assert (item.part, item.source_kind, item.text) == ("prompts/text", "unknown", '{"type":[],"x":"abcd"}')
    assert item.chars == 22  # the block's compact JSON, every character of it


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC]), st.lists(_JSON, max_size=5),
       _JSON)
def test_arbitrary_json_never_breaks_extraction(api, messages, extra):
    """Any JSON in messages, system and tools gives items (with str text) or a ValueError, nothing else."""
    key = "input" if api == API_OPENAI_RESPONSES else "messages"
    body = {"model": "m", key: messages, "system": extra, "instructions": extra, "tools": extra}
    try:
        items = items_from_request(body, api)
    except ValueError:
        return
    assert all(isinstance(i.text, str) and i.chars == len(i.text) for i in items)
    assert len({i.id for i in items}) == len(items)


def test_sdk_not_given_sentinels_are_absent_values():
    """openai/anthropic NOT_GIVEN for tools, system or input count as absent, not as content."""
    import anthropic
    import openai

    responses = {"model": "gpt-5", "input": openai.NOT_GIVEN, "instructions": "hi", "tools": openai.NOT_GIVEN}
    assert [(i.part, i.text) for i in items_from_request(responses, API_OPENAI_RESPONSES)] == [("system", "hi")]
    claude = {"model": "c", "system": anthropic.NOT_GIVEN, "tools": anthropic.NOT_GIVEN,
              "messages": [{"role": "user", "content": "x"}]}
    assert [(i.part, i.text) for i in items_from_request(claude, API_ANTHROPIC)] == [("prompts/text", "x")]
