"""One instrumented model call: its span, its annotation, its observation.

The provider modules (``openai.py``, ``anthropic.py``) know the SDKs; this
module knows OpenTelemetry and the tracker; the spans themselves are
written by the one span writer (:mod:`ctxscope.telemetry.spans`). A
:class:`ModelCall` opens the GenAI client span, computes the context
annotation from the request while the span is open (SPEC section 4), emits the ``capture-start`` and
``post-compaction`` spans, and once the response (or the stream's last event)
arrives sets the usage, the reported input and the calibration, then ends
the span.

Every step of ours is guarded: an error of ctxscope (tokenizer, ledger,
processor, a listener) is logged and never reaches the caller. The provider's
own errors are recorded on the span (``error.type``) and re-raised unchanged
by the wrappers, which never catch them here.

What differs between providers (reading a response, a stream, the output
content) is an :class:`Api` the provider module describes; the method
wrappers, the same for every provider, are in :mod:`._instrumentor`.

Message content (SPEC section 7) is off unless the instrumentor was turned on
with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` set (see
:mod:`._content`): then the call's span carries ``gen_ai.system_instructions``,
``gen_ai.input.messages``, ``gen_ai.tool.definitions`` (given at span start)
and ``gen_ai.output.messages`` (at the end), and/or a
``gen_ai.client.inference.operation.details`` event carries them structured.
"""

from __future__ import annotations

import collections.abc
import contextvars
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from ctxscope.core.conversation import compaction_marks
from ctxscope.instrumentation import _worker

from ctxscope.faultlog import log_failure
from ctxscope.core.observation import Usage
from ctxscope.schema import INSTRUMENTATION_SCOPE, Attr, GenAI, SpanName, Stage
from ctxscope.telemetry.spans import SpanWriter, annotated, usage_attributes
from ctxscope.telemetry.tracker import PendingCall, Tracker, get_tracker, session_end_time_ns
from ctxscope.instrumentation._content import ContentMode, request_content, span_attributes
from ctxscope.instrumentation._measured import note_call

_log = logging.getLogger("ctxscope.instrumentation")

OPERATION_CHAT = SpanName.OPERATION_CHAT
ERROR_TYPE = GenAI.ERROR_TYPE
SPAN_CAPTURE_START = SpanName.CAPTURE_START
SPAN_POST_COMPACTION = SpanName.POST_COMPACTION
SPAN_SESSION_END = SpanName.SESSION_END
# The GenAI conventions' event that carries a call's content structured (util-genai's name).
EVENT_OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
# Context key of the model call being sent (see ModelCall.activate; read by active_call()).
ACTIVE_CALL_KEY = otel_context.create_key("ctxscope-model-call")

# Request options that are not part of the request body.
_NOT_BODY = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ctxscope")
    except Exception:  # noqa: BLE001
        return "0.0.0"


@dataclass
class ResponseInfo:
    """What a response (or a finished stream) tells about the call."""

    usage: Usage = field(default_factory=Usage)
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    # Content capture only: the output in the GenAI conventions' shape.
    output_messages: list[dict[str, Any]] | None = None


def is_omitted(value: Any) -> bool:
    """The SDKs' "not given" sentinels (``omit``, ``NOT_GIVEN``)."""
    return type(value).__name__ in ("Omit", "NotGiven")


def request_body(kwargs: dict[str, Any],
                 iterable_fields: tuple[str, ...] = ("messages", "input", "tools")) -> dict[str, Any]:
    """The request body the SDK will send, from the call's keyword arguments.

    An iterator in ``messages``/``input``/``tools`` would be consumed by us
    before the SDK sees it: it is turned into a list, and the list is put
    back into ``kwargs`` so that the SDK sends the same items.
    """
    for name in iterable_fields:
        value = kwargs.get(name)
        # collections.abc, not typing: typing's alias checks cost microseconds a call.
        if (value is not None and type(value) not in (list, tuple, str, dict)
                and not isinstance(value, (list, tuple, str, collections.abc.Mapping)) and not is_omitted(value)):
            try:
                kwargs[name] = list(value)
            except TypeError:
                pass
    body = {k: v for k, v in kwargs.items() if k not in _NOT_BODY and not is_omitted(v)}
    extra = kwargs.get("extra_body")
    if isinstance(extra, collections.abc.Mapping):
        body.update(extra)
    return body


def snapshot_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as the worker reads it: a new dict, each list in it copied (pointers: microseconds).

    An agent appends to its message list once the call returns; the copy
    keeps the list as it was sent. The elements are shared: a message edited
    in place after the call, before the worker measured it, is measured as
    edited (the SDKs and the agents we know do not do that; docs/instrumentation.md).
    """
    return {key: (list(value) if type(value) is list else value) for key, value in body.items()}


# Request body field -> GenAI request attribute (numbers as given; the first of a key wins).
_NUMERIC_PARAMETERS = (
    (GenAI.REQUEST_MAX_TOKENS, "max_tokens"), (GenAI.REQUEST_MAX_TOKENS, "max_output_tokens"),
    (GenAI.REQUEST_MAX_TOKENS, "max_completion_tokens"), (GenAI.REQUEST_TEMPERATURE, "temperature"),
    (GenAI.REQUEST_TOP_P, "top_p"), (GenAI.REQUEST_TOP_K, "top_k"),
    (GenAI.REQUEST_FREQUENCY_PENALTY, "frequency_penalty"),
    (GenAI.REQUEST_PRESENCE_PENALTY, "presence_penalty"), (GenAI.REQUEST_SEED, "seed"),
)


def request_parameters(body: Mapping[str, Any]) -> dict[str, Any]:
    """The GenAI conventions' ``gen_ai.request.*`` parameters of a request body (no content)."""
    attributes: dict[str, Any] = {}
    for key, name in _NUMERIC_PARAMETERS:
        value = body.get(name)
        if key not in attributes and isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[key] = value
    stop = body.get("stop_sequences", body.get("stop"))
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, (list, tuple)) and stop and all(isinstance(x, str) for x in stop):
        attributes[GenAI.REQUEST_STOP_SEQUENCES] = list(stop)
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n != 1:  # the conventions: only when not 1
        attributes[GenAI.REQUEST_CHOICE_COUNT] = n
    return attributes


def server_of(instance: Any) -> tuple[str, int | None] | None:
    """``(server.address, server.port)`` of an SDK resource's client (``instance._client.base_url``)."""
    try:
        url = getattr(getattr(instance, "_client", None), "base_url", None)
        host = getattr(url, "host", None)
        if not isinstance(host, str) or not host:
            return None
        port = getattr(url, "port", None)
        if port is None:
            port = {"https": 443, "http": 80}.get(str(getattr(url, "scheme", "")))
        return host, port if isinstance(port, int) else None
    except Exception:  # noqa: BLE001 - an SDK without a base URL: no server attributes
        return None


class Telemetry:
    """The tracer and the tracker an instrumentor works with."""

    # Live instances: with both instrumentors on one tracker, one of them marks a session's end.
    _live: list["Telemetry"] = []

    def __init__(self, tracer_provider: Any = None, tracker: Tracker | None = None, *,
                 content: ContentMode = ContentMode.NO_CONTENT, logger_provider: Any = None,
                 meter_provider: Any = None) -> None:
        self.tracer: Tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, _version(), tracer_provider=tracer_provider)
        self.spans = SpanWriter(self.tracer)  # every span of this instrumentor is written by it
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._processor: Any = None
        self._warned_no_sdk = False
        self.tracker = tracker or get_tracker()
        # Decided once, when the instrumentor is turned on (SPEC section 7: off by default).
        self.content = content
        self.logger: Any = None
        if content.on_events:
            from opentelemetry import _logs

            self.logger = _logs.get_logger(INSTRUMENTATION_SCOPE, _version(), logger_provider=logger_provider)
        self.tracker.add_eviction_listener(self.session_ended)
        Telemetry._live = [*Telemetry._live, self]

    def close(self) -> None:
        self.tracker.remove_eviction_listener(self.session_ended)
        Telemetry._live = [t for t in Telemetry._live if t is not self]

    def processor(self) -> Any:
        """The context span processor the metrics go to, installed on the SDK tracer provider once it exists.

        Resolved at the call, not when instrumenting: an application may set
        its providers up after ``instrument()``. None (said once) while only
        no-op providers exist.
        """
        processor = self._processor
        if processor is None:
            from ctxscope.telemetry.processor import ensure_processor

            processor = self._processor = ensure_processor(self._tracer_provider, self._meter_provider)
            if processor is None and not self._warned_no_sdk:
                self._warned_no_sdk = True
                _log.warning("ctxscope: no OpenTelemetry SDK TracerProvider is set up, so no spans and no "
                             "llm.context metrics leave this process (set one up, run under "
                             "opentelemetry-instrument, or call ctxscope.setup()); the local store, when on, "
                             "still records every call")
        return processor

    def record(self, attributes: Mapping[str, Any], start_time_ns: int, span: Any,
               duration_s: float | None = None) -> None:
        """Hand a span's annotation to the metrics whether or not the span is recorded (sampling).

        ``duration_s``: a finished model call (its GenAI client histograms too).
        """
        processor = self.processor()
        if processor is not None:
            processor.observe_call(attributes, start_time_ns, span, duration_s)

    def session_ended(self, session_id: str) -> None:
        """A session left the tracker: a marker span (and the metrics directly) end its series."""
        if next((t for t in Telemetry._live if t.tracker is self.tracker), self) is not self:
            return
        attributes: dict[str, str | bool] = {Attr.SESSION_ID: session_id, Attr.SESSION_ENDED: True}
        ended = session_end_time_ns()  # the ending call's start: measured later, on the worker
        span = self.spans.session_end(attributes, otel_context.Context(), start_time=ended)
        self.record(attributes, 0, span)
        self.spans.end(span, ended)


class ModelCall:
    """The span and the tracker state of one model call. ``finish``/``fail`` end it once.

    On the caller's thread only what must be known before the request leaves:
    the span opens (with the request's model, parameters and server), the
    request is noted (a shallow copy of its lists: the caller may append to
    its history once the call returns) with the caller's context and the time.
    The composition (items, framing, diff, annotation, change events, marker
    spans) is measured by the process's measuring worker (:mod:`._worker`),
    in call order; ``finish``/``fail`` hand it the response, and the worker
    ends the span at the response's end time. ``ctxscope.testing.wait_for_measurements``
    (or the tracer provider's ``force_flush``) waits for it.
    """

    def __init__(self, telemetry: Telemetry, *, provider: str, api: str, body: Mapping[str, Any],
                 session_id: str | None = None, server: tuple[str, int | None] | None = None,
                 parse: Callable[[], Mapping[str, Any] | None] | None = None) -> None:
        self.telemetry = telemetry
        self.provider = provider
        self.api = api
        self.pending: PendingCall | None = None
        # Set by a stream proxy: end the call with what the stream saw.
        self.stream_finish: Callable[[], None] | None = None
        self.stream_fail: Callable[[BaseException], None] | None = None
        self._ended = False
        self._lock = threading.Lock()
        model = body.get("model")
        self.model = model if isinstance(model, str) else None
        started = time.time_ns()
        attributes: dict[str, Any] = {
            GenAI.OPERATION_NAME: OPERATION_CHAT,
            GenAI.PROVIDER_NAME: provider,
        }
        if self.model:
            attributes[GenAI.REQUEST_MODEL] = self.model
        attributes.update(request_parameters(body))
        if server is not None:
            attributes[GenAI.SERVER_ADDRESS] = server[0]
            if server[1] is not None:
                attributes[GenAI.SERVER_PORT] = server[1]
        self._started = started
        self.content: dict[str, list[Any]] = {}
        # Kept for the metrics, which take the call's attributes whether or not the span is sampled;
        # the worker completes them with the annotation (None: no annotation, no metrics).
        self._attributes: dict[str, Any] | None = None
        self._base_attributes = attributes
        self.span: Span = telemetry.spans.start_call(self.model, attributes, started)
        # What the worker reads of the request: the body as it is now (the caller's lists copied,
        # their elements shared: the SDKs and agents append to a history, they do not edit its
        # messages in place), the caller's context (ctxscope.session, the compacting flag, the
        # conversation id on the current span or in baggage) and the compactions declared so far.
        snapshot = snapshot_body(body) if parse is None else None
        marks = compaction_marks()
        _worker.submit(functools.partial(self._measure_request, snapshot, parse, session_id, marks),
                       "request", contextvars.copy_context(), wake=False)

    def _measure_request(self, body: Mapping[str, Any] | None, parse: Callable[[], Mapping[str, Any] | None] | None,
                         session_id: str | None, marks: int) -> None:
        """On the worker: the request's composition, its annotation on the span, its marker spans."""
        attributes: dict[str, Any] = {}
        if body is None and parse is not None:
            body = self._parsed(parse)
            if body is None:
                return
            attributes.update(self._opened_without(body))
        assert body is not None
        observed = self._started
        if self.telemetry.content.captures:
            self.content = self._request_content(body)
            if self.telemetry.content.on_spans:
                attributes.update(span_attributes(self.content))
        pending = self._observe_request(body, session_id, observed, marks)
        annotation = None
        if pending is not None:
            annotation = pending.snapshot.annotation
            attributes.update(self._identity())
            if pending.snapshot.compaction is not None:
                attributes[GenAI.CONVERSATION_COMPACTED] = True  # the first call after it; never false
            attributes.update(annotation.to_attributes())
        if annotation is not None:
            self._attributes = {**self._base_attributes, **attributes}
        self.telemetry.spans.annotate(self.span, attributes)
        _worker.pause()
        if annotation is not None:
            self._decorate(annotation, observed)

    def _opened_without(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """What the whole body says that the span did not open with (the transport's peek can only miss fields)."""
        attributes = {key: value for key, value in request_parameters(body).items()
                      if key not in self._base_attributes}
        model = body.get("model")
        if self.model is None and isinstance(model, str) and model:
            self.model = model
            attributes[GenAI.REQUEST_MODEL] = model
            self.telemetry.spans.rename_call(self.span, model)
        self._base_attributes.update(attributes)
        return attributes

    def _parsed(self, parse: Callable[[], Mapping[str, Any] | None]) -> Mapping[str, Any] | None:
        try:
            return parse()
        except Exception:  # noqa: BLE001 - ours: the call goes on without a composition
            log_failure(_log, "ctxscope: could not read the %s request", self.api)
            return None

    # -- request -------------------------------------------------------------------

    def _identity(self) -> dict[str, str]:
        """The session key (ctxscope's attribute), and gen_ai.conversation.id only where one was given."""
        pending = self.pending
        if pending is None:
            return {}
        identity = {Attr.SESSION_ID: pending.session_id}
        if pending.conversation_id:
            identity[GenAI.CONVERSATION_ID] = pending.conversation_id
        return identity

    @property
    def captures_content(self) -> bool:
        return self.telemetry.content.captures

    def _request_content(self, body: Mapping[str, Any]) -> dict[str, list[Any]]:
        try:
            return request_content(self.api, body)
        except Exception:  # noqa: BLE001 - ours: the call goes on without content
            log_failure(_log, "ctxscope: could not read the %s request's content", self.api)
            return {}

    def _observe_request(self, body: Mapping[str, Any], session_id: str | None,
                         observed: int, marks: int | None = None) -> PendingCall | None:
        """The request as the tracker took it (also kept as ``pending``), or None when that failed (logged)."""
        try:
            pending = self.telemetry.tracker.observe_request(
                body, self.api, provider=self.provider, session_id=session_id, model=self.model,
                timestamp_ns=observed, compactions_before=marks)
            self.pending = pending
            pending.snapshot.annotation.sample_offset_ns = max(0, observed - self._started)
            return pending
        except Exception:  # noqa: BLE001 - ours: log, never reach the caller
            log_failure(_log, "ctxscope: could not annotate the %s call", self.api)
            return None

    def _decorate(self, annotation: Any, observed: int) -> None:
        """Change events on the call's span; capture-start and post-compaction child spans."""
        try:
            snapshot = self.pending.snapshot  # type: ignore[union-attr]
            if self.pending.first:  # type: ignore[union-attr]
                self._marker(SPAN_CAPTURE_START, snapshot.annotation_for(Stage.CAPTURE_START))
            if snapshot.compaction is not None:
                post = snapshot.compaction.annotation
                post.sample_offset_ns = 0
                self._marker(SPAN_POST_COMPACTION, post)
            self.telemetry.spans.change_events(self.span, annotation, observed)  # none on a sampled-out span
        except Exception:  # noqa: BLE001
            log_failure(_log, "ctxscope: could not annotate the %s call", self.api)

    def _marker(self, name: str, annotation: Any) -> None:
        """A short span carrying an annotation of its own stage, child of the call's span."""
        # No gen_ai.operation.name: a marker is not a model call (trace backends list those as requests).
        identity: dict[str, Any] = {**self._identity(), GenAI.PROVIDER_NAME: self.provider}
        if self.model:
            identity[GenAI.REQUEST_MODEL] = self.model
        now = time.time_ns()
        attributes = annotated(identity, annotation)
        spans = self.telemetry.spans
        span = spans.marker(name, self.span, attributes, annotation, self._started, event_time=now)
        self.telemetry.record(attributes, self._started, span)
        spans.end(span, now)

    # -- response --------------------------------------------------------------------

    def _claim(self) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    @property
    def ended(self) -> bool:
        return self._ended

    def finish(self, info: ResponseInfo | Callable[[], ResponseInfo | None] | None) -> None:
        """The response arrived (or the stream ended): the worker sets usage, reported input, ends the span.

        ``info``: what the response tells, or a function the worker calls to
        read it from the response (off the call path: the SDKs' response
        objects are read, never changed, and the caller does not edit them).
        """
        if not self._claim():
            return
        _worker.submit(functools.partial(self._finish, info, time.time_ns(), compaction_marks()), "response",
                       wake=False)

    def fail(self, error: BaseException, info: ResponseInfo | None = None) -> None:
        """The provider (or the transport) raised: the worker records it on the span; the caller re-raises."""
        if not self._claim():
            return
        # The type's name only: the exception (its traceback, the caller's frames) is not kept.
        _worker.submit(functools.partial(self._fail, type(error).__qualname__, info, time.time_ns()), "error",
                       wake=False)

    def end_read(self, outcome: Callable[[], tuple[ResponseInfo | None, str | None]]) -> None:
        """The response ended: the worker reads it (``outcome``: its info, and the error type it fails with,
        None when it finished) and ends the call as :meth:`finish` or :meth:`fail` would (the transport layer)."""
        if not self._claim():
            return
        _worker.submit(functools.partial(self._end_read, outcome, time.time_ns(), compaction_marks()), "response",
                       wake=False)

    def _end_read(self, outcome: Callable[[], tuple[ResponseInfo | None, str | None]], ended: int,
                  marks: int) -> None:
        try:
            info, error_type = outcome()
        except Exception:  # noqa: BLE001 - ours: the call ends without what the response said
            log_failure(_log, "ctxscope: could not read the %s response", self.api)
            info, error_type = None, None
        if error_type is None:
            self._finish(info, ended, marks)
        else:
            self._fail(error_type, info, ended)

    def _finish(self, info: ResponseInfo | Callable[[], ResponseInfo | None] | None, ended: int, marks: int) -> None:
        try:
            if callable(info):
                info = info()
            info = info or ResponseInfo()
            attributes = self._response_attributes(info)
            if self.pending is not None:
                self.telemetry.tracker.observe_response(
                    self.pending, info.usage, response_model=info.response_model, response_id=info.response_id,
                    ended_ns=ended, compactions_at_end=marks)
                attributes.update(self._reported_attributes())
                if info.usage.cleared:
                    attributes.update(self._cleared(info.usage.cleared))
            if self.captures_content:
                self._output_attributes(info, attributes)
            self.telemetry.spans.annotate(self.span, attributes)
            self._record(attributes, ended)
            if self.telemetry.logger is not None:
                self._emit_details(info, attributes)
        except Exception:  # noqa: BLE001
            log_failure(_log, "ctxscope: could not record the %s response", self.api)
        finally:
            self._end(ended)

    def _fail(self, error_type: str, info: ResponseInfo | None, ended: int) -> None:
        try:
            # The description stays the type: a provider message may quote the prompt (SPEC section 7).
            self.telemetry.spans.fail(self.span, error_type)
            attributes = self._response_attributes(info) if info is not None else {}
            attributes[ERROR_TYPE] = error_type
            if self.pending is not None:
                self.telemetry.tracker.observe_response(
                    self.pending, info.usage if info else None, error=error_type, ended_ns=ended)
                attributes.update(self._reported_attributes())
            if self.captures_content:
                self._output_attributes(info or ResponseInfo(), attributes)
            self.telemetry.spans.annotate(self.span, attributes)
            self._record(attributes, ended)
            if self.telemetry.logger is not None:
                self._emit_details(info or ResponseInfo(), attributes)
        except Exception:  # noqa: BLE001
            log_failure(_log, "ctxscope: could not record the %s error", self.api)
        finally:
            self._end(ended)

    def _record(self, attributes: Mapping[str, Any], ended: int) -> None:
        """The call's annotation, usage included, and its GenAI client metrics (sampled or not)."""
        if self._attributes is not None:
            self.telemetry.record({**self._attributes, **attributes}, self._started, self.span,
                                  duration_s=(ended - self._started) / 1e9)

    def _output_attributes(self, info: ResponseInfo, attributes: dict[str, Any]) -> None:
        """The output messages on the span, as JSON, when content goes to spans."""
        if self.telemetry.content.on_spans and info.output_messages:
            attributes.update(span_attributes({GenAI.OUTPUT_MESSAGES: info.output_messages}))

    def _emit_details(self, info: ResponseInfo, attributes: Mapping[str, Any]) -> None:
        """The ``gen_ai.client.inference.operation.details`` event: the call's attributes, the content structured."""
        try:
            from opentelemetry._logs import LogRecord

            event: dict[str, Any] = {GenAI.OPERATION_NAME: OPERATION_CHAT, GenAI.PROVIDER_NAME: self.provider}
            if self.model:
                event[GenAI.REQUEST_MODEL] = self.model
            event.update(self._identity())
            event.update(attributes)
            # Structured, not JSON: log record attributes may hold lists of maps.
            event.update({k: v for k, v in self.content.items() if v})
            if info.output_messages:
                event[GenAI.OUTPUT_MESSAGES] = info.output_messages
            self.telemetry.logger.emit(LogRecord(event_name=EVENT_OPERATION_DETAILS, attributes=event,
                                                 context=trace.set_span_in_context(self.span)))
        except Exception:  # noqa: BLE001 - the span is complete without it
            log_failure(_log, "ctxscope: could not emit the %s call's content event", self.api)

    def _cleared(self, edits: Any) -> dict[str, Any]:
        """The categories after the provider's context editing, and its removals as change events."""
        annotation = self.pending.snapshot.annotation  # type: ignore[union-attr]
        self.telemetry.spans.change_events(self.span, annotation,
                                           only_ids={f"provider-edit:{edit_type}" for edit_type, _ in edits})
        return {key: value for key, value in annotation.to_attributes().items()
                if key.startswith(Attr.CATEGORIES_PREFIX) or key in (Attr.ESTIMATED_TOKENS, Attr.OMITTED_CHANGES)}

    def _reported_attributes(self) -> dict[str, Any]:
        """The reported input and calibration the ledger attached (SPEC sections 4-5)."""
        annotation = self.pending.snapshot.annotation if self.pending is not None else None
        attributes: dict[str, Any] = {}
        if annotation is not None and annotation.reported_tokens is not None:
            attributes[Attr.REPORTED_TOKENS] = int(annotation.reported_tokens)
        if annotation is not None and annotation.calibration_factor is not None:
            attributes[Attr.CALIBRATION_FACTOR] = float(annotation.calibration_factor)
        return attributes

    @staticmethod
    def _response_attributes(info: ResponseInfo) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        if info.response_model:
            attributes[GenAI.RESPONSE_MODEL] = info.response_model
        if info.response_id:
            attributes[GenAI.RESPONSE_ID] = info.response_id
        if info.finish_reasons:
            attributes[GenAI.RESPONSE_FINISH_REASONS] = list(info.finish_reasons)
        attributes.update(usage_attributes(info.usage))
        return attributes

    def _end(self, ended: int) -> None:
        try:
            self.telemetry.spans.end(self.span, ended)  # the response's end, not the worker's
        except Exception:  # noqa: BLE001 - a processor that raises must not reach the caller
            log_failure(_log, "ctxscope: ending the span failed")

    # -- context ------------------------------------------------------------------------

    def activate(self) -> object:
        """Make the call's span current while the SDK sends the request (its own spans nest under it)."""
        # The call rides in the context too: a transport below it (instrumentation/http) then knows
        # the request is measured already, whether or not the span is sampled.
        return otel_context.attach(otel_context.set_value(ACTIVE_CALL_KEY, self,
                                                          trace.set_span_in_context(self.span)))

    @staticmethod
    def deactivate(token: object) -> None:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001
            pass


def active_call() -> "ModelCall | None":
    """The model call whose request is being sent in this context (SDK or transport level), if any.

    One mechanism for both who ask: the HTTP transport layer (a request already measured above it is
    not measured again) and the Anthropic SDK's own call span (left out while ours is being sent).
    """
    call = otel_context.get_value(ACTIVE_CALL_KEY)
    return call if isinstance(call, ModelCall) else None


def start_call(telemetry: Telemetry, *, provider: str, api: str, body: Mapping[str, Any],
               server: tuple[str, int | None] | None = None,
               parse: Callable[[], Mapping[str, Any] | None] | None = None) -> ModelCall | None:
    """A :class:`ModelCall`, or None when even opening the span failed (the call then runs bare).

    ``parse``: the whole body, read by the worker (the transport layer); ``body`` is then what the
    span opens with (the model, the parameters).
    """
    try:
        call = ModelCall(telemetry, provider=provider, api=api, body=body, server=server, parse=parse)
    except Exception:  # noqa: BLE001
        log_failure(_log, "ctxscope: could not start a span for the %s call", api)
        return None
    try:
        note_call(call.span)  # the GenAI completion hook then knows this call is measured
    except Exception:  # noqa: BLE001
        _log.debug("ctxscope: could not note a call", exc_info=True)
    return call


def usage_from(input_tokens: Any = None, output_tokens: Any = None, cache_read: Any = None,
               cache_creation: Any = None, reported_input: Any = None, server_tool_calls: Any = None) -> Usage:
    def num(value: Any) -> int | None:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return Usage(input_tokens=num(input_tokens), output_tokens=num(output_tokens),
                 cache_read_input_tokens=num(cache_read), cache_creation_input_tokens=num(cache_creation),
                 reported_input=num(reported_input), server_tool_calls=num(server_tool_calls))


def install_processor(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Put the context span processor on the SDK tracer provider (once), so the spans become metrics."""
    try:
        from ctxscope.telemetry.processor import ensure_processor

        ensure_processor(tracer_provider, meter_provider)
    except Exception:  # noqa: BLE001 - no metrics is better than a broken program
        _log.warning("ctxscope: could not install the context span processor", exc_info=True)


def unwrap_all(*groups: Any) -> None:
    """Undo ``wrap_function_wrapper`` for ``(module, "Class.method", ...)`` targets; safe to repeat."""
    import importlib

    from opentelemetry.instrumentation.utils import unwrap

    for group in groups:
        for target in group:
            module_name, dotted = target[0], target[1]
            class_name, method = dotted.split(".", 1)
            try:
                owner = getattr(importlib.import_module(module_name), class_name)
                unwrap(owner, method)
            except Exception:  # noqa: BLE001 - not wrapped, or the SDK lacks it
                _log.debug("ctxscope: could not unwrap %s.%s", module_name, dotted)


# ---------------------------------------------------------------------------
# What a provider module describes (the shared wrappers are in _instrumentor.py)
# ---------------------------------------------------------------------------

class StreamState(Protocol):
    """What a stream proxy shows each chunk or event to; ``info()`` once the stream ends."""

    def observe(self, item: Any) -> None: ...

    def info(self) -> ResponseInfo: ...


@dataclass(frozen=True)
class Api:
    """What a provider module tells the shared wrappers about one of its APIs."""

    name: str  # items.API_*: the request format the tracker reads
    provider: str  # gen_ai.provider.name
    stream_classes: Callable[[], tuple[type, type]]  # the SDK's (Stream, AsyncStream), imported lazily
    info: Callable[[Any], ResponseInfo]  # a response object -> usage, ids, finish reasons
    stream_state: Callable[[bool], StreamState]  # a new state for a stream; True: collect the output content
    output: Callable[[Any, ResponseInfo], list[dict[str, Any]]]  # a response -> output messages (content capture)
