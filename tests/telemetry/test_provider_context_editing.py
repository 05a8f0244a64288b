"""Provider-side context management, real SDKs against ctxscope.testing's server, values by hand.

Anthropic server-side compaction (a ``compaction`` iteration and block): the
reported input is the first ``message`` iteration's, the next request (which
sends the summary back) is a declared ``auto`` compaction, and what precedes
the summary block is out of the context. Anthropic context editing
(``applied_edits`` with ``cleared_input_tokens``): a removal on the call's span,
taken off its category, not unattributed. OpenAI Responses ``compaction``
output items: a compaction likewise.

Counting is chars/4 per item, no provider framing (tests/_instr_support.py).
The server's reported input is ``ceil(len / 4)`` of every string value of
the context fields, roles and block types included, plus 10 (ctxscope.testing).
"""

from __future__ import annotations

import asyncio

import pytest

from ctxscope.instrumentation.anthropic import AnthropicInstrumentor
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.schema import Attr, Category, GenAI, Metric, MetricAttr
from ctxscope.testing import ProviderServer, Reply

from _instr_support import attr, categories, changes, instrumented, metered, token_gauges

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

CLAUDE = "claude-sonnet-4-5"
SYSTEM = "s" * 40  # 10 tokens
FIRST = "u" * 400  # 100 tokens
SUMMARY = "m" * 80  # 20 tokens
NEXT = "q" * 40  # 10 tokens
SUMMARY_TURN = {"role": "assistant", "content": [{"type": "compaction", "content": SUMMARY},
                                                 {"type": "text", "text": "done"}]}


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


def _compactions(reader) -> dict[str, int]:
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == Metric.COMPACTIONS.name:
                    for point in metric.data.data_points:
                        trigger = point.attributes[MetricAttr.COMPACTION_TRIGGER]
                        out[trigger] = out.get(trigger, 0) + int(point.value)
    return out


def _anthropic_calls(client, first_call) -> None:
    first_call(model=CLAUDE, max_tokens=50, system=SYSTEM, messages=[{"role": "user", "content": FIRST}])
    client.beta.messages.create(model=CLAUDE, max_tokens=50, system=SYSTEM, messages=[
        {"role": "user", "content": FIRST}, SUMMARY_TURN, {"role": "user", "content": NEXT}])


def _assert_server_compaction(telemetry, reader) -> None:
    first, second = telemetry.calls()
    # The model's own sampling saw system 10 + the summary turn ("assistant" 3, "compaction" 3,
    # summary 20) + 10 hidden = 46; the compaction sampling's 121 (the whole request) is not the context.
    assert attr(first, Attr.REPORTED_TOKENS) == 46
    assert attr(first, GenAI.USAGE_INPUT_TOKENS) == 46
    # The next request is post-compaction: declared (the provider said so), trigger auto.
    assert attr(second, GenAI.CONVERSATION_COMPACTED) is True
    post = telemetry.spans("post-compaction")
    assert len(post) == 1 and attr(post[0], Attr.COMPACTION_TRIGGER) == "auto"
    # What precedes the summary block is out: system 10, summary 20, "done" 1, the new prompt 10.
    assert categories(second) == {"system": 10, "summaries": 20, "assistant": 1, "prompts": 10}
    assert attr(second, Attr.ESTIMATED_TOKENS) == 41
    # The server reads from the block on: 10 + 10 + (3 + 3 + 20 + 1 + 1) + ("user" 1 + 10) = 59.
    assert attr(second, Attr.REPORTED_TOKENS) == 59
    assert _compactions(reader) == {"auto": 1}


def test_anthropic_server_compaction_is_a_compaction(server, monkeypatch):
    """A compaction iteration and block: reported 46 (the message iteration), then an auto compaction."""
    with instrumented(server, monkeypatch, AnthropicInstrumentor) as telemetry, metered(telemetry) as reader:
        client = server.anthropic_client()
        server.reply(Reply.text("done", compaction=SUMMARY), Reply.text("ok"))
        _anthropic_calls(client, client.beta.messages.create)
        _assert_server_compaction(telemetry, reader)


def test_anthropic_server_compaction_in_a_stream(server, monkeypatch):
    """The same through a stream: the compaction block starts a content block, the iterations ride on message_delta."""
    with instrumented(server, monkeypatch, AnthropicInstrumentor) as telemetry, metered(telemetry) as reader:
        client = server.anthropic_client()
        server.reply(Reply.text("done", compaction=SUMMARY), Reply.text("ok"))

        def streamed(**kw):
            for _ in client.beta.messages.create(stream=True, **kw):
                pass

        _anthropic_calls(client, streamed)
        _assert_server_compaction(telemetry, reader)


def test_anthropic_async_helper_stream_reports_the_compaction(server, monkeypatch):
    """The async stream() helper: its accumulated message holds the compaction block and the iterations."""
    with instrumented(server, monkeypatch, AnthropicInstrumentor) as telemetry, metered(telemetry) as reader:
        server.reply(Reply.text("done", compaction=SUMMARY), Reply.text("ok"))

        async def run() -> None:
            aclient = server.anthropic_client(async_=True)
            async with aclient.beta.messages.stream(model=CLAUDE, max_tokens=50, system=SYSTEM,
                                                    messages=[{"role": "user", "content": FIRST}]) as stream:
                await stream.until_done()

        asyncio.run(run())
        _anthropic_calls(server.anthropic_client(), lambda **kw: None)
        _assert_server_compaction(telemetry, reader)


TOOL_TURNS = [
    {"role": "user", "content": "u" * 40},  # 10
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": "a"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r" * 400}]},  # 100
]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_context_editing_is_a_removal(server, monkeypatch, stream):
    """100 tokens of tool results cleared: a results removal of -100 on the span, results 100 -> 0, not unattributed."""
    with instrumented(server, monkeypatch, AnthropicInstrumentor) as telemetry, metered(telemetry) as reader:
        client = server.anthropic_client()
        server.reply(Reply.text("ok", clear_tool_results=1))
        body = dict(model=CLAUDE, max_tokens=50, messages=TOOL_TURNS)
        if stream:
            for _ in client.beta.messages.create(stream=True, **body):
                pass
        else:
            client.beta.messages.create(**body)
        span = telemetry.one_call()
        # prompts 10, the call's arguments {"p":"a"} 9 chars -> 3, the result's 100 cleared.
        assert categories(span) == {"prompts": 10, "assistant": 3, "results": 0}
        assert attr(span, Attr.ESTIMATED_TOKENS) == 13
        assert ("results", "removal", -100) in changes(span)
        removal = [e for e in span.events if e.attributes.get("id") == "provider-edit:clear_tool_uses_20250919"]
        assert len(removal) == 1 and removal[0].attributes["label"] == "clear_tool_uses_20250919"
        # The server reports the request without the cleared content: 10 hidden + "user" 1 + 10,
        # "assistant" 3 + "tool_use" 2 + "toolu_1" 2 + "read" 1 + "a" 1, "user" 1 + "tool_result" 3
        # + "toolu_1" 2 = 36. The estimate (13) no longer exceeds it: no scaling (factor 1), and
        # unattributed is the 23 the server's own framing adds, not the cleared 100.
        assert attr(span, Attr.REPORTED_TOKENS) == 36
        assert attr(span, Attr.CALIBRATION_FACTOR) == 1.0
        assert token_gauges(reader, attr(span, Attr.SESSION_ID)) == {"prompts": 10, "assistant": 3, "results": 0,
                                                                     "unattributed": 23}


def test_responses_compaction_item_is_a_compaction(server, monkeypatch):
    """A compaction item in a Responses output: the next request is an auto compaction (one, declared)."""
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as telemetry, metered(telemetry) as reader:
        client = server.openai_client()
        server.reply(Reply.text("done", compaction=SUMMARY), Reply.text("ok"))
        first = client.responses.create(model="gpt-4o", instructions=SYSTEM, input=FIRST)
        compaction = first.output[0].model_dump()
        assert compaction["type"] == "compaction"
        client.responses.create(model="gpt-4o", instructions=SYSTEM, input=[
            {"role": "user", "content": FIRST}, compaction, {"role": "user", "content": NEXT}])
        _, second = telemetry.calls()
        assert attr(second, GenAI.CONVERSATION_COMPACTED) is True
        post = telemetry.spans("post-compaction")
        assert len(post) == 1 and attr(post[0], Attr.COMPACTION_TRIGGER) == "auto"
        assert _compactions(reader) == {"auto": 1}


def test_thinking_cleared_comes_off_the_assistant_category():
    """clear_thinking_20251015 cleared 30 of 50 thinking tokens: assistant 50 -> 20; a zero edit is no change."""
    from ctxscope.core.apis.anthropic_messages import cleared
    from ctxscope.core.observation import Usage
    from ctxscope.telemetry.tracker import Tracker

    edits = cleared({"applied_edits": [
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 1, "cleared_input_tokens": 30},
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 0, "cleared_input_tokens": 0}]})
    assert edits == (("clear_thinking_20251015", 30),)
    tracker = Tracker(tokenizer="chars", framing=False)
    body = {"model": CLAUDE, "max_tokens": 10, "messages": [
        {"role": "user", "content": "u" * 40},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t" * 200, "signature": "s"}]},
        {"role": "user", "content": "q" * 40}]}
    call = tracker.observe_request(body, "anthropic.messages", provider="anthropic", session_id="think")
    assert call.snapshot.annotation.categories[Category.ASSISTANT] == 50
    tracker.observe_response(call, Usage(input_tokens=40, output_tokens=1, reported_input=40, cleared=edits))
    annotation = call.snapshot.annotation
    assert annotation.categories[Category.ASSISTANT] == 20
    assert annotation.estimated_tokens == 40
    assert [(c.category, c.change_type.value, c.delta_tokens) for c in annotation.changes
            if c.source_kind == "context_edit"] == [(Category.ASSISTANT, "removal", -30)]
