"""Gemini and Ollama wire formats (ctxscope.core.apis): items worked out by hand, and through the transport layer.

Counting is chars/4 (``ceil(chars / 4)`` per item); the server reports input
by its documented rule (chars/4 of every string under the context fields,
plus 10 hidden tokens).
"""

from __future__ import annotations

import base64
import struct
import zlib

import httpx
import pytest

from ctxscope.core.apis import gemini
from ctxscope.core.framing import framing_items
from ctxscope.instrumentation.http import HTTPInstrumentor
from ctxscope.core.items import items_from_request
from ctxscope.schema import Attr, GenAI
from ctxscope.testing import ProviderServer, Reply, reported_input_tokens

from _instr_support import attr, categories, instrumented, no_content


def _png(width: int, height: int) -> str:
    """A PNG header of the given size, base64 (enough for the size reader)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk).decode()


GEMINI_BODY = {
    "systemInstruction": {"parts": [{"text": "You are terse."}]},  # 14 chars
    "tools": [{"functionDeclarations": [{"name": "read", "description": "Read."}]}, {"googleSearch": {}}],
    "contents": [
        {"role": "user", "parts": [{"text": "hello there"}, {"inlineData": {"mimeType": "image/png",
                                                                            "data": _png(1000, 500)}}]},
        {"role": "model", "parts": [{"text": "thinking it over", "thought": True},
                                    {"functionCall": {"name": "read", "args": {"path": "a.py"}}},
                                    {"thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read", "response": {"output": "x = 1"}}}]},
        {"role": "user", "parts": [{"someNewPart": {"k": "v"}}]},
    ],
}


def test_gemini_items_worked_out_by_hand():
    """System, a declaration, a built-in tool, text, an image by Google's tiles, thinking, a call, its result."""
    items = items_from_request(GEMINI_BODY, gemini.API)
    parts = [(i.part, i.chars, i.fixed_tokens, i.label) for i in items]
    assert parts == [
        ("system", 14, None, None),
        ("tools/read", len('{"name":"read","description":"Read."}'), None, "read"),
        ("tools/server/googleSearch", len('{"googleSearch":{}}'), None, "googleSearch"),
        ("prompts/text", 11, None, None),
        # 1000x500 px: both sides over 384, so 258 per 768-px tile: 2 x 1 tiles.
        ("prompts/media/image", 0, 516, None),
        ("assistant/thinking", 16, None, None),
        ("assistant/calls/read", len('{"path":"a.py"}'), None, "read"),
        ("results/read", len('{"output":"x = 1"}'), None, "read"),  # paired with its call by name
        ("prompts/text", len('{"someNewPart":{"k":"v"}}'), None, None),  # an unknown part: its JSON
    ]


def test_gemini_framing_is_the_gemma_turn_markup():
    """3 + the role per content, one more turn for the system instruction, 3 to prime the reply."""
    count = len  # one token a character, to see the roles
    framing = {i.label: i.fixed_tokens for i in framing_items(GEMINI_BODY, gemini.API, count)}
    # contents: user 3+4, model 3+5, user 3+4, user 3+4; system: 3 + "user" 4
    assert framing == {"messages": 7 + 8 + 7 + 7 + 7, "priming": 3}


def test_ollama_items_worked_out_by_hand():
    body = {"model": "llama3.2", "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "look", "images": ["aGVsbG8="]},
        {"role": "assistant", "content": "", "thinking": "hmm",
         "tool_calls": [{"function": {"name": "read", "arguments": {"path": "a.py"}}}]},
        {"role": "tool", "content": "x = 1", "tool_name": "read"},
    ], "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}]}
    parts = [(i.part, i.chars, i.fixed_tokens) for i in items_from_request(body, "ollama.chat")]
    assert parts == [
        ("tools/read", len('{"type":"function","function":{"name":"read","parameters":{}}}'), None),
        ("system", 14, None),
        ("prompts/text", 4, None),
        ("prompts/media/image", 0, 768),
        ("assistant/thinking", 3, None),
        ("assistant/calls/read", len('{"path":"a.py"}'), None),
        ("results/read", 5, None),
    ]


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    with instrumented(server, monkeypatch, HTTPInstrumentor) as t:
        yield t


GEMINI_REQUEST = {"systemInstruction": {"parts": [{"text": "You are terse."}]},
                  "contents": [{"role": "user", "parts": [{"text": "hello there"}]}]}


@pytest.mark.parametrize("path", ["/v1beta/models/gemini-2.5-flash:generateContent",
                                  "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                                  "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"],
                         ids=["json", "json-array-stream", "sse-stream"])
def test_gemini_through_the_transport(tel, server, path):
    """Each framing: the model from the path, system 4 + prompts 3, reported = the server's count, id, cache."""
    server.reply(Reply(content="fine then", cache_read_tokens=5))
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", server.base_url + path, json=GEMINI_REQUEST) as response:
            raw = b"".join(response.iter_raw())
    assert raw  # the caller got the body
    span = tel.one_call()
    assert span.name == "chat gemini-2.5-flash"
    assert attr(span, GenAI.PROVIDER_NAME) == "gcp.gemini"
    assert categories(span) == {"system": 4, "prompts": 3}
    reported = reported_input_tokens(GEMINI_REQUEST, "gemini.generate_content")
    # The server counts every string: "You are terse." 4, the role "user" 1, "hello there" 3, + 10.
    assert attr(span, Attr.REPORTED_TOKENS) == reported == 4 + 1 + 3 + 10
    assert attr(span, GenAI.USAGE_CACHE_READ_INPUT_TOKENS) == 5
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == reported
    assert attr(span, GenAI.RESPONSE_ID) == "gemresp-000001"
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


@pytest.mark.parametrize("stream", [None, False, True], ids=["default-stream", "json", "stream"])
def test_ollama_through_the_transport(tel, server, stream):
    """No "stream" key means a stream (JSON lines): prompt_eval_count is the reported input either way."""
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": "hello there"}]}
    if stream is not None:
        body["stream"] = stream
    with httpx.Client(timeout=30) as client:
        response = client.post(server.base_url + "/api/chat", json=body)
    assert response.headers["content-type"] == ("application/json" if stream is False else "application/x-ndjson")
    span = tel.one_call()
    assert attr(span, GenAI.PROVIDER_NAME) == "ollama"
    assert categories(span) == {"prompts": 3}
    assert attr(span, Attr.REPORTED_TOKENS) == reported_input_tokens(body, "ollama.chat") == 1 + 3 + 10
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


def test_no_content_on_the_transports_spans(tel, server):
    """Content capture off (the default): the request's text is in no span attribute or event."""
    secret = "SENTINEL-4e1d"
    body = {"model": "llama3.2", "stream": False, "messages": [{"role": "user", "content": "note " + secret}]}
    server.reply(Reply.text("echo " + secret))
    with httpx.Client(timeout=30) as client:
        client.post(server.base_url + "/api/chat", json=body)
    for span in tel.spans():
        assert no_content(span, secret)


def test_content_capture_opted_in_gives_gemini_inputs_and_outputs(server, monkeypatch):
    """OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only: GenAI-shaped input, system, tools, output."""
    import json

    from ctxscope.testing import ToolCall

    server.reset()
    telemetry = __import__("_instr_support").make_telemetry()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    instrumentor = HTTPInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider, tracker=telemetry.tracker)
    try:
        server.reply(Reply.tool_calls_([ToolCall("read", {"path": "a.py"})], content="reading"))
        body = {**GEMINI_REQUEST, "tools": [{"functionDeclarations": [{"name": "read", "description": "Read."}]}]}
        with httpx.Client(timeout=30) as client:
            client.post(server.base_url + "/v1beta/models/gemini-2.5-flash:generateContent", json=body)
    finally:
        instrumentor.uninstrument()
    span = telemetry.one_call()
    assert json.loads(attr(span, GenAI.SYSTEM_INSTRUCTIONS)) == [{"type": "text", "content": "You are terse."}]
    assert json.loads(attr(span, GenAI.INPUT_MESSAGES)) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello there"}]}]
    assert json.loads(attr(span, GenAI.TOOL_DEFINITIONS)) == [
        {"type": "function", "name": "read", "description": "Read."}]
    assert json.loads(attr(span, GenAI.OUTPUT_MESSAGES)) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "reading"},
                                        {"type": "tool_call", "id": None, "name": "read",
                                         "arguments": {"path": "a.py"}}], "finish_reason": "stop"}]


def test_a_gemini_body_is_recognised_by_inspect(tmp_path):
    """``ctxscope inspect`` on a Gemini body: detected by its contents, system 4 + prompts 3 (chars/4)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from ctxscope.core.items import detect_api

    assert detect_api(GEMINI_REQUEST) == gemini.API
    path = tmp_path / "gemini.json"
    path.write_text(json.dumps(GEMINI_REQUEST))
    done = subprocess.run([str(Path(sys.executable).parent / "ctxscope"), "inspect", str(path), "--tokenizer",
                           "chars", "--no-framing"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "gemini.generate_content" in done.stdout
    rows: dict[str, str] = {}
    for line in done.stdout.splitlines():  # the category table comes first; the parts table repeats names
        words = line.split()
        if words and words[0] in ("system", "prompts", "estimated"):
            rows.setdefault(words[0], words[1])
    assert rows == {"system": "4", "prompts": "3", "estimated": "7"}
