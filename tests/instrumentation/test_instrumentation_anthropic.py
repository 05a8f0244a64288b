"""The Anthropic instrumentor with the real anthropic SDK against ctxscope.testing's server.

chars/4 counting; the server reports ``ceil(len / 4)`` per string under
``system``/``messages``/``tools`` plus 10 hidden tokens, split into uncached,
cache-write and cache-read parts as the reply declares.
"""

from __future__ import annotations

import asyncio

import anthropic
import pytest
import wrapt
from opentelemetry.trace import SpanKind, StatusCode

import ctxscope
from ctxscope.instrumentation.anthropic import AnthropicInstrumentor
from ctxscope.schema import Attr, GenAI
from ctxscope.testing import ProviderServer, Reply

from _instr_support import SESSION, attr, categories, changes, instrumented, no_content

MODEL = "claude-opus-4-1"
SYSTEM = "You are terse."                                  # 14 chars -> 4 tokens
MESSAGES = [{"role": "user", "content": "hello there"}]    # 11 chars -> 3 tokens
# Server: "You are terse." 4 + "user" 1 + "hello there" 3 + 10 hidden = 18
REQUEST = dict(model=MODEL, max_tokens=100, system=SYSTEM, messages=MESSAGES)


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    with instrumented(server, monkeypatch, AnthropicInstrumentor) as t:
        yield t


@pytest.fixture
def client(server):
    return server.anthropic_client()


def test_messages_span_with_cache_usage_worked_out_by_hand(tel, server, client):
    """Reported input = uncached 10 + cache write 3 + cache read 5 = 18; categories 4 + 3."""
    server.reply(Reply.text("ok", cache_read_tokens=5, cache_creation_tokens=3))
    with ctxscope.session("a-1"):
        message = client.messages.create(**REQUEST)
    assert message.usage.input_tokens == 10
    span = tel.one_call()
    assert span.name == f"chat {MODEL}" and span.kind is SpanKind.CLIENT
    assert attr(span, GenAI.PROVIDER_NAME) == "anthropic"
    assert attr(span, GenAI.OPERATION_NAME) == "chat"
    assert attr(span, GenAI.REQUEST_MAX_TOKENS) == 100
    assert attr(span, GenAI.RESPONSE_ID) == message.id
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("end_turn",)
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == 18
    assert attr(span, GenAI.USAGE_CACHE_READ_INPUT_TOKENS) == 5
    assert attr(span, GenAI.USAGE_CACHE_CREATION_INPUT_TOKENS) == 3
    assert attr(span, GenAI.USAGE_OUTPUT_TOKENS) == 1
    assert attr(span, SESSION) == "a-1"
    assert categories(span) == {"system": 4, "prompts": 3}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert attr(span, Attr.REPORTED_TOKENS) == 18
    assert attr(span, Attr.WINDOW_TOKENS) == 200_000
    assert changes(span) == [("system", "baseline", 4), ("prompts", "baseline", 3)]


def test_result_is_unchanged(tel, server, client):
    """The instrumented create returns what the bare SDK returns."""
    AnthropicInstrumentor().uninstrument()
    server.reset()
    bare = client.messages.create(**REQUEST).model_dump()
    AnthropicInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    server.reset()
    seen = client.messages.create(**REQUEST)
    assert isinstance(seen, anthropic.types.Message)
    assert seen.model_dump() == bare


def test_stream_events_unchanged_and_usage_from_message_start_and_delta(tel, server, client):
    """stream=True: the same events as a bare run; input from message_start, output from message_delta."""
    AnthropicInstrumentor().uninstrument()
    server.reset()
    server.reply(Reply.text("one two three"))
    bare = [e.model_dump() for e in client.messages.create(**REQUEST, stream=True)]
    AnthropicInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    server.reset()
    server.reply(Reply.text("one two three"))
    stream = client.messages.create(**REQUEST, stream=True)
    assert isinstance(stream, anthropic.Stream)
    events = list(stream)
    assert [e.model_dump() for e in events] == bare
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 18
    assert attr(span, GenAI.USAGE_OUTPUT_TOKENS) == 4
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("end_turn",)


def test_stream_closed_early_still_has_reported_input(tel, server, client):
    """Closing after message_start: the input usage is already known."""
    server.reply(Reply.text("a b c d e"))
    stream = client.messages.create(**REQUEST, stream=True)
    assert next(stream).type == "message_start"
    stream.close()
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 18
    assert span.status.status_code is StatusCode.UNSET


def test_stream_helper_get_final_message(tel, client):
    """messages.stream(): get_final_message() inside the block; the span ends at exit with the usage."""
    with client.messages.stream(**REQUEST) as stream:
        assert tel.calls() == []
        final = stream.get_final_message()
    assert final.content[0].text == "ok"
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 18
    assert attr(span, GenAI.RESPONSE_ID) == final.id


def test_stream_helper_text_stream(tel, server, client):
    """messages.stream(): iterating text_stream passes the text through unchanged."""
    server.reply(Reply.text("alpha beta"))
    with client.messages.stream(**REQUEST) as stream:
        text = "".join(stream.text_stream)
    assert text == "alpha beta"
    assert attr(tel.one_call(), GenAI.USAGE_OUTPUT_TOKENS) == 3


def test_provider_error_is_raised_unchanged(tel, server, client):
    """A 400 raises BadRequestError with Anthropic's error body; the span records error.type."""
    server.reply(Reply.error(400, "bad request"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**REQUEST)
    assert caught.value.status_code == 400
    assert caught.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": "bad request"}}
    span = tel.one_call()
    assert attr(span, "error.type") == "BadRequestError"
    assert span.status.status_code is StatusCode.ERROR


def test_helper_error_on_enter_is_raised_and_recorded(tel, server, client):
    """messages.stream() whose request fails: the error leaves the with statement, the span has it."""
    server.reply(Reply.error(529, "overloaded"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(**REQUEST):
            pass
    assert caught.value.status_code == 529
    assert attr(tel.one_call(), "error.type") == type(caught.value).__qualname__


def test_stream_error_event_is_raised_and_recorded(tel, server, client):
    """An error event mid-stream raises the SDK's error; the span ends with error.type."""
    server.reply(Reply.text("a b", stream_error=True))
    with pytest.raises(anthropic.APIStatusError):
        list(client.messages.create(**REQUEST, stream=True))
    span = tel.one_call()
    assert attr(span, "error.type") == "APIStatusError"
    assert attr(span, Attr.REPORTED_TOKENS) == 18  # message_start came before the break


def test_async_create_stream_and_helper(tel, server):
    """AsyncAnthropic: create, stream=True and the async stream helper each give one span."""
    async def run():
        aclient = server.anthropic_client(async_=True)
        message = await aclient.messages.create(**REQUEST)
        stream = await aclient.messages.create(**REQUEST, stream=True)
        assert isinstance(stream, anthropic.AsyncStream)
        kinds = [e.type async for e in stream]
        async with aclient.messages.stream(**REQUEST) as helper:
            final = await helper.get_final_message()
        return message, kinds, final

    message, kinds, final = asyncio.run(run())
    assert message.content[0].text == "ok" and final.content[0].text == "ok"
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert [attr(s, Attr.REPORTED_TOKENS) for s in tel.calls()] == [18, 18, 18]


def test_tool_use_round_trip_categories(tel, server, client):
    """A tool_use reply and its tool_result: assistant/calls and results parts of the next request."""
    server.reply(Reply.tool_call("read_file", {"path": "a.py"}, id="toolu_1"))
    with ctxscope.session("a-tools"):
        first = client.messages.create(**REQUEST)
        follow = MESSAGES + [
            {"role": "assistant", "content": [block.model_dump() for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "print(1)"}]}]
        client.messages.create(model=MODEL, max_tokens=100, system=SYSTEM, messages=follow)
    second = tel.calls()[1]
    assert attr(tel.calls()[0], GenAI.RESPONSE_FINISH_REASONS) == ("tool_use",)
    # '{"path":"a.py"}' 15 chars -> 4; "print(1)" 8 chars -> 2
    assert categories(second) == {"system": 4, "prompts": 3, "assistant": 4, "results": 2}
    assert changes(second) == [("assistant", "addition", 4), ("results", "addition", 2)]


def test_instrument_and_uninstrument_twice_is_harmless(tel, client):
    """instrument() twice: one span per call; uninstrument() twice: the SDK is bare again."""
    AnthropicInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    client.messages.create(**REQUEST)
    assert len(tel.calls()) == 1
    AnthropicInstrumentor().uninstrument()
    AnthropicInstrumentor().uninstrument()
    client.messages.create(**REQUEST)
    assert len(tel.calls()) == 1
    assert not isinstance(vars(anthropic.resources.messages.Messages)["create"], wrapt.ObjectProxy)
    assert not isinstance(vars(anthropic.resources.messages.Messages)["stream"], wrapt.ObjectProxy)


def test_no_text_in_spans(tel, server, client):
    """Sentinels in system prompt, prompt and response never reach a span."""
    server.reply(Reply.text("SENTINEL-OUT"))
    client.messages.create(model=MODEL, max_tokens=10, system="SENTINEL-SYS",
                           messages=[{"role": "user", "content": "SENTINEL-IN"}])
    # The call was measured (so there is a span to search): "SENTINEL-SYS" 12 chars -> 3,
    # "SENTINEL-IN" 11 chars -> 3.
    assert categories(tel.one_call()) == {"system": 3, "prompts": 3}
    for span in tel.spans():
        assert no_content(span, "SENTINEL-SYS", "SENTINEL-IN", "SENTINEL-OUT")


def test_beta_messages_create_and_stream(tel, client):
    """client.beta.messages: create and the stream helper are instrumented like messages."""
    message = client.beta.messages.create(**REQUEST)
    with client.beta.messages.stream(**REQUEST) as stream:
        final = stream.get_final_message()
    assert message.content[0].text == "ok" and final.content[0].text == "ok"
    assert [attr(s, Attr.REPORTED_TOKENS) for s in tel.calls()] == [18, 18]


def test_with_raw_response_span_has_the_usage(tel, server, client):
    """with_raw_response: reported input 18 (10 + 3 + 5) read from the body; the caller's parse() is the same object."""
    server.reply(Reply.text("ok", cache_read_tokens=5, cache_creation_tokens=3))
    raw = client.messages.with_raw_response.create(**REQUEST)
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 18
    assert attr(span, GenAI.USAGE_CACHE_READ_INPUT_TOKENS) == 5
    message = raw.parse()
    assert message is raw.parse() and attr(span, GenAI.RESPONSE_ID) == message.id


def test_async_with_raw_response_span_has_the_usage(tel, server):
    """The async client's raw response (parse() a coroutine): reported input 18 on the span."""
    async def run() -> str:
        raw = await server.anthropic_client(async_=True).messages.with_raw_response.create(**REQUEST)
        return (await raw.parse()).content[0].text

    assert asyncio.run(run()) == "ok"
    assert attr(tel.one_call(), Attr.REPORTED_TOKENS) == 18
