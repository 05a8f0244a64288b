"""OTLP export received by a real OTLP receiver (oteltest sinks, gRPC and HTTP)."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("oteltest.sink")
from _otlp_sink import Receiver, attrs, free_port, spans_of, wait_for  # noqa: E402

from ctxscope.telemetry.setup import setup  # noqa: E402
from ctxscope.schema import (  # noqa: E402
    CHANGE_EVENT_NAME,
    Annotation,
    Attr,
    Category,
    Change,
    ChangeType,
    Coverage,
    GenAI,
    Metric,
    MetricAttr,
    Stage,
)

C = Category


def tokens_in(request: Any, session: str) -> dict[str, float]:
    out = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name != Metric.TOKENS.name:
                    continue
                assert sm.scope.name == "ctxscope" and m.unit == Metric.TOKENS.unit
                for p in m.gauge.data_points:
                    a = attrs(p.attributes)
                    if a[MetricAttr.SESSION_ID] == session:
                        out[a[MetricAttr.CATEGORY]] = p.as_int or p.as_double
    return out


def scenario(telemetry, between=lambda: None) -> None:
    """One session s1: a call of 1,200 estimated tokens reported at 1,500, then one shrunk to 900 reported 800."""
    tracer = telemetry.tracer_provider.get_tracer("agent")
    first = Annotation(stage=Stage.REQUEST_INPUT, basis="tiktoken/o200k_base", coverage=Coverage.COMPLETE,
                       baseline=True, categories={C.SYSTEM: 200, C.TOOLS: 600, C.PROMPTS: 400},
                       estimated_tokens=1200, reported_tokens=1500, window_tokens=128000, model="gpt-4o",
                       changes=[Change("tool:read_file", C.TOOLS, 600, 600, ChangeType.BASELINE, label="read_file")])
    second = Annotation(stage=Stage.REQUEST_INPUT, basis="tiktoken/o200k_base", coverage=Coverage.COMPLETE,
                        baseline=False, categories={C.SYSTEM: 200, C.TOOLS: 600, C.RESULTS: 100},
                        estimated_tokens=900, reported_tokens=800, window_tokens=128000, model="gpt-4o",
                        changes=[Change("call_1", C.RESULTS, 100, 100, ChangeType.ADDITION, label="read_file")])
    for n, ann in enumerate((first, second)):
        if n:
            between()
        span_attrs = {GenAI.CONVERSATION_ID: "s1", GenAI.REQUEST_MODEL: "gpt-4o",
                      GenAI.PROVIDER_NAME: "openai", **ann.to_attributes()}
        with tracer.start_as_current_span("chat gpt-4o", attributes=span_attrs) as span:
            for name, event_attrs in ann.change_events():
                span.add_event(name, event_attrs)


@pytest.fixture(params=["grpc", "http/protobuf"])
def sink(request):
    with Receiver(request.param) as receiver:
        yield receiver.handler, receiver.endpoint, request.param


def test_spans_and_tokens_reach_the_receiver_and_shutdown_exports_zeros(sink, tmp_path):
    """Spans carry the annotation and change events; tokens are calibrated by hand; the last export is 0."""
    handler, endpoint, protocol = sink
    telemetry = setup("agent-test", endpoint=endpoint, protocol=protocol, set_global=False, instrument=False,
                      store=False, export_interval_millis=3_600_000)
    try:
        _check_export(telemetry, handler)
    finally:
        telemetry.shutdown()


def _check_export(telemetry, handler) -> None:
    assert telemetry.mode == "otlp"
    scenario(telemetry, between=lambda: telemetry.force_flush(10_000))
    assert telemetry.force_flush(10_000)
    wait_for(lambda: len(spans_of(handler.traces)) >= 2 and len(handler.metrics) >= 2)
    # After the first call: 200/600/400 and unattributed 1500 - 1200 = 300.
    assert tokens_in(handler.metrics[0], "s1") == {"system": 200, "tools": 600, "prompts": 400,
                                                    "unattributed": 300}

    spans = spans_of(handler.traces)
    first = attrs(spans[0].attributes)
    assert first[Attr.category(C.TOOLS)] == 600 and first[Attr.ESTIMATED_TOKENS] == 1200
    assert first[Attr.REPORTED_TOKENS] == 1500 and first[Attr.STAGE] == "request-input"
    assert first[GenAI.CONVERSATION_ID] == "s1"
    (event,) = spans[1].events
    assert event.name == CHANGE_EVENT_NAME
    assert attrs(event.attributes) == {"id": "call_1", "category": "results", "estimated_tokens": 100,
                                       "delta_tokens": 100, "change_type": "addition", "label": "read_file"}
    resource = attrs(handler.traces[0].resource_spans[0].resource.attributes)
    assert resource["service.name"] == "agent-test"

    # Second call: estimates 900 > reported 800, factor 8/9: system 177.8, tools 533.3, results 88.9
    # -> floors 177/533/88 = 798, the 2 left go to the largest remainders (results .89, system .78):
    # system 178, tools 533, results 89; prompts (missing now) 0; unattributed 0.
    assert tokens_in(handler.metrics[-1], "s1") == {"system": 178, "tools": 533, "results": 89,
                                                     "prompts": 0, "unattributed": 0}
    count = len(handler.metrics)
    telemetry.shutdown()
    wait_for(lambda: len(handler.metrics) > count)
    finals = [tokens_in(r, "s1") for r in handler.metrics[count:]]
    finals = [f for f in finals if f]
    # prompts reported its 0 once already (it left with the second call): the recording's end zeroes the rest.
    assert finals[-1] == {"system": 0, "tools": 0, "results": 0, "unattributed": 0}


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_closed_port_costs_the_data_only(protocol, caplog):
    """Exporting to a closed port: spans end at once, no exception, shutdown within the export timeout."""
    telemetry = setup("agent-test", endpoint=f"http://127.0.0.1:{free_port()}", protocol=protocol,
                      set_global=False, instrument=False, store=False, timeout_s=0.5,
                      export_interval_millis=3_600_000)
    started = time.perf_counter()
    scenario(telemetry)
    assert time.perf_counter() - started < 0.5  # the export happens off the caller's thread
    started = time.perf_counter()
    telemetry.shutdown()
    assert time.perf_counter() - started < 8.0


def test_no_endpoint_means_embedded_without_exporters(tmp_path):
    """No endpoint anywhere: no exporter, no metric reader (so no network), the local store on."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ctxscope.telemetry.processor import ContextSpanProcessor

    telemetry = setup(set_global=False, instrument=False, data_dir=tmp_path, environ={})
    try:
        assert telemetry.mode == "embedded" and telemetry.traces_endpoint is None
        processors = telemetry.tracer_provider._active_span_processor._span_processors
        assert [type(p) for p in processors] == [ContextSpanProcessor]
        assert not any(isinstance(p, BatchSpanProcessor) for p in processors)
        assert telemetry.store is not None and telemetry.store.root == tmp_path
    finally:
        telemetry.shutdown()


def test_environment_variables_choose_endpoint_and_protocol():
    """OTEL_EXPORTER_OTLP_ENDPOINT (a base URL) and _PROTOCOL=http/protobuf reach a real HTTP receiver."""
    with Receiver("http/protobuf") as receiver:
        handler = receiver.handler
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRICS_EXPORTER": "none"}
        telemetry = setup("env-test", set_global=False, instrument=False, store=False, environ=env)
        try:
            assert (telemetry.mode, telemetry.metrics_endpoint, telemetry.protocol) == ("otlp", None, "http/protobuf")
            scenario(telemetry)
            telemetry.force_flush(5_000)
            wait_for(lambda: len(spans_of(handler.traces)) == 2)
            assert handler.metrics == []  # OTEL_METRICS_EXPORTER=none
        finally:
            telemetry.shutdown()


def test_unsupported_protocol_is_a_value_error():
    """http/json has no Python exporter: setup() says so at once."""
    with pytest.raises(ValueError, match="unsupported OTLP protocol 'http/json'"):
        setup(set_global=False, instrument=False, store=False,
              environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


AGENT = '''
import ctxscope
from ctxscope.testing import ProviderServer, Reply

with ProviderServer() as server:
    server.reply(Reply.text("first answer"), Reply.text("second answer"))
    client = server.openai_client()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    with ctxscope.session("auto-agent"):
        r = client.chat.completions.create(model="gpt-4o", messages=messages)
        messages += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": "and again"}]
        client.chat.completions.create(model="gpt-4o", messages=messages)
print("agent done")
'''


def run_instrumented(tmp_path, env_extra: dict[str, str]) -> None:
    """``opentelemetry-instrument python agent.py`` with nothing but environment variables."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("openai")
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"CTXSCOPE_TOKENIZER": "chars", "CTXSCOPE_DATA_DIR": str(tmp_path / "store"), **env_extra})
    # The dev extra also installs other OpenAI instrumentations (tests of ctxscope.interop); they all
    # register the entry point "openai" and would add their own "chat gpt-4o" spans: this is about ctxscope's.
    env.setdefault("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "openai")
    done = subprocess.run([str(bin_dir / "opentelemetry-instrument"), sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "agent done"
    assert "Traceback" not in done.stderr and "Failed to export" not in done.stderr, done.stderr


def test_opentelemetry_instrument_alone_keeps_the_local_store(tmp_path):
    """No OTEL_* endpoint: the ctxscope configurator keeps both calls in the local store, exports nothing."""
    from ctxscope.telemetry.store import LocalStore

    run_instrumented(tmp_path, {})
    records = LocalStore(tmp_path / "store").read("auto-agent")
    # chars/4: system "You are terse." 4, prompts "hello there" 3 + "and again" 3, assistant "first answer" 3.
    # Overhead (OpenAI chat framing, docs/fidelity.md): 3 + the role a message ("system" 2, "user" 1,
    # "assistant" 3) and 3 for the reply priming: 5 + 4 + 3 = 12, then 5 + 4 + 6 + 4 + 3 = 22.
    assert [r["parts"] for r in records] == [{"system": 4, "prompts/text": 3, "overhead": 12},
                                             {"system": 4, "prompts/text": 6, "assistant/text": 3, "overhead": 22}]


def test_opentelemetry_instrument_exports_over_otlp_with_final_zeros(tmp_path):
    """OTEL_EXPORTER_OTLP_ENDPOINT alone: spans and metrics reach the receiver; the exit export is all zeros."""
    with Receiver("http/protobuf") as receiver:
        handler = receiver.handler
        run_instrumented(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                                    "OTEL_SERVICE_NAME": "auto-agent-svc"})
        wait_for(lambda: len([s for s in spans_of(handler.traces) if s.name == "chat gpt-4o"]) == 2 and
                 any(tokens_in(r, "auto-agent") for r in handler.metrics))
    resource = attrs(handler.traces[0].resource_spans[0].resource.attributes)
    assert resource["service.name"] == "auto-agent-svc"
    finals = [t for t in (tokens_in(r, "auto-agent") for r in handler.metrics) if t]
    assert set(finals[-1]) >= {"system", "prompts", "assistant"} and set(finals[-1].values()) == {0}
    assert not (tmp_path / "store").exists()  # exporting: the local store stays off by default


def test_setup_in_code_instruments_and_exports(tmp_path):
    """``ctxscope.setup(endpoint=...)`` in a fresh process: openai calls become spans and token gauges."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env["CTXSCOPE_TOKENIZER"] = "chars"
    with Receiver("http/protobuf") as receiver:
        handler = receiver.handler
        script = tmp_path / "agent.py"
        script.write_text(
            "import ctxscope\n"
            f"telemetry = ctxscope.setup('in-code', endpoint='{receiver.endpoint}', protocol='http/protobuf')\n"
            + AGENT + "telemetry.force_flush()\ntelemetry.shutdown()\n")
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        wait_for(lambda: len([s for s in spans_of(handler.traces) if s.name == "chat gpt-4o"]) == 2)
    series = [t for t in (tokens_in(r, "auto-agent") for r in handler.metrics) if t]
    # Second call, chars/4: system 4, prompts 3 + 3, assistant 3, overhead (framing: 3 + the role a
    # message, 3 for the priming) 5 + 4 + 6 + 4 + 3 = 22: 35 estimated. The server reports "system" 2 + 4
    # + "user" 1 + 3 + "assistant" 3 + 3 + "user" 1 + 3 + 10 hidden = 30: scaled by 30/35, largest
    # remainder: 3.43, 5.14, 2.57, 18.86 -> 3, 5, 3, 19.
    assert series[0] == {"system": 3, "prompts": 5, "assistant": 3, "overhead": 19, "unattributed": 0}
    assert set(series[-1].values()) == {0}
