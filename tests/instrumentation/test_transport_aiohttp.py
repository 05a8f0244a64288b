"""The HTTP transport layer's aiohttp hook (ctxscope_http) with real aiohttp sessions against ctxscope.testing's server.

The mirror of ``test_transport_http.py``: what the caller gets is compared
byte for byte with the layer on and off, read in each of aiohttp's ways;
the server reports input by its documented rule (``reported_input_tokens``),
counting is chars/4.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest

aiohttp = pytest.importorskip("aiohttp")

import httpx  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from ctxscope.instrumentation.http import HTTPInstrumentor  # noqa: E402
from ctxscope.instrumentation.http import _aiohttp, _frames  # noqa: E402
from ctxscope.schema import Attr, GenAI  # noqa: E402
from ctxscope.testing import ProviderServer, Reply, reported_input_tokens  # noqa: E402

from _instr_support import attr, categories, instrumented  # noqa: E402

SYSTEM = {"role": "system", "content": "You are terse."}  # 14 chars -> 4 tokens
HELLO = {"role": "user", "content": "hello there"}  # 11 chars -> 3 tokens
CHAT = {"model": "gpt-4o", "messages": [SYSTEM, HELLO]}
STREAMED = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
# The server: "system" 2 + "You are terse." 4 + "user" 1 + "hello there" 3 + 10 hidden = 20
CHAT_REPORTED = 20
OVERSIZED = 33 * 1024 * 1024  # past the 32 MB limit
PATH = "/v1/chat/completions"


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def tel(server, monkeypatch):
    with instrumented(server, monkeypatch, HTTPInstrumentor) as t:
        yield t


async def _read(response, how: str) -> list[bytes]:
    """The body as a caller reads it: each of aiohttp's ways."""
    if how == "read":
        return [await response.read()]
    if how == "text":
        return [(await response.text()).encode()]
    if how == "lines":
        return [line async for line in response.content]
    if how == "iter_any":
        return [chunk async for chunk in response.content.iter_any()]
    if how == "iter_chunked":
        return [chunk async for chunk in response.content.iter_chunked(5)]
    if how == "readline":
        lines = []
        while line := await response.content.readline():
            lines.append(line)
        return lines
    raise AssertionError(how)


async def _exchange(server, reply: Reply, *, how: str = "read", body=None, data: bytes | None = None,
                    path: str = PATH, method: str = "POST"):
    """One request as a caller makes it; (status, chunks as received, the exception or None)."""
    server.reset()
    server.reply(reply)
    chunks: list[bytes] = []
    error = None
    status = None
    async with aiohttp.ClientSession() as session:
        try:
            kwargs = {"data": data} if data is not None else {"json": body if body is not None else CHAT}
            async with session.request(method, server.base_url + path, **kwargs) as response:
                status = response.status
                chunks = await _read(response, how)
        except Exception as exc:  # noqa: BLE001 - compared on and off
            error = exc
    return status, chunks, error


def _same(off, on) -> None:
    status_off, chunks_off, error_off = off
    status_on, chunks_on, error_on = on
    assert status_on == status_off
    assert b"".join(chunks_on) == b"".join(chunks_off)
    assert type(error_on) is type(error_off) and str(error_on) == str(error_off)


CASES = {
    "normal": (Reply.text("hello back"), False),
    "streamed": (Reply.text("hello back to you"), True),
    "429": (Reply.error(429, "slow down"), False),
    "429-streamed": (Reply.error(429, "slow down"), True),
    "500": (Reply.error(500, "boom"), False),
    "reset-mid-stream": (Reply(content="one two three four five", reset_after_bytes=300), True),
    "reset-mid-body": (Reply(content="one two three four five", reset_after_bytes=40), False),
}


@pytest.mark.parametrize("how", ["read", "iter_any", "lines"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_caller_gets_the_same_bytes_and_exceptions_on_and_off(server, monkeypatch, case, how):
    """Normal, streamed, 429, 500, resets, read three ways: status, bytes and exception (type, message) unchanged."""
    reply, stream = CASES[case]
    body = STREAMED if stream else CHAT
    off = asyncio.run(_exchange(server, reply, how=how, body=body))
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        on = asyncio.run(_exchange(server, reply, how=how, body=body))
        spans = tel.calls()
    _same(off, on)
    assert len(spans) == 1
    span = spans[0]
    if case.startswith("reset"):
        assert off[2] is not None and span.status.status_code is StatusCode.ERROR
        assert attr(span, "error.type") == type(on[2]).__qualname__ == "ClientPayloadError"
    elif case.startswith(("429", "500")):
        assert attr(span, "error.type") == case.split("-")[0]
        assert attr(span, "http.response.status_code") == int(case.split("-")[0])
    else:
        assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
        assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"
        assert span.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("how", ["text", "iter_chunked", "readline"])
def test_every_way_of_reading_a_stream_gives_the_usage(tel, server, how):
    """text(), iter_chunked(5) (events split mid-line), readline(): the same bytes as off, usage and id read."""
    on = asyncio.run(_exchange(server, Reply.text("hello back to you"), how=how, body=STREAMED))
    assert on[2] is None and b"[DONE]" in b"".join(on[1])
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


def test_bytes_pushed_back_and_read_again_are_counted_once(tel, server):
    """unread_data (deprecated, still in aiohttp 3.x) puts read bytes back: the caller reads them twice, the
    measure once. Before the fix the JSON body was fed as its first 10 bytes twice over, which does not
    parse: no usage, no response id. Now: the server's 20 reported, its id read."""
    import warnings

    async def go():
        server.reset()
        server.reply(Reply.text("fine"))
        async with aiohttp.ClientSession() as session:
            async with session.post(server.base_url + PATH, json=CHAT) as response:
                first = await response.content.read(10)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    response.content.unread_data(first)
                return first, await response.read()

    first, whole = asyncio.run(go())
    assert whole.startswith(first) and len(first) == 10  # the caller got the pushed-back bytes again
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"


def test_the_annotation_is_the_sdk_instrumentors(tel, server):
    """A bytes body (data=, as google-genai sends it): system 4 + prompts 3, reported 20, model and finish reason."""
    import json

    asyncio.run(_exchange(server, Reply.text("fine"), data=json.dumps(CHAT).encode()))
    span = tel.one_call()
    assert span.name == "chat gpt-4o"
    assert attr(span, GenAI.PROVIDER_NAME) == "openai"
    assert categories(span) == {"system": 4, "prompts": 3}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert attr(span, GenAI.USAGE_INPUT_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_FINISH_REASONS) == ("stop",)


def test_a_lower_case_method_and_the_anthropic_api(tel, server):
    """session.request("post", .../v1/messages): recognised like POST; provider and reported input of Messages."""
    body = {"model": "claude-x", "max_tokens": 16, "messages": [HELLO], "stream": True}
    status, chunks, error = asyncio.run(_exchange(server, Reply.text("hi"), body=body, path="/v1/messages",
                                                  method="post", how="lines"))
    assert status == 200 and error is None
    span = tel.one_call()
    assert attr(span, GenAI.PROVIDER_NAME) == "anthropic"
    assert attr(span, Attr.REPORTED_TOKENS) == reported_input_tokens({"messages": [HELLO]}, "anthropic.messages")
    assert attr(span, GenAI.RESPONSE_ID) == "msg_000001"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_an_oversized_response_passes_unread(server, caplog, monkeypatch, stream):
    """A response over 32 MB reaches the caller whole, byte for byte as with the layer off; the call has no
    usage, and that is said (once a process)."""
    monkeypatch.setattr(_frames, "_warned", set())
    reply = Reply.text("x" * OVERSIZED)
    body = STREAMED if stream else CHAT
    off = asyncio.run(_exchange(server, reply, how="iter_any", body=body))
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel, \
            caplog.at_level(logging.WARNING, logger="ctxscope.instrumentation"):
        on = asyncio.run(_exchange(server, reply, how="iter_any", body=body))
        span = tel.one_call()
    _same(off, on)
    status, chunks, error = on
    assert error is None and status == 200
    assert b"x" * OVERSIZED in b"".join(chunks)
    assert attr(span, Attr.REPORTED_TOKENS) is None
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7
    assert any("over 33554432 bytes is not read" in r.getMessage() for r in caplog.records)


def test_a_reset_mid_stream_reaches_the_caller_as_the_very_exception_aiohttp_set(tel, server):
    """Exception identity: the exception the caller's read raises is the object aiohttp set on the reader
    (``response.content.exception()``), not a copy or a wrapper; the call fails with its type."""
    async def run():
        server.reset()
        server.reply(Reply(content="one two three four five", reset_after_bytes=300))
        async with aiohttp.ClientSession() as session:
            async with session.post(server.base_url + PATH, json=STREAMED) as response:
                try:
                    async for _ in response.content.iter_any():
                        pass
                except aiohttp.ClientError as exc:
                    return exc, response.content.exception()
        return None, None

    caught, set_on_reader = asyncio.run(run())
    assert caught is not None and caught is set_on_reader
    span = tel.one_call()
    assert span.status.status_code is StatusCode.ERROR
    assert attr(span, "error.type") == type(caught).__qualname__


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream-sse"])
def test_a_json_body_is_the_callers_own_and_stays_untouched(tel, server, stream):
    """json= to Gemini's path (the model in the URL): measured, the model named; the caller's dict unchanged."""
    import copy

    body = {"contents": [{"role": "user", "parts": [{"text": "hello there"}]}],
            "systemInstruction": {"parts": [{"text": "You are terse."}]}}
    before = copy.deepcopy(body)
    path = ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" if stream
            else "/v1beta/models/gemini-2.5-flash:generateContent")
    status, chunks, error = asyncio.run(_exchange(server, Reply.text("hi"), body=body, path=path, how="lines"))
    assert status == 200 and error is None
    assert body == before and "model" not in body
    span = tel.one_call()
    assert span.name == "chat gemini-2.5-flash"
    assert attr(span, GenAI.PROVIDER_NAME) == "gcp.gemini"
    assert categories(span) == {"system": 4, "prompts": 3}
    served = server.requests[-1]
    assert attr(span, Attr.REPORTED_TOKENS) == reported_input_tokens(served.body, served.api) > 0


def test_an_oversized_request_passes_unread(tel, server, caplog, monkeypatch):
    """A request body over 32 MB is not read (said once); the request and its answer are the caller's as ever."""
    monkeypatch.setattr(_frames, "_warned", set())
    big = {**CHAT, "messages": [SYSTEM, {"role": "user", "content": "y" * OVERSIZED}]}
    with caplog.at_level(logging.WARNING, logger="ctxscope.instrumentation"):
        import json

        status, chunks, error = asyncio.run(_exchange(server, Reply.text("ok"), data=json.dumps(big).encode()))
    assert status == 200 and error is None and b"chatcmpl" in b"".join(chunks)
    assert tel.calls() == []
    assert any("model request over 33554432 bytes is not read" in r.getMessage() for r in caplog.records)


def test_a_stream_reaches_the_caller_as_it_arrives(tel, server):
    """Events 0.3 s apart: the first piece arrives long before the stream ends (no buffering)."""
    async def run():
        server.reset()
        server.reply(Reply(content="one two three", stream_interval_s=0.3))
        arrivals = []
        async with aiohttp.ClientSession() as session:
            start = time.monotonic()
            async with session.post(server.base_url + PATH, json={**CHAT, "stream": True}) as response:
                async for _ in response.content.iter_any():
                    arrivals.append(time.monotonic() - start)
        return arrivals

    arrivals = asyncio.run(run())
    assert arrivals[-1] - arrivals[0] > 1.0  # 6 events, 5 gaps of 0.3 s
    assert arrivals[0] < 0.3
    assert tel.one_call() is not None


def test_requests_to_other_urls_are_not_read(tel, server, monkeypatch):
    """Another path, a GET: the body is never looked at, the response's reader stays aiohttp's own class."""
    from aiohttp.streams import StreamReader

    looked = []
    original = _aiohttp._content
    monkeypatch.setattr(_aiohttp, "_content", lambda kwargs: looked.append(1) or original(kwargs))

    async def run():
        async with aiohttp.ClientSession() as session:
            async with session.post(server.base_url + "/v1/embeddings", json=CHAT) as response:
                kinds = [type(response.content)]
                await response.read()
            async with session.get(server.base_url + PATH) as response:
                kinds.append(type(response.content))
                await response.read()
            assert looked == [] and tel.calls() == []
            async with session.post(server.base_url + PATH, json=CHAT) as response:  # the control: read
                kinds.append(type(response.content))
                await response.read()
        return kinds

    kinds = asyncio.run(run())
    assert kinds[:2] == [StreamReader, StreamReader] and kinds[2] is not StreamReader
    assert looked == [1] and len(tel.calls()) == 1


@pytest.mark.parametrize("url,maybe", [
    ("http://h/v1/chat/completions", True),
    ("/v1/chat/completions", True),  # relative, to a session's base_url
    ("http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", True),
    ("http://h/v1/chat%2Fcompletions", True),  # percent-encoded: decoded as the path is
    ("http://h/v1/messages#top", True),
    ("http://h/v1/embeddings", False),
    ("http://h/v1/chat/completions/x?y=1", False),
    ("http://h/search?q=/chat/completions", False),  # the ending in the query is not the path's
])
def test_the_url_test_reads_the_path_only(url, maybe):
    """The cheap test on str and yarl URLs: the path's ending, whatever the query, fragment or escapes."""
    from yarl import URL

    assert _aiohttp.may_be_model_url(url) is maybe
    if url.startswith("http"):
        assert _aiohttp.may_be_model_url(URL(url)) is maybe


def test_an_excluded_host_is_left_alone(server, monkeypatch):
    """CTXSCOPE_HTTP_EXCLUDE_HOSTS: a model call to that host makes no span."""
    monkeypatch.setenv("CTXSCOPE_HTTP_EXCLUDE_HOSTS", "example.invalid, 127.0.0.1")
    with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
        asyncio.run(_exchange(server, Reply.text("ok")))
        assert tel.calls() == []


def test_a_body_that_is_not_the_apis_shape_is_not_measured(tel, server):
    """A POST to .../chat/completions whose JSON has no messages list, or a form: no span."""
    asyncio.run(_exchange(server, Reply.text("ok"), body={"model": "gpt-4o", "prompt": "hi"}))
    asyncio.run(_exchange(server, Reply.text("ok"), data=b"model=gpt-4o"))
    assert tel.calls() == []


def test_closing_a_stream_early_ends_the_call_with_what_was_read(tel, server):
    """The caller reads the first event and closes: the span ends, unfailed, with no usage (it came later)."""
    async def run():
        server.reset()
        server.reply(Reply(content="one two three", stream_interval_s=0.2))
        async with aiohttp.ClientSession() as session:
            response = await session.post(server.base_url + PATH, json=STREAMED)
            first = await response.content.readline()
            response.close()
        return first

    assert asyncio.run(run()).startswith(b"data: ")
    span = tel.one_call()
    assert span.status.status_code is StatusCode.UNSET
    assert attr(span, Attr.REPORTED_TOKENS) is None
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7


def test_a_response_dropped_unread_ends_its_call_when_collected(tel, server):
    """A response neither read nor closed: the span ends once the response is garbage-collected."""
    async def run():
        async with aiohttp.ClientSession() as session:
            response = await session.post(server.base_url + PATH, json=CHAT)
            await asyncio.sleep(0.3)  # the body arrives: until then the connection holds the response
            assert tel.calls() == []
            del response
            gc.collect()

    asyncio.run(run())
    span = tel.one_call()
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7


def test_an_error_event_in_a_stream_fails_the_call_with_its_type(tel, server):
    """A 200 stream that breaks off with the provider's error event: error.type is the event's error type."""
    status, chunks, error = asyncio.run(_exchange(server, Reply(content="one two", stream_error=True),
                                                  body={**CHAT, "stream": True}, how="lines"))
    assert status == 200 and error is None and b"error" in b"".join(chunks)
    span = tel.one_call()
    assert span.status.status_code is StatusCode.ERROR
    assert attr(span, "error.type") == "server_error"


def test_raise_for_status_fails_the_call_with_the_callers_exception(tel, server):
    """ClientSession(raise_for_status=True): the caller gets ClientResponseError, as bare; the span records it."""
    async def run():
        server.reset()
        server.reply(Reply.error(429, "slow down"))
        async with aiohttp.ClientSession(raise_for_status=True) as session:
            try:
                await session.post(server.base_url + PATH, json=CHAT)
            except aiohttp.ClientResponseError as exc:
                return exc.status
        return None

    assert asyncio.run(run()) == 429
    span = tel.one_call()
    assert attr(span, "error.type") == "ClientResponseError"


# ---------------------------------------------------------------------------
# httpx over aiohttp: one span per call, measured at the httpx hook
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_httpx_over_aiohttp_makes_one_span(tel, server, stream):
    """LiteLLM's aiohttp transport under an httpx.AsyncClient: the httpx hook measures, the aiohttp one passes."""
    transport_module = pytest.importorskip("litellm.llms.custom_httpx.aiohttp_transport")

    async def run():
        server.reset()
        server.reply(Reply.text("hello back"))
        session = aiohttp.ClientSession()
        transport = transport_module.LiteLLMAiohttpTransport(client=session)
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:
            if stream:
                async with client.stream("POST", server.base_url + PATH, json=STREAMED) as response:
                    body = b"".join([chunk async for chunk in response.aiter_bytes()])
            else:
                body = (await client.post(server.base_url + PATH, json=CHAT)).content
        await session.close()
        return body

    body = asyncio.run(run())
    assert b"chatcmpl-000001" in body
    span = tel.one_call()
    assert attr(span, Attr.REPORTED_TOKENS) == CHAT_REPORTED
    assert attr(span, GenAI.RESPONSE_ID) == "chatcmpl-000001"


def test_uninstrumenting_puts_aiohttp_back(server, monkeypatch):
    """After uninstrument, ClientSession._request is aiohttp's own function again."""
    original = vars(aiohttp.ClientSession)["_request"]
    with instrumented(server, monkeypatch, HTTPInstrumentor):
        assert vars(aiohttp.ClientSession)["_request"] is not original
        assert vars(aiohttp.ClientSession)["_request"].__wrapped__ is original
    assert vars(aiohttp.ClientSession)["_request"] is original


async def _litellm_aiohttp_openai_stream(server) -> tuple[str, str]:
    """LiteLLM's aiohttp_openai provider asked for a stream: (the exception's type, its message's first line)."""
    import litellm

    litellm.suppress_debug_info = True
    server.reset()
    server.reply(Reply.text("hello back to you"))
    try:
        chunks = await litellm.acompletion(model="aiohttp_openai/gpt-4o", messages=[SYSTEM, HELLO],
                                           api_base=server.openai_base_url, api_key="k", max_tokens=16, stream=True)
        async for _ in chunks:
            pass
    except Exception as error:  # noqa: BLE001 - LiteLLM's own, compared on and off
        return type(error).__qualname__, str(error).splitlines()[0].replace(server.base_url, "<server>")
    return "", ""


def test_litellms_aiohttp_openai_stream_raises_on_its_own(server, monkeypatch):
    """A known gap that is LiteLLM's (1.110): its aiohttp_openai provider reads an event stream with
    ``response.json()``, so an async stream raises APIConnectionError ("Attempt to decode JSON with unexpected
    mimetype: text/event-stream"), bare as under ctxscope: the same type and message. The request reached the
    server; ctxscope's span for it ends (nothing read: no usage) once the unread response is collected.
    One event loop for both (LiteLLM keeps its aiohttp session across calls)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the import: no network for prices
    pytest.importorskip("litellm")

    async def both():
        bare = await _litellm_aiohttp_openai_stream(server)
        with instrumented(server, monkeypatch, HTTPInstrumentor) as tel:
            on = await _litellm_aiohttp_openai_stream(server)
            served = len(server.requests)
            gc.collect()
            span = tel.one_call()
        return bare, on, served, span

    bare, on, served, span = asyncio.run(both())
    assert bare[0] == "APIConnectionError" and "unexpected mimetype: text/event-stream" in bare[1]
    assert on == bare
    assert served == 1
    assert attr(span, Attr.ESTIMATED_TOKENS) == 7  # the request was read: system 4 + prompt 3
    assert attr(span, Attr.REPORTED_TOKENS) is None  # the body was never read, by LiteLLM or ctxscope
