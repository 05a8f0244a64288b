"""One peer's side of ``bench/bench_peers.py``: the same workload, run inside the peer's own virtualenv.

Started by the orchestrator as ``<venv>/bin/python driver.py PEER``, with the
provider server's URL, the OTLP receiver's endpoint and the content-capture
setting in the environment. Imports nothing from ctxscope or from the bench
(the peers' venvs do not have them): only the ``openai`` SDK, the
OpenTelemetry SDK, the OTLP/gRPC exporters and the peer's instrumentor,
found through its ``opentelemetry_instrumentor`` entry point (ctxscope's
rows also take its gauge views, and one row the exporters ``setup()`` builds).

Setup, the same for every peer: a tracer provider with a BatchSpanProcessor
and an OTLP exporter, a meter provider with a periodic reader and an OTLP
exporter, both to the orchestrator's receiver, ``service.name`` = the peer's
name (so the receiver counts each peer's spans and points apart).

Time inside the wrapper: four timers (wrapt function wrappers) sit at the two
places the peers wrap, ``Completions.create`` (ctxscope, the official
instrumentation, OpenLLMetry) and ``OpenAI.request`` (OpenInference): one
installed before the instrumentor (under the peer's wrapper), one after
(above it). A call's wrapper time is the sum over both places of outer minus
inner; the baseline has the same four timers with nothing between them, and
the orchestrator subtracts its figure round by round.

Protocol: one JSON object a line on stdin, one JSON answer a line on stdout.
``start`` (items, tag), ``call``, ``sessions`` (n, items), ``collect``,
``rss``, ``flush``, ``exit``. An exception answers ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from importlib import metadata
from typing import Any

MODEL = "gpt-4o"
# The distribution of each peer: its instrumentor is this distribution's opentelemetry_instrumentor entry point.
DISTRIBUTIONS = {
    "ctxscope": "ctxscope",
    "official": "opentelemetry-instrumentation-genai-openai",
    "openllmetry": "opentelemetry-instrumentation-openai",
    "openinference": "openinference-instrumentation-openai",
}
# Where the peers wrap the SDK: (module, attribute) for wrapt.
# The workload and the timer are bench_overhead's own (bench/workload.py: standard library only).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from workload import InnerTimer, conversation  # noqa: E402

WRAP_POINTS = (("openai.resources.chat.completions", "Completions.create"), ("openai", "OpenAI.request"))


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def instrumentor_of(peer: str) -> Any:
    """The peer's instrumentor class, from its distribution's entry point."""
    dist = metadata.distribution(DISTRIBUTIONS[peer])
    points = [ep for ep in dist.entry_points if ep.group == "opentelemetry_instrumentor"]
    openai_points = [ep for ep in points if "openai" in ep.name.lower()] or points
    if not openai_points:
        raise RuntimeError(f"{dist.metadata['Name']} declares no opentelemetry_instrumentor entry point")
    return openai_points[0].load()


class Driver:
    def __init__(self, peer: str) -> None:
        import wrapt
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        import openai

        endpoint = os.environ["BENCH_OTLP_ENDPOINT"]
        if peer == "ctxscope" and os.environ.get("BENCH_CTXSCOPE_EXPORTERS") == "1":
            # The exporters ctxscope.setup() builds: the SDK's, encoding with ctxscope's encoders.
            from ctxscope.telemetry.grpc_metric_exporter import GrpcMetricExporter as OTLPMetricExporter
            from ctxscope.telemetry.grpc_span_exporter import GrpcSpanExporter as OTLPSpanExporter
        resource = Resource.create({"service.name": os.environ.get("BENCH_SERVICE", peer)})
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
        self.reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=endpoint, insecure=True),
            export_interval_millis=int(os.environ.get("BENCH_METRIC_INTERVAL_MS", "5000")))
        views: list[Any] = []
        if peer == "ctxscope":  # the views ctxscope.setup() gives the provider it creates (telemetry/views.py)
            from ctxscope.telemetry.views import gauge_views

            views = gauge_views()
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self.reader], views=views)
        self.inner = [InnerTimer() for _ in WRAP_POINTS]
        self.outer = [InnerTimer() for _ in WRAP_POINTS]
        for (module, name), timer in zip(WRAP_POINTS, self.inner):
            wrapt.wrap_function_wrapper(module, name, timer)
        self.instrumentor = None
        if peer != "baseline":
            self.instrumentor = instrumentor_of(peer)()
            self.instrumentor.instrument(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)
        for (module, name), timer in zip(WRAP_POINTS, self.outer):
            wrapt.wrap_function_wrapper(module, name, timer)
        self.client = openai.OpenAI(base_url=os.environ["BENCH_OPENAI_BASE_URL"], api_key="bench", max_retries=0)
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.calls = 0  # calls of the current session

    def start(self, items: int, tag: str) -> dict[str, Any]:
        self.messages, self.tools = conversation(items, tag)
        self.calls = 0
        return {"items": len(self.messages) + len(self.tools)}

    def call(self) -> dict[str, Any]:
        if self.calls:  # the conversation grows by one message a call; a session's first call sends it as is
            self.messages.append({"role": "user", "content": f"One more thing, number {self.calls}."})
        self.calls += 1
        started = time.perf_counter()
        self.client.chat.completions.create(model=MODEL, messages=self.messages, tools=self.tools)
        total = time.perf_counter() - started
        wrapper = sum(o.last - i.last for o, i in zip(self.outer, self.inner))
        return {"total_ms": total * 1e3, "wrapper_ms": wrapper * 1e3}

    def sessions(self, n: int, items: int) -> dict[str, Any]:
        """``n`` live sessions of ``items`` items, one call each."""
        for s in range(n):
            self.start(items, f"live-{s}")
            self.call()
        return {"sessions": n}

    def collect(self) -> dict[str, Any]:
        """CPU (this thread) of one collection and export by the periodic reader, as its timer would run it."""
        started = time.thread_time()
        self.reader.force_flush()
        return {"cpu_ms": (time.thread_time() - started) * 1e3}

    def rss(self) -> dict[str, Any]:
        import gc

        gc.collect()
        return {"rss_mb": rss_mb()}

    def flush(self) -> dict[str, Any]:
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()
        return {}

    def exit(self) -> dict[str, Any]:
        if self.instrumentor is not None:
            self.instrumentor.uninstrument()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        return {}


def versions() -> dict[str, str]:
    names = ["openai", "opentelemetry-sdk", *DISTRIBUTIONS.values()]
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def main() -> int:
    peer = sys.argv[1]
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the libraries print stays off the protocol
    try:
        driver = Driver(peer)
        answer: dict[str, Any] = {"ready": peer, "versions": versions(), "rss_mb": rss_mb()}
    except Exception as exc:  # noqa: BLE001 - reported to the orchestrator, which skips the peer
        answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        driver = None
    out.write(json.dumps(answer) + "\n")
    out.flush()
    if driver is None:
        return 1
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            answer = getattr(driver, op)(**command)
        except Exception as exc:  # noqa: BLE001 - the orchestrator reports it
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        out.write(json.dumps(answer) + "\n")
        out.flush()
        if op == "exit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
