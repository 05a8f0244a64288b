"""One scenario of tests/interop/test_foreign_instrumentations.py, run in a process of its own.

Instrumenting the openai SDK with several instrumentations in one process
interferes (OpenLLMetry's uninstrument leaves a wrapper behind that still
writes spans to the old tracer provider), so each scenario runs here, in a
fresh interpreter, and prints its spans and ctxscope metrics as JSON::

    python tests/_foreign_scenario.py '{"instrument": ["openinference"], "foreign": true,
                                        "stream": false, "session": null}'

The environment (content capture of each instrumentation) is the caller's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxscope.interop import ForeignSpanProcessor
from ctxscope.schema import Metric, MetricAttr
from ctxscope.testing import ProviderServer, Reply
from ctxscope.telemetry.tracker import Tracker

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
FIRST = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]


def instrumentor(name: str) -> Any:
    if name == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif name == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor  # type: ignore[no-redef]
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor  # type: ignore[no-redef]
    elif name == "ctxscope":
        from ctxscope.instrumentation.openai import OpenAIInstrumentor  # type: ignore[no-redef]
    else:
        raise ValueError(f"unknown instrumentation {name!r}")
    return OpenAIInstrumentor()


def conversation(server: ProviderServer, *, stream: bool) -> None:
    """Two turns: a tool call, then its result and a text answer (turn 2 streamed if asked)."""
    server.reply(Reply.tool_call("read_file", {"path": "app.py"}), Reply.text("done"))
    client = server.openai_client()
    first = client.chat.completions.create(model="gpt-4o", messages=FIRST, tools=TOOLS)
    call = first.choices[0].message
    second = FIRST + [call.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "print(1)"}]
    if stream:
        chunks = client.chat.completions.create(model="gpt-4o", messages=second, tools=TOOLS, stream=True,
                                                stream_options={"include_usage": True})
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = client.chat.completions.create(model="gpt-4o", messages=second, tools=TOOLS).choices[0].message.content
    assert text == "done", text


def responses_conversation(server: ProviderServer) -> None:
    """The same two turns through the Responses API (instructions, flat tools, function_call items)."""
    server.reply(Reply.tool_call("read_file", {"path": "app.py"}), Reply.text("done"))
    client = server.openai_client()
    tools = [{"type": "function", "name": "read_file", "description": "Read a file",
              "parameters": TOOLS[0]["function"]["parameters"]}]
    first_input = [{"role": "user", "content": "hello there"}]
    first = client.responses.create(model="gpt-4o", instructions="You are terse.", input=first_input, tools=tools)
    call = next(item for item in first.output if item.type == "function_call")
    # A fresh copy: OpenLLMetry 0.62.4 adds "type": "message" to the caller's input items in place.
    second = [{"role": "user", "content": "hello there"}, call.model_dump(exclude_none=True),
                            {"type": "function_call_output", "call_id": call.call_id, "output": "print(1)"}]
    answer = client.responses.create(model="gpt-4o", instructions="You are terse.", input=second, tools=tools)
    assert answer.output_text == "done", answer.output_text


def span_json(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "scope": span.instrumentation_scope.name,
        "span_id": span.context.span_id,
        "trace_id": span.context.trace_id,
        "parent_id": span.parent.span_id if span.parent else None,
        "start": span.start_time,
        "end": span.end_time,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
    }


CONTEXT_METRICS = frozenset(spec.name for spec in Metric.ALL)


def metrics_json(reader: InMemoryMetricReader) -> list[dict[str, Any]]:
    out = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            if scope.scope.name != "ctxscope":
                continue
            for metric in scope.metrics:
                if metric.name not in CONTEXT_METRICS:  # the GenAI client histograms of ctxscope's own calls
                    continue
                for point in metric.data.data_points:
                    attrs = dict(point.attributes or {})
                    out.append({"name": metric.name, "session": attrs.get(MetricAttr.SESSION_ID),
                                "detail": attrs.get(MetricAttr.CATEGORY) or attrs.get(MetricAttr.LIMIT),
                                "value": point.value})
    return out


def run(config: dict[str, Any]) -> dict[str, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    foreign = None
    if config.get("foreign"):
        # Both sides without provider framing, so the figures stay the items' hand-worked counts.
        foreign = ForeignSpanProcessor(provider, meter_provider, tracker=Tracker(tokenizer="chars", framing=False))
        provider.add_span_processor(foreign)
    logs: dict[str, Any] = {}
    if config.get("logs"):  # content in log events (openai-v2 event_only)
        from opentelemetry.sdk._logs import LoggerProvider

        logs["logger_provider"] = LoggerProvider()
        if foreign is not None:
            logs["logger_provider"].add_log_record_processor(foreign.log_processor())
    instrumentors = []
    for name in config["instrument"]:
        extra = {"tracker": Tracker(tokenizer="chars", framing=False)} if name == "ctxscope" else dict(logs)
        instrumentor(name).instrument(tracer_provider=provider, meter_provider=meter_provider, **extra)
        instrumentors.append(instrumentor(name))
    with ProviderServer() as server:
        if config.get("api") == "responses":
            responses_conversation(server)
        elif config.get("session"):
            from openinference.instrumentation import using_session

            with using_session(config["session"]):
                conversation(server, stream=bool(config.get("stream")))
        else:
            conversation(server, stream=bool(config.get("stream")))
    provider.force_flush()  # ctxscope's calls are measured off the call path: their spans end once measured
    return {"spans": [span_json(s) for s in exporter.get_finished_spans()], "metrics": metrics_json(reader)}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1])), default=list))
