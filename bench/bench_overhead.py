"""Added latency of the instrumentation per model call, and memory per live session.

A conversation of 2,000 items (system prompt, 5 tool definitions, then rounds
of user text, an assistant tool call and its tool result of 200-2,000
characters) is sent with the real ``openai`` SDK to ``ctxscope.testing``'s
local server, growing by one user message per call, as an agent's history
grows. Each round sends the same request twice, once bare and once
instrumented (ctxscope's span, annotation, tracker and span processor, on an
SDK tracer provider with no exporter), in alternating order.

The SDK itself spends about a second on such a body (its request transforms,
JSON, HTTP), with a spread of hundreds of milliseconds on a shared machine,
so a difference of two end-to-end times cannot resolve a millisecond. A timer
placed around the SDK's own ``create``, under ctxscope's wrapper, splits each
call into the SDK's time and the time added above it; the figure is the
median over rounds of (added above the SDK, instrumented) minus (the same,
bare). End-to-end medians are printed too. Target: under 1 ms.

Memory: tracemalloc growth of the tracker for live sessions of that
conversation, per session (the conversation's own strings belong to the
application and are not counted).
"""

from __future__ import annotations

import gc
import logging
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken"
if SHARED_TIKTOKEN.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))

ROUNDS = 30
WARMUP = 3
MODEL = "gpt-4o"

if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))
from workload import ITEMS, InnerTimer, conversation  # noqa: E402 - the benches' one workload


SIZES = (20, 200, 2000)


def latency(items: int = ITEMS) -> dict[str, float]:
    import wrapt
    from opentelemetry.instrumentation.utils import unwrap
    from opentelemetry.sdk.trace import TracerProvider

    import openai.resources.chat.completions as completions
    from ctxscope.instrumentation.openai import OpenAIInstrumentor
    from ctxscope.testing import ProviderServer
    from ctxscope.telemetry.tracker import Tracker

    logging.getLogger("opentelemetry.instrumentation.instrumentor").setLevel(logging.ERROR)
    messages, tools = conversation(items)
    provider = TracerProvider()  # no exporter: the cost of ctxscope, not of a backend
    tracker = Tracker()
    instrumentor = OpenAIInstrumentor()
    instrumentor.uninstrument()
    inner = InnerTimer()
    wrapt.wrap_function_wrapper(completions, "Completions.create", inner)
    try:
        with ProviderServer() as server:
            server.record_requests = False
            client = server.openai_client()

            instrumentor.instrument(tracer_provider=provider, tracker=tracker)
            # Bare calls go straight to the timer under ctxscope's wrapper: no re-patching
            # between calls, so both sides run equally warm.
            bare_create = vars(completions.Completions)["create"].__wrapped__

            def call(instrumented: bool) -> tuple[float, float]:
                kwargs = dict(model=MODEL, messages=messages, tools=tools)
                started = time.perf_counter()
                if instrumented:
                    client.chat.completions.create(**kwargs)
                else:
                    bare_create(client.chat.completions, **kwargs)
                total = time.perf_counter() - started
                # Measurements that run off the call path finish here, untimed: the next call
                # (bare or not) then starts on an idle worker. (Their cost to a caller that does
                # not wait is measured apart: caller_delay.)
                provider.force_flush()
                return total, inner.last

            # The first instrumented call counts every item (the baseline): reported apart.
            first_total, first_inner = call(True)
            bare, instrumented, added = [], [], []
            for r in range(WARMUP + ROUNDS):
                messages.append({"role": "user", "content": f"One more thing, number {r}."})
                order = (False, True) if r % 2 == 0 else (True, False)
                outside = {}
                for flag in order:
                    total, sdk = call(flag)
                    outside[flag] = (total, total - sdk)
                if r >= WARMUP:
                    bare.append(outside[False][0])
                    instrumented.append(outside[True][0])
                    added.append(outside[True][1] - outside[False][1])
        provider.force_flush()  # the measurements of the last calls, before reading the ledger
    finally:
        instrumentor.uninstrument()
        unwrap(completions.Completions, "create")
    basis = tracker.ledger(tracker.sessions()[0]).latest.annotation.basis
    return {
        "items": items,
        "basis": basis,
        "rounds": ROUNDS,
        "bare_median_ms": statistics.median(bare) * 1e3,
        "instrumented_median_ms": statistics.median(instrumented) * 1e3,
        "added_median_ms": statistics.median(added) * 1e3,
        "added_p90_ms": sorted(added)[int(len(added) * 0.9)] * 1e3,
        "first_call_added_ms": (first_total - first_inner) * 1e3,
    }


def in_process() -> dict[str, float]:
    """The tracker's own work per call (extract, diff, count the new item), without HTTP."""
    from ctxscope.telemetry.tracker import Tracker

    messages, tools = conversation()
    tracker = Tracker()
    body = {"model": MODEL, "messages": messages, "tools": tools}
    tracker.observe_request(body, "openai.chat", provider="openai", session_id="bench")
    times = []
    for r in range(200):
        messages.append({"role": "user", "content": f"One more thing, number {r}."})
        started = time.perf_counter()
        tracker.observe_request(body, "openai.chat", provider="openai", session_id="bench")
        times.append(time.perf_counter() - started)
    return {"observe_request_median_ms": statistics.median(times) * 1e3}


def split() -> dict[str, float]:
    """Medians of the steps of one call, in process: extraction, ledger, the span processor's on_end.

    on_end is timed on a span carrying the annotation of the last request.
    """
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.core.items import RequestExtractor
    from ctxscope.core.ledger import SessionLedger
    from ctxscope.telemetry.processor import ContextSpanProcessor
    from ctxscope.schema import GenAI

    messages, tools = conversation()
    body = {"model": MODEL, "messages": messages, "tools": tools}
    extractor, ledger = RequestExtractor(), SessionLedger("bench")
    snapshot = ledger.observe(extractor.extract(body, "openai.chat"), model=MODEL)
    extract_s, ledger_s = [], []
    for r in range(200):
        messages.append({"role": "user", "content": f"One more thing, number {r}."})
        started = time.perf_counter()
        items = extractor.extract(body, "openai.chat")
        middle = time.perf_counter()
        snapshot = ledger.observe(items, model=MODEL)
        extract_s.append(middle - started)
        ledger_s.append(time.perf_counter() - middle)
    ledger.report(snapshot, snapshot.annotation.estimated_tokens - 100)
    processor = ContextSpanProcessor(MeterProvider())
    tracer = TracerProvider().get_tracer("bench")  # the processor is called by hand, not at end()
    attributes = {GenAI.CONVERSATION_ID: "bench", GenAI.REQUEST_MODEL: MODEL, GenAI.PROVIDER_NAME: "openai",
                  **snapshot.annotation.to_attributes()}
    on_end: list[float] = []
    for _ in range(200):
        span = tracer.start_span("chat", attributes=attributes)
        span.end()
        started = time.perf_counter()
        processor.on_end(span)
        on_end.append(time.perf_counter() - started)
    processor.shutdown()
    return {"extract_median_ms": statistics.median(extract_s) * 1e3,
            "ledger_median_ms": statistics.median(ledger_s) * 1e3,
            "on_end_us": statistics.median(on_end) * 1e6}


def wrapper_alone(sampled_out: bool = False) -> float:
    """ctxscope's whole wrapper (span, annotation, processor) around a stub that returns a completion.

    ``sampled_out``: under ``ALWAYS_OFF`` (the span not recorded; the metrics still fed). Median ms.
    """
    from openai.types.chat import ChatCompletion
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

    from ctxscope.instrumentation._wrappers import Telemetry, install_processor
    from ctxscope.instrumentation.openai import API_CHAT, _sync_create
    from ctxscope.telemetry.tracker import Tracker

    completion = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101}})
    provider = TracerProvider(sampler=ALWAYS_OFF if sampled_out else ALWAYS_ON)
    install_processor(provider)
    wrapper = _sync_create(Telemetry(provider, Tracker()), API_CHAT)
    messages, tools = conversation()

    def stub(*args: Any, **kwargs: Any) -> Any:
        return completion

    wrapper(stub, None, (), dict(model=MODEL, messages=messages, tools=tools))
    times = []
    for r in range(300):
        messages.append({"role": "user", "content": f"One more thing, number {r}."})
        started = time.perf_counter()
        wrapper(stub, None, (), dict(model=MODEL, messages=messages, tools=tools))
        times.append(time.perf_counter() - started)
        provider.force_flush()  # the measurement off the call path, untimed
    return statistics.median(times) * 1e3


def caller_delay(items: int = ITEMS, probes: int = 200) -> dict[str, float]:
    """What the measuring worker costs a caller that does not wait for it (the GIL).

    The caller's probe: a blocking wait of 0.5 ms (the GIL released, as in a
    socket read) then a little Python work, the shape of an HTTP exchange.
    Timed while the worker measures the first call of a new ``items``-item
    session (the longest job there is: every item counted), and while it is
    idle; the difference per probe is the delay the worker adds each time the
    caller wants the interpreter back.
    """
    from openai.types.chat import ChatCompletion
    from opentelemetry.sdk.trace import TracerProvider

    from ctxscope.instrumentation import _worker
    from ctxscope.instrumentation._wrappers import Telemetry, install_processor
    from ctxscope.instrumentation.openai import API_CHAT, _sync_create
    from ctxscope.telemetry.tracker import Tracker

    completion = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101}})
    provider = TracerProvider()
    install_processor(provider)
    wrapper = _sync_create(Telemetry(provider, Tracker()), API_CHAT)

    def probe() -> float:
        started = time.perf_counter()
        time.sleep(0.0005)
        sum(range(200))
        return time.perf_counter() - started

    def probes_while(busy: bool, tag: str) -> tuple[list[float], float]:
        messages, tools = conversation(items, tag=tag)
        call_started = time.perf_counter()
        if busy:
            wrapper(lambda *a, **k: completion, None, (), dict(model=MODEL, messages=messages, tools=tools))
        call_s = time.perf_counter() - call_started
        if busy:  # as long as the worker measures
            # The call path does not wake the worker (it finds its jobs within LOOK_EVERY_S): wake
            # it now, so every probe overlaps the measurement (the worst case for the caller).
            _worker.worker().submit(lambda: None, "wake")
            times = []
            while _worker.worker().pending and len(times) < 20 * probes:
                times.append(probe())
        else:
            times = [probe() for _ in range(probes)]
        provider.force_flush()
        return times, call_s

    probes_while(True, "warm")  # encodings and caches warm; the worker thread started
    idle, _ = probes_while(False, "idle")
    busy, first_call_s = probes_while(True, "busy")
    pending = _worker.worker().pending
    return {"probe_idle_median_ms": statistics.median(idle) * 1e3,
            "probe_busy_median_ms": statistics.median(busy) * 1e3,
            "probe_busy_max_ms": max(busy) * 1e3,
            "caller_delay_median_ms": (statistics.median(busy) - statistics.median(idle)) * 1e3,
            "first_call_wrapper_ms": first_call_s * 1e3, "busy_probes": len(busy), "pending_after": pending}


def collection(sessions: int = 64, rounds: int = 50) -> dict[str, float]:
    """CPU time of one metric collection with ``sessions`` live sessions (the processor's callbacks).

    On a meter provider with the gauge views ``setup()`` gives the one it
    creates (``telemetry/views.py``); bench_collection also measures an
    application's own provider without them.

    Each session holds a realistic state (eight categories, three limits,
    reported tokens, waste kinds); between collections one session changes,
    as when one agent of many makes a call.
    """
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from ctxscope.telemetry.processor import ContextSpanProcessor
    from ctxscope.telemetry.views import gauge_views
    from ctxscope.schema import Annotation, Attr, Category, Coverage, GenAI, Stage, WasteKind

    reader = InMemoryMetricReader()
    processor = ContextSpanProcessor(MeterProvider(metric_readers=[reader], views=gauge_views(),
                                                   shutdown_on_exit=False),
                                     max_sessions=sessions)
    categories = {c: 100 + 10 * i for i, c in enumerate(list(Category)[:8])}

    def call(session: int, n: int) -> None:
        ann = Annotation(stage=Stage.REQUEST_INPUT, basis="chars/4", coverage=Coverage.COMPLETE, baseline=False,
                         categories={c: v + n for c, v in categories.items()},
                         estimated_tokens=sum(categories.values()) + 8 * n, reported_tokens=5000 + n,
                         window_tokens=128000, effective_window_tokens=100000, compact_threshold_tokens=90000,
                         model=MODEL, waste={WasteKind.DUPLICATE: 10, WasteKind.BLOAT: 20})
        attrs = {Attr.SESSION_ID: f"s{session}", GenAI.REQUEST_MODEL: MODEL, GenAI.PROVIDER_NAME: "openai",
                 **ann.to_attributes()}
        processor.observe_call(attrs, time.time_ns())

    for s_ in range(sessions):
        call(s_, 0)
    reader.get_metrics_data()
    times = []
    for r in range(rounds):
        call(r % sessions, r + 1)
        started = time.process_time()
        data = reader.get_metrics_data()
        times.append(time.process_time() - started)
    points = sum(len(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics)
    processor.shutdown()
    return {"collection_cpu_ms": statistics.median(times) * 1e3, "collection_points": points,
            "collection_sessions": sessions}


def memory(sessions: int = 4) -> dict[str, float]:
    from ctxscope.core.tokens import encoding_for_model, load_encoding
    from ctxscope.telemetry.tracker import Tracker

    bodies = []
    for s in range(sessions):
        messages, tools = conversation(tag=f"#{s}")
        bodies.append({"model": MODEL, "messages": messages, "tools": tools})
    tracker = Tracker(max_sessions=sessions + 1)
    # Warm what every session shares (encodings, limits, caches) before measuring.
    warm_messages, warm_tools = conversation(items=50, tag="warm")
    tracker.observe_request({"model": MODEL, "messages": warm_messages, "tools": warm_tools}, "openai.chat",
                            provider="openai", session_id="warm")
    # The warm call started the encoding's background load: wait for it, or its ~24 MB of Python
    # objects land in the sessions' figure (the encoding's own cost: bench_peers, docs/instrumentation.md).
    load_encoding(encoding_for_model(MODEL))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for s, body in enumerate(bodies):
        tracker.observe_request(body, "openai.chat", provider="openai", session_id=f"s{s}")
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"memory_per_session_kib": (after - before) / sessions / 1024, "sessions": sessions}


def main() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    by_size = {items: latency(items) for items in SIZES}
    figures.update(by_size[ITEMS])
    for items, figures_at in by_size.items():
        figures[f"added_median_ms_{items}"] = figures_at["added_median_ms"]
        figures[f"first_call_added_ms_{items}"] = figures_at["first_call_added_ms"]
    figures.update(in_process())
    figures["wrapper_alone_median_ms"] = wrapper_alone()
    figures["wrapper_sampled_out_median_ms"] = wrapper_alone(sampled_out=True)
    figures.update(split())
    figures.update(caller_delay())
    figures.update(memory())
    figures.update(collection())
    print(f"  conversation of {figures['items']} items, basis {figures['basis']}, {figures['rounds']} paired rounds")
    print(f"  bare call median          {figures['bare_median_ms']:8.2f} ms")
    print(f"  instrumented call median  {figures['instrumented_median_ms']:8.2f} ms")
    print(f"  added latency median      {figures['added_median_ms']:8.3f} ms   (p90 {figures['added_p90_ms']:.3f} ms;"
          f" target < 1 ms: {'met' if figures['added_median_ms'] < 1 else 'NOT met'})")
    print("  added latency median by size  " + ", ".join(
        f"{items}: {figures[f'added_median_ms_{items}']:.3f} ms" for items in SIZES))
    print("  first call added by size      " + ", ".join(
        f"{items}: {figures[f'first_call_added_ms_{items}']:.2f} ms" for items in SIZES))
    print(f"  wrapper alone per call    {figures['wrapper_alone_median_ms']:8.3f} ms   (stub SDK call, no HTTP)")
    print(f"  wrapper, sampled out      {figures['wrapper_sampled_out_median_ms']:8.3f} ms   (ALWAYS_OFF: metrics fed,"
          f" no span recorded)")
    print(f"  tracker alone per call    {figures['observe_request_median_ms']:8.3f} ms   (extract, diff, count, waste)")
    print(f"  of which extraction       {figures['extract_median_ms']:8.3f} ms   "
          f"ledger {figures['ledger_median_ms']:.3f} ms")
    print(f"  span processor on_end     {figures['on_end_us']:8.1f} us")
    print(f"  first call added          {figures['first_call_added_ms']:8.1f} ms  "
          f"(on the call path, {figures['items']} items)")
    print(f"  caller while the worker measures a first call: probe median {figures['probe_busy_median_ms']:.3f} ms"
          f" (max {figures['probe_busy_max_ms']:.2f}) against {figures['probe_idle_median_ms']:.3f} ms idle: "
          f"{figures['caller_delay_median_ms']:+.3f} ms a probe; that first call's wrapper "
          f"{figures['first_call_wrapper_ms']:.2f} ms")
    print(f"  memory per live session   {figures['memory_per_session_kib']:8.0f} KiB")
    print(f"  one metric collection     {figures['collection_cpu_ms']:8.2f} ms CPU, setup()'s views "
          f"({figures['collection_sessions']} live sessions, {figures['collection_points']} points)")
    print(f"  load average              {os.getloadavg()[0]:.2f}")
    figures["load_average"] = os.getloadavg()[0]
    return figures


if __name__ == "__main__":
    main()
