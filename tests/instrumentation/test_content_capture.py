"""Opt-in content capture (SPEC section 7) with the real openai and anthropic SDKs.

Off by default: no text of the conversation on any span. With
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` set when the instrumentor
is turned on, the call's span carries the GenAI conventions' structured
attributes as JSON (``gen_ai.system_instructions``, ``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.tool.definitions``), and/or the
``gen_ai.client.inference.operation.details`` event carries them structured.
Every expected value below is written out by hand from the request and the
server's scripted reply.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from ctxscope.config import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT as CAPTURE
from ctxscope.instrumentation._content import ContentMode, content_mode
from ctxscope.instrumentation.anthropic import AnthropicInstrumentor
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.schema import GenAI
from ctxscope.testing import ProviderServer, Reply

from _instr_support import attr, make_telemetry, no_content

SYSTEM = "SNTL-SYS-a1 You are a coding agent."
PROMPT = "SNTL-PROMPT-b2 fix the bug"
RESULT = "SNTL-RESULT-c3 def f(): pass"
ANSWER = "SNTL-ANSWER-d4 done"
DESCRIPTION = "SNTL-DESC-e5 Reads a file"
SENTINELS = ("SNTL-",)

CONTENT_KEYS = (GenAI.SYSTEM_INSTRUCTIONS, GenAI.INPUT_MESSAGES, GenAI.OUTPUT_MESSAGES, GenAI.TOOL_DEFINITIONS)
PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "read_file", "description": DESCRIPTION, "parameters": PARAMS}}]
TOOL_DEFINITION = {"type": "function", "name": "read_file", "description": DESCRIPTION, "parameters": PARAMS}
CHAT_HISTORY = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": PROMPT},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_9", "content": RESULT},
]
# The same history in the conventions' shape: system messages stay in a chat history.
CHAT_INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
    {"role": "user", "parts": [{"type": "text", "content": PROMPT}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_9", "name": "read_file",
                                     "arguments": {"path": "a.py"}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_9", "response": RESULT}]},
]
MODEL = "claude-opus-4-1"


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


class Captured:
    """Instrumentors turned on under one value of the variable, with span and log exporters."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(CAPTURE, raising=False)
        else:
            monkeypatch.setenv(CAPTURE, value)
        self.tel = make_telemetry()
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor()]
        for instrumentor in self.instrumentors:
            instrumentor.instrument(tracer_provider=self.tel.provider, tracker=self.tel.tracker,
                                    logger_provider=self.logger_provider)

    def close(self) -> None:
        for instrumentor in self.instrumentors:
            instrumentor.uninstrument()

    def content(self, span) -> dict:
        """The span's content attributes, decoded from JSON."""
        return {key: json.loads(attr(span, key)) for key in CONTENT_KEYS if attr(span, key) is not None}

    def events(self) -> list:
        return [r.log_record for r in self.logs.get_finished_logs()]


@pytest.fixture
def capture(server, monkeypatch):
    made: list[Captured] = []

    def make(value: str | None) -> Captured:
        server.reset()
        made.append(Captured(monkeypatch, value))
        return made[-1]

    yield make
    for c in made:
        c.close()


# ---------------------------------------------------------------------------
# The variable
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("value, mode", [
    (None, ContentMode.NO_CONTENT), ("", ContentMode.NO_CONTENT), ("false", ContentMode.NO_CONTENT),
    ("no_content", ContentMode.NO_CONTENT), ("true", ContentMode.SPAN_ONLY), ("TRUE", ContentMode.SPAN_ONLY),
    ("span_only", ContentMode.SPAN_ONLY), ("EVENT_ONLY", ContentMode.EVENT_ONLY),
    (" Span_And_Event ", ContentMode.SPAN_AND_EVENT),
])
def test_values_of_the_variable(value, mode):
    """The boolean form and util-genai's four modes, in any case, map to where content goes."""
    assert content_mode(value) is mode


def test_an_unknown_value_means_no_content_with_one_warning(caplog):
    """A typo captures nothing and says so once, naming the variable and the accepted values."""
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        assert content_mode("yes please") is ContentMode.NO_CONTENT
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert CAPTURE in message and "yes please" in message and "SPAN_AND_EVENT" in message


# ---------------------------------------------------------------------------
# Off
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, "false", "NO_CONTENT"])
def test_off_no_text_on_any_span_and_no_event(capture, server, value):
    """Unset, false or NO_CONTENT: no content attribute, no sentinel anywhere, no event."""
    c = capture(value)
    server.reply(Reply.text(ANSWER), Reply.text(ANSWER))
    server.openai_client().chat.completions.create(model="gpt-4o", messages=CHAT_HISTORY, tools=CHAT_TOOLS)
    server.anthropic_client().messages.create(model=MODEL, max_tokens=50, system=SYSTEM,
                                              messages=[{"role": "user", "content": PROMPT}])
    spans = c.tel.spans()
    assert len(c.tel.calls()) == 2
    assert all(c.content(span) == {} for span in spans)
    assert all(no_content(span, *SENTINELS) for span in spans)
    assert c.events() == []


def test_decided_once_when_instrumented(capture, server, monkeypatch):
    """Setting the variable after instrument() changes nothing (read once, not per request)."""
    c = capture(None)
    monkeypatch.setenv(CAPTURE, "SPAN_AND_EVENT")
    server.openai_client().chat.completions.create(model="gpt-4o", messages=CHAT_HISTORY)
    assert c.content(c.tel.one_call()) == {}
    assert c.events() == []


# ---------------------------------------------------------------------------
# On spans
# ---------------------------------------------------------------------------

def test_openai_chat_content_on_the_span(capture, server):
    """SPAN_ONLY: the chat history, the tool definition and the answer with its tool call, as structured JSON."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.tool_call("read_file", {"path": "b.py"}, id="call_10", content=ANSWER))
    server.openai_client().chat.completions.create(model="gpt-4o", messages=CHAT_HISTORY, tools=CHAT_TOOLS)
    assert c.content(c.tel.one_call()) == {
        GenAI.INPUT_MESSAGES: CHAT_INPUT,
        GenAI.TOOL_DEFINITIONS: [TOOL_DEFINITION],
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "tool_calls", "parts": [
            {"type": "text", "content": ANSWER},
            {"type": "tool_call", "id": "call_10", "name": "read_file", "arguments": {"path": "b.py"}}]}],
    }
    assert c.events() == []


def test_true_is_content_on_the_span(capture, server):
    """The boolean form ``true`` puts content on ctxscope's span."""
    c = capture("true")
    server.reply(Reply.text(ANSWER))
    server.openai_client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    assert c.content(c.tel.one_call()) == {
        GenAI.INPUT_MESSAGES: [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}],
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "stop",
                                 "parts": [{"type": "text", "content": ANSWER}]}],
    }


def test_openai_chat_stream_output_assembled_from_chunks(capture, server):
    """A streamed answer: the text pieces and the tool call's deltas joined into one output message."""
    c = capture("span_only")
    server.reply(Reply.tool_call("read_file", {"path": "c.py"}, id="call_11", content=ANSWER))
    stream = server.openai_client().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": PROMPT}], stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed == ANSWER
    assert c.content(c.tel.one_call())[GenAI.OUTPUT_MESSAGES] == [
        {"role": "assistant", "finish_reason": "tool_calls", "parts": [
            {"type": "text", "content": ANSWER},
            {"type": "tool_call", "id": "call_11", "name": "read_file", "arguments": {"path": "c.py"}}]}]


def test_openai_responses_instructions_are_system_instructions(capture, server):
    """Responses: instructions -> gen_ai.system_instructions; function call and output items -> parts."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.text(ANSWER))
    tools = [{"type": "function", "name": "read_file", "description": DESCRIPTION, "parameters": PARAMS}]
    server.openai_client().responses.create(model="gpt-4o", instructions=SYSTEM, tools=tools, input=[
        {"role": "user", "content": PROMPT},
        {"type": "function_call", "call_id": "call_9", "name": "read_file", "arguments": '{"path":"a.py"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": RESULT},
    ])
    assert c.content(c.tel.one_call()) == {
        GenAI.SYSTEM_INSTRUCTIONS: [{"type": "text", "content": SYSTEM}],
        GenAI.INPUT_MESSAGES: CHAT_INPUT[1:],
        GenAI.TOOL_DEFINITIONS: [TOOL_DEFINITION],
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "stop",
                                 "parts": [{"type": "text", "content": ANSWER}]}],
    }


def test_openai_responses_stream_output_from_the_completed_event(capture, server):
    """A Responses stream: the output is the one the response.completed event carries."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.text(ANSWER))
    events = list(server.openai_client().responses.create(model="gpt-4o", input=PROMPT, stream=True))
    assert events[-1].type == "response.completed"
    assert c.content(c.tel.one_call()) == {
        GenAI.INPUT_MESSAGES: [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}],
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "stop",
                                 "parts": [{"type": "text", "content": ANSWER}]}],
    }


ANTHROPIC_MESSAGES = [
    {"role": "user", "content": PROMPT},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "read_file",
                                       "input": {"path": "a.py"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9",
                                  "content": [{"type": "text", "text": RESULT}]}]},
]
ANTHROPIC_INPUT = [
    {"role": "user", "parts": [{"type": "text", "content": PROMPT}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "toolu_9", "name": "read_file",
                                     "arguments": {"path": "a.py"}}]},
    {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_9", "response": RESULT}]},
]
ANTHROPIC_TOOLS = [{"name": "read_file", "description": DESCRIPTION, "input_schema": PARAMS}]


def test_anthropic_system_blocks_tools_and_tool_use_output(capture, server):
    """Anthropic: system blocks -> system_instructions, tool_use/tool_result -> parts, the answer's tool_use."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.tool_call("read_file", {"path": "b.py"}, id="toolu_10", content=ANSWER))
    server.anthropic_client().messages.create(model=MODEL, max_tokens=50, tools=ANTHROPIC_TOOLS,
                                              system=[{"type": "text", "text": SYSTEM}], messages=ANTHROPIC_MESSAGES)
    assert c.content(c.tel.one_call()) == {
        GenAI.SYSTEM_INSTRUCTIONS: [{"type": "text", "content": SYSTEM}],
        GenAI.INPUT_MESSAGES: ANTHROPIC_INPUT,
        GenAI.TOOL_DEFINITIONS: [TOOL_DEFINITION],
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "tool_use", "parts": [
            {"type": "text", "content": ANSWER},
            {"type": "tool_call", "id": "toolu_10", "name": "read_file", "arguments": {"path": "b.py"}}]}],
    }


def test_anthropic_raw_stream_output_from_block_deltas(capture, server):
    """stream=True: text deltas and the tool input's JSON deltas assembled per content block."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.tool_call("read_file", {"path": "d.py"}, id="toolu_11", content=ANSWER))
    list(server.anthropic_client().messages.create(model=MODEL, max_tokens=50, messages=ANTHROPIC_MESSAGES[:1],
                                                   stream=True))
    assert c.content(c.tel.one_call())[GenAI.OUTPUT_MESSAGES] == [
        {"role": "assistant", "finish_reason": "tool_use", "parts": [
            {"type": "text", "content": ANSWER},
            {"type": "tool_call", "id": "toolu_11", "name": "read_file", "arguments": {"path": "d.py"}}]}]


def test_anthropic_async_stream_helper_output(capture, server):
    """The async messages.stream() helper: the output is the helper's accumulated message."""
    c = capture("SPAN_ONLY")
    server.reply(Reply.text(ANSWER))

    async def run() -> str:
        client = server.anthropic_client(async_=True)
        async with client.messages.stream(model=MODEL, max_tokens=50, messages=ANTHROPIC_MESSAGES[:1]) as stream:
            return (await stream.get_final_message()).content[0].text

    assert asyncio.run(run()) == ANSWER
    assert c.content(c.tel.one_call())[GenAI.OUTPUT_MESSAGES] == [
        {"role": "assistant", "finish_reason": "end_turn", "parts": [{"type": "text", "content": ANSWER}]}]


# ---------------------------------------------------------------------------
# On events
# ---------------------------------------------------------------------------

def test_event_only_content_in_the_operation_details_event(capture, server):
    """EVENT_ONLY: nothing on the span; one event in the span's trace with the content structured."""
    c = capture("EVENT_ONLY")
    server.reply(Reply.text(ANSWER))
    server.anthropic_client().messages.create(model=MODEL, max_tokens=50, system=SYSTEM, messages=ANTHROPIC_MESSAGES)
    span = c.tel.one_call()
    assert c.content(span) == {} and no_content(span, *SENTINELS)
    [event] = c.events()
    assert event.event_name == "gen_ai.client.inference.operation.details"
    assert (event.trace_id, event.span_id) == (span.context.trace_id, span.context.span_id)
    attributes = event.attributes
    assert attributes[GenAI.OPERATION_NAME] == "chat" and attributes[GenAI.PROVIDER_NAME] == "anthropic"
    assert attributes[GenAI.REQUEST_MODEL] == MODEL and attributes[GenAI.USAGE_OUTPUT_TOKENS] == 5
    # Structured (log attributes hold lists of maps), read back as plain data.
    plain = json.loads(json.dumps({k: attributes[k] for k in CONTENT_KEYS if k in attributes}, default=list))
    assert plain == {
        GenAI.SYSTEM_INSTRUCTIONS: [{"type": "text", "content": SYSTEM}],
        GenAI.INPUT_MESSAGES: ANTHROPIC_INPUT,
        GenAI.OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "end_turn",
                                 "parts": [{"type": "text", "content": ANSWER}]}],
    }


def test_span_and_event_both(capture, server):
    """SPAN_AND_EVENT: the same output on the span (JSON) and on the event (structured)."""
    c = capture("SPAN_AND_EVENT")
    server.reply(Reply.text(ANSWER))
    server.openai_client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    expected = [{"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": ANSWER}]}]
    assert c.content(c.tel.one_call())[GenAI.OUTPUT_MESSAGES] == expected
    [event] = c.events()
    assert json.loads(json.dumps(event.attributes[GenAI.OUTPUT_MESSAGES], default=list)) == expected


def test_a_failed_call_keeps_its_input_and_the_error(capture, server):
    """A provider error: the input content stays on the span, no output, error.type set."""
    c = capture("SPAN_AND_EVENT")
    import openai

    server.reply(Reply.error(400, "bad request"))
    with pytest.raises(openai.BadRequestError):  # the provider's own error, untouched
        server.openai_client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    span = c.tel.one_call()
    assert c.content(span) == {GenAI.INPUT_MESSAGES: [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]}
    [event] = c.events()
    assert event.attributes["error.type"] == "BadRequestError"


def test_change_labels_stay_tool_names_with_content_on(capture, server):
    """Content capture does not put paths into change labels: a tool call's label is its tool name."""
    c = capture("SPAN_ONLY")
    server.openai_client().chat.completions.create(model="gpt-4o", messages=CHAT_HISTORY, tools=CHAT_TOOLS)
    labels = {(e.attributes["category"], e.attributes.get("label")) for e in c.tel.one_call().events
              if e.name == "llm.context.change"}
    assert ("assistant", "read_file") in labels and ("results", "read_file") in labels
    assert not any("a.py" in str(label) for _, label in labels)


class _Broken(SimpleLogRecordProcessor):
    def on_emit(self, log_record) -> None:  # noqa: D102 - a processor that fails
        raise RuntimeError("log pipeline down")


def test_a_failing_log_pipeline_never_reaches_the_caller(capture, server, caplog):
    """A log processor that raises: the caller gets its answer, the span keeps its output, we log a warning."""
    c = capture("SPAN_AND_EVENT")
    c.logger_provider.add_log_record_processor(_Broken(c.logs))
    server.reply(Reply.text(ANSWER))
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        result = server.openai_client().chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    assert result.choices[0].message.content == ANSWER
    assert c.content(c.tel.one_call())[GenAI.OUTPUT_MESSAGES][0]["parts"] == [{"type": "text", "content": ANSWER}]
    assert any("content event" in r.getMessage() for r in caplog.records)
