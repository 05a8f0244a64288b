"""The HTTP transport layer's cost: per model call at 20 / 200 / 2,000 items, and per request to an unrelated URL.

**Model call.** The 2,000-item conversation of ``bench_overhead.py`` is
posted as JSON bytes with a real ``httpx.Client`` to ``ctxscope.testing``'s
local server, growing by one user message a call. A timer wrapped around
``Client.send`` before ctxscope's wrapper (so ctxscope's wraps it) splits
each call into the HTTP exchange and what ctxscope adds around it: reading
the request body, the tracker, the span, reading the response. Each round
sends the request bare (straight to the timer) and instrumented, in
alternating order; the figure is the median over rounds of (added,
instrumented) minus (the same, bare). Target: under 1 ms.

The same with a real ``aiohttp.ClientSession`` (the aiohttp hook): a timer
put in place of ``ClientSession._request`` before ctxscope's hook (so the
hook calls it) splits the caller's ``post`` + ``read()`` into aiohttp's
exchange and what ctxscope adds, the response read through the tee
included.

**Unrelated URL.** httpx: requests to a path that is not a model endpoint
through a client with an in-memory transport (``httpx.MockTransport``: no
socket, so the few microseconds are not lost in network noise), in
alternating blocks with the layer on and off; the figure is the median
per-request difference of the blocks. aiohttp has no in-memory transport:
ctxscope's hook of ``ClientSession._request`` is timed over an original
that returns at once, against that original called directly, the same
blocks; that difference is all the hook adds to any request that is not a
model call. Target: under 5 us.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from workload import InnerTimer  # noqa: E402 - bench/ is on sys.path now

ROUNDS = 30
WARMUP = 3
BLOCKS = 40
PER_BLOCK = 2000


SIZES = (20, 200, 2000)


def model_call(items: int | None = None) -> dict[str, float]:
    import httpx
    import wrapt
    from opentelemetry.instrumentation.utils import unwrap
    from opentelemetry.sdk.trace import TracerProvider

    from bench_overhead import MODEL
    from workload import ITEMS, conversation
    from ctxscope.instrumentation.http import HTTPInstrumentor
    from ctxscope.testing import ProviderServer
    from ctxscope.telemetry.tracker import Tracker

    logging.getLogger("opentelemetry.instrumentation.instrumentor").setLevel(logging.ERROR)
    items = items or ITEMS
    messages, tools = conversation(items)
    provider = TracerProvider()
    tracker = Tracker()
    instrumentor = HTTPInstrumentor()
    instrumentor.uninstrument()
    inner = InnerTimer()
    wrapt.wrap_function_wrapper(httpx, "Client.send", inner)
    try:
        with ProviderServer() as server, httpx.Client(timeout=60) as client:
            server.record_requests = False
            instrumentor.instrument(tracer_provider=provider, tracker=tracker)
            bare_send = vars(httpx.Client)["send"].__wrapped__  # the timer, under ctxscope's wrapper
            url = server.openai_base_url + "/chat/completions"

            def call(instrumented: bool) -> tuple[float, float]:
                content = json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode()
                request = client.build_request("POST", url, content=content,
                                               headers={"content-type": "application/json"})
                started = time.perf_counter()
                response = client.send(request) if instrumented else bare_send(client, request)
                total = time.perf_counter() - started
                response.close()
                provider.force_flush()  # the measurement off the call path, untimed
                return total, inner.last

            first_total, first_sent = call(True)  # the baseline: every item counted once
            bare, instrumented, added = [], [], []
            for r in range(WARMUP + ROUNDS):
                messages.append({"role": "user", "content": f"One more thing, number {r}."})
                outside = {}
                for flag in ((False, True) if r % 2 == 0 else (True, False)):
                    total, sent = call(flag)
                    outside[flag] = (total, total - sent)
                if r >= WARMUP:
                    bare.append(outside[False][0])
                    instrumented.append(outside[True][0])
                    added.append(outside[True][1] - outside[False][1])
    finally:
        instrumentor.uninstrument()
        unwrap(httpx.Client, "send")
    return {
        "items": items,
        "rounds": ROUNDS,
        "first_call_added_ms": (first_total - first_sent) * 1e3,
        "bare_median_ms": statistics.median(bare) * 1e3,
        "instrumented_median_ms": statistics.median(instrumented) * 1e3,
        "added_median_ms": statistics.median(added) * 1e3,
        "added_p90_ms": sorted(added)[int(len(added) * 0.9)] * 1e3,
    }


def aiohttp_model_call(items: int | None = None) -> dict[str, float]:
    """The model call of :func:`model_call` sent with a real ``aiohttp.ClientSession`` (the body as bytes)."""
    import asyncio

    import aiohttp
    from opentelemetry.sdk.trace import TracerProvider

    from bench_overhead import MODEL
    from workload import ITEMS, conversation
    from ctxscope.instrumentation.http import HTTPInstrumentor
    from ctxscope.testing import ProviderServer
    from ctxscope.telemetry.tracker import Tracker

    logging.getLogger("opentelemetry.instrumentation.instrumentor").setLevel(logging.ERROR)
    items = items or ITEMS
    messages, tools = conversation(items)
    provider = TracerProvider()
    tracker = Tracker()
    instrumentor = HTTPInstrumentor()
    instrumentor.uninstrument()
    original = vars(aiohttp.ClientSession)["_request"]
    inner = [0.0]

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            inner[0] = time.perf_counter() - started

    aiohttp.ClientSession._request = timed  # type: ignore[method-assign]

    async def run(url: str) -> tuple[tuple[float, float], list[float], list[float], list[float]]:
        async with aiohttp.ClientSession() as session:
            headers = {"content-type": "application/json"}

            async def call(instrumented: bool) -> tuple[float, float]:
                content = json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode()
                started = time.perf_counter()
                if instrumented:
                    response = await session._request("POST", url, data=content, headers=headers)
                else:
                    response = await timed(session, "POST", url, data=content, headers=headers)
                requested = time.perf_counter() - started
                sent = inner[0]
                await response.content.wait_eof()  # untimed: the body's arrival is the server's time, not ours
                started = time.perf_counter()
                await response.read()  # through the tee: the measure reads the body and ends the call
                total = requested + time.perf_counter() - started
                response.release()
                provider.force_flush()  # the measurement off the call path, untimed
                return total, sent

            first_total, first_sent = await call(True)
            bare, instrumented, added = [], [], []
            for r in range(WARMUP + ROUNDS):
                messages.append({"role": "user", "content": f"One more thing, number {r}."})
                outside = {}
                for flag in ((False, True) if r % 2 == 0 else (True, False)):
                    total, sent = await call(flag)
                    outside[flag] = (total, total - sent)
                if r >= WARMUP:
                    bare.append(outside[False][0])
                    instrumented.append(outside[True][0])
                    added.append(outside[True][1] - outside[False][1])
        return (first_total, first_sent), bare, instrumented, added

    try:
        with ProviderServer() as server:
            server.record_requests = False
            instrumentor.instrument(tracer_provider=provider, tracker=tracker)
            (first_total, first_sent), bare, instrumented, added = asyncio.run(
                run(server.openai_base_url + "/chat/completions"))
    finally:
        instrumentor.uninstrument()
        aiohttp.ClientSession._request = original  # type: ignore[method-assign]
    return {
        "items": items,
        "rounds": ROUNDS,
        "first_call_added_ms": (first_total - first_sent) * 1e3,
        "bare_median_ms": statistics.median(bare) * 1e3,
        "instrumented_median_ms": statistics.median(instrumented) * 1e3,
        "added_median_ms": statistics.median(added) * 1e3,
        "added_p90_ms": sorted(added)[int(len(added) * 0.9)] * 1e3,
    }


def aiohttp_unrelated_url() -> dict[str, float]:
    """ctxscope's ``ClientSession._request`` hook over an original that returns at once, against that original."""
    import asyncio

    import aiohttp
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.instrumentation._wrappers import Telemetry
    from ctxscope.instrumentation.http._aiohttp import request_wrapper
    from ctxscope.instrumentation.http._patch import Switch
    from aiohttp.streams import StreamReader

    async def answer(self: Any, method: Any, str_or_url: Any, **kwargs: Any) -> Any:
        return None

    hook = request_wrapper(Telemetry(TracerProvider()), frozenset(), StreamReader)(answer, Switch())
    url = "http://127.0.0.1:1/v1/embeddings"
    body = {"input": "x"}

    async def run() -> dict[str, list[float]]:
        session = aiohttp.ClientSession()
        per_request: dict[str, list[float]] = {"bare": [], "ctxscope": []}
        for block in range(BLOCKS):
            for mode in (("bare", "ctxscope") if block % 2 == 0 else ("ctxscope", "bare")):
                function = answer if mode == "bare" else hook
                started = time.perf_counter()
                for _ in range(PER_BLOCK):
                    await function(session, "POST", url, json=body)
                per_request[mode].append((time.perf_counter() - started) / PER_BLOCK)
        await session.close()
        return per_request

    per_request = asyncio.run(run())
    return {
        "bare_median_us": statistics.median(per_request["bare"]) * 1e6,
        "instrumented_median_us": statistics.median(per_request["ctxscope"]) * 1e6,
        "added_median_us": statistics.median(
            [on - off for on, off in zip(per_request["ctxscope"], per_request["bare"])]) * 1e6,
    }


def hook_alone() -> dict[str, float]:
    """ctxscope's httpx ``Client.send`` hook over an original that returns at once, against that original."""
    import httpx
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.instrumentation._wrappers import Telemetry
    from ctxscope.instrumentation.http._patch import Switch
    from ctxscope.instrumentation.http._send import send_wrapper

    def answer(self: Any, request: Any, **kwargs: Any) -> Any:
        return None

    hook = send_wrapper(Telemetry(TracerProvider()), httpx, frozenset(), False)(answer, Switch())
    client = httpx.Client()
    request = client.build_request("POST", "http://127.0.0.1:1/v1/embeddings", content=b'{"input": "x"}')
    per_request: dict[str, list[float]] = {"bare": [], "ctxscope": []}
    for block in range(BLOCKS):
        for mode in (("bare", "ctxscope") if block % 2 == 0 else ("ctxscope", "bare")):
            function = answer if mode == "bare" else hook
            started = time.perf_counter()
            for _ in range(PER_BLOCK):
                function(client, request)
            per_request[mode].append((time.perf_counter() - started) / PER_BLOCK)
    client.close()
    return {
        "bare_median_us": statistics.median(per_request["bare"]) * 1e6,
        "instrumented_median_us": statistics.median(per_request["ctxscope"]) * 1e6,
        "added_median_us": statistics.median(
            [on - off for on, off in zip(per_request["ctxscope"], per_request["bare"])]) * 1e6,
    }


def unrelated_url() -> dict[str, float]:
    """Bare, a pass-through wrapt wrapper (the floor for any wrapper), and ctxscope's, in rotating blocks."""
    import httpx
    import wrapt
    from opentelemetry.instrumentation.utils import unwrap
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.instrumentation.http import HTTPInstrumentor
    from ctxscope.instrumentation.http._send import maybe_model_call
    from ctxscope.telemetry.tracker import Tracker

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"{}")

    def passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return wrapped(*args, **kwargs)

    instrumentor = HTTPInstrumentor()
    instrumentor.uninstrument()
    client = httpx.Client(transport=httpx.MockTransport(answer))
    request = client.build_request("POST", "http://127.0.0.1:1/v1/embeddings", content=b'{"input": "x"}')
    per_request: dict[str, list[float]] = {"bare": [], "wrapt": [], "ctxscope": []}
    try:
        for block in range(BLOCKS):
            for mode in (("bare", "wrapt", "ctxscope") if block % 2 == 0 else ("ctxscope", "wrapt", "bare")):
                if mode == "wrapt":
                    wrapt.wrap_function_wrapper(httpx.Client, "send", passthrough)
                elif mode == "ctxscope":
                    instrumentor.instrument(tracer_provider=TracerProvider(), tracker=Tracker())
                started = time.perf_counter()
                for _ in range(PER_BLOCK):
                    client.send(request)
                per_request[mode].append((time.perf_counter() - started) / PER_BLOCK)
                if mode == "wrapt":
                    unwrap(httpx.Client, "send")
                elif mode == "ctxscope":
                    instrumentor.uninstrument()
    finally:
        instrumentor.uninstrument()
        client.close()
    # The test itself, alone: what a request pays above wrapt's own call.
    checks = []
    for _ in range(20):
        started = time.perf_counter()
        for _ in range(10000):
            maybe_model_call(request)
        checks.append((time.perf_counter() - started) / 10000)
    medians = {k: statistics.median(v) * 1e6 for k, v in per_request.items()}
    return {
        "check_alone_median_us": statistics.median(checks) * 1e6,
        "bare_median_us": medians["bare"],
        "wrapt_passthrough_median_us": medians["wrapt"],
        "instrumented_median_us": medians["ctxscope"],
        "added_median_us": statistics.median(
            [on - off for on, off in zip(per_request["ctxscope"], per_request["bare"])]) * 1e6,
    }


def body_reading() -> dict[str, float]:
    """The transport's own part: reading the grown body (BodyCache) against parsing it whole, same run."""
    from bench_overhead import MODEL
    from workload import conversation
    from ctxscope.instrumentation.http._bodies import BodyCache
    from ctxscope.instrumentation.http._frames import loads

    messages, tools = conversation()
    cache = BodyCache()
    cache.parse(json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode(), "messages")
    grown, whole = [], []
    for r in range(ROUNDS):
        messages.append({"role": "user", "content": f"One more thing, number {r}."})
        content = json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode()
        started = time.perf_counter()
        cache.parse(content, "messages")
        middle = time.perf_counter()
        loads(content)
        whole.append(time.perf_counter() - middle)
        grown.append(middle - started)
    return {"grown_median_ms": statistics.median(grown) * 1e3, "whole_median_ms": statistics.median(whole) * 1e3,
            "body_bytes": len(content)}


def main() -> dict[str, float]:
    from bench_overhead import in_process

    import os

    figures: dict[str, float] = {}
    for items in SIZES[:-1]:
        smaller = model_call(items)
        figures[f"call_added_median_ms_{items}"] = smaller["added_median_ms"]
        figures[f"call_first_call_added_ms_{items}"] = smaller["first_call_added_ms"]
        print(f"model call, {items} items: added by ctxscope median {smaller['added_median_ms']:.3f} ms; "
              f"first call {smaller['first_call_added_ms']:.2f} ms")
    call = model_call()
    tracker = in_process()["observe_request_median_ms"]
    reading = body_reading()
    print(f"model call, {call['items']} items: bare {call['bare_median_ms']:.2f} ms, instrumented "
          f"{call['instrumented_median_ms']:.2f} ms; added by ctxscope median {call['added_median_ms']:.3f} ms, "
          f"p90 {call['added_p90_ms']:.3f} ms (target < 1 ms); first call {call['first_call_added_ms']:.2f} ms")
    print(f"  of which the tracker alone (as at the SDK level) {tracker:.3f} ms; reading the grown "
          f"{reading['body_bytes'] / 1e6:.1f} MB body {reading['grown_median_ms']:.3f} ms "
          f"(parsing it whole: {reading['whole_median_ms']:.3f} ms)")
    figures.update({f"call_{k}": v for k, v in call.items()})
    figures["tracker_alone_median_ms"] = tracker
    figures.update({f"body_{k}": v for k, v in reading.items()})
    other = unrelated_url()
    print(f"unrelated URL: bare {other['bare_median_us']:.1f} us, pass-through wrapt "
          f"{other['wrapt_passthrough_median_us']:.1f} us, instrumented {other['instrumented_median_us']:.1f} us; "
          f"added median {other['added_median_us']:.2f} us (target < 5 us); the path test alone "
          f"{other['check_alone_median_us']:.2f} us")
    figures.update({f"unrelated_{k}": v for k, v in other.items()})
    alone = hook_alone()
    print(f"httpx unrelated URL, the hook alone: the original alone {alone['bare_median_us']:.2f} us, through "
          f"ctxscope's hook {alone['instrumented_median_us']:.2f} us; added median {alone['added_median_us']:.2f} us "
          f"(target < 5 us)")
    figures.update({f"httpx_hook_alone_{k}": v for k, v in alone.items()})
    for items in SIZES:
        over = aiohttp_model_call(items)
        figures[f"aiohttp_call_added_median_ms_{items}"] = over["added_median_ms"]
        figures[f"aiohttp_call_added_p90_ms_{items}"] = over["added_p90_ms"]
        figures[f"aiohttp_call_first_call_added_ms_{items}"] = over["first_call_added_ms"]
        print(f"aiohttp model call, {items} items: bare {over['bare_median_ms']:.2f} ms; added by ctxscope median "
              f"{over['added_median_ms']:.3f} ms, p90 {over['added_p90_ms']:.3f} ms; first call "
              f"{over['first_call_added_ms']:.2f} ms")
    aio = aiohttp_unrelated_url()
    print(f"aiohttp unrelated URL: the original alone {aio['bare_median_us']:.2f} us, through ctxscope's hook "
          f"{aio['instrumented_median_us']:.2f} us; added median {aio['added_median_us']:.2f} us (target < 5 us)")
    figures.update({f"aiohttp_unrelated_{k}": v for k, v in aio.items()})
    figures["load_average"] = os.getloadavg()[0]
    print(f"load average {figures['load_average']:.2f}")
    return figures


if __name__ == "__main__":
    main()
