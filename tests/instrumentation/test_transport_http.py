"""The HTTP transport layer (ctxscope_http) with real httpx / httpx2 clients against ctxscope.testing's server.

What the caller gets is compared byte for byte with the layer on and off;
the server reports input by its documented rule, so reported values are
worked out from the request (``reported_input_tokens``); counting is chars/4.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import httpx
import httpx2
import pytest
from opentelemetry.trace import StatusCode

from ctxscope.instrumentation.http import HTTPInstrumentor
from ctxscope.instrumentation.http import _frames
from ctxscope.instrumentation.http._send import tee_classes
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.schema import Attr, GenAI
from ctxscope.testing import ProviderServer, Reply, reported_input_tokens

from _instr_support import attr, categories, instrumented

LIBRARIES = (httpx, httpx2)
SYSTEM = {"role": "system", "content": "You are terse."}  # 14 chars -> 4 tokens
HELLO = {"role": "user", "content": "hello there"}  # 11 chars -> 3 tokens
CHAT = {"model": "gpt-4o", "messages": [SYSTEM, HELLO]}
# The server: "system" 2 + "You are terse." 4 + "user" 1 + "hello there" 3 + 10 hidden = 20
CHAT_REPORTED = 20
OVERSIZED = 33 * 1024 * 1024  # past the 32 MB limit


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    with instrumented(server, monkeypatch, HTTPInstrumentor) as t:
        yield t


def _exchange(library, server, reply: Reply, body: dict, *, stream: bool, path: str = "/v1/chat/completions"):
    """One POST as a caller makes it; (status, chunks as received, the exception or None)."""
    server.reset()
    server.reply(reply)
    chunks: list[bytes] = []
    error = None
    status = None
    with library.Client(timeout=30) as client:
        try:
            if stream:
                with client.stream("POST", server.base_url + path, json=body) as response:
                    status = response.status_code
                    for chunk in response.iter_raw():
                        chunks.append(chunk)
            else:
                response = client.post(server.base_url + path, json=body)
                status = response.status_code
                chunks.append(response.content)
        except Exception as exc:  # noqa: BLE001 - compared on and off
            error = exc
    return status, chunks, error


async def _exchange_async(library, server, reply: Reply, body: dict, *, stream: bool):
    server.reset()
    server.reply(reply)
    chunks: list[bytes] = []
    error = None
    status = None
    async with library.AsyncClient(timeout=30) as client:
        try:
            if stream:
                async with client.stream("POST", server.base_url + "/v1/chat/completions", json=body) as response:
                    status = response.status_code
                    async for chunk in response.aiter_raw():
                        chunks.append(chunk)
            else:
                response = await client.post(server.base_url + "/v1/chat/completions", json=body)
                status = response.status_code
                chunks.append(response.content)
        except Exception as exc:  # noqa: BLE001
            error = exc
    return status, chunks, error


CASES = {
    "normal": (Reply.text("hello back"), False),
    "streamed": (Reply.text("hello back to you"), True),
    "429": (Reply.error(429, "slow down"), False),
    "429-streamed": (Reply.error(429, "slow down"), True),
    "500": (Reply.error(500, "boom"), False),
    "reset-mid-stream": (Reply(content="one two three four five", reset_after_bytes=300), True),
    "reset-mid-body": (Reply(content="one two three four five", reset_after_bytes=40), False),
}


def _same(off, on) -> None:
    status_off, chunks_off, error_off = off
    status_on, chunks_on, error_on = on
    assert status_on == status_off
    assert b"".join(chunks_on) == b"".join(chunks_off)
    assert type(error_on) is type(error_off) and str(error_on) == str(error_off)


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_caller_gets_the_same_bytes_and_exceptions_on_and_off(server, monkeypatch, library, case):
    """Normal, streamed, 429, 500, resets: status, body bytes and exception (type, message) unchanged."""
    reply, stream = CASES[case]
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}} if stream else CHAT
    off = _exchange(library, server, reply, body, stream=stream)
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        on = _exchange(library, server, reply, body, stream=stream)
        spans = tel.calls()
    _same(off, on)
    assert len(spans) == 1
    span = spans[0]
    if case.startswith("reset"):
        assert off[2] is not None and span.status.status_code is StatusCode.ERROR
        assert attr(span, "error.type") == type(on[2]).__qualname__
    elif case.startswith(("429", "500")):
        assert attr(span, "error.type") == case.split("-")[0]
        assert attr(span, "http.response.status_code") == int(case.split("-")[0])
    else:
        assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
        assert span.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_async_clients_get_the_same_bytes_and_one_span(server, monkeypatch, library, stream):
    """AsyncClient.send: the same bytes, one span with the reported input."""
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}} if stream else CHAT
    reply = Reply.text("hello back to you")
    off = asyncio.run(_exchange_async(library, server, reply, body, stream=stream))
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        on = asyncio.run(_exchange_async(library, server, reply, body, stream=stream))
        span = tel.one_call()
    _same(off, on)
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"


def test_the_annotation_is_the_sdk_instrumentors(tel, server):
    """A raw httpx chat call: system 4 + prompts 3, reported 20, ids and finish reason from the body."""
    _exchange(httpx, server, Reply.text("fine"), CHAT, stream=False)
    span = tel.one_call()
    assert span.name == "chat gpt-4o"
    assert attr(span, GenAI.PROVIDER_NAME) == "openai"
    assert categories(span) == {"system": 4, "prompts": 3}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_an_oversized_response_passes_unread(server, caplog, monkeypatch, stream):
    """A response over 32 MB reaches the caller whole, byte for byte as with the layer off; the call has no
    usage, and that is said (once a process)."""
    monkeypatch.setattr(_frames, "_warned", set())
    body = {**CHAT, "stream": True} if stream else CHAT
    reply = Reply.text("x" * OVERSIZED)
    off = _exchange(httpx, server, reply, body, stream=stream)
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel, \
            caplog.at_level(logging.WARNING, logger="ctxscope.instrumentation"):
        on = _exchange(httpx, server, reply, body, stream=stream)
        span = tel.one_call()
    _same(off, on)
    status, chunks, error = on
    assert error is None and status == 200
    assert b"x" * OVERSIZED in b"".join(chunks)
    assert attr(span, Attr.REPORTED_TOKENS) is None
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert any("over 33554432 bytes is not read" in r.getMessage() for r in caplog.records)


class _BrokenError(Exception):
    """The one exception object a transport raises: the caller must get that very object."""


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("where", ["send", "mid-stream"])
def test_the_caller_gets_the_very_exception_the_transport_raised(tel, library, where):
    """Exception identity, not only type and message: a transport that raises on sending, or a body stream
    that raises after its first piece; the caller catches the same object (``is``), the call fails with its
    type."""
    error = _BrokenError("transport down")

    class Body(library.SyncByteStream):
        def __iter__(self):
            yield b'data: {"id": "chatcmpl-1", "choices": []}\n\n'
            raise error

    def answer(request):
        if where == "send":
            raise error
        return library.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    caught = None
    with library.Client(transport=library.MockTransport(answer)) as client:
        try:
            with client.stream("POST", "http://127.0.0.1:1/v1/chat/completions",
                               json={**CHAT, "stream": True}) as response:
                for _ in response.iter_raw():
                    pass
        except _BrokenError as exc:
            caught = exc
    assert caught is error
    span = tel.one_call()
    assert span.status.status_code is StatusCode.ERROR
    assert attr(span, "error.type") == "_BrokenError"


def test_the_callers_thread_never_waits_for_the_worker_reading_a_body(tel, server):
    """The next bodies of a known conversation are only peeked at on the caller's thread: with the measuring
    worker held (its run lock) and the body cache mid-read (its extend lock), two more calls go out and come
    back; once released, the worker reads them, and each call's reported input is the server's count."""
    from ctxscope.instrumentation import _worker
    from ctxscope.instrumentation.http import _send

    url = server.base_url + "/v1/chat/completions"
    server.reset()
    messages = [SYSTEM, HELLO]
    worker = _worker.worker()
    with httpx.Client(timeout=30) as client:
        assert client.post(url, json={"model": "gpt-4o", "messages": messages}).status_code == 200
        assert len(tel.calls()) == 1  # measured: the cache knows the conversation
        statuses: list[int] = []

        def two_more_calls() -> None:
            history = messages
            for turn in range(2):
                history = history + [{"role": "assistant", "content": f"ok {turn}"},
                                     {"role": "user", "content": "and then?"}]
                statuses.append(client.post(url, json={"model": "gpt-4o", "messages": history}).status_code)

        with worker._running, _send._BODIES._extending:
            caller = threading.Thread(target=two_more_calls)
            caller.start()
            caller.join(30)  # a caller that waited for either lock would still be waiting
            done = not caller.is_alive()
            pending = worker.pending
        caller.join()
        assert done and statuses == [200, 200]
        assert pending >= 4  # both calls' request and response jobs waited for the worker
    spans = tel.calls()
    served = [reported_input_tokens(r.body, r.api) for r in server.requests]
    assert [attr(s, Attr.REPORTED_TOKENS) for s in spans] == served and len(served) == 3
    assert all(attr(s, Attr.ESTIMATED_TOKENS) for s in spans)


def test_a_stream_reaches_the_caller_as_it_arrives(tel, server):
    """Events 0.3 s apart: the first piece arrives long before the stream ends (no buffering)."""
    server.reset()
    server.reply(Reply(content="one two three", stream_interval_s=0.3))
    arrivals = []
    with httpx.Client(timeout=30) as client:
        start = time.monotonic()
        with client.stream("POST", server.base_url + "/v1/chat/completions",
                           json={**CHAT, "stream": True}) as response:
            for _ in response.iter_raw():
                arrivals.append(time.monotonic() - start)
    assert arrivals[-1] - arrivals[0] > 1.0  # 6 events, 5 gaps of 0.3 s
    assert arrivals[0] < 0.3
    assert tel.one_call() is not None


def test_requests_to_other_urls_are_not_read(tel, server, monkeypatch):
    """Another path, a GET: the request body is never touched, the response stream is the library's own."""
    sync_tee, _ = tee_classes(httpx)
    reads = []
    original = httpx.Request.content

    def counted(self):
        reads.append(self.url.path)
        return original.fget(self)

    monkeypatch.setattr(httpx.Request, "content", property(counted))
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", server.base_url + "/v1/embeddings", json=CHAT) as response:
            assert not isinstance(response.stream, sync_tee)
            response.read()
        client.get(server.base_url + "/v1/chat/completions")
        assert reads == [] and tel.calls() == []
        client.post(server.base_url + "/v1/chat/completions", json=CHAT)  # the control: this one is read
    assert reads == ["/v1/chat/completions"] and len(tel.calls()) == 1


def test_an_excluded_host_is_left_alone(server, monkeypatch):
    """CTXSCOPE_HTTP_EXCLUDE_HOSTS: a model call to that host makes no span."""
    monkeypatch.setenv("CTXSCOPE_HTTP_EXCLUDE_HOSTS", "example.invalid, 127.0.0.1")
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        _exchange(httpx, server, Reply.text("ok"), CHAT, stream=False)
        assert tel.calls() == []


def test_a_body_that_is_not_the_apis_shape_is_not_measured(tel, server):
    """A POST to .../chat/completions whose JSON has no messages list: no span."""
    _exchange(httpx, server, Reply.text("ok"), {"model": "gpt-4o", "prompt": "hi"}, stream=False)
    assert tel.calls() == []


# ---------------------------------------------------------------------------
# With the SDK instrumentor: one span per call, the SDK level wins
# ---------------------------------------------------------------------------

@pytest.fixture
def both(server, monkeypatch):
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        sdk = OpenAIInstrumentor()
        sdk.instrument(tracer_provider=tel.provider, tracker=tel.tracker)
        try:
            yield tel
        finally:
            sdk.uninstrument()


def test_sdk_and_transport_make_one_span_per_call(both, server):
    """create, a stream, with_raw_response: one span each, from the SDK level (its parsed objects)."""
    client = server.openai_client()
    client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, HELLO])
    for _ in client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, HELLO], stream=True,
                                            stream_options={"include_usage": True}):
        pass
    client.chat.completions.with_raw_response.create(model="gpt-4o", messages=[SYSTEM, HELLO]).parse()
    spans = both.calls()
    assert len(spans) == 3
    assert [attr(s, Attr.REPORTED_TOKENS) for s in spans] == [CHAT_REPORTED] * 3


@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
def test_with_streaming_response_gets_usage_and_id_from_the_stream(both, server, async_):
    """with_streaming_response: the SDK's call is handed to the tee, which reads usage and id as the body is read."""
    client = server.openai_client(async_=async_)
    kwargs = dict(model="gpt-4o", messages=[SYSTEM, HELLO])

    if async_:
        async def run():
            async with client.chat.completions.with_streaming_response.create(**kwargs) as response:
                return (await response.parse()).id
        rid = asyncio.run(run())
    else:
        with client.chat.completions.with_streaming_response.create(**kwargs) as response:
            rid = response.parse().id
    span = both.one_call()
    assert attr(span, GenAI.RESPONSE_ID) == rid == "chatcmpl-000001"
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED


def test_a_streamed_raw_response_gets_usage_from_its_events(both, server):
    """with_raw_response.create(stream=True): usage and id from the SSE events the caller reads."""
    client = server.openai_client()
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=[SYSTEM, HELLO], stream=True,
                                                           stream_options={"include_usage": True})
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == "ok"
    span = both.one_call()
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED


def test_the_transport_alone_measures_sdk_calls(tel, server):
    """The SDK instrumentor off: the openai SDK's own calls (httpx2) are measured at the transport."""
    client = server.openai_client()
    client.responses.create(model="gpt-4o", input="hello there")
    anthropic = server.anthropic_client()
    with anthropic.messages.stream(model="claude-x", max_tokens=16, messages=[HELLO]) as stream:
        "".join(stream.text_stream)
    chat, messages = tel.calls()
    assert attr(chat, Attr.REPORTED_TOKENS) == reported_input_tokens({"input": "hello there"}, "openai.responses")
    assert attr(messages, GenAI.PROVIDER_NAME) == "anthropic"
    assert attr(messages, Attr.REPORTED_TOKENS) == reported_input_tokens({"messages": [HELLO]}, "anthropic.messages")
    assert attr(messages, GenAI.RESPONSE_ID) == "msg_000003"  # the Responses answer took 1 and 2


def test_anthropic_raw_responses_get_usage_and_id_from_the_stream(server, monkeypatch):
    """Anthropic with_streaming_response and streamed with_raw_response: handed to the tee, usage and id read."""
    from ctxscope.instrumentation.anthropic import AnthropicInstrumentor

    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        sdk = AnthropicInstrumentor()
        sdk.instrument(tracer_provider=tel.provider, tracker=tel.tracker)
        try:
            client = server.anthropic_client()
            kwargs = dict(model="claude-x", max_tokens=16, messages=[HELLO])
            with client.messages.with_streaming_response.create(**kwargs) as response:
                first_id = response.parse().id
            raw = client.messages.with_raw_response.create(stream=True, **kwargs)
            for _ in raw.parse():
                pass
        finally:
            sdk.uninstrument()
        spans = tel.calls()
    reported = reported_input_tokens({"messages": [HELLO]}, "anthropic.messages")
    assert [attr(s, GenAI.RESPONSE_ID) for s in spans] == [first_id, "msg_000002"] == ["msg_000001", "msg_000002"]
    assert [attr(s, Attr.REPORTED_TOKENS) for s in spans] == [reported, reported]


@pytest.mark.parametrize("path,body,kind", [
    ("/v1/chat/completions", {**CHAT, "stream": True}, "server_error"),
    ("/v1/messages", {"model": "claude-x", "max_tokens": 16, "messages": [HELLO], "stream": True},
     "overloaded_error"),
], ids=["openai-chat", "anthropic"])
def test_an_error_event_in_a_stream_fails_the_call_with_its_type(tel, server, path, body, kind):
    """A 200 stream that breaks off with the provider's error event: error.type is the event's error type."""
    status, chunks, error = _exchange(httpx, server, Reply(content="one two", stream_error=True), body,
                                      stream=True, path=path)
    assert status == 200 and error is None and b"error" in b"".join(chunks)
    span = tel.one_call()
    assert span.status.status_code is StatusCode.ERROR
    assert attr(span, "error.type") == kind


def test_a_response_dropped_unread_ends_its_call_when_collected(tel, server):
    """A streamed response neither read nor closed: the span ends once the response is garbage-collected."""
    import gc

    client = httpx.Client(timeout=30)
    request = client.build_request("POST", server.base_url + "/v1/chat/completions", json=CHAT)
    response = client.send(request, stream=True)
    assert tel.calls() == []
    del response
    gc.collect()
    span = tel.one_call()
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    client.close()


def test_the_layer_works_without_aiohttp(server, monkeypatch):
    """aiohttp not importable: the layer instruments httpx as ever, and aiohttp is left alone (no error)."""
    import sys

    aiohttp = sys.modules.get("aiohttp")
    original = vars(aiohttp.ClientSession)["_request"] if aiohttp is not None else None
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp -> ImportError
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        _exchange(httpx, server, Reply.text("ok"), CHAT, stream=False)
        assert attr(tel.one_call(), Attr.REPORTED_TOKENS) == CHAT_REPORTED
        if aiohttp is not None:
            assert vars(aiohttp.ClientSession)["_request"] is original
