"""Message arrays and request bodies: OpenAI chat (developer, reasoning_content, tools) and Anthropic."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CORPUS, requires_corpus

from ctxscope.schema import Category
from ctxscope.transcripts import TranscriptFile


def test_openai_body_with_developer_reasoning_and_tools(tmp_path: Path):
    """Developer text is system, reasoning_content is thinking, tools are tools, the tool result names its tool."""
    body = {"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
            "messages": [{"role": "developer", "content": "Be brief."},
                         {"role": "user", "content": "Read a.py"},
                         {"role": "assistant", "content": None, "reasoning_content": "I should read it.",
                          "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "print(1)"}]}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body, indent=1))
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == 1
    # chars by hand: "type read_file = () => any;\n\n" 29, "Be brief." 9, "Read a.py" 9,
    # "I should read it." 17, '{"path": "a.py"}' 16, "print(1)" 8.
    assert [(i.category, i.part, i.chars, i.label) for i in calls[0].items] == [
        (Category.TOOLS, "tools/read_file", 29, "read_file"),
        (Category.SYSTEM, "system", 9, None),
        (Category.PROMPTS, "prompts/text", 9, None),
        (Category.ASSISTANT, "assistant/thinking", 17, None),
        (Category.ASSISTANT, "assistant/calls/read_file", 16, "read_file"),
        (Category.RESULTS, "results/read_file", 8, "read_file"),
    ]
    result = calls[0].items[-1]
    assert (result.id, result.source_call_id, result.reference) == ("c1:result", "c1", "read_file:path=a.py")


def test_pairs_take_usage_from_the_response(tmp_path: Path):
    """An Anthropic pair's reported input is input + cache creation + cache read of its response."""
    pair = {"request": {"model": "claude-x", "system": "sys", "messages": [{"role": "user", "content": "hi"}]},
            "response": {"usage": {"input_tokens": 100, "cache_creation_input_tokens": 20,
                                   "cache_read_input_tokens": 5, "output_tokens": 3}}}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(pair) + "\n")
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.reported_tokens for c in calls] == [125]
    assert calls[0].provider == "anthropic"


@requires_corpus
def test_recorded_api_pairs_are_one_call_a_line():
    """134 Anthropic and 214 OpenAI chat recordings give 134 and 214 calls, no problems."""
    for name, expected in (("anthropic", 134), ("openai_chat", 214)):
        source = TranscriptFile(str(CORPUS / "api" / name / "pydantic-ai-cassettes.requests.jsonl"))
        assert len(list(source.calls())) == expected
        assert source.problems == []


@requires_corpus
def test_swe_agent_history_gives_one_call_per_assistant_message():
    """The SWE-agent trajectory's history has 13 assistant messages after the first: 13 calls."""
    path = next((CORPUS / "api" / "swe-agent").iterdir())
    history = json.loads(path.read_text())["history"]
    expected = sum(1 for i, m in enumerate(history) if m.get("role") == "assistant" and i > 0)
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == expected == 13


def test_responses_body_with_usage_details(tmp_path: Path):
    """An OpenAI Responses pair: instructions are system, input_tokens (cached included) is the reported 300."""
    pair = {"request": {"model": "gpt-5", "instructions": "Be terse.",
                        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]},
            "response": {"usage": {"input_tokens": 300, "input_tokens_details": {"cached_tokens": 200},
                                   "output_tokens": 5}}}
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(pair) + "\n")
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.reported_tokens for c in calls] == [300]
    assert [i.category for i in calls[0].items] == [Category.SYSTEM, Category.PROMPTS]
