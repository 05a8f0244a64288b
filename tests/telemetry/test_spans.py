"""The one span writer (telemetry/spans.py): what each kind of span carries, where it hangs, when it starts and ends."""

from __future__ import annotations

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from ctxscope.core.observation import Usage
from ctxscope.schema import (INSTRUMENTATION_SCOPE, Annotation, Attr, Category, Change, ChangeType, Coverage,
                             GenAI, SpanName, Stage)
from ctxscope.telemetry.spans import SpanWriter, annotated, call_span_name, usage_attributes

T0 = 1_700_000_000_000_000_000


def _annotation(stage: Stage = Stage.TRANSCRIPT_OBSERVED, changes: int = 2) -> Annotation:
    """100 system + 40 prompts tokens; ``changes`` additions of 10, 20, ... prompt tokens."""
    return Annotation(stage=stage, basis="chars/4", coverage=Coverage.PARTIAL, baseline=False,
                      categories={Category.SYSTEM: 100, Category.PROMPTS: 40}, estimated_tokens=140,
                      changes=[Change(id=f"c{n}", category=Category.PROMPTS, estimated_tokens=10 * (n + 1),
                                      delta_tokens=10 * (n + 1), change_type=ChangeType.ADDITION)
                               for n in range(changes)])


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield SpanWriter.for_provider(provider, "9.9"), exporter
    provider.shutdown()


def test_usage_attributes_are_the_genai_names_of_the_counts_given():
    """Reported input as gen_ai.usage.input_tokens (cached counted once); absent counts are left out."""
    usage = Usage(input_tokens=3, output_tokens=7, cache_read_input_tokens=50, cache_creation_input_tokens=None,
                  reported_input=53)
    assert usage_attributes(usage) == {GenAI.USAGE_INPUT_TOKENS: 53, GenAI.USAGE_OUTPUT_TOKENS: 7,
                                       GenAI.USAGE_CACHE_READ_INPUT_TOKENS: 50}
    assert usage_attributes(None) == {} and usage_attributes(Usage()) == {}


def test_span_names():
    assert call_span_name("gpt-4o") == "chat gpt-4o" and call_span_name(None) == "chat"
    assert call_span_name("m", SpanName.COMPANION_PREFIX) == "ctxscope.context m"
    assert (SpanName.CAPTURE_START, SpanName.POST_COMPACTION, SpanName.SESSION_END) == \
        ("capture-start", "post-compaction", "session-end")


def test_a_written_call_has_its_markers_under_it_and_its_changes_as_events(exported):
    """write_call: the CLIENT call span with the attributes given, markers as INTERNAL children, all at its times."""
    writer, exporter = exported
    annotation = _annotation()
    identity = {GenAI.OPERATION_NAME: "chat", GenAI.PROVIDER_NAME: "anthropic", GenAI.CONVERSATION_ID: "s1"}
    capture = _annotation(Stage.CAPTURE_START, changes=1)
    writer.write_call("claude-x", {**identity, **annotation.to_attributes()}, annotation,
                      [(SpanName.CAPTURE_START, capture)], identity, T0, T0 + 5_000)
    marker, call = exporter.get_finished_spans()  # the marker ends first
    assert (call.name, call.kind, call.start_time, call.end_time) == ("chat claude-x", SpanKind.CLIENT, T0, T0 + 5_000)
    assert call.instrumentation_scope.name == INSTRUMENTATION_SCOPE and call.instrumentation_scope.version == "9.9"
    assert call.attributes[Attr.CATEGORIES_PREFIX + "system"] == 100 and call.attributes[Attr.ESTIMATED_TOKENS] == 140
    assert [(e.name, e.attributes["id"], e.attributes["delta_tokens"], e.timestamp) for e in call.events] == \
        [("llm.context.change", "c0", 10, T0), ("llm.context.change", "c1", 20, T0)]
    assert (marker.name, marker.kind, marker.start_time, marker.end_time) == \
        ("capture-start", SpanKind.INTERNAL, T0, T0)
    assert marker.parent.span_id == call.context.span_id and marker.context.trace_id == call.context.trace_id
    # The call's identity without gen_ai.operation.name: a marker is not a model call (SPEC section 4).
    assert GenAI.OPERATION_NAME not in marker.attributes and call.attributes[GenAI.OPERATION_NAME] == "chat"
    del identity[GenAI.OPERATION_NAME]
    assert dict(marker.attributes) == {**identity, **capture.to_attributes()}
    assert marker.attributes[Attr.STAGE] == "capture-start"
    assert [e.attributes["id"] for e in marker.events] == ["c0"]


def test_a_live_call_is_opened_annotated_failed_and_ended_in_steps(exported):
    """start_call, annotate, change_events (some ids only), fail, end: one span with all of it."""
    writer, exporter = exported
    span = writer.start_call("gpt-4o", {GenAI.REQUEST_MODEL: "gpt-4o"}, T0)
    writer.annotate(span, {Attr.SESSION_ID: "fp-1"})
    writer.annotate(span, {})  # nothing to set: no call
    writer.change_events(span, _annotation(changes=3), T0 + 1, only_ids={"c2"})
    writer.fail(span, "RateLimitError")
    writer.end(span, T0 + 9)
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes) == {GenAI.REQUEST_MODEL: "gpt-4o", Attr.SESSION_ID: "fp-1"}
    assert [(e.attributes["id"], e.timestamp) for e in done.events] == [("c2", T0 + 1)]
    assert (done.status.status_code, done.status.description) == (StatusCode.ERROR, "RateLimitError")
    assert (done.start_time, done.end_time) == (T0, T0 + 9)


def test_a_marker_under_a_context_and_the_session_end_marker(exported):
    """A companion hangs under the context given; session-end is a root INTERNAL span carrying what it was given."""
    writer, exporter = exported
    parent = writer.start_call(None, {}, T0)
    companion = writer.marker("ctxscope.context m", trace.set_span_in_context(parent), annotated({"k": "v"},
                              _annotation(changes=0)), _annotation(changes=0), T0 + 2)
    writer.end(companion, T0 + 3)
    writer.end(parent, T0 + 4)
    writer.end(writer.session_end({Attr.SESSION_ID: "s", Attr.SESSION_ENDED: True, GenAI.OPERATION_NAME: "chat"},
                                  otel_context.Context()))
    done = {s.name: s for s in exporter.get_finished_spans()}
    assert done["ctxscope.context m"].parent.span_id == done["chat"].context.span_id
    assert done["ctxscope.context m"].attributes["k"] == "v" and not done["ctxscope.context m"].events
    # A companion is left as given: it stands for the other instrumentation's model call.
    end = done["session-end"]
    assert end.parent is None and end.kind == SpanKind.INTERNAL
    assert dict(end.attributes) == {Attr.SESSION_ID: "s", Attr.SESSION_ENDED: True}


def test_a_sampled_out_call_gets_no_events_and_none_are_built(monkeypatch):
    """A span that is not recorded: the writer returns before building its events (a sampled-out call costs less)."""
    provider = TracerProvider(sampler=ALWAYS_OFF)
    writer = SpanWriter.for_provider(provider)
    annotation = _annotation()
    built = []
    monkeypatch.setattr(Annotation, "change_events", lambda self: built.append(1) or [])
    span = writer.start_call("m", {}, T0)
    assert not span.is_recording()
    writer.change_events(span, annotation, T0)
    writer.write_call("m", {}, annotation, [(SpanName.CAPTURE_START, annotation)], {}, T0, T0)
    assert built == []
