"""ctxscope.interop's readers of other instrumentations' attributes, and the processor's guards.

In-process (no instrumentation of the openai SDK here): spans are written
with the attributes another instrumentation writes, by a tracer of its scope
name. Counting is chars/4; the conversation and its values are those of
tests/interop/test_foreign_instrumentations.py (system 4, tools 16, prompts 3,
assistant 5, results 2; reported 33 then 55; window 128,000).
"""

from __future__ import annotations

from _paths import TESTS

import json
import logging
from typing import Any, Iterator, Mapping

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ctxscope.interop import (
    FORMAT_GEN_AI,
    FORMAT_OPENINFERENCE,
    FORMAT_OPENLLMETRY,
    ForeignSpanProcessor,
    install,
    parse_attributes,
)
from ctxscope.schema import Attr, GenAI, Metric, MetricAttr
from ctxscope.telemetry.tracker import Tracker

DATA = TESTS / "data"
OWN = {"system": 4, "tools": 16, "prompts": 3, "assistant": 5, "results": 2, "unattributed": 25}
TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}


class Pipe:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        # Without provider framing, so the figures stay the items' hand-worked counts.
        self.processor = ForeignSpanProcessor(self.provider, self.meter_provider,
                                              tracker=Tracker(tokenizer="chars", framing=False))
        self.provider.add_span_processor(self.processor)

    def write(self, scope: str, name: str, attributes: Mapping[str, Any]) -> None:
        """A finished span of another instrumentation, as it writes it."""
        span = self.provider.get_tracer(scope).start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        span.end()

    def companions(self) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith("ctxscope.context")]

    def tokens(self) -> dict[str, tuple[str, float]]:
        out = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != Metric.TOKENS.name:
                        continue
                    for point in metric.data.data_points:
                        if point.value:
                            out[point.attributes[MetricAttr.CATEGORY]] = (
                                point.attributes[MetricAttr.SESSION_ID], point.value)
        return out


# The chat request both recorded formats below describe, as the application sent it.
CHAT_BODY = {"model": "gpt-4o", "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_000001", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path":"app.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_000001", "content": "print(1)"},
], "tools": [TOOL]}


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    p = Pipe()
    yield p
    p.provider.shutdown()
    p.meter_provider.shutdown()


# ---------------------------------------------------------------------------
# OpenLLMetry's indexed attributes (a real recording)
# ---------------------------------------------------------------------------

def test_recorded_openllmetry_indexed_spans_give_ctxscope_figures(pipe):
    """OpenLLMetry 0.52.6's gen_ai.prompt.* / llm.request.functions.* spans: 4/16/3/5/2 + 25, complete."""
    recording = json.loads((DATA / "openllmetry-0.52.6-chat-spans.json").read_text())
    for span in recording["spans"]:
        pipe.write(span["scope"], span["name"], span["attributes"])
    assert {k: v for k, (_, v) in pipe.tokens().items()} == OWN
    assert [(c.attributes[Attr.COVERAGE], c.attributes[Attr.REPORTED_TOKENS]) for c in pipe.companions()] == [
        ("complete", 33), ("complete", 55)]


def test_openllmetry_indexed_attributes_rebuild_the_chat_request():
    """The second recorded span becomes the chat body the application sent (arguments, ids, tool)."""
    recording = json.loads((DATA / "openllmetry-0.52.6-chat-spans.json").read_text())
    call = parse_attributes(recording["spans"][1]["attributes"])
    assert call is not None and call.format == FORMAT_OPENLLMETRY and call.complete
    assert (call.provider, call.model, call.usage.reported_input, call.usage.output_tokens) == ("openai", "gpt-4o",
                                                                                               55, 1)
    assert call.body == CHAT_BODY


# ---------------------------------------------------------------------------
# GenAI conventions
# ---------------------------------------------------------------------------

GEN_AI_CHAT = {
    GenAI.OPERATION_NAME: "chat",
    GenAI.PROVIDER_NAME: "openai",
    GenAI.REQUEST_MODEL: "gpt-4o",
    GenAI.SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "You are terse."}]),
    GenAI.INPUT_MESSAGES: json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "hello there"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_000001", "name": "read_file",
                                         "arguments": {"path": "app.py"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_000001", "response": "print(1)"}]},
    ]),
    # The conventions' flat form of a function tool.
    GenAI.TOOL_DEFINITIONS: json.dumps([{"type": "function", "name": "read_file", "description": "Read a file",
                                         "parameters": TOOL["function"]["parameters"]}]),
    GenAI.USAGE_INPUT_TOKENS: 55,
    GenAI.USAGE_CACHE_READ_INPUT_TOKENS: 20,
    GenAI.CONVERSATION_ID: "conv-7",
}


def test_gen_ai_system_instructions_messages_and_tool_definitions():
    """system_instructions lead, tool_call arguments become compact JSON, flat tools get the chat form."""
    call = parse_attributes(GEN_AI_CHAT)
    assert call is not None and call.format == FORMAT_GEN_AI and call.complete
    assert call.conversation_id == "conv-7"
    # Cached input is inside the conventions' input total: 55 reported, 35 of it uncached.
    assert (call.usage.reported_input, call.usage.input_tokens, call.usage.cache_read_input_tokens) == (55, 35, 20)
    assert call.body == CHAT_BODY


def test_gen_ai_span_with_conversation_id_gives_ctxscope_figures(pipe):
    """The GenAI span above: the same categories as ctxscope's own, keyed by gen_ai.conversation.id."""
    pipe.write("some.genai.instrumentation", "chat gpt-4o", GEN_AI_CHAT)
    assert pipe.tokens() == {k: ("conv-7", v) for k, v in OWN.items()}


def test_gen_ai_structured_values_as_in_log_events():
    """Messages given as structured values (tuples of dicts, as util-genai's events carry) read the same."""
    structured = dict(GEN_AI_CHAT)
    structured[GenAI.INPUT_MESSAGES] = tuple(json.loads(GEN_AI_CHAT[GenAI.INPUT_MESSAGES]))
    structured[GenAI.TOOL_DEFINITIONS] = tuple(json.loads(GEN_AI_CHAT[GenAI.TOOL_DEFINITIONS]))
    assert parse_attributes(structured).body == parse_attributes(GEN_AI_CHAT).body


def test_gen_ai_media_parts_become_chat_blocks():
    """A uri image part and a blob become image_url blocks next to the text."""
    call = parse_attributes({
        GenAI.OPERATION_NAME: "chat", GenAI.REQUEST_MODEL: "gpt-4o",
        GenAI.INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [
            {"type": "text", "content": "what is this?"},
            {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"}]}])})
    assert call.body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    assert not call.complete  # no tool definitions recorded: cannot tell "no tools" from "not recorded"


def test_unreadable_content_falls_back_to_usage(pipe):
    """gen_ai.input.messages that is not JSON: no error, no body, the reported 55 all unattributed, unrecorded."""
    attributes = {GenAI.OPERATION_NAME: "chat", GenAI.PROVIDER_NAME: "openai", GenAI.REQUEST_MODEL: "gpt-4o",
                  GenAI.INPUT_MESSAGES: "[{not json", GenAI.USAGE_INPUT_TOKENS: 55}
    call = parse_attributes(attributes)
    assert call.body is None and not call.complete and call.usage.reported_input == 55
    pipe.write("x", "chat gpt-4o", attributes)
    assert pipe.tokens() == {"unattributed": ("unknown", 55)}
    (companion,) = pipe.companions()
    assert companion.attributes[Attr.COVERAGE] == "unrecorded"
    assert companion.attributes[Attr.WINDOW_TOKENS] == 128_000


@pytest.mark.parametrize("attributes", [
    {GenAI.OPERATION_NAME: "embeddings", GenAI.REQUEST_MODEL: "text-embedding-3-small", GenAI.USAGE_INPUT_TOKENS: 8},
    {GenAI.OPERATION_NAME: "invoke_agent", GenAI.REQUEST_MODEL: "gpt-4o", GenAI.USAGE_INPUT_TOKENS: 900},
    {"openinference.span.kind": "CHAIN", "llm.token_count.prompt": 5},
    {"http.request.method": "POST"},
], ids=["embeddings", "agent", "openinference-chain", "http"])
def test_spans_that_are_not_model_calls_are_left_alone(attributes, pipe):
    """Embeddings, agent, chain and HTTP spans: no call parsed, no companion span, no metrics."""
    assert parse_attributes(attributes) is None
    pipe.write("x", "span", attributes)
    assert pipe.companions() == [] and pipe.tokens() == {}


# ---------------------------------------------------------------------------
# OpenInference
# ---------------------------------------------------------------------------

def test_openinference_content_blocks_and_tools():
    """llm.input_messages.*.message.contents.* blocks and llm.tools.*.tool.json_schema, session.id."""
    call = parse_attributes({
        "openinference.span.kind": "LLM", "llm.provider": "openai", "llm.model_name": "gpt-4o",
        "session.id": "s-1",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "look",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "https://example.com/a.png",
        "llm.tools.0.tool.json_schema": json.dumps(TOOL),
        "llm.token_count.prompt": 40, "llm.token_count.prompt_details.cache_read": 8,
    })
    assert call.format == FORMAT_OPENINFERENCE and call.complete and call.conversation_id == "s-1"
    assert call.body == {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}],
        "tools": [TOOL]}
    assert (call.usage.reported_input, call.usage.input_tokens) == (40, 32)


def test_openinference_chained_responses_request_is_partial():
    """previous_response_id in llm.invocation_parameters: the provider prepends unseen context, partial."""
    attributes = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                  "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "more",
                  "llm.invocation_parameters": json.dumps({"model": "gpt-4o", "previous_response_id": "resp_1"})}
    assert not parse_attributes(attributes).complete
    attributes["llm.invocation_parameters"] = json.dumps({"model": "gpt-4o"})
    assert parse_attributes(attributes).complete


def _history(*texts: str) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "parts": [{"type": "text", "content": t}]} for i, t in enumerate(texts)]


LONG = "x" * 400  # 100 tokens


def _compactions(pipe: Pipe) -> dict[str, int]:
    out = {}
    data = pipe.reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == Metric.COMPACTIONS.name:
                    for point in metric.data.data_points:
                        out[point.attributes[MetricAttr.COMPACTION_TRIGGER]] = point.value
    return out


def test_a_history_replaced_by_a_new_prompt_is_no_compaction(pipe):
    """GenAI spans whose history (300 tokens) is replaced by one new 1-token prompt: no summary, nothing kept:
    no compaction.

    SPEC version 2: a compaction is inferred only from a summary or a sliding window (docs/accounting.md).
    """
    for history in (_history(LONG), _history(LONG, LONG, LONG), _history("next")):
        pipe.write("x", "chat gpt-4o", {GenAI.OPERATION_NAME: "chat", GenAI.REQUEST_MODEL: "gpt-4o",
                                        GenAI.CONVERSATION_ID: "c", GenAI.TOOL_DEFINITIONS: "[]",
                                        GenAI.INPUT_MESSAGES: json.dumps(history)})
    assert _compactions(pipe) == {}
    assert [s for s in pipe.exporter.get_finished_spans() if s.name == "post-compaction"] == []


def test_a_sliding_window_over_gen_ai_spans_is_a_trim(pipe):
    """The two oldest messages dropped, the newest kept: one compaction with trigger trim, on its post-compaction
    span."""
    for history in (_history(LONG, LONG), _history(LONG, LONG, "a", "b"), _history("a", "b", "c")):
        pipe.write("x", "chat gpt-4o", {GenAI.OPERATION_NAME: "chat", GenAI.REQUEST_MODEL: "gpt-4o",
                                        GenAI.CONVERSATION_ID: "c", GenAI.TOOL_DEFINITIONS: "[]",
                                        GenAI.INPUT_MESSAGES: json.dumps(history)})
    assert _compactions(pipe) == {"trim": 1}
    post = [s for s in pipe.exporter.get_finished_spans() if s.name == "post-compaction"]
    assert len(post) == 1 and post[0].parent.span_id == pipe.companions()[-1].context.span_id


def test_a_chained_request_is_no_compaction(pipe):
    """The same cut seen by OpenInference with previous_response_id: partial history, no compaction."""
    for i, history in enumerate((("u", LONG), ("u", LONG, "a", LONG, "u", LONG), ("u", "next"))):
        attributes: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "session.id": "c",
                                      "llm.invocation_parameters": json.dumps(
                                          {"model": "gpt-4o", **({"previous_response_id": "r1"} if i == 2 else {})})}
        for j in range(0, len(history), 2):
            attributes[f"llm.input_messages.{j // 2}.message.role"] = "user" if history[j] == "u" else "assistant"
            attributes[f"llm.input_messages.{j // 2}.message.content"] = history[j + 1]
        pipe.write("openinference.instrumentation.openai", "Response", attributes)
    assert _compactions(pipe) == {}
    assert [c.attributes[Attr.COVERAGE] for c in pipe.companions()] == ["complete", "complete", "partial"]


# ---------------------------------------------------------------------------
# The processor's guards
# ---------------------------------------------------------------------------

def test_an_error_of_ours_is_logged_never_raised(pipe, monkeypatch, caplog):
    """The tracker raising inside on_end: span.end() returns normally, one warning is logged."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(pipe.processor.tracker, "observe_request", broken)
    with caplog.at_level(logging.WARNING, logger="ctxscope.interop.processor"):
        pipe.write("x", "chat gpt-4o", GEN_AI_CHAT)
    assert pipe.companions() == []
    assert any("another instrumentation" in r.getMessage() for r in caplog.records)


def test_install_is_idempotent_and_skips_non_sdk_providers():
    """install() adds one processor per SDK provider; a no-op provider gets none."""
    from opentelemetry.trace import NoOpTracerProvider

    provider = TracerProvider()
    try:
        first = install(provider, MeterProvider())
        assert first is not None and install(provider) is first
        # On the provider exactly once, so each foreign span is read once.
        assert [p for p in provider._active_span_processor._span_processors
                if isinstance(p, ForeignSpanProcessor)] == [first]
        assert install(NoOpTracerProvider()) is None
    finally:
        provider.shutdown()


def test_install_beside_ctxscope_setup_reuses_its_context_processor():
    """ctxscope.setup() then install(): one ContextSpanProcessor, which records the foreign call's session."""
    import ctxscope
    from ctxscope.telemetry.processor import installed_processor

    telemetry = ctxscope.setup(store=False, instrument=False, set_global=False)
    try:
        processor = install(telemetry.tracer_provider, tokenizer="chars")
        assert processor is not None and installed_processor(telemetry.tracer_provider) is telemetry.processor
        span = telemetry.tracer_provider.get_tracer("x").start_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes={
            GenAI.OPERATION_NAME: "chat", GenAI.REQUEST_MODEL: "gpt-4o", GenAI.USAGE_INPUT_TOKENS: 55,
            GenAI.CONVERSATION_ID: "conv-setup"})
        span.end()
        assert telemetry.processor.sessions() == ["conv-setup"]
    finally:
        telemetry.shutdown()
