"""A transcript call's spans written finished, past the SDK's per-attribute checks (``replay``, ``watch``).

A replayed call is over before its spans are written: they need no open
``Span``, no lock, no second validation of attributes ctxscope built
itself. :class:`FinishedSpans` builds each span as the SDK's
``ReadableSpan`` (its public constructor) with the attributes and events
the SDK's own path would give it, and hands it to the tracer provider's
processors (``on_end``) in the order the SDK would: the markers, then the
call. Ids come from the tracer's own id generator in the SDK's order (the
call's trace id, then its span id, then each marker's), so ``watch``'s
derived ids are the same.

It writes only where the result is the SDK's, and says so
(:func:`finished_spans` returns None, :meth:`FinishedSpans.write_call`
False) so the caller takes the SDK's path, which applies what the user
configured:

- the tracer is the SDK's, enabled, without its internal metrics
  (``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``);
- the sampler samples every span of a call: ``parentbased_always_on`` (the
  default) or ``always_on``; any other (``traceidratio``, ``always_off``,
  a sampler of the application's) takes the SDK's path, which asks it;
- no attribute value length limit, and the call within the count limits
  (attributes of a span, events, attributes of an event);
- every attribute a ``str``, ``int``, ``float`` or ``bool`` (the SDK
  would drop a ``None``, copy a list, warn about another type);
- the provider's processors are ones whose ``on_start`` and ``_on_ending``
  do nothing (the batch and simple span processors, ctxscope's context
  span processor), on the SDK's synchronous multi-processor;
- no span is current (the SDK would make the call its child).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import Event, ReadableSpan, SynchronousMultiSpanProcessor, Tracer
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind, TraceFlags

from ctxscope.schema import Annotation

__all__ = ["FinishedSpans", "finished_spans"]

_log = logging.getLogger(__name__)

# Attribute values the SDK keeps as they are (a bool is its own class, not an int here).
_PLAIN = frozenset({str, int, float, bool})
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SAMPLED_RANDOM = TraceFlags(TraceFlags.SAMPLED | getattr(TraceFlags, "RANDOM_TRACE_ID", 0))


def _samples_every_span(sampler: Any) -> bool:
    """A root and its local children all recorded and sampled, whatever their attributes."""
    if sampler is sampling.ALWAYS_ON:
        return True
    if type(sampler) is not sampling.ParentBased:
        return False
    return (getattr(sampler, "_root", None) is sampling.ALWAYS_ON
            and getattr(sampler, "_local_parent_sampled", None) is sampling.ALWAYS_ON)


def _quiet_processors(tracer: Any) -> tuple[Any, ...] | None:
    """The processors' tuple when every one of them does nothing at a span's start; else None."""
    from ctxscope.telemetry.processor import ContextSpanProcessor

    multi = getattr(tracer, "span_processor", None)
    if type(multi) is not SynchronousMultiSpanProcessor:
        return None
    processors = getattr(multi, "_span_processors", None)
    if not isinstance(processors, tuple):
        return None
    quiet = (BatchSpanProcessor, SimpleSpanProcessor, ContextSpanProcessor)
    return processors if all(type(p) in quiet for p in processors) else None


def finished_spans(tracer: Any) -> "FinishedSpans | None":
    """A :class:`FinishedSpans` on ``tracer``, or None where the SDK's own path must write (module docstring)."""
    try:
        if type(tracer) is not Tracer or not tracer._is_enabled():  # noqa: SLF001
            return None
        metrics = getattr(tracer, "_tracer_metrics", None)
        if metrics is None or type(metrics).__name__ != "NoOpTracerMetrics":
            return None
        if not _samples_every_span(tracer.sampler):
            _log.debug("ctxscope: sampler %s: replayed spans go through the SDK's sampling", tracer.sampler)
            return None
        limits = tracer._span_limits  # noqa: SLF001
        if limits.max_attribute_length is not None or limits.max_span_attribute_length is not None:
            return None
        if _quiet_processors(tracer) is None:
            return None
        return FinishedSpans(tracer)
    except Exception:  # noqa: BLE001 - another SDK: its own path
        _log.debug("ctxscope: finished spans off", exc_info=True)
        return None


def _limit(value: int | None) -> float:
    return float("inf") if value is None else value


def _plain(attributes: Mapping[str, Any]) -> bool:
    return _PLAIN.issuperset(map(type, attributes.values()))


class FinishedSpans:
    """Writes a transcript call's spans finished, on the tracer's processors (see the module docstring)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self._sampler = tracer.sampler
        limits = tracer._span_limits  # noqa: SLF001
        self._max_attributes = _limit(limits.max_span_attributes)
        self._max_events = _limit(limits.max_events)
        self._max_event_attributes = _limit(limits.max_event_attributes)
        self._processors = _quiet_processors(tracer)

    def _usable(self) -> bool:
        """What may change after this was built: the sampler, the processors, a current span."""
        tracer = self.tracer
        if tracer.sampler is not self._sampler:
            return False
        processors = getattr(tracer.span_processor, "_span_processors", None)
        if processors is not self._processors:
            self._processors = _quiet_processors(tracer)
            if self._processors is None:
                return False
        return not trace_api.get_current_span().get_span_context().is_valid

    def _fits(self, attributes: Mapping[str, Any], events: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
        if len(attributes) > self._max_attributes or len(events) > self._max_events or not _plain(attributes):
            return False
        most = self._max_event_attributes
        return all(len(a) <= most and _plain(a) for _, a in events)

    def write_call(self, name: str, attributes: Mapping[str, Any], annotation: Annotation,
                   markers: list[tuple[str, Mapping[str, Any], Annotation]], start_time: int,
                   end_time: int) -> bool:
        """The call span ``name`` and its markers ``(name, attributes, annotation)``, ended; False: not written.

        The markers' attributes come without ``gen_ai.operation.name`` (the span writer removed it).
        """
        if not self._usable():
            return False
        events = annotation.change_events()
        marker_events = [marker.change_events() for _, _, marker in markers]
        if not self._fits(attributes, events):
            return False
        for (_, marker_attributes, _), found in zip(markers, marker_events):
            if not self._fits(marker_attributes, found):
                return False
        tracer = self.tracer
        ids = tracer.id_generator
        trace_id = ids.generate_trace_id()
        flags = _SAMPLED_RANDOM if ids.is_trace_id_random() else _SAMPLED
        context = trace_api.SpanContext(trace_id, ids.generate_span_id(), is_remote=False, trace_flags=flags)
        resource, scope, info = tracer.resource, tracer._instrumentation_scope, tracer.instrumentation_info  # noqa: SLF001
        on_end = tracer.span_processor.on_end
        finished = []
        for (marker_name, marker_attributes, _), found in zip(markers, marker_events):
            marker_context = trace_api.SpanContext(trace_id, ids.generate_span_id(), is_remote=False,
                                                   trace_flags=flags)
            finished.append(ReadableSpan(
                marker_name, marker_context, context, resource, dict(marker_attributes),
                [Event(event_name, event_attributes, start_time) for event_name, event_attributes in found],
                (), SpanKind.INTERNAL, info, start_time=start_time, end_time=start_time,
                instrumentation_scope=scope))
        finished.append(ReadableSpan(
            name, context, None, resource, dict(attributes),
            [Event(event_name, event_attributes, start_time) for event_name, event_attributes in events],
            (), SpanKind.CLIENT, info, start_time=start_time, end_time=end_time, instrumentation_scope=scope))
        for span in finished:
            on_end(span)
        return True

