"""From a number to the call that caused it: ``llm.context.added.tokens`` exemplars, exported for real.

The real openai SDK against ``ctxscope.testing``'s server, instrumented by
ctxscope (chars/4, no framing). Two calls of one conversation: the first is the
baseline (no growth); the second adds the reply "hi, how can I help?" (19
chars: 5 tokens, assistant) and the question "what is two plus two" (20 chars:
5 tokens, prompts). So the histogram holds one observation of 5 in each of the
two categories, recorded in the second call's span context: the SDK's
``trace_based`` exemplar filter attaches that span's trace and span id.

Checked at a real OTLP receiver (oteltest's gRPC sink) and in a real
Prometheus 3 (``--enable-feature=exemplar-storage``, its OTLP receiver) through
``/api/v1/query_exemplars``, the API Grafana's exemplar links read.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("openai")
pytest.importorskip("wrapt")
pytest.importorskip("oteltest.sink")

from _otlp_sink import Receiver, attrs  # noqa: E402
from backends import binary_path, requires  # noqa: E402
from prometheus_helpers import PrometheusServer, wait_for  # noqa: E402

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: E402
    OTLPMetricExporter as OTLPHttpMetricExporter,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from ctxscope.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from ctxscope.schema import Metric, MetricAttr  # noqa: E402
from ctxscope.testing import ProviderServer, Reply  # noqa: E402
from ctxscope.telemetry.tracker import Tracker  # noqa: E402

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
ADDED = {"assistant": 5, "prompts": 5}  # worked out above


def conversation(exporter: Any) -> tuple[str, str]:
    """Two calls through a meter provider exporting with ``exporter``; the second call span's (trace, span) ids."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)],
        resource=Resource.create({"service.name": "exemplar-agent"}), shutdown_on_exit=False)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider,
                            tracker=Tracker(tokenizer="chars", framing=False))
    try:
        with ProviderServer() as server:
            client = server.openai_client()
            server.reply(Reply.text("hi, how can I help?"))
            client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
            server.reply(Reply.text("four"))
            client.chat.completions.create(model="gpt-4o", messages=[
                *MESSAGES, {"role": "assistant", "content": "hi, how can I help?"},
                {"role": "user", "content": "what is two plus two"}])
        meter_provider.force_flush(10_000)
    finally:
        instrumentor.uninstrument()
        meter_provider.shutdown()
    second = [s for s in spans.get_finished_spans() if s.name == "chat gpt-4o"][-1]
    return format(second.context.trace_id, "032x"), format(second.context.span_id, "016x")


def test_otlp_export_carries_exemplars_of_the_adding_call():
    """Each category's point: count 1, sum 5, one exemplar of 5 with the second call's trace and span id."""
    with Receiver("grpc") as receiver:
        trace_id, span_id = conversation(OTLPMetricExporter(endpoint=receiver.endpoint, insecure=True))
        wait_for(lambda: receiver.handler.metrics, 15)
        found: dict[str, Any] = {}
        for request in receiver.handler.metrics:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name == Metric.ADDED_TOKENS.name:
                            assert m.unit == Metric.ADDED_TOKENS.unit
                            for p in m.histogram.data_points:
                                # The first export (force_flush) carries them; the reservoir is
                                # emptied at each collection, so the shutdown's export has none.
                                found.setdefault(attrs(p.attributes)[MetricAttr.CATEGORY], p)
    assert set(found) == set(ADDED)
    for category, point in found.items():
        assert (point.count, point.sum) == (1, ADDED[category])
        assert MetricAttr.SESSION_ID not in attrs(point.attributes)  # no session key on a histogram
        (exemplar,) = point.exemplars
        assert (exemplar.trace_id.hex(), exemplar.span_id.hex()) == (trace_id, span_id)
        assert (exemplar.as_int or exemplar.as_double) == ADDED[category]


@pytest.fixture
def prometheus3(tmp_path: Path) -> Iterator[PrometheusServer]:
    prom = PrometheusServer(tmp_path, [], binary=binary_path("prometheus3"),
                            args=["--web.enable-otlp-receiver", "--enable-feature=exemplar-storage"])
    prom.start()
    try:
        yield prom
    finally:
        prom.stop()


def _exemplars(prom: PrometheusServer, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr, "start": "0", "end": "9999999999"})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query_exemplars?{query}", timeout=5) as resp:
        return json.load(resp)["data"]


@requires("prometheus3")
def test_prometheus_stores_the_exemplars_grafana_links_to_the_trace(prometheus3):
    """query_exemplars on the bucket series: per category one exemplar of 5 carrying the call's trace_id."""
    trace_id, span_id = conversation(OTLPHttpMetricExporter(endpoint=prometheus3.url + "/api/v1/otlp/v1/metrics"))
    expr = Metric.ADDED_TOKENS.prometheus_name + "_bucket"
    data = wait_for(lambda: (d := _exemplars(prometheus3, expr)) and len(d) >= 2 and d, 20)
    by_category: dict[str, list[dict[str, Any]]] = {}
    for series in data:
        by_category.setdefault(series["seriesLabels"]["llm_context_category"], []).extend(series["exemplars"])
    assert set(by_category) == set(ADDED)
    for category, exemplars in by_category.items():
        (exemplar,) = exemplars
        assert float(exemplar["value"]) == ADDED[category]
        assert exemplar["labels"] == {"trace_id": trace_id, "span_id": span_id}
