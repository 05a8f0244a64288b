"""Shared set-up of the instrumentation tests: an SDK tracer provider with an
in-memory exporter, a tracker counting with chars/4 and no provider framing (so
values are worked out by hand), and helpers to read spans back."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxscope.config import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
from ctxscope.telemetry.processor import ContextSpanProcessor
from ctxscope.schema import Attr, Metric, MetricAttr
from ctxscope.testing import wait_for_measurements
from ctxscope.telemetry.tracker import Tracker


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    tracker: Tracker

    def spans(self, name_prefix: str | None = None) -> list[ReadableSpan]:
        """Finished spans of the ``ctxscope`` scope, in end order (once every call made is measured)."""
        assert wait_for_measurements()
        spans = [s for s in self.exporter.get_finished_spans()
                 if s.instrumentation_scope is not None and s.instrumentation_scope.name == "ctxscope"]
        if name_prefix is not None:
            spans = [s for s in spans if s.name.startswith(name_prefix)]
        return spans

    def calls(self) -> list[ReadableSpan]:
        """The model-call spans (``chat {model}``)."""
        return self.spans("chat")

    def one_call(self) -> ReadableSpan:
        calls = self.calls()
        assert len(calls) == 1, [s.name for s in self.spans()]
        return calls[0]


def make_telemetry() -> Telemetry:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # framing=False: the items' own counts, so values are worked out by hand (the
    # provider framing model has tests of its own, tests/telemetry/test_tracker.py).
    return Telemetry(provider, exporter, Tracker(tokenizer="chars", framing=False))


@contextmanager
def instrumented(server: Any, monkeypatch: Any, instrumentor_class: type) -> Iterator[Telemetry]:
    """Fresh telemetry with ``instrumentor_class`` instrumenting it against a reset ``server``.

    Content capture is off whatever the environment says: the tests assert the
    default (SPEC section 7).
    """
    monkeypatch.delenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, raising=False)
    server.reset()
    telemetry = make_telemetry()
    instrumentor = instrumentor_class()
    instrumentor.instrument(tracer_provider=telemetry.provider, tracker=telemetry.tracker)
    try:
        yield telemetry
    finally:
        instrumentor.uninstrument()


@contextmanager
def metered(telemetry: Telemetry) -> Iterator[InMemoryMetricReader]:
    """The context span processor on ``telemetry``'s provider, recording into an in-memory reader."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    processor = ContextSpanProcessor(meters)
    telemetry.provider.add_span_processor(processor)
    try:
        yield reader
    finally:
        processor.shutdown()
        meters.shutdown()


def token_gauges(reader: InMemoryMetricReader, session: str) -> dict[str, int]:
    """The latest ``llm.context.tokens`` value of each category of ``session``."""
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != Metric.TOKENS.name:
                    continue
                for point in metric.data.data_points:
                    attrs = dict(point.attributes)
                    if attrs[MetricAttr.SESSION_ID] == session:
                        out[attrs[MetricAttr.CATEGORY]] = int(point.value)
    return out


def categories(span: ReadableSpan) -> dict[str, int]:
    attrs = span.attributes or {}
    return {k[len(Attr.CATEGORIES_PREFIX):]: v for k, v in attrs.items() if k.startswith(Attr.CATEGORIES_PREFIX)}


def changes(span: ReadableSpan) -> list[tuple[str, str, int]]:
    """``(category, change_type, delta_tokens)`` of the span's change events, in order."""
    return [(e.attributes["category"], e.attributes["change_type"], e.attributes["delta_tokens"])
            for e in span.events if e.name == "llm.context.change"]


def attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


def no_content(span: ReadableSpan, *texts: str) -> bool:
    """None of ``texts`` appears in the span's name, attributes or events."""
    blob = repr(span.name) + repr(dict(span.attributes or {})) + repr([(e.name, dict(e.attributes or {}))
                                                                      for e in span.events])
    return not any(t in blob for t in texts)


SESSION = Attr.SESSION_ID  # the session key, on every span of ours (gen_ai.conversation.id only when given)


def finished(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ...]:
    """An in-memory exporter's spans once every call made is measured (ctxscope measures off the call path)."""
    assert wait_for_measurements()
    return exporter.get_finished_spans()
