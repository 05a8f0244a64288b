"""The one span writer: every span ctxscope writes, and everything it puts on one.

Three paths write ctxscope's spans, and all of them write them here:

- the live instrumentation (:mod:`ctxscope.instrumentation._wrappers`): the
  ``chat <model>`` CLIENT span opens on the caller's thread with the request's
  attributes; the measuring worker adds the annotation, the change events, the
  marker spans, the usage, and ends it at the response's end time;
- ``replay`` and ``watch`` (:mod:`ctxscope.telemetry.replay`): a transcript
  call is written whole, at the transcript's own times (:meth:`SpanWriter.write_call`);
- the foreign-span processor (:mod:`ctxscope.interop.processor`): a
  ``ctxscope.context <model>`` companion span beside another instrumentation's
  call, with the markers under it.

What a span carries is each path's to say (its identity attributes); how it is
written is this module's: the annotation as attributes given when the span
starts, the changes as ``llm.context.change`` events (SPEC section 4) built
only for a recording span, the markers (``capture-start``, ``post-compaction``,
``session-end``) as INTERNAL spans, the usage in the GenAI conventions' names.
Names come from :class:`ctxscope.schema.SpanName`.

Nothing here guards: each caller's guard (the worker's, the emitter's, the
processor's) already logs an error of ours once and keeps the user's program going.
"""

from __future__ import annotations

from typing import Any, Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ctxscope.core.observation import Usage
from ctxscope.schema import INSTRUMENTATION_SCOPE, Annotation, ChangeAttr, GenAI, SpanName

__all__ = ["SpanWriter", "annotated", "call_span_name", "usage_attributes"]


def call_span_name(model: str | None, prefix: str = SpanName.OPERATION_CHAT) -> str:
    """``chat <model>`` (or a companion's ``ctxscope.context <model>``); the prefix alone without a model."""
    return f"{prefix} {model}" if model else prefix


def usage_attributes(usage: Usage | None) -> dict[str, int]:
    """A call's usage as GenAI attributes: only the counts the provider gave."""
    if usage is None:
        return {}
    out: dict[str, int] = {}
    # GenAI conventions: input_tokens counts every input token, cached ones included.
    for key, value in ((GenAI.USAGE_INPUT_TOKENS, usage.reported_input),
                       (GenAI.USAGE_OUTPUT_TOKENS, usage.output_tokens),
                       (GenAI.USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_input_tokens),
                       (GenAI.USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_creation_input_tokens)):
        if value is not None:
            out[key] = int(value)
    return out


def annotated(identity: Mapping[str, Any], annotation: Annotation) -> dict[str, Any]:
    """A marker's or companion's attributes: the caller's identity, then the annotation (SPEC section 4)."""
    return {**identity, **annotation.to_attributes()}


# The marker spans (SPEC section 4): they carry no gen_ai.operation.name.
_MARKERS = frozenset({SpanName.CAPTURE_START, SpanName.POST_COMPACTION, SpanName.SESSION_END})
_UNSET = object()


def without_operation(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """A marker's attributes: it is not a model call (SPEC section 4), whatever identity it was handed."""
    if GenAI.OPERATION_NAME in attributes:
        return {k: v for k, v in attributes.items() if k != GenAI.OPERATION_NAME}
    return attributes


class SpanWriter:
    """Writes ctxscope's spans on one tracer (scope ``ctxscope``)."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        # The finished-span writer of write_call, built at its first call (None: the SDK's path).
        self._finished: Any = _UNSET

    @classmethod
    def for_provider(cls, tracer_provider: Any = None, version: str | None = None) -> "SpanWriter":
        """The writer on ``tracer_provider`` (None: the global one)."""
        return cls(trace.get_tracer(INSTRUMENTATION_SCOPE, version, tracer_provider=tracer_provider))

    # -- call spans ------------------------------------------------------------------

    def start_call(self, model: str | None, attributes: Mapping[str, Any], start_time: int,
                   context: otel_context.Context | None = None) -> Span:
        """A model call's CLIENT span, open (the live path ends it when the response is in)."""
        return self.tracer.start_span(call_span_name(model), context=context, kind=SpanKind.CLIENT,
                                      attributes=attributes, start_time=start_time)

    @staticmethod
    def rename_call(span: Span, model: str | None) -> None:
        """A call span's name once its model is known (the transport layer reads a body after opening its span)."""
        span.update_name(call_span_name(model))

    def annotate(self, span: Span, attributes: Mapping[str, Any]) -> None:
        """More attributes on an open span, in one call (each call takes the span's lock)."""
        if attributes:
            span.set_attributes(attributes)

    def change_events(self, span: Span, annotation: Annotation, timestamp: int | None = None,
                      only_ids: frozenset[str] | set[str] | None = None) -> None:
        """The annotation's changes as ``llm.context.change`` events (``only_ids``: those changes alone).

        A span that is not recorded (sampled out) gets none, and none are built.
        """
        if not span.is_recording():
            return
        for event_name, event_attributes in annotation.change_events():
            if only_ids is None or event_attributes.get(ChangeAttr.ID) in only_ids:
                span.add_event(event_name, event_attributes, timestamp=timestamp)

    def fail(self, span: Span, error_type: str) -> None:
        """The call failed: status ERROR, described by the error's type alone (a message may quote the prompt)."""
        span.set_status(Status(StatusCode.ERROR, error_type))

    @staticmethod
    def end(span: Span, end_time: int | None = None) -> None:
        span.end(end_time=end_time)

    # -- marker and companion spans ----------------------------------------------------

    def marker(self, name: str, parent: Span | otel_context.Context, attributes: Mapping[str, Any],
               annotation: Annotation, start_time: int | None, event_time: int | None = None) -> Span:
        """A marker (``capture-start``, ``post-compaction``) or companion span under ``parent``, open.

        ``attributes``: what it carries (:func:`annotated`: the caller's identity
        and the annotation); the annotation's changes become its events, at
        ``event_time`` (default: the start). The caller ends it (:meth:`end`):
        the live path hands its attributes to the metrics first.
        """
        context = trace.set_span_in_context(parent) if isinstance(parent, Span) else parent
        if name in _MARKERS:
            attributes = without_operation(attributes)
        span = self.tracer.start_span(name, context=context, kind=SpanKind.INTERNAL, attributes=attributes,
                                      start_time=start_time)
        self.change_events(span, annotation, start_time if event_time is None else event_time)
        return span

    def session_end(self, attributes: Mapping[str, Any], context: otel_context.Context | None = None,
                    start_time: int | None = None) -> Span:
        """The ``session-end`` marker (``llm.context.session_ended``), open: the caller ends it."""
        attributes = without_operation(attributes)
        return self.tracer.start_span(SpanName.SESSION_END, kind=SpanKind.INTERNAL, context=context,
                                      attributes=attributes, start_time=start_time)

    # -- a transcript call, whole ---------------------------------------------------------

    def write_call(self, model: str | None, attributes: Mapping[str, Any], annotation: Annotation,
                   markers: list[tuple[str, Annotation]], marker_attributes: Mapping[str, Any],
                   start_time: int, end_time: int) -> None:
        """A call already over (``replay``, ``watch``): its span, its markers under it, its events; ended.

        Everything at the call's start except the span's end; markers last no time.
        Written finished (:mod:`ctxscope.telemetry.finished_spans`) where that gives
        the SDK's own spans; otherwise through the SDK's tracer, which applies its
        sampler and limits.
        """
        finished = self._finished
        if finished is _UNSET:
            from ctxscope.telemetry.finished_spans import finished_spans

            finished = self._finished = finished_spans(self.tracer)
        if finished is not None:
            marked = [(name, without_operation(annotated(marker_attributes, marker_annotation)), marker_annotation)
                      for name, marker_annotation in markers]
            if finished.write_call(call_span_name(model), attributes, annotation, marked, start_time, end_time):
                return
        span = self.start_call(model, attributes, start_time)
        for name, marker_annotation in markers:
            marker = self.marker(name, span, annotated(marker_attributes, marker_annotation), marker_annotation,
                                 start_time)
            self.end(marker, start_time)
        self.change_events(span, annotation, start_time)
        self.end(span, end_time)
