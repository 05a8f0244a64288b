"""The HTTP transport layer's cost: per model call at 20 / 200 / 2,000 items, and per request to an unrelated URL.

**Model call.** The 2,000-item conversation of ``bench_overhead.py`` is
posted as JSON bytes with a real ``httpx.Client`` to ``ctxscope.testing``'s
local server, growing by one user message a call. A timer wrapped around
``Client.send`` before ctxscope's wrapper (so ctxscope's wraps it) splits
each call into the HTTP exchange and what ctxscope adds around it on the
caller's thread: the look at the request (its path, its size, the fields
around the conversation), the span, keeping the response's bytes for the
measuring worker (which reads the body, runs the tracker and parses the
response off the call path; drained between calls, untimed). Each round
sends the request bare (straight to the timer) and instrumented, in
alternating order; the figure is the median over rounds of (added,
instrumented) minus (the same, bare). Target: under 1 ms.

The same with a real ``aiohttp.ClientSession`` (the aiohttp hook): a timer
put in place of ``ClientSession._request`` before ctxscope's hook (so the
hook calls it) splits the caller's ``post`` + ``read()`` into aiohttp's
exchange and what ctxscope adds, the response read through the tee
included.

**Unrelated URL.** What a request that is not a model call pays: ctxscope's
hook in place of the library's method, which calls the original with the
same arguments once its one test says "not ours". Three figures, each bare
and through the hook in paired, interleaved blocks (:func:`_paired`: the
median over rounds of the per-request difference, in the thread's CPU time,
which leaves out the time the process waits for a core):

* the hook alone, over an original that returns at once (httpx
  ``Client.send``, aiohttp ``ClientSession._request``): exactly what the
  hook adds, the figure the target is read on (the spread of the pairs is
  a few hundredths of a microsecond);
* end to end through ``httpx.Client.send`` with an in-memory transport
  (``httpx.MockTransport``), bare, a pass-through wrapt wrapper and the
  hook as the instrumentor installs it: a sanity check, whose bare request
  costs a hundred times the hook, so its paired differences spread over
  +-10 us on a loaded machine (the middle half is printed);
* with ``BENCH_TRANSPORT_CALLGRIND=1``, the end-to-end request counted in
  instructions under valgrind's callgrind (:func:`unrelated_url_instructions`),
  which do not depend on the load: the added instructions a request, their
  share of a bare request's, and that share of this run's bare CPU time.

Target: under 5 us.
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
BLOCKS = 120  # per mode; paired rounds of the unrelated-URL figures
PER_BLOCK = 500


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


def _paired(functions: dict[str, Any], call: Any, blocks: int = BLOCKS, per_block: int = PER_BLOCK) -> dict[str, Any]:
    """``call(function)`` ``per_block`` times a block, the modes' blocks interleaved (the order turning each
    block); per request, each block's wall time and its thread CPU time.

    The thread's CPU time does not count the time the process waits for a core, which is most of the noise
    on a shared machine; the figure is the median over blocks of (mode's block) minus (the first mode's block
    of the same round): a paired difference, so a slow stretch of the machine slows both sides of a pair.
    """
    modes = list(functions)
    wall: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    for block in range(blocks):
        shift = block % len(modes)
        for mode in modes[shift:] + modes[:shift]:
            function = functions[mode]
            call(function)  # warm: the mode's first request after a switch is not timed
            started, started_cpu = time.perf_counter(), time.thread_time()
            for _ in range(per_block):
                call(function)
            cpu[mode].append((time.thread_time() - started_cpu) / per_block)
            wall[mode].append((time.perf_counter() - started) / per_block)
    base = modes[0]
    out: dict[str, Any] = {"blocks": blocks, "per_block": per_block}
    for mode in modes:
        out[f"{mode}_median_us"] = statistics.median(wall[mode]) * 1e6
        out[f"{mode}_cpu_median_us"] = statistics.median(cpu[mode]) * 1e6
        if mode != base:
            out[f"{mode}_added_median_us"] = statistics.median(
                [on - off for on, off in zip(wall[mode], wall[base])]) * 1e6
            diffs = sorted(on - off for on, off in zip(cpu[mode], cpu[base]))
            out[f"{mode}_added_cpu_median_us"] = statistics.median(diffs) * 1e6
            # The middle half of the paired CPU differences: how far the figure moves from block to block.
            out[f"{mode}_added_cpu_iqr_us"] = (diffs[len(diffs) // 4] * 1e6, diffs[3 * len(diffs) // 4] * 1e6)
    return out


def aiohttp_unrelated_url() -> dict[str, Any]:
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

    async def make_session() -> Any:
        return aiohttp.ClientSession()

    loop = asyncio.new_event_loop()
    session = loop.run_until_complete(make_session())

    def call(function: Any) -> None:
        # The coroutine driven by hand: no event loop turn per request, only the hook and the original.
        coroutine = function(session, "POST", url, json=body)
        try:
            coroutine.send(None)
        except StopIteration:
            pass

    try:
        return _paired({"bare": answer, "ctxscope": hook}, call)
    finally:
        loop.run_until_complete(session.close())
        loop.close()


def hook_alone() -> dict[str, Any]:
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
    try:
        return _paired({"bare": answer, "ctxscope": hook}, lambda function: function(client, request))
    finally:
        client.close()


def unrelated_url() -> dict[str, Any]:
    """A request to a path that is not a model endpoint, end to end through ``httpx.Client.send`` with an
    in-memory transport: bare, a pass-through wrapt wrapper (the floor for any wrapper), and ctxscope's hook
    as the instrumentor installs it, switched in place per block (the installing is not timed)."""
    import httpx
    import wrapt
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
    instrumentor.instrument(tracer_provider=TracerProvider(), tracker=Tracker())
    hook = vars(httpx.Client)["send"]
    original = hook.__wrapped__
    sends = {"bare": original, "wrapt": wrapt.FunctionWrapper(original, passthrough), "ctxscope": hook}

    def call(send: Any) -> None:
        if vars(httpx.Client)["send"] is not send:
            httpx.Client.send = send  # type: ignore[method-assign]
        client.send(request)

    try:
        paired = _paired(sends, call)
    finally:
        httpx.Client.send = hook  # type: ignore[method-assign]
        instrumentor.uninstrument()
        client.close()
    # The test itself, alone: what a request pays above a plain function's call.
    checks = []
    for _ in range(20):
        started = time.perf_counter()
        for _ in range(10000):
            maybe_model_call(request)
        checks.append((time.perf_counter() - started) / 10000)
    paired["check_alone_median_us"] = statistics.median(checks) * 1e6
    return paired


CALLGRIND_REQUESTS = 1000


def _callgrind_driver(requests: int) -> None:
    """Under callgrind: the unrelated-URL request of :func:`unrelated_url`, bare and through ctxscope's hook,
    in alternating phases, each phase one dump (``--dump-before=getppid``: ``os.getppid()`` marks them)."""
    import os

    import httpx
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.instrumentation.http import HTTPInstrumentor
    from ctxscope.telemetry.tracker import Tracker

    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, content=b"{}")))
    request = client.build_request("POST", "http://127.0.0.1:1/v1/embeddings", content=b'{"input": "x"}')
    HTTPInstrumentor().instrument(tracer_provider=TracerProvider(), tracker=Tracker())
    hook = vars(httpx.Client)["send"]
    sends = {"bare": hook.__wrapped__, "ctxscope": hook}
    for send in sends.values():  # warm: first-use costs are not a request's
        httpx.Client.send = send  # type: ignore[method-assign]
        for _ in range(50):
            client.send(request)
    for mode in ("bare", "ctxscope", "bare", "ctxscope"):
        httpx.Client.send = sends[mode]  # type: ignore[method-assign]
        os.getppid()
        for _ in range(requests):
            client.send(request)
    os.getppid()


def unrelated_url_instructions(requests: int = CALLGRIND_REQUESTS) -> dict[str, Any] | None:
    """The unrelated-URL request counted in instructions (valgrind's callgrind; None without valgrind).

    Instruction counts do not depend on the machine's load: the added
    instructions per request, and their share of a bare request's, repeat to
    a few in a thousand from run to run (PYTHONHASHSEED=0). Two bare and two
    instrumented phases of ``requests`` each, in one process; the figure is
    each pair's difference per request.
    """
    import os
    import re
    import shutil
    import subprocess
    import tempfile

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([valgrind, "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}/cg",
                        sys.executable, str(Path(__file__).resolve()), "--callgrind-driver", str(requests)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        totals = []
        for index in range(1, 6):  # dump 1: start-up and warm-up; 2-5: the phases
            text = Path(out, f"cg.{index}").read_text()
            totals.append(int(re.search(r"^totals:\s*(\d+)", text, re.M).group(1)))  # type: ignore[union-attr]
    bare = [totals[1] / requests, totals[3] / requests]
    instrumented = [totals[2] / requests, totals[4] / requests]
    added = [on - off for on, off in zip(instrumented, bare)]
    return {"requests": requests, "bare_instructions": bare, "added_instructions": added,
            "added_share": [a / b for a, b in zip(added, bare)]}


def body_reading() -> dict[str, float]:
    """The worker's reading of the grown body (BodyCache.parse) against parsing it whole, same run."""
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
    print(f"  on the measuring worker, off the call path: the tracker (as at the SDK level) {tracker:.3f} ms; "
          f"reading the grown {reading['body_bytes'] / 1e6:.1f} MB body {reading['grown_median_ms']:.3f} ms "
          f"(parsing it whole: {reading['whole_median_ms']:.3f} ms)")
    figures.update({f"call_{k}": v for k, v in call.items()})
    figures["tracker_alone_median_ms"] = tracker
    figures.update({f"body_{k}": v for k, v in reading.items()})
    other = unrelated_url()
    print(f"unrelated URL, end to end (httpx, in-memory transport; {other['blocks']} paired blocks of "
          f"{other['per_block']}): bare {other['bare_median_us']:.1f} us, pass-through wrapt "
          f"{other['wrapt_median_us']:.1f} us, instrumented {other['ctxscope_median_us']:.1f} us; added by "
          f"ctxscope, thread CPU {other['ctxscope_added_cpu_median_us']:.2f} us (middle half "
          f"{other['ctxscope_added_cpu_iqr_us'][0]:.2f} to {other['ctxscope_added_cpu_iqr_us'][1]:.2f}), wall "
          f"{other['ctxscope_added_median_us']:.2f} us (target < 5 us); wrapt's, thread CPU "
          f"{other['wrapt_added_cpu_median_us']:.2f} us; the path test alone {other['check_alone_median_us']:.2f} us")
    figures.update({f"unrelated_{k}": v for k, v in other.items() if not isinstance(v, tuple)})
    if os.environ.get("BENCH_TRANSPORT_CALLGRIND") == "1":  # ~4 min on a loaded machine
        counted = unrelated_url_instructions()
        if counted is not None:
            share = statistics.mean(counted["added_share"])
            print(f"unrelated URL under callgrind ({counted['requests']} requests a phase, two pairs): bare "
                  f"{counted['bare_instructions'][0]:,.0f} instructions a request, ctxscope adds "
                  f"{counted['added_instructions'][0]:,.0f} / {counted['added_instructions'][1]:,.0f} "
                  f"({share:.2%} of a bare request: {share * other['bare_cpu_median_us']:.2f} us of this run's "
                  f"bare {other['bare_cpu_median_us']:.1f} us CPU)")
            figures["unrelated_added_instructions"] = statistics.mean(counted["added_instructions"])
            figures["unrelated_added_share"] = share
            figures["unrelated_added_us_by_instructions"] = share * other["bare_cpu_median_us"]
    alone = hook_alone()
    print(f"httpx unrelated URL, the hook alone: the original alone {alone['bare_cpu_median_us']:.2f} us, through "
          f"ctxscope's hook {alone['ctxscope_cpu_median_us']:.2f} us; added, thread CPU "
          f"{alone['ctxscope_added_cpu_median_us']:.2f} us, wall {alone['ctxscope_added_median_us']:.2f} us "
          f"(target < 5 us)")
    figures.update({f"httpx_hook_alone_{k}": v for k, v in alone.items() if not isinstance(v, tuple)})
    for items in SIZES:
        over = aiohttp_model_call(items)
        figures[f"aiohttp_call_added_median_ms_{items}"] = over["added_median_ms"]
        figures[f"aiohttp_call_added_p90_ms_{items}"] = over["added_p90_ms"]
        figures[f"aiohttp_call_first_call_added_ms_{items}"] = over["first_call_added_ms"]
        print(f"aiohttp model call, {items} items: bare {over['bare_median_ms']:.2f} ms; added by ctxscope median "
              f"{over['added_median_ms']:.3f} ms, p90 {over['added_p90_ms']:.3f} ms; first call "
              f"{over['first_call_added_ms']:.2f} ms")
    aio = aiohttp_unrelated_url()
    print(f"aiohttp unrelated URL, the hook alone: the original alone {aio['bare_cpu_median_us']:.2f} us, through "
          f"ctxscope's hook {aio['ctxscope_cpu_median_us']:.2f} us; added, thread CPU "
          f"{aio['ctxscope_added_cpu_median_us']:.2f} us, wall {aio['ctxscope_added_median_us']:.2f} us "
          f"(target < 5 us)")
    figures.update({f"aiohttp_unrelated_{k}": v for k, v in aio.items() if not isinstance(v, tuple)})
    figures["load_average"] = os.getloadavg()[0]
    print(f"load average {figures['load_average']:.2f}")
    return figures


if __name__ == "__main__":
    if sys.argv[1:2] == ["--callgrind-driver"]:
        _callgrind_driver(int(sys.argv[2]))
    else:
        main()
