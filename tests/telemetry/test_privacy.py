"""Privacy (SPEC section 7): prompt, tool and response text leave the process nowhere.

The real openai SDK, instrumented by ctxscope, talks to ctxscope.testing's
server; telemetry goes over OTLP to a real receiver (oteltest's gRPC sink) and
to the local store. Sentinel strings planted in the system prompt, the user's
prompt, a tool definition, tool-call arguments, a tool result and the
responses (plain and streamed) must appear in no exported byte, no log line of
ctxscope or OpenTelemetry, and no local file.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
oteltest_sink = pytest.importorskip("oteltest.sink")
from oteltest.sink.handler import RequestHandler  # noqa: E402

import ctxscope  # noqa: E402
from ctxscope.telemetry.setup import setup  # noqa: E402
from ctxscope.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from ctxscope.testing import ProviderServer, Reply  # noqa: E402

SENTINELS = {
    "system": "SNTL-SYSTEM-91c2",
    "prompt": "SNTL-PROMPT-44ab",
    "tool_description": "SNTL-TOOLDESC-7e10",
    "arguments": "SNTL-ARGS-0d5f",
    "result": "SNTL-RESULT-b3a8",
    "response": "SNTL-RESPONSE-c611",
    "stream": "SNTL-STREAM-2f9e",
}
# The provider SDK's own DEBUG logs print request bodies: that is the user's
# logging choice, not ctxscope's output, so only these loggers are checked.
PROVIDER_LOGGERS = ("openai", "httpx", "httpcore")


class Collect(RequestHandler):
    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.spans = 0
        self.lock = threading.Lock()

    def _keep(self, request: Any) -> None:
        with self.lock:
            self.payloads.append(request.SerializeToString())

    def handle_logs(self, request, headers):
        self._keep(request)

    def handle_metrics(self, request, headers):
        self._keep(request)

    def handle_trace(self, request, headers):
        with self.lock:
            self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        self._keep(request)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conversation(client: Any) -> None:
    """Three turns: a tool call, the tool's result answered in text, then a streamed answer."""
    tools = [{"type": "function", "function": {
        "name": "read_file", "description": "Reads a file. " + SENTINELS["tool_description"],
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + SENTINELS["system"]},
        {"role": "user", "content": "Please fix the bug. " + SENTINELS["prompt"]},
    ]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "def f(): pass  # " + SENTINELS["result"]})
    second = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
    messages.append({"role": "assistant", "content": second.choices[0].message.content})
    messages.append({"role": "user", "content": "And now?"})
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, stream=True,
                                            stream_options={"include_usage": True})
    assert SENTINELS["stream"] in "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def found(blob: bytes | str) -> list[str]:
    data = blob.encode() if isinstance(blob, str) else blob
    return [name for name, s in SENTINELS.items() if s.encode() in data]


def test_no_content_in_otlp_logs_or_local_files(tmp_path, caplog, monkeypatch):
    """Every exported byte, every ctxscope/OpenTelemetry log line and every stored file is free of the text."""
    # The default is under test: a capture opt-in left in the environment must not change it.
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("CTXSCOPE_CAPTURE_LABELS", raising=False)
    caplog.set_level(logging.DEBUG)
    handler, port = Collect(), free_port()
    sink = oteltest_sink.GrpcSink(handler, logging.getLogger("oteltest-sink"), port=port)
    sink.start()
    data_dir = tmp_path / "store"
    telemetry = setup("privacy-test", endpoint=f"http://127.0.0.1:{port}", protocol="grpc", set_global=False,
                      instrument=False, store=True, data_dir=data_dir, export_interval_millis=3_600_000)
    instrumentor = OpenAIInstrumentor()
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    try:
        with ProviderServer() as server:
            server.reply(Reply.tool_call("read_file", {"path": "src/" + SENTINELS["arguments"] + ".py"}),
                         Reply.text("Fixed it. " + SENTINELS["response"]),
                         Reply.text("Nothing else. " + SENTINELS["stream"]))
            with ctxscope.session("privacy-session"):
                conversation(server.openai_client())
            # The sentinels did reach the provider: the scan below looks for text that was really sent.
            sent = json.dumps([r.body for r in server.requests])
            assert set(found(sent)) == set(SENTINELS) - {"stream"}
        telemetry.force_flush(10_000)
    finally:
        instrumentor.uninstrument()
        telemetry.shutdown()
        sink.stop()

    assert handler.spans >= 3, "the receiver got the model-call spans"
    exported = b"".join(handler.payloads)
    assert b"llm.context.tokens" in exported and b"privacy-session" in exported  # it is the real export
    assert found(exported) == []

    ours = [r for r in caplog.records if not r.name.startswith(PROVIDER_LOGGERS)]
    assert found("\n".join(r.getMessage() + repr(r.args) for r in ours)) == []

    files = [p for p in Path(data_dir).rglob("*") if p.is_file()]
    assert files, "the local store kept the calls"
    stored = b"".join(p.read_bytes() for p in files)
    assert b"privacy-session" in stored
    assert len(telemetry.store.read("privacy-session")) == 3
    assert found(stored) == []
