"""One session per conversation, no invented compactions (issue 15, point 4).

Real openai and anthropic SDKs against ``ctxscope.testing``'s server. An eval
harness running one conversation three times in a process makes three
fingerprint sessions (the history restarting from its opening is a new
conversation, never a compaction); a tool call and its result taken out of
the middle of a history is an edit, not a compaction.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("wrapt")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from _instr_support import finished  # noqa: E402
from ctxscope.schema import INSTRUMENTATION_SCOPE, Attr, Metric, MetricAttr  # noqa: E402
from ctxscope.testing import ProviderServer, Reply  # noqa: E402
from ctxscope.telemetry.tracker import Tracker  # noqa: E402

QUESTIONS = ("What is 2 + 2?", "And times 3?", "Now minus 5?")


@pytest.fixture(scope="module")
def server():
    with ProviderServer(default=Reply.text("It is 4.")) as s:
        yield s


def openai_agent(client: Any, history: list[dict[str, Any]]) -> Any:
    return client.chat.completions.create(model="gpt-4o", messages=history)


def anthropic_agent(client: Any, history: list[dict[str, Any]]) -> Any:
    return client.messages.create(model="claude-sonnet-4-6", max_tokens=64, system="You are a calculator.",
                                  messages=history)


PROVIDERS = {
    "openai": ("ctxscope.instrumentation.openai", "OpenAIInstrumentor",
               openai_agent, "openai_client"),
    "anthropic": ("ctxscope.instrumentation.anthropic", "AnthropicInstrumentor", anthropic_agent,
                  "anthropic_client"),
}


def answer_text(provider: str, reply: Any) -> str:
    return reply.choices[0].message.content if provider == "openai" else reply.content[0].text


def opening(provider: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a calculator."}] if provider == "openai" else []


class Run:
    """An instrumented provider SDK with its spans and metrics."""

    def __init__(self, server: Any, provider: str) -> None:
        import importlib

        pytest.importorskip(provider)
        module, name, self.call, client = PROVIDERS[provider]
        self.provider = provider
        server.reset()
        self.exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.instrumentor = getattr(importlib.import_module(module), name)()
        self.instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider,
                                     tracker=Tracker(tokenizer="chars", framing=False))
        self.client = getattr(server, client)()

    def close(self) -> None:
        self.instrumentor.uninstrument()

    def conversation(self, turns: int = len(QUESTIONS)) -> None:
        history = opening(self.provider)
        for question in QUESTIONS[:turns]:
            history.append({"role": "user", "content": question})
            reply = self.call(self.client, history)
            history.append({"role": "assistant", "content": answer_text(self.provider, reply)})

    def call_sessions(self) -> list[str]:
        """The session key of each model-call span, in order."""
        return [s.attributes[Attr.SESSION_ID] for s in finished(self.exporter)
                if s.name.startswith("chat")]

    def spans_named(self, name: str) -> int:
        return sum(1 for s in finished(self.exporter) if s.name == name)

    def metric_sessions(self, spec: Any) -> dict[str, list[float]]:
        """The values of one instrument per session in one collection."""
        out: dict[str, list[float]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                if sm.scope.name != INSTRUMENTATION_SCOPE:
                    continue
                for metric in sm.metrics:
                    if metric.name == spec.name:
                        for point in metric.data.data_points:
                            out.setdefault(point.attributes[MetricAttr.SESSION_ID], []).append(point.value)
        return out


@pytest.fixture(params=sorted(PROVIDERS))
def run(request, server):
    r = Run(server, request.param)
    yield r
    r.close()


def test_three_identical_conversations_are_three_sessions_without_compactions(run):
    """An eval loop running one 3-turn conversation three times: 3 sessions of 3 calls, 0 compactions."""
    for _ in range(3):
        run.conversation()
    sessions = run.call_sessions()
    first = sessions[0]
    assert first.startswith("fp-")
    assert sessions == [first] * 3 + [f"{first}.2"] * 3 + [f"{first}.3"] * 3
    assert run.spans_named("post-compaction") == 0
    assert run.spans_named("capture-start") == 3
    # The first two conversations ended when the next began: their series report 0 once; the third is live.
    tokens = run.metric_sessions(Metric.TOKENS)
    assert set(tokens) == {first, f"{first}.2", f"{first}.3"}
    assert set(tokens[first]) == set(tokens[f"{first}.2"]) == {0}
    assert min(tokens[f"{first}.3"]) > 0
    assert run.metric_sessions(Metric.COMPACTIONS) == {}


def test_an_explicit_session_id_wins_over_the_restart(run):
    """Under ``ctxscope.session("eval")`` the three runs stay one session, still without a compaction."""
    import ctxscope

    with ctxscope.session("eval"):
        for _ in range(3):
            run.conversation()
    assert run.call_sessions() == ["eval"] * 9
    assert run.spans_named("post-compaction") == 0
    assert run.metric_sessions(Metric.COMPACTIONS) == {}


def test_a_tool_call_and_its_result_removed_is_no_compaction(server):
    """An agent dropping one tool call and its result from the middle of its history: the same session, no
    compaction."""
    pytest.importorskip("openai")
    run = Run(server, "openai")
    try:
        tool_call = {"id": "call_1", "type": "function",
                     "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}}
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a calculator."},
            {"role": "user", "content": "Read my notes, then add 2 and 2."},
            {"role": "assistant", "content": None, "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "nothing useful in here " * 20},
            {"role": "assistant", "content": "The notes are empty. 2 + 2 = 4."},
            {"role": "user", "content": "And times 3?"},
        ]
        openai_agent(run.client, history)
        history = history[:2] + history[4:] + [{"role": "assistant", "content": "12"},
                                               {"role": "user", "content": "Now minus 5?"}]
        openai_agent(run.client, history)
    finally:
        run.close()
    sessions = run.call_sessions()
    assert len(sessions) == 2 and sessions[0] == sessions[1]
    assert run.spans_named("post-compaction") == 0
    assert run.metric_sessions(Metric.COMPACTIONS) == {}


def test_a_chat_run_then_a_responses_run_of_one_conversation_are_two_sessions(server):
    """A framework running one conversation through chat completions, then again through Responses: two sessions,
    no compaction."""
    pytest.importorskip("openai")
    run = Run(server, "openai")
    try:
        run.conversation()
        history: list[dict[str, Any]] = []
        for question in QUESTIONS:
            history.append({"role": "user", "content": question})
            reply = run.client.responses.create(model="gpt-4o", instructions="You are a calculator.", input=history)
            history.append({"role": "assistant", "content": reply.output_text})
    finally:
        run.close()
    sessions = run.call_sessions()
    assert len(sessions) == 6 and sessions[0].startswith("fp-")
    # The fingerprint is the same through either API shape (system prompt and first user message).
    assert sessions == [sessions[0]] * 3 + [f"{sessions[0]}.2"] * 3
    assert run.spans_named("post-compaction") == 0
    assert run.metric_sessions(Metric.COMPACTIONS) == {}
