"""ctxscope.testing: the local server answers in the providers' wire formats, by its stated usage rule."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anthropic
import openai
import pytest

from ctxscope.testing import (HIDDEN_OVERHEAD_TOKENS, ProviderServer, Reply, ToolCall, output_tokens,
                              reported_input_tokens)


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()


def test_usage_rule_by_hand():
    """Strings under the context fields, ceil(len/4) each, plus the hidden 10; keys never count."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}],
            "tools": [{"type": "function", "function": {"name": "read"}}], "temperature": 0}
    # "user" 1 + "hello there" 3 + "function" 2 + "read" 1 + 10 ("m" is not a context field)
    assert reported_input_tokens(body, "openai.chat") == 17
    assert HIDDEN_OVERHEAD_TOKENS == 10
    assert reported_input_tokens({"system": "abcde", "messages": []}, "anthropic.messages") == 12
    assert reported_input_tokens({"instructions": "abcd", "input": "x"}, "openai.responses") == 12
    assert output_tokens("hello", [ToolCall("read", {"path": "a.py"})]) == 2 + 4


def test_chat_json_and_request_record(server):
    """OpenAI chat JSON: content, usage by the rule, the request recorded as sent."""
    client = server.openai_client()
    result = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello there"}])
    assert result.id == "chatcmpl-000001"
    assert result.choices[0].message.content == "ok"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (14, 1, 15)
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "hello there"}]
    assert server.requests[0].api == "openai.chat"


def test_chat_stream_usage_chunk_only_when_asked(server):
    """A usage chunk (empty choices) ends the stream only with stream_options.include_usage."""
    client = server.openai_client()
    messages = [{"role": "user", "content": "hi"}]
    server.reply(Reply.text("one two"))
    plain = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in plain) == "one two"
    assert all(c.usage is None for c in plain)
    assert plain[-1].choices[0].finish_reason == "stop"
    with_usage = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                                     stream_options={"include_usage": True}))
    assert with_usage[-1].choices == []
    assert with_usage[-1].usage.prompt_tokens == 12  # "user" 1 + "hi" 1 + 10


def test_chat_tool_call_json_and_stream(server):
    """Scripted tool calls: id, name and compact JSON arguments, whole or streamed."""
    client = server.openai_client()
    server.reply(Reply.tool_call("read_file", {"path": "a.py"}, id="call_x"),
                 Reply.tool_call("read_file", {"path": "a.py"}, id="call_y"))
    result = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    call = result.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_x", "read_file", '{"path":"a.py"}')
    assert result.usage.completion_tokens == 4  # '{"path":"a.py"}': 15 chars
    with client.chat.completions.stream(model="gpt-4o", messages=[{"role": "user", "content": "x"}]) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls[0].id == "call_y"
    assert final.choices[0].finish_reason == "tool_calls"


def test_responses_json_and_stream(server):
    """Responses: output_text and usage; the stream ends in response.completed with the usage."""
    client = server.openai_client()
    result = client.responses.create(model="gpt-4o", instructions="abcd", input="hello there")
    assert result.output_text == "ok"
    assert result.usage.input_tokens == 14  # 1 + 3 + 10
    events = list(client.responses.create(model="gpt-4o", input="hello there", stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert events[-1].response.usage.input_tokens == 13
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_anthropic_json_splits_cached_input(server):
    """Anthropic usage: input_tokens is the uncached rest of the total."""
    client = server.anthropic_client()
    server.reply(Reply.text("ok", cache_read_tokens=4, cache_creation_tokens=2))
    message = client.messages.create(model="claude-opus-4-1", max_tokens=10, system="abcd",
                                     messages=[{"role": "user", "content": "hello there"}])
    usage = message.usage
    # total 1 + 1 + 3 + 10 = 15
    assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (9, 2, 4)
    assert message.stop_reason == "end_turn"


def test_anthropic_stream_event_order(server):
    """message_start, blocks (text then tool_use), message_delta with the output, message_stop."""
    client = server.anthropic_client()
    server.reply(Reply.tool_call("read_file", {"p": 1}, content="let me"))
    kinds = [e.type for e in client.messages.create(model="claude-opus-4-1", max_tokens=10, stream=True,
                                                     messages=[{"role": "user", "content": "x"}])]
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]


def test_errors_in_provider_format_without_retry(server):
    """Scripted errors: the SDKs raise their own error types at once (x-should-retry: false)."""
    server.reply(Reply.error(429, "slow"), Reply.error(500, "boom"))
    with pytest.raises(openai.RateLimitError):
        server.openai_client(max_retries=3).chat.completions.create(model="m", messages=[])
    with pytest.raises(anthropic.InternalServerError) as caught:
        server.anthropic_client(max_retries=3).messages.create(model="m", max_tokens=1, messages=[])
    assert caught.value.body["error"] == {"type": "api_error", "message": "boom"}
    assert len(server.requests) == 2  # no retries


def test_unknown_path_is_404_and_reset_restarts_ids(server):
    """A path no provider has answers 404; reset() makes ids start again."""
    request = urllib.request.Request(server.base_url + "/v1/nothing", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 404
    assert json.loads(caught.value.read())["error"]["type"] == "not_found_error"
    client = server.openai_client()
    assert client.chat.completions.create(model="m", messages=[]).id == "chatcmpl-000001"
    server.reset()
    assert client.chat.completions.create(model="m", messages=[]).id == "chatcmpl-000001"


def test_responder_and_default():
    """A responder answers when the queue is empty; the default otherwise."""
    with ProviderServer(default=Reply.text("fallback"),
                        responder=lambda r: Reply.text("echo") if r.body.get("model") == "e" else None) as s:
        client = s.openai_client()
        assert client.chat.completions.create(model="e", messages=[]).choices[0].message.content == "echo"
        assert client.chat.completions.create(model="x", messages=[]).choices[0].message.content == "fallback"
