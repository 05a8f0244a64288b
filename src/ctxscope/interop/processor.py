"""ForeignSpanProcessor: model-call spans of other instrumentations -> companion spans.

A finished span cannot be changed, so for each model-call span another
instrumentation writes (:mod:`.formats`), this processor builds the items and
the session's snapshot (a private :class:`~ctxscope.telemetry.tracker.Tracker`: the same
extractor, ledger, waste and limits as ctxscope's own instrumentation) and
writes a **companion span** ``ctxscope.context {model}``: a child of the
original span, same trace, same start and end, carrying the SPEC annotation
and the gen_ai identity attributes. :class:`~ctxscope.telemetry.processor.ContextSpanProcessor`
turns it into metrics like any annotated span.

Never on:

* spans of the ``ctxscope`` scope (its own calls, markers and companions: no recursion);
* spans that already carry an annotation;
* another instrumentation's span around or inside a call ctxscope's own
  instrumentation recorded (seen in ``on_start``): no double counting.

Every body is guarded: an error of ours is logged, never raised into the
program that ends the span.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import NonRecordingSpan

from ctxscope.instrumentation._measured import RecentIds  # one bounded set of recent span ids
from ctxscope.instrumentation._wrappers import Telemetry
from ctxscope.core.apis import API_OPENAI_CHAT  # the shape every foreign format is rebuilt in (formats.py)
from ctxscope.telemetry.processor import UNKNOWN_SESSION, ensure_processor, install_once
from ctxscope.core.conversation import current_session_id
from ctxscope.core.observation import Usage
from ctxscope.schema import INSTRUMENTATION_SCOPE, Annotation, Attr, Coverage, GenAI, SpanName, Stage
from ctxscope.telemetry.spans import annotated, call_span_name, usage_attributes
from ctxscope.telemetry.tracker import Tracker
from ctxscope.interop.formats import ForeignCall, parse_attributes

if TYPE_CHECKING:  # pragma: no cover - logs.py imports the SDK's log processor only when asked for
    from ctxscope.interop.logs import GenAIEventContent

__all__ = ["COMPANION_SPAN_PREFIX", "ForeignSpanProcessor", "install"]

_log = logging.getLogger(__name__)

COMPANION_SPAN_PREFIX = SpanName.COMPANION_PREFIX

def _scope(span: Any) -> str | None:
    scope = getattr(span, "instrumentation_scope", None)
    return getattr(scope, "name", None)


class ForeignSpanProcessor(SpanProcessor):
    """Context annotation for model-call spans written by other GenAI instrumentations.

    ``tracer_provider`` is where the companion spans go (default: the global
    one); the :class:`~ctxscope.telemetry.processor.ContextSpanProcessor` that turns them
    into metrics is installed there too (once, with ``meter_provider``).
    ``tracker``: a Tracker of one's own (tests, a tokenizer choice); by default
    a private one, so these sessions never mix with ctxscope's own calls.
    """

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, *,
                 tracker: Tracker | None = None, tokenizer: str | None = None) -> None:
        self._telemetry = Telemetry(tracer_provider, tracker or Tracker(tokenizer=tokenizer))
        self._own_calls = RecentIds()  # span ids of ctxscope's own model-call spans
        self._covered = RecentIds()  # span ids of foreign spans a ctxscope call ran inside
        self._shutdown = False
        self._events: GenAIEventContent | None = None  # once log_processor() was asked for
        ensure_processor(tracer_provider, meter_provider)

    def log_processor(self) -> GenAIEventContent:
        """A log record processor for content written in log events instead of spans.

        openai-v2 with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only``
        puts the messages on a ``gen_ai.client.inference.operation.details``
        event: add this to the ``LoggerProvider`` the instrumentation writes to
        (``logger_provider.add_log_record_processor(processor.log_processor())``).
        """
        if self._events is None:
            from ctxscope.interop.logs import GenAIEventContent

            self._events = GenAIEventContent()
        return self._events

    @property
    def tracker(self) -> Tracker:
        return self._telemetry.tracker

    # -- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        try:
            if _scope(span) != INSTRUMENTATION_SCOPE:
                return
            attributes = getattr(span, "attributes", None) or {}
            if GenAI.OPERATION_NAME not in attributes:
                return
            self._own_calls.add(span.context.span_id)
            parent = getattr(span, "parent", None)
            if parent is not None:
                self._covered.add(parent.span_id)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: could not look at a starting span", exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: could not annotate the span %r of another instrumentation",
                         getattr(span, "name", "?"), exc_info=True)

    def shutdown(self) -> None:
        if not self._shutdown:
            self._shutdown = True
            self._telemetry.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- internals -------------------------------------------------------------

    def _on_end(self, span: ReadableSpan) -> None:
        if self._shutdown or _scope(span) == INSTRUMENTATION_SCOPE:
            return
        attrs = span.attributes or {}
        if Annotation.present_in(attrs):
            return
        if span.context is not None and span.context.span_id in self._covered:
            return
        if span.parent is not None and span.parent.span_id in self._own_calls:
            return
        if self._events is not None and span.context is not None:
            content = self._events.take(span.context.span_id)
            if content and not any(key in attrs for key in content):
                attrs = {**attrs, **content}
        call = parse_attributes(attrs)
        if call is None or (call.body is None and call.usage.reported_input is None):
            return
        self._annotate(span, call)

    def _session_id(self, call: ForeignCall) -> str | None:
        """gen_ai.conversation.id / session.id, else the tracker's rules (fingerprint)."""
        if call.conversation_id:
            return call.conversation_id
        if call.body is None and current_session_id() is None:
            # Without content there is no fingerprint: one session for the rest.
            return UNKNOWN_SESSION
        return None

    def _annotate(self, span: ReadableSpan, call: ForeignCall) -> None:
        tracker = self._telemetry.tracker
        model = call.model
        body = call.body if call.body is not None else {"model": model or "", "messages": []}
        # A history known to be partial must not be read as a compaction by the
        # ledger; missing tool definitions alone do not hide any history. Without
        # content the breakdown was not recorded: the reported total stands alone.
        if call.body is None:
            coverage: Coverage | None = Coverage.UNRECORDED
        else:
            coverage = Coverage.PARTIAL if call.chained else None
        pending = tracker.observe_request(body, API_OPENAI_CHAT, provider=call.provider or "unknown",
                                          session_id=self._session_id(call), model=model,
                                          timestamp_ns=span.start_time, coverage=coverage)
        snapshot = pending.snapshot
        annotation = snapshot.annotation
        if not call.complete and annotation.coverage is Coverage.COMPLETE:
            annotation.coverage = Coverage.PARTIAL
        annotation.sample_offset_ns = 0
        tracker.observe_response(pending, call.usage, response_model=call.response_model,
                                 response_id=call.response_id, ended_ns=span.end_time)
        identity: dict[str, Any] = {
            GenAI.OPERATION_NAME: SpanName.OPERATION_CHAT,
            Attr.SESSION_ID: pending.session_id,
            GenAI.PROVIDER_NAME: pending.provider,
        }
        if pending.conversation_id:  # never a fingerprint (GenAI conventions)
            identity[GenAI.CONVERSATION_ID] = pending.conversation_id
        if model:
            identity[GenAI.REQUEST_MODEL] = model
        if call.response_model:
            identity[GenAI.RESPONSE_MODEL] = call.response_model
        # The input alone: the other instrumentation's span carries the rest of the usage already.
        identity.update(usage_attributes(Usage(reported_input=call.usage.reported_input)))
        parent = trace.set_span_in_context(NonRecordingSpan(span.context))
        start = span.start_time
        end = span.end_time if span.end_time is not None else start
        spans = self._telemetry.spans
        companion = self._start(call_span_name(model, COMPANION_SPAN_PREFIX), annotation, identity, parent, start)
        # Markers as ctxscope's own calls write them, children of the companion.
        if pending.first:
            spans.end(self._start(SpanName.CAPTURE_START, snapshot.annotation_for(Stage.CAPTURE_START), identity,
                                  companion, start), end)
        if snapshot.compaction is not None:
            post = snapshot.compaction.annotation
            post.sample_offset_ns = 0
            if not call.complete and post.coverage is Coverage.COMPLETE:
                post.coverage = Coverage.PARTIAL
            spans.end(self._start(SpanName.POST_COMPACTION, post, identity, companion, start), end)
        spans.end(companion, end)

    def _start(self, name: str, annotation: Annotation, identity: dict[str, Any], parent: Any,
               start: int | None) -> Any:
        """A span carrying the identity, the annotation and its change events (the caller ends it)."""
        return self._telemetry.spans.marker(name, parent, annotated(identity, annotation), annotation, start)


_installed: "weakref.WeakKeyDictionary[Any, ForeignSpanProcessor]" = weakref.WeakKeyDictionary()


def install(tracer_provider: Any = None, meter_provider: Any = None, *,
            tokenizer: str | None = None) -> ForeignSpanProcessor | None:
    """Add one :class:`ForeignSpanProcessor` to an SDK tracer provider (idempotent).

    ``tracer_provider`` defaults to the global one. Returns None (logged at
    debug level) when it is not the SDK's: there is nothing to attach to.
    """
    return install_once(tracer_provider, _installed,
                        lambda provider: ForeignSpanProcessor(provider, meter_provider, tokenizer=tokenizer),
                        "processor for other instrumentations", "other instrumentations not profiled")
