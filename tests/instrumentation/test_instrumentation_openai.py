"""The OpenAI instrumentor with the real openai SDK against ctxscope.testing's server.

Counting is chars/4 (``ceil(chars / 4)`` per item) so every value is worked
out by hand; the server reports input by its documented rule (every string
value under ``messages``/``tools`` or ``instructions``/``input``/``tools``,
``ceil(len / 4)`` each, plus 10 hidden tokens).
"""

from __future__ import annotations

import asyncio
import logging

import openai
import pytest
import wrapt
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

import ctxscope
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.schema import Attr, GenAI
from ctxscope.testing import ProviderServer, Reply, wait_for_measurements
from ctxscope.core.tokens import CharsCounter

from _instr_support import SESSION, attr, categories, changes, instrumented, make_telemetry, no_content

SYSTEM = {"role": "system", "content": "You are terse."}          # 14 chars -> 4 tokens
HELLO = {"role": "user", "content": "hello there"}                 # 11 chars -> 3 tokens
# Server: "system" 2 + "You are terse." 4 + "user" 1 + "hello there" 3 + 10 hidden = 20
FIRST = [SYSTEM, HELLO]
# Turn 2 adds "assistant" 3 + "ok" 1 + "user" 1 + "read it" 2 = 27 reported; items +1 +2
SECOND = FIRST + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "read it"}]


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as t:
        yield t


@pytest.fixture
def client(server):
    return server.openai_client()


def _bare(server, fn):
    """Run ``fn(client)`` uninstrumented, from fresh server ids; the result as plain data."""
    instrumentor = OpenAIInstrumentor()
    instrumentor.uninstrument()
    server.reset()
    try:
        return fn(server.openai_client())
    finally:
        server.reset()


def test_chat_span_carries_the_annotation_worked_out_by_hand(tel, client):
    """A first chat call: GenAI attributes, categories 4+3, reported 20, baseline change events."""
    with ctxscope.session("s-chat"):
        result = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert result.choices[0].message.content == "ok"
    span = tel.one_call()
    assert span.name == "chat gpt-4o" and span.kind is SpanKind.CLIENT
    assert attr(span, GenAI.OPERATION_NAME) == "chat"
    assert attr(span, GenAI.PROVIDER_NAME) == "openai"
    assert attr(span, GenAI.REQUEST_MODEL) == "gpt-4o"
    assert attr(span, GenAI.RESPONSE_MODEL) == "gpt-4o"
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == 20
    assert attr(span, GenAI.USAGE_OUTPUT_TOKENS) == 1
    assert attr(span, GenAI.USAGE_CACHE_READ_INPUT_TOKENS) == 0
    assert attr(span, SESSION) == "s-chat"
    assert attr(span, Attr.STAGE) == "request-input"
    assert attr(span, Attr.BASIS) == "chars/4"
    assert attr(span, Attr.COVERAGE) == "complete"
    assert attr(span, Attr.BASELINE) is True
    assert categories(span) == {"system": 4, "prompts": 3}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert attr(span, Attr.REPORTED_TOKENS) == 20
    assert attr(span, Attr.CALIBRATION_FACTOR) == 1.0  # estimates fall short: unattributed takes 13
    assert attr(span, Attr.WINDOW_TOKENS) == 128_000  # genai-prices: gpt-4o
    assert attr(span, Attr.MODEL) == "gpt-4o"
    assert changes(span) == [("system", "baseline", 4), ("prompts", "baseline", 3)]


def test_first_call_of_a_session_has_a_capture_start_child_span(tel, client):
    """capture-start once per session, child of the call's span, stage capture-start."""
    with ctxscope.session("s-capture"):
        client.chat.completions.create(model="gpt-4o", messages=FIRST)
        client.chat.completions.create(model="gpt-4o", messages=SECOND)
    starts = tel.spans("capture-start")
    assert len(starts) == 1
    first_call = tel.calls()[0]
    assert starts[0].parent.span_id == first_call.context.span_id
    assert attr(starts[0], Attr.STAGE) == "capture-start"
    assert attr(starts[0], Attr.ITEM_STAGE) == "request-input"
    assert attr(starts[0], Attr.ESTIMATED_TOKENS) == 7


def test_second_turn_reports_additions_largest_first(tel, client):
    """Turn 2: not a baseline; additions prompts +2 then assistant +1; reported 27."""
    with ctxscope.session("s-turns"):
        client.chat.completions.create(model="gpt-4o", messages=FIRST)
        client.chat.completions.create(model="gpt-4o", messages=SECOND)
    second = tel.calls()[1]
    assert attr(second, Attr.BASELINE) is False
    assert categories(second) == {"system": 4, "prompts": 5, "assistant": 1}
    assert attr(second, Attr.ESTIMATED_TOKENS) == 10
    assert attr(second, Attr.REPORTED_TOKENS) == 27
    assert changes(second) == [("prompts", "addition", 2), ("assistant", "addition", 1)]


def test_estimates_above_the_report_give_a_factor_below_one(tel, client):
    """A tool rendered with its long parameter names (keys the server's rule skips) outweighs
    the server's rule: factor = 28 / estimated."""
    properties = {"the_path_of_the_file_to_read_from_disk": {"type": "string"},
                  "the_encoding_to_decode_the_file_with": {"type": "string"}}
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                               "parameters": {"type": "object", "properties": properties}}}]
    client.chat.completions.create(model="gpt-4o", messages=[HELLO], tools=tools)
    span = tel.one_call()
    # "user" 1 + "hello there" 3 + tools "function" 2 "read_file" 3 "Read a file" 3 "object" 2
    # "string" 2 + 2 + 10
    assert attr(span, Attr.REPORTED_TOKENS) == 28
    # Our tool item is OpenAI's TypeScript rendering, 146 chars -> 37 tokens:
    # "// Read a file\n" 15 + "type read_file = (_: {\n" 23
    # + "the_path_of_the_file_to_read_from_disk?: string,\n" 49
    # + "the_encoding_to_decode_the_file_with?: string,\n" 47 + "}) => any;\n\n" 12;
    # with "hello there" 3: 40 estimated, so the factor is 28 / 40 = 0.7.
    assert categories(span) == {"tools": 37, "prompts": 3}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 40
    assert attr(span, Attr.CALIBRATION_FACTOR) == pytest.approx(0.7)


def test_chat_result_is_unchanged(tel, server, client):
    """The instrumented call returns what the uninstrumented one does."""
    bare = _bare(server, lambda c: c.chat.completions.create(model="gpt-4o", messages=FIRST).model_dump())
    OpenAIInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    server.reset()
    seen = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert isinstance(seen, openai.types.chat.ChatCompletion)
    assert seen.model_dump() == bare


def test_chat_stream_chunks_are_unchanged_and_the_span_ends_with_the_stream(tel, server, client):
    """Streamed chunks equal an uninstrumented run's; the span ends after the last, with the usage chunk."""
    kwargs = dict(model="gpt-4o", messages=FIRST, stream=True, stream_options={"include_usage": True})
    bare = _bare(server, lambda c: (server.reply(Reply.text("one two three")),
                                    [x.model_dump() for x in c.chat.completions.create(**kwargs)])[1])
    OpenAIInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    server.reply(Reply.text("one two three"))
    stream = client.chat.completions.create(**kwargs)
    assert isinstance(stream, openai.Stream)
    first = next(stream)
    assert tel.calls() == []  # still open while the stream runs
    chunks = [first] + list(stream)
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert [c.model_dump() for c in chunks] == bare
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 20
    assert attr(span, GenAI.USAGE_OUTPUT_TOKENS) == 4  # "one two three": 13 chars
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


def test_chat_stream_without_usage_has_no_reported_input(tel, client):
    """Without include_usage the provider sends no usage: the span has estimates only."""
    list(client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True))
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) is None
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7


def test_closing_a_stream_early_ends_the_span(tel, server, client):
    """close() after one chunk ends the span, with no error status."""
    server.reply(Reply.text("a b c d e f"))
    stream = client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True)
    next(stream)
    stream.close()
    span = tel.one_call()
    assert span.status.status_code is StatusCode.UNSET


def test_stream_used_as_context_manager_ends_the_span(tel, client):
    """Leaving ``with stream:`` ends the span."""
    with client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True) as stream:
        next(iter(stream))
    assert len(tel.calls()) == 1


def test_provider_error_is_raised_unchanged_and_recorded(tel, server, client):
    """A 429 raises the SDK's RateLimitError with the provider's body; the span has error.type."""
    server.reply(Reply.error(429, "slow down"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert caught.value.status_code == 429
    assert caught.value.body == {"message": "slow down", "type": "rate_limit_exceeded", "param": None,
                                 "code": "rate_limit_exceeded"}
    assert caught.value.__cause__ is None
    span = tel.one_call()
    assert attr(span, "error.type") == "RateLimitError"
    assert span.status.status_code is StatusCode.ERROR
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7  # the request was still measured


def test_error_in_the_middle_of_a_stream_is_raised_and_recorded(tel, server, client):
    """A stream that breaks off raises the SDK's APIError to the caller; the span ends with error.type."""
    server.reply(Reply.text("a b c", stream_error=True, error_message="broke"))
    stream = client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True)
    with pytest.raises(openai.APIError, match="broke"):
        for _ in stream:
            pass
    span = tel.one_call()
    assert attr(span, "error.type") == "APIError"


def test_chat_streaming_helper(tel, client):
    """client.chat.completions.stream(): events as usual, one span, ended at exit."""
    with client.chat.completions.stream(model="gpt-4o", messages=FIRST,
                                        stream_options={"include_usage": True}) as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
    assert text == "ok"
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 20


def test_chat_streaming_helper_left_early_ends_the_span(tel, server, client):
    """Leaving the helper's block before the end still ends the span."""
    server.reply(Reply.text("a b c d e f g"))
    with client.chat.completions.stream(model="gpt-4o", messages=FIRST) as stream:
        next(iter(stream))
    assert len(tel.calls()) == 1


def test_responses_create_and_chaining(tel, client):
    """Responses: reported input_tokens; a previous_response_id call stays in the session, partial coverage."""
    first = client.responses.create(model="gpt-4o", instructions="You are terse.", input="hello there")
    assert first.output_text == "ok"
    client.responses.create(model="gpt-4o", input="read it", previous_response_id=first.id)
    one, two = tel.calls()
    # "You are terse." 4 + "hello there" 3 + 10
    assert attr(one, Attr.REPORTED_TOKENS) == 17
    assert categories(one) == {"system": 4, "prompts": 3}
    assert attr(one, GenAI.RESPONSE_ID) == first.id
    assert attr(two, SESSION) == attr(one, SESSION)
    assert attr(two, Attr.COVERAGE) == "partial"


def test_responses_stream_and_helper(tel, client):
    """Responses events pass through; usage comes from response.completed; the helper too."""
    events = list(client.responses.create(model="gpt-4o", input="hello there", stream=True))
    assert events[-1].type == "response.completed"
    with client.responses.stream(model="gpt-4o", input="hello again") as stream:
        final = stream.get_final_response()
    assert final.output_text == "ok"
    one, two = tel.calls()
    assert attr(one, Attr.REPORTED_TOKENS) == 13  # "hello there" 3 + 10
    assert attr(two, Attr.REPORTED_TOKENS) == 13  # "hello again" 3 + 10
    assert attr(one, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


def test_tool_call_reply_finish_reason(tel, server, client):
    """A scripted tool call comes back as tool_calls, and the span says so."""
    server.reply(Reply.tool_call("read_file", {"path": "a.py"}))
    result = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert result.choices[0].message.tool_calls[0].function.arguments == '{"path":"a.py"}'
    assert attr(tel.one_call(), GenAI.RESPONSE_FINISH_REASONS) == ("tool_calls",)


def test_declared_compaction_emits_a_post_compaction_span(tel, client):
    """mark_compaction('manual') makes the next call's post-compaction span, trigger manual."""
    with ctxscope.session("s-compact"):
        client.chat.completions.create(model="gpt-4o", messages=SECOND)
        ctxscope.session.mark_compaction("manual")
        client.chat.completions.create(
            model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "Summary: said hi."}])
    posts = tel.spans("post-compaction")
    assert len(posts) == 1
    assert attr(posts[0], Attr.STAGE) == "post-compaction"
    assert attr(posts[0], Attr.COMPACTION_TRIGGER) == "manual"
    assert attr(posts[0], SESSION) == "s-compact"
    assert attr(tel.calls()[1], Attr.BASELINE) is True


def test_async_chat_create_and_stream(tel, client, server):
    """AsyncOpenAI: create and stream=True are instrumented like the sync client."""
    async def run():
        aclient = server.openai_client(async_=True)
        result = await aclient.chat.completions.create(model="gpt-4o", messages=FIRST)
        stream = await aclient.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True,
                                                       stream_options={"include_usage": True})
        assert isinstance(stream, openai.AsyncStream)
        chunks = [c async for c in stream]
        async with aclient.chat.completions.stream(model="gpt-4o", messages=FIRST) as helper:
            async for _ in helper:
                pass
        response = await aclient.responses.create(model="gpt-4o", input="hello there")
        return result, chunks, response

    result, chunks, response = asyncio.run(run())
    assert result.choices[0].message.content == "ok"
    assert chunks[-1].usage.prompt_tokens == 20
    assert response.output_text == "ok"
    spans = tel.calls()
    assert len(spans) == 4
    assert [attr(s, Attr.REPORTED_TOKENS) for s in spans] == [20, 20, None, 13]


def test_instrument_and_uninstrument_twice_is_harmless(tel, client):
    """A second instrument() adds no second span; uninstrument() twice leaves a bare SDK."""
    OpenAIInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert len(tel.calls()) == 1
    OpenAIInstrumentor().uninstrument()
    OpenAIInstrumentor().uninstrument()
    client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert len(tel.calls()) == 1
    assert not isinstance(vars(openai.resources.chat.completions.Completions)["create"], wrapt.ObjectProxy)


def test_tokenizer_error_never_reaches_the_caller(tel, client, monkeypatch, caplog):
    """A counter that raises: the call returns its result, the span has no annotation, a warning is logged."""
    def broken(self, text):
        raise RuntimeError("tokenizer broke")

    monkeypatch.setattr(CharsCounter, "count", broken)
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        result = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert result.choices[0].message.content == "ok"
    span = tel.one_call()
    assert attr(span, Attr.ESTIMATED_TOKENS) is None
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == 20
    assert "could not annotate" in caplog.text


def test_processor_and_exporter_errors_never_reach_the_caller(tel, client):
    """A span processor whose on_end raises, and an exporter that raises: the call still returns."""
    class Raising(SpanProcessor):
        def on_end(self, span):
            raise RuntimeError("processor broke")

    class RaisingExporter:
        def export(self, spans):
            raise RuntimeError("exporter broke")

        def shutdown(self):
            pass

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    tel.provider.add_span_processor(Raising())
    tel.provider.add_span_processor(SimpleSpanProcessor(RaisingExporter()))
    result = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    assert result.choices[0].message.content == "ok"
    stream = client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True)
    assert [c.choices[0].delta.content for c in stream if c.choices][1] == "ok"


def test_no_prompt_or_response_text_in_spans_or_logs(tel, server, client, caplog):
    """Sentinels in prompt, tool result and response appear in no span and no ctxscope log line."""
    caplog.set_level(logging.DEBUG, logger="ctxscope")
    server.reply(Reply.text("SENTINEL-RESPONSE-3"))
    messages = [{"role": "user", "content": "SENTINEL-PROMPT-1"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_9", "content": "SENTINEL-RESULT-2"}]
    client.chat.completions.create(model="gpt-4o", messages=messages)
    server.reply(Reply.error(400, "bad: SENTINEL-PROMPT-1"))  # a provider error quoting the prompt
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o", messages=messages)
    assert len(tel.spans()) >= 3
    for span in tel.spans():
        assert no_content(span, "SENTINEL-PROMPT-1", "SENTINEL-RESULT-2", "SENTINEL-RESPONSE-3")
        assert "SENTINEL" not in (span.status.description or "")
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("ctxscope")]
    assert not any("SENTINEL" in line for line in ours)


def test_evicted_session_gets_one_session_end_span(server):
    """Past max_sessions the tracker drops a session: one session-end span, even with both instrumentors."""
    from ctxscope.instrumentation.anthropic import AnthropicInstrumentor
    from ctxscope.telemetry.tracker import Tracker

    t = make_telemetry()
    t.tracker = Tracker(tokenizer="chars", max_sessions=1)
    OpenAIInstrumentor().instrument(tracer_provider=t.provider, tracker=t.tracker)
    AnthropicInstrumentor().instrument(tracer_provider=t.provider, tracker=t.tracker)
    try:
        client = server.openai_client()
        with ctxscope.session("first"):
            client.chat.completions.create(model="gpt-4o", messages=FIRST)
        with ctxscope.session("second"):
            client.chat.completions.create(model="gpt-4o", messages=FIRST)
    finally:
        OpenAIInstrumentor().uninstrument()
        AnthropicInstrumentor().uninstrument()
    ends = t.spans("session-end")
    assert [attr(s, SESSION) for s in ends] == ["first"]
    assert attr(ends[0], Attr.SESSION_ENDED) is True


def test_one_shot_iterator_of_messages_is_sent_whole(tel, server, client):
    """messages given as a generator: measured by ctxscope and still sent in full by the SDK."""
    client.chat.completions.create(model="gpt-4o", messages=(m for m in FIRST))
    assert server.requests[-1].body["messages"] == FIRST
    assert attr(tel.one_call(), Attr.ESTIMATED_TOKENS) == 7


def test_demo_agent_records_capture_compaction_and_summary(tel):
    """examples/coding_agent.py: one capture-start per session, a declared auto compaction, a summary part."""
    import importlib.util

    from ctxscope.core import limits
    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("coding_agent", ROOT / "examples" / "coding_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        assert module.main(["--quiet"]) == 0
    finally:
        limits.reset()
    calls = tel.calls()
    assert len(calls) == 12
    assert {attr(s, SESSION) for s in calls} == {"demo-coding-agent", "demo-coding-agent/compaction"}
    posts = tel.spans("post-compaction")
    assert [attr(s, Attr.COMPACTION_TRIGGER) for s in posts] == ["auto"]
    after = [s for s in calls if attr(s, SESSION) == "demo-coding-agent"][7]  # first call after it
    assert attr(after, Attr.BASELINE) is True
    # The summary message: "<summary>\n" + the summariser's 168-char reply + "\n</summary>" = 189 chars -> 48.
    assert categories(after)["summaries"] == 48
    assert len(tel.spans("capture-start")) == 2


def test_provider_error_is_the_same_object_the_sdk_raised(tel, server, client):
    """A recorder under ctxscope's wrapper sees the SDK's exception; the caller gets that very object."""
    from opentelemetry.instrumentation.utils import unwrap

    import openai.resources.chat.completions as completions

    raised = []

    def recorder(wrapped, instance, args, kwargs):
        try:
            return wrapped(*args, **kwargs)
        except Exception as error:
            raised.append(error)
            raise

    OpenAIInstrumentor().uninstrument()
    wrapt.wrap_function_wrapper(completions, "Completions.create", recorder)
    OpenAIInstrumentor().instrument(tracer_provider=tel.provider, tracker=tel.tracker)
    try:
        server.reply(Reply.error(500, "boom"))
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="gpt-4o", messages=FIRST)
    finally:
        OpenAIInstrumentor().uninstrument()
        unwrap(completions.Completions, "create")
    assert raised and caught.value is raised[0]
    assert attr(tel.one_call(), "error.type") == "InternalServerError"


def test_structured_output_parse_is_one_span(tel, server, client):
    """chat.completions.parse() and responses.parse() post themselves: each still gives one span."""
    import pydantic

    class Answer(pydantic.BaseModel):
        answer: str

    server.reply(Reply.text('{"answer":"4"}'), Reply.text('{"answer":"5"}'))
    parsed = client.chat.completions.parse(model="gpt-4o", messages=FIRST, response_format=Answer)
    assert parsed.choices[0].message.parsed == Answer(answer="4")
    response = client.responses.parse(model="gpt-4o", input="hello there", text_format=Answer)
    assert response.output_parsed == Answer(answer="5")
    one, two = tel.calls()
    assert attr(one, Attr.REPORTED_TOKENS) == 20
    assert attr(two, Attr.REPORTED_TOKENS) == 13


def test_next_to_the_official_openai_v2_instrumentation(tel, client):
    """With opentelemetry-instrumentation-openai-v2 on too: two spans per call, only ours annotated."""
    v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    official = v2.OpenAIInstrumentor()
    official.instrument(tracer_provider=tel.provider)
    try:
        result = client.chat.completions.create(model="gpt-4o", messages=FIRST)
    finally:
        official.uninstrument()
    assert result.choices[0].message.content == "ok"
    assert wait_for_measurements()
    chats = [s for s in tel.exporter.get_finished_spans() if s.name == "chat gpt-4o"]
    scopes = sorted(s.instrumentation_scope.name for s in chats)
    assert len(chats) == 2 and "ctxscope" in scopes
    ours = next(s for s in chats if s.instrumentation_scope.name == "ctxscope")
    theirs = next(s for s in chats if s.instrumentation_scope.name != "ctxscope")
    assert attr(ours, Attr.ESTIMATED_TOKENS) == 7
    assert not any(k.startswith("llm.context.") for k in theirs.attributes)
    assert attr(theirs, GenAI.USAGE_INPUT_TOKENS) == attr(ours, GenAI.USAGE_INPUT_TOKENS) == 20


def test_abandoned_stream_ends_its_span_when_collected(tel, server, client):
    """A stream dropped half-read (neither consumed nor closed) ends its span once garbage-collected."""
    import gc

    server.reply(Reply.text("a b c d"))
    stream = client.chat.completions.create(model="gpt-4o", messages=FIRST, stream=True)
    next(stream)
    assert tel.calls() == []
    del stream
    gc.collect()
    span = tel.one_call()
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7


def test_with_raw_response_span_has_the_usage_and_parse_is_unchanged(tel, client):
    """with_raw_response: the span reads the already-read body (reported 20); the caller's parse() is the same
    object."""
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=FIRST)
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == 20
    assert attr(span, GenAI.USAGE_OUTPUT_TOKENS) == 1
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)
    completion = raw.parse()
    assert completion is raw.parse() and completion.choices[0].message.content == "ok"
    assert attr(span, GenAI.RESPONSE_ID) == completion.id


def test_async_with_raw_response_span_has_the_usage(tel, server):
    """The async client's raw response: the span still gets the reported input (20)."""
    async def run() -> str:
        raw = await server.openai_client(async_=True).chat.completions.with_raw_response.create(
            model="gpt-4o", messages=FIRST)
        return raw.parse().choices[0].message.content

    assert asyncio.run(run()) == "ok"
    assert attr(tel.one_call(), Attr.REPORTED_TOKENS) == 20


def test_with_streaming_response_ends_the_span_without_usage(tel, client):
    """with_streaming_response: the body is the caller's to read, so the span has estimates (7) but no usage."""
    with client.chat.completions.with_streaming_response.create(model="gpt-4o", messages=FIRST) as response:
        assert response.parse().choices[0].message.content == "ok"
    span = tel.one_call()
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert attr(span, Attr.REPORTED_TOKENS) is None
