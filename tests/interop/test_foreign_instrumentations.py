"""Other GenAI instrumentations, really installed, instrumenting the real openai SDK
against ctxscope.testing's server, profiled by ctxscope.interop.ForeignSpanProcessor.

The same two-turn conversation runs under ctxscope's own instrumentation (the
reference) and under each other instrumentation; counting is chars/4, so every
value is worked out by hand:

* items (ctxscope's rendering, docs/items.md): system "You are terse." 14 chars
  -> 4; tool read_file rendered "// Read a file\\ntype read_file = (_: {\\npath:
  string,\\n}) => any;\\n\\n" 64 chars -> 16; user "hello there" 11 -> 3; the
  assistant's call arguments '{"path":"app.py"}' 17 -> 5; the result "print(1)" 8 -> 2.
* reported input (the server's rule: ceil(len/4) of every string value, +10):
  turn 1: messages 2+4+1+3, tools "function" 2 + "read_file" 3 + "Read a file" 3
  + "object" 2 + "string" 2 + "path" 1, + 10 = 33; turn 2 adds the assistant
  message 3+3+5+3+2 and the tool message 1+3+2: 55.
* turn 2 estimates: 4+16+3+5+2 = 30, unattributed 55-30 = 25; window of gpt-4o
  128,000 (genai-prices), utilisation 55/128,000.

Each scenario runs in a fresh interpreter (tests/_foreign_scenario.py):
instrumenting the SDK with several instrumentations in one process interferes
(OpenLLMetry's uninstrument leaves a wrapper that still writes to the old
tracer provider). Instrumentations wrap the SDK together only where a test
means it.
"""

from __future__ import annotations

from _paths import TESTS

import json
import os
import subprocess
import sys
from functools import lru_cache
from typing import Any

import pytest

from ctxscope.telemetry.processor import UNKNOWN_SESSION
from ctxscope.schema import Attr, GenAI, Metric

pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")
pytest.importorskip("opentelemetry.instrumentation.openai")
pytest.importorskip("openinference.instrumentation.openai")

SCENARIO = TESTS / "_foreign_scenario.py"
WINDOW = 128_000
REPORTED = 55
# Turn 2 by hand (module docstring).
OWN = {"system": 4, "tools": 16, "prompts": 3, "assistant": 5, "results": 2, "unattributed": 25}

# Content capture of each instrumentation: (on, off) environments.
CAPTURE = {
    "openai-v2": ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
                  {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "no_content"}),
    "openllmetry": ({"TRACELOOP_TRACE_CONTENT": "true"}, {"TRACELOOP_TRACE_CONTENT": "false"}),
    "openinference": ({"OPENINFERENCE_HIDE_INPUTS": "false"},
                      {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}),
}
FOREIGN = tuple(CAPTURE)
_CAPTURE_KEYS = {k for on, off in CAPTURE.values() for k in (*on, *off)}


class Result:
    """Spans and ctxscope metrics of one scenario."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.spans: list[dict[str, Any]] = data["spans"]
        self.metrics = {(m["name"], m["detail"]): (m["session"], m["value"]) for m in data["metrics"]}

    def companions(self) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith("ctxscope.context")]

    def tokens(self) -> dict[str, float]:
        return {k[1]: v[1] for k, v in self.metrics.items() if k[0] == Metric.TOKENS.name and v[1]}


@lru_cache(maxsize=None)
def scenario(instrument: tuple[str, ...], *, foreign: bool = True, capture: bool = True, stream: bool = False,
             session: str | None = None, logs: bool = False, env_items: tuple[tuple[str, str], ...] = (),
             api: str = "chat") -> Result:
    """Run one conversation in a fresh interpreter (instrumentations interfere in one process)."""
    env = {k: v for k, v in os.environ.items() if k not in _CAPTURE_KEYS}
    for name in instrument:
        if name in CAPTURE:
            env.update(CAPTURE[name][0 if capture else 1])
    env.update(env_items)
    config = {"instrument": list(instrument), "foreign": foreign, "stream": stream, "session": session,
              "logs": logs, "api": api}
    done = subprocess.run([sys.executable, str(SCENARIO), json.dumps(config)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return Result(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def reference() -> Result:
    """What ctxscope's own instrumentation reports for the conversation."""
    return scenario(("ctxscope",), foreign=False)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_reference_values_are_the_hand_worked_ones(reference):
    """ctxscope's own instrumentation: categories 4/16/3/5/2 + 25 unattributed, 55 reported."""
    assert reference.tokens() == OWN
    assert reference.metrics[(Metric.REPORTED_TOKENS.name, None)][1] == REPORTED
    assert reference.metrics[(Metric.LIMIT_TOKENS.name, "window")][1] == WINDOW
    assert reference.metrics[(Metric.UTILIZATION.name, None)][1] == pytest.approx(REPORTED / WINDOW)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", ["openllmetry", "openinference"])
def test_full_content_gives_the_same_metrics_as_ctxscope(name, stream, reference):
    """Messages and tool definitions on the span: every metric equals ctxscope's own, session included."""
    result = scenario((name,), stream=stream)
    assert result.metrics == reference.metrics
    assert [c["attributes"][Attr.COVERAGE] for c in result.companions()] == ["complete", "complete"]


@pytest.mark.parametrize("name", ["openllmetry", "openinference"])
def test_responses_api_gives_the_same_metrics_as_ctxscope(name):
    """Responses API (instructions, flat tools, function_call items): equal to ctxscope's own figures.

    Reported by the server's rule: turn 1 instructions 4 + input 1+3 + tools 13 + 10 = 31; turn 2 adds
    the function_call item (arguments 5, call_id 3, name 3, type 4, id 3, status 3) and the output item
    (type 5, call_id 3, output 2): 62. Items as for chat: 30, so 32 unattributed.
    """
    own = scenario(("ctxscope",), foreign=False, api="responses")
    assert own.tokens() == {**OWN, "unattributed": 32}
    assert own.metrics[(Metric.REPORTED_TOKENS.name, None)][1] == 62
    assert scenario((name,), api="responses").metrics == own.metrics


def test_openai_v2_without_tool_definitions_puts_tools_into_unattributed(reference):
    """openai-v2 writes messages but no gen_ai.tool.definitions: tools' 16 tokens move to unattributed, partial."""
    result = scenario(("openai-v2",))
    expected = {k: v for k, v in OWN.items() if k != "tools"}
    expected["unattributed"] = OWN["unattributed"] + OWN["tools"]  # 25 + 16 = 41: the calibrated total stays 55
    assert result.tokens() == expected
    # Same session (the fingerprint of the same system prompt and first user message), same usage figures.
    for key in ((Metric.REPORTED_TOKENS.name, None), (Metric.LIMIT_TOKENS.name, "window"),
                (Metric.UTILIZATION.name, None)):
        assert result.metrics[key] == reference.metrics[key]
    assert [c["attributes"][Attr.COVERAGE] for c in result.companions()] == ["partial", "partial"]


EVENT_ONLY = (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "event_only"),)


def test_openai_v2_event_only_content_is_read_from_its_log_event(reference):
    """event_only: messages only on the log event; with log_processor() the figures equal span_only's."""
    result = scenario(("openai-v2",), logs=True, env_items=EVENT_ONLY)
    on_span = scenario(("openai-v2",))
    assert not any(GenAI.INPUT_MESSAGES in s["attributes"] for s in result.spans)  # really not on the span
    assert result.metrics == on_span.metrics
    assert result.tokens()["prompts"] == OWN["prompts"]


def test_openai_v2_event_only_without_the_log_processor_is_usage_only():
    """event_only and no log processor added: the span has no content, usage-based figures, breakdown unrecorded."""
    result = scenario(("openai-v2",), env_items=EVENT_ONLY)
    assert result.tokens() == {"unattributed": REPORTED}
    assert [c["attributes"][Attr.COVERAGE] for c in result.companions()] == ["unrecorded", "unrecorded"]


@pytest.mark.parametrize("name", FOREIGN)
def test_content_capture_off_records_usage_based_figures(name):
    """No content on the spans: no failure; 55 reported, all unattributed, window and utilisation; unrecorded."""
    result = scenario((name,), capture=False)
    assert result.tokens() == {"unattributed": REPORTED}
    assert result.metrics[(Metric.REPORTED_TOKENS.name, None)] == (UNKNOWN_SESSION, REPORTED)
    assert result.metrics[(Metric.LIMIT_TOKENS.name, "window")] == (UNKNOWN_SESSION, WINDOW)
    assert result.metrics[(Metric.UTILIZATION.name, None)][1] == pytest.approx(REPORTED / WINDOW)
    assert [(c["attributes"][Attr.COVERAGE], c["attributes"][Attr.ESTIMATED_TOKENS],
             c["attributes"][Attr.REPORTED_TOKENS]) for c in result.companions()] == [
        ("unrecorded", 0, 33), ("unrecorded", 0, 55)]


def test_companion_span_is_a_child_of_the_original_and_carries_no_content():
    """The companion: child of the OpenInference span, same trace and times, gen_ai identity, counts only."""
    result = scenario(("openinference",))
    originals = [s for s in result.spans if s["scope"].startswith("openinference")]
    companions = result.companions()
    assert len(originals) == len(companions) == 2
    for original, companion in zip(originals, companions):
        assert companion["name"] == "ctxscope.context gpt-4o"
        assert companion["scope"] == "ctxscope"
        assert companion["parent_id"] == original["span_id"]
        assert companion["trace_id"] == original["trace_id"]
        assert (companion["start"], companion["end"]) == (original["start"], original["end"])
        assert companion["attributes"][GenAI.REQUEST_MODEL] == "gpt-4o"
        assert companion["attributes"][GenAI.PROVIDER_NAME] == "openai"
        blob = json.dumps([companion["attributes"], companion["events"]])
        for text in ("You are terse.", "hello there", "print(1)", "app.py", "Read a file"):
            assert text not in blob
    assert companions[1]["attributes"][Attr.category("results")] == 2
    assert [s["name"] for s in result.spans if s["name"] == "capture-start"] == ["capture-start"]


def test_openinference_session_id_keys_the_session():
    """OpenInference's session.id (using_session) keys the series (llm.context.session.id)."""
    result = scenario(("openinference",), session="conv-42")
    assert {session for session, _ in result.metrics.values()} == {"conv-42"}
    assert result.tokens() == OWN


@pytest.mark.parametrize("order", [("ctxscope", "openinference"), ("openinference", "ctxscope"),
                                   ("ctxscope", "openllmetry"), ("openllmetry", "ctxscope"),
                                   ("ctxscope", "openai-v2"), ("openai-v2", "ctxscope")],
                         ids=["oi-1", "oi-2", "ll-inside", "ll-outside", "v2-inside", "v2-outside"])
def test_no_double_counting_beside_ctxscope_own_instrumentation(order, reference):
    """Both instrument the same calls (either nesting): no companion span, the metrics are ctxscope's own."""
    result = scenario(order)
    assert result.companions() == []
    assert len([s for s in result.spans if s["scope"] != "ctxscope"]) == 2  # the other one did record both
    assert result.metrics == reference.metrics
