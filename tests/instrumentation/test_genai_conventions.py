"""The GenAI conventions on ctxscope's own model spans and metrics (issue 15: what the official instrumentation emits).

Real openai SDK against ``ctxscope.testing``'s server: ``server.address`` and
``server.port``, the request parameters, and the ``gen_ai.client.operation.duration``
and ``gen_ai.client.token.usage`` histograms, recorded whether the span is sampled or not.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("wrapt")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON  # noqa: E402

from _instr_support import finished  # noqa: E402
from ctxscope.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from ctxscope.schema import Attr, GenAI, GenAIMetric  # noqa: E402
from ctxscope.testing import ProviderServer, Reply  # noqa: E402
from ctxscope.telemetry.tracker import Tracker  # noqa: E402

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


def call_once(server: Any, sampler: Any) -> tuple[list[Any], dict[str, list[Any]]]:
    """One chat call with parameters; its finished spans and the GenAI histogram points by metric name."""
    server.reset()
    server.reply(Reply.text("hi, how can I help?"))
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider,
                            tracker=Tracker(tokenizer="chars", framing=False))
    try:
        server.openai_client().chat.completions.create(model="gpt-4o", messages=MESSAGES, top_p=0.5, seed=7,
                                                       stop=["END"], n=2, temperature=0.2)
        data = reader.get_metrics_data()
    finally:
        instrumentor.uninstrument()
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name in (GenAIMetric.OPERATION_DURATION, GenAIMetric.TOKEN_USAGE):
                    assert metric.unit == (GenAIMetric.OPERATION_DURATION_UNIT
                                           if metric.name == GenAIMetric.OPERATION_DURATION
                                           else GenAIMetric.TOKEN_USAGE_UNIT)
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
    return finished(exporter), points


def test_call_span_has_server_and_request_parameters(server):
    """server.address/port from the client's base URL; top_p, seed, stop sequences, choice count, temperature."""
    spans, _ = call_once(server, ALWAYS_ON)
    call = next(s for s in spans if s.name == "chat gpt-4o")
    attrs = dict(call.attributes)
    assert attrs[GenAI.SERVER_ADDRESS] == "127.0.0.1" and attrs[GenAI.SERVER_PORT] == server.port
    assert attrs[GenAI.REQUEST_TOP_P] == 0.5 and attrs[GenAI.REQUEST_SEED] == 7
    assert attrs[GenAI.REQUEST_TEMPERATURE] == 0.2 and attrs[GenAI.REQUEST_CHOICE_COUNT] == 2
    assert list(attrs[GenAI.REQUEST_STOP_SEQUENCES]) == ["END"]
    assert attrs[GenAI.RESPONSE_ID] and list(attrs[GenAI.RESPONSE_FINISH_REASONS]) == ["stop"]
    # The marker is not a model call: no operation name, the session key all the same.
    marker = next(s for s in spans if s.name == "capture-start")
    assert GenAI.OPERATION_NAME not in marker.attributes and Attr.SESSION_ID in marker.attributes
    # A fingerprint session: ctxscope's key only, no made-up gen_ai.conversation.id.
    assert attrs[Attr.SESSION_ID].startswith("fp-") and GenAI.CONVERSATION_ID not in attrs


@pytest.mark.parametrize("sampler", [ALWAYS_ON, ALWAYS_OFF], ids=["recorded", "sampled-out"])
def test_duration_and_token_usage_histograms(server, sampler):
    """One call: a duration point and input/output token points, as util-genai records them, sampled or not."""
    _, points = call_once(server, sampler)
    [duration] = points[GenAIMetric.OPERATION_DURATION]
    assert duration.count == 1 and 0 < duration.sum < 30
    assert list(duration.explicit_bounds) == list(GenAIMetric.DURATION_BUCKETS)
    identity = {GenAI.OPERATION_NAME: "chat", GenAI.PROVIDER_NAME: "openai", GenAI.REQUEST_MODEL: "gpt-4o",
                GenAI.RESPONSE_MODEL: "gpt-4o", GenAI.SERVER_ADDRESS: "127.0.0.1", GenAI.SERVER_PORT: server.port}
    assert dict(duration.attributes) == identity
    tokens = {p.attributes[GenAI.TOKEN_TYPE]: (p.count, p.sum) for p in points[GenAIMetric.TOKEN_USAGE]}
    # Input as the server reports it: "system" 2 + "You are terse." 4 + "user" 1 + "hello there" 3 + 10 hidden = 20;
    # output: "hi, how can I help?" (19 chars) -> 5.
    assert tokens == {"input": (1, 20), "output": (1, 5)}


def test_one_llm_span_per_anthropic_call_with_the_sdks_own_tracing_on(server):
    """The anthropic SDK's built-in call span (scope com.anthropic.sdk.python) is left out while ctxscope's is the
    call's."""
    pytest.importorskip("anthropic")
    from ctxscope.instrumentation.anthropic import AnthropicInstrumentor

    def llm_spans(instrument: bool) -> list[tuple[str, str]]:
        server.reset()
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrumentor = AnthropicInstrumentor()
        if instrument:
            instrumentor.instrument(tracer_provider=tracer_provider, tracker=Tracker(tokenizer="chars", framing=False))
        try:
            client = server.anthropic_client(open_telemetry={"tracer_provider": tracer_provider})
            client.messages.create(model="claude-sonnet-4-6", max_tokens=32,
                                   messages=[{"role": "user", "content": "hello there"}])
        finally:
            if instrument:
                instrumentor.uninstrument()
        return [(s.instrumentation_scope.name, s.name) for s in finished(exporter)
                if GenAI.OPERATION_NAME in (s.attributes or {})]

    # Without ctxscope the SDK's own span is there (so this test can fail); with it, ours alone.
    assert llm_spans(instrument=False) == [("com.anthropic.sdk.python", "anthropic.messages.create")]
    assert llm_spans(instrument=True) == [("ctxscope", "chat claude-sonnet-4-6")]


def test_anthropic_iterations_report_the_first_samplings_input():
    """usage.iterations (a server-side compaction, then the answer; top-level fields sum the samplings):
    the reported input is the first ``message`` iteration's, cached parts counted once."""
    pytest.importorskip("anthropic")
    from anthropic.types.beta import BetaMessage

    from ctxscope.instrumentation.anthropic import message_info

    message = BetaMessage.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 9000, "output_tokens": 40, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 3000,
                  "iterations": [
                      {"type": "compaction", "input_tokens": 180000, "output_tokens": 2000,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                      {"type": "message", "input_tokens": 5000, "output_tokens": 20,
                       "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000},
                      {"type": "message", "input_tokens": 4000, "output_tokens": 20,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2000}]}})
    usage = message_info(message).usage
    # 5000 + 100 + 1000: the compaction's 180,000 and the second sampling are not this request's prompt.
    assert usage.reported_input == 6100
    # The uncached, cache and output fields stay the top-level (billed) ones.
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (9000, 3000, 40)
