"""Usage.server_tool_calls filled from provider usage, real SDKs against ctxscope.testing (sync, async, streams).

Anthropic: the sum of ``usage.server_tool_use`` (0 when present and zero, None
when absent); OpenAI Responses: server-run output items (web_search_call...);
chat: always 0. Then live self-calibration learns from a request offering a
server tool only when the usage says none ran.
"""

from __future__ import annotations

import asyncio

import pytest

from ctxscope.config import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
from ctxscope.instrumentation.anthropic import AnthropicInstrumentor, message_info
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.testing import ProviderServer, Reply, wait_for_measurements
from ctxscope.telemetry.tracker import Tracker

from _instr_support import make_telemetry

# The SDK warns that this model name is deprecated; the name is all the test needs.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

CLAUDE = "claude-sonnet-4-5"
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
ANTHROPIC = dict(model=CLAUDE, max_tokens=50, tools=[SEARCH], messages=[{"role": "user", "content": "find it"}])
RESPONSES = dict(model="gpt-4o", input="find it", tools=[{"type": "web_search"}])


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    """Both instrumentors on one telemetry; every observation's usage collected."""
    monkeypatch.delenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, raising=False)
    server.reset()
    t = make_telemetry()
    t.tracker = Tracker(tokenizer="chars")
    seen: list = []
    t.tracker.add_listener(lambda obs: seen.append(obs.usage))
    instrumentors = [AnthropicInstrumentor(), OpenAIInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=t.provider, tracker=t.tracker)
    yield t, seen
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


def test_anthropic_create_sums_server_tool_use(tel, server):
    """web_search_requests 2 + web_fetch_requests 1 -> 3; zeros -> 0; no server_tool_use -> None (unknown)."""
    _, seen = tel
    client = server.anthropic_client()
    server.reply(Reply.text("done", server_tool_use={"web_search_requests": 2, "web_fetch_requests": 1}),
                 Reply.text("done", server_tool_use={"web_search_requests": 0, "web_fetch_requests": 0}),
                 Reply.text("done"))
    for _ in range(3):
        client.messages.create(**ANTHROPIC)
    assert wait_for_measurements()
    assert [u.server_tool_calls for u in seen] == [3, 0, None]


def test_anthropic_streams_take_the_final_delta(tel, server):
    """Streams (create(stream=True), the stream() helper, async): message_start says 0, message_delta 1 -> 1."""
    _, seen = tel
    server.reply(*[Reply.text("done here", server_tool_use={"web_search_requests": 1})] * 3)
    client = server.anthropic_client()
    for _ in client.messages.create(stream=True, **ANTHROPIC):
        pass
    with client.messages.stream(**ANTHROPIC) as stream:
        stream.until_done()

    async def run() -> None:
        aclient = server.anthropic_client(async_=True)
        stream = await aclient.messages.create(stream=True, **ANTHROPIC)
        async for _ in stream:
            pass

    asyncio.run(run())
    assert wait_for_measurements()
    assert [u.server_tool_calls for u in seen] == [1, 1, 1]


def test_openai_responses_count_server_call_items(tel, server):
    """Two web_search_call items -> 2 (JSON and stream); none -> 0; chat -> 0."""
    _, seen = tel
    client = server.openai_client()
    server.reply(Reply.text("found", server_calls=("web_search_call", "web_search_call")),
                 Reply.text("found", server_calls=("web_search_call", "web_search_call")),
                 Reply.text("found"), Reply.text("hi"))
    client.responses.create(**RESPONSES)
    for _ in client.responses.create(stream=True, **RESPONSES):
        pass
    client.responses.create(**RESPONSES)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert wait_for_measurements()
    assert [u.server_tool_calls for u in seen] == [2, 2, 0, 0]


def test_live_calibration_learns_only_when_no_server_tool_ran(tel, server):
    """A web-search request whose usage says 2 searches teaches nothing; one saying 0 is learned."""
    t, _ = tel
    client = server.anthropic_client()
    server.reply(Reply.text("done", server_tool_use={"web_search_requests": 2}))
    client.messages.create(**ANTHROPIC)
    assert wait_for_measurements()
    assert t.tracker.calibrator.corrections() == []
    server.reply(Reply.text("done", server_tool_use={"web_search_requests": 0}))
    client.messages.create(**ANTHROPIC)
    assert wait_for_measurements()
    learned = t.tracker.calibrator.corrections()
    assert len(learned) == 1 and learned[0].tools_key.startswith("s:")


def test_anthropic_run_blocks_without_a_usage_counter():
    """Code execution / MCP connector runs are blocks without a usage counter: 0 + 2 blocks -> 2."""
    message = {"model": CLAUDE, "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {}},
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "docs", "input": {}},
        {"type": "text", "text": "done"}],
        "usage": {"input_tokens": 9, "output_tokens": 1, "server_tool_use": {"web_search_requests": 0}}}
    assert message_info(message).usage.server_tool_calls == 2
    # No counter and no run block: unknown, never taken for "none ran".
    assert message_info({**message, "content": [], "usage": {"input_tokens": 9}}).usage.server_tool_calls is None
