"""Replayed calls written finished: the SDK's own spans, and the SDK's path wherever the user configured otherwise."""

from __future__ import annotations

from _paths import TESTS

from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased

from ctxscope.schema import Annotation, Attr, ChangeAttr, Coverage, GenAI, SpanName, Stage
from ctxscope.telemetry.finished_spans import FinishedSpans, finished_spans
from ctxscope.telemetry.processor import ensure_processor
from ctxscope.telemetry.replay import CallEmitter, replay_files

COMPACTION = TESTS / "data" / "transcripts" / "claude_624a4a58_compaction.jsonl"
SESSION = "624a4a58-b34c-462d-a70d-13421c8125a8"


class SameAsDefault(ParentBased):
    """The default sampler's decisions under another class: the finished-span writer does not know it."""

    def __init__(self) -> None:
        super().__init__(ALWAYS_ON)


def _replay(sampler: Any = None, limits: SpanLimits | None = None, outer: bool = False) -> list[Any]:
    """The finished spans of the compaction transcript's replay, ids derived from each call (as ``watch``)."""
    provider = TracerProvider(sampler=sampler, span_limits=limits)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    emitter = CallEmitter.for_provider(provider, tokenizer="chars", stable_ids=True)
    if outer:
        with provider.get_tracer("app").start_as_current_span("outer"):
            replay_files([str(COMPACTION)], emitter)
    else:
        replay_files([str(COMPACTION)], emitter)
    return list(exporter.get_finished_spans())


def _described(span: Any) -> dict[str, Any]:
    """Everything OTLP carries of a span."""
    return {"name": span.name, "kind": span.kind, "trace_id": span.context.trace_id,
            "span_id": span.context.span_id, "flags": int(span.context.trace_flags),
            "parent": span.parent.span_id if span.parent else None, "start": span.start_time,
            "end": span.end_time, "status": (span.status.status_code, span.status.description),
            "attributes": list(span.attributes.items()), "dropped_attributes": span.dropped_attributes,
            "events": [(e.name, e.timestamp, list(e.attributes.items()), e.dropped_attributes)
                       for e in span.events],
            "dropped_events": span.dropped_events, "links": list(span.links),
            "resource": dict(span.resource.attributes), "scope": span.instrumentation_scope}


def test_the_default_configuration_writes_finished_spans():
    """The default sampler and limits, the SDK's processors: finished spans; another sampler class: the SDK's path."""
    assert isinstance(finished_spans(TracerProvider().get_tracer("t")), FinishedSpans)
    assert isinstance(finished_spans(TracerProvider(sampler=ALWAYS_ON).get_tracer("t")), FinishedSpans)
    for sampler in (SameAsDefault(), ALWAYS_OFF, TraceIdRatioBased(0.5)):
        assert finished_spans(TracerProvider(sampler=sampler).get_tracer("t")) is None
    assert finished_spans(TracerProvider(span_limits=SpanLimits(max_attribute_length=10)).get_tracer("t")) is None
    assert finished_spans(trace.NoOpTracer()) is None


def test_finished_spans_are_the_sdk_spans():
    """Every field of every span (ids, parent, times, status, attributes, events) equals the SDK path's."""
    finished = _replay()
    through_sdk = _replay(SameAsDefault())
    assert [_described(s) for s in finished] == [_described(s) for s in through_sdk]
    # Each took its own path: the SDK's wraps every event's attributes, the finished spans do not.
    assert all(type(e.attributes) is dict for s in finished for e in s.events)
    assert all(isinstance(e.attributes, BoundedAttributes) for s in through_sdk for e in s.events)
    # By hand from the file: 5 calls, a capture-start under the first, a post-compaction under the fifth.
    calls = [s for s in finished if s.name.startswith("chat ")]
    assert len(calls) == 5 and len(finished) == 7
    capture, compaction = (next(s for s in finished if s.name == n)
                           for n in (SpanName.CAPTURE_START, SpanName.POST_COMPACTION))
    assert capture.parent.span_id == calls[0].context.span_id
    assert compaction.parent.span_id == calls[4].context.span_id
    assert capture.context.trace_id == calls[0].context.trace_id
    assert capture.start_time == capture.end_time == calls[0].start_time
    assert calls[1].end_time - calls[1].start_time == 5_079_000_000  # 20:55:49.719 -> 20:55:54.798
    for call in calls:
        assert call.parent is None and call.attributes[GenAI.CONVERSATION_ID] == SESSION
        assert call.attributes[GenAI.OPERATION_NAME] == "chat"
        assert call.context.trace_flags.sampled
    assert GenAI.OPERATION_NAME not in capture.attributes
    assert capture.attributes[Attr.STAGE] == "capture-start"
    events = [e for s in finished for e in s.events]
    assert events and all(e.name == "llm.context.change" and e.timestamp is not None for e in events)
    assert all(ChangeAttr.ID in e.attributes for e in events)


def test_a_user_sampler_still_decides():
    """A sampler that drops every span, or some traces, is asked, as by the SDK's own path."""
    assert _replay(ALWAYS_OFF) == []
    # The ids derive from each call: the traces a ratio sampler keeps are known beforehand.
    ratio = TraceIdRatioBased(0.5)
    every = [s for s in _replay() if s.name.startswith("chat ")]
    expected = {s.context.span_id for s in every
                if ratio.should_sample(None, s.context.trace_id, s.name).decision.is_sampled()}
    assert 0 < len(expected) < 5  # the test shows something only if the sampler keeps some, not all
    kept = _replay(ratio)
    assert {s.context.span_id for s in kept if s.name.startswith("chat ")} == expected
    # A call's markers follow its decision.
    assert all(s.parent.span_id in expected for s in kept if s.parent is not None)


def test_span_limits_still_apply():
    """A limit on attributes or events drops what it drops on the SDK's path (and says how many)."""
    spans = _replay(limits=SpanLimits(max_span_attributes=4, max_events=1))
    assert spans and all(len(s.attributes) <= 4 for s in spans)
    assert any(s.dropped_attributes > 0 for s in spans)
    assert all(len(s.events) <= 1 for s in spans) and any(s.dropped_events > 0 for s in spans)


def test_a_current_span_becomes_the_calls_parent():
    """Replayed inside an application's span: the calls are its children, as the SDK makes them."""
    spans = _replay(outer=True)
    outer = next(s for s in spans if s.name == "outer")
    calls = [s for s in spans if s.name.startswith("chat ")]
    assert len(calls) == 5 and all(c.parent.span_id == outer.context.span_id for c in calls)


def test_a_value_the_sdk_would_drop_takes_the_sdk_path():
    """An attribute the SDK would not keep as it is (None, a list): not written finished."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    writer = finished_spans(provider.get_tracer("t"))
    assert writer is not None
    annotation = Annotation(stage=Stage.TRANSCRIPT_OBSERVED, basis="chars/4", coverage=Coverage.PARTIAL,
                            baseline=False, categories={}, estimated_tokens=0)
    assert not writer.write_call("chat m", {"a": None}, annotation, [], 1, 2)
    assert not writer.write_call("chat m", {"a": ["x"]}, annotation, [], 1, 2)
    assert exporter.get_finished_spans() == ()
    assert writer.write_call("chat m", {"a": "x", "b": 1, "c": 0.5, "d": True}, annotation, [], 1, 2)
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes) == {"a": "x", "b": 1, "c": 0.5, "d": True}
    assert (span.start_time, span.end_time, span.parent) == (1, 2, None)


def test_a_processor_added_later_is_checked():
    """A processor whose on_start may do something, added after the first call: the SDK's path from then on."""
    provider = TracerProvider()
    ensure_processor(provider)
    writer = finished_spans(provider.get_tracer("t"))
    assert writer is not None

    class Counting(SimpleSpanProcessor):
        started = 0

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            Counting.started += 1

    exporter = InMemorySpanExporter()
    provider.add_span_processor(Counting(exporter))
    emitter = CallEmitter.for_provider(provider, tokenizer="chars")
    replay_files([str(COMPACTION)], emitter)
    assert Counting.started == 7 and len(exporter.get_finished_spans()) == 7
