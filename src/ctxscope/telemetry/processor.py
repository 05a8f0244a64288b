"""ContextSpanProcessor: annotated spans -> the metrics of SPEC section 6.

ctxscope's instrumentors hand each call's annotation over directly
(:meth:`ContextSpanProcessor.observe_call`), whether its span is recorded or
sampled out, so the metrics do not depend on sampling. For every other span,
``on_end`` reads the context annotation back from the finished span (only
the attributes the metrics need, :func:`reading_from_attributes`; the
``llm.context.change`` events carry nothing the metrics need). Either way the
processor keeps each session's latest state and, at the next collection, sets
the synchronous gauges of :mod:`ctxscope.telemetry.metrics` where a value
changed. So anything that writes the annotation (a transcript replay, a
companion span) gets the metrics.

Semantics (docs/telemetry.md):

- ``llm.context.tokens`` per category in the calibrated view (SPEC section 5),
  ``unattributed`` included; a series a session reported before and missing
  from its newest snapshot reports 0 once to each reader, then leaves.
- A collection (the compaction counter's callback, :meth:`ContextSpanProcessor._collect`,
  runs first in each) sets only the series of the sessions changed since the
  last one, and only those whose value changed; every other live series is
  read from the SDK's storage as it stands. Ended series are removed from
  the SDK's storage once every reader has collected their final value
  (:meth:`ContextSpanProcessor._forget`).
- ``llm.context.added.tokens`` (and, in fleet mode, ``llm.context.request.tokens``
  and a synchronous compaction counter, no session key anywhere) are
  recorded per call in the call span's context: exemplars lead to the call.
- When a recording ends (``stop()``, ``shutdown()``, ``end_session(id)``, a
  span with ``llm.context.session_ended``, or LRU eviction past
  ``max_sessions``), every gauge series of the session reports 0 once per
  metric reader and then leaves later exports; ``stop()`` first exports the
  live values through every push reader, so a run shorter than the export
  interval still sends them, then the zeros through them; a pull reader
  (Prometheus) gets the zeros at its own next collection. The compaction counter never
  goes down: it reports its final total once more, then leaves.
- Every body (``on_end``, callbacks) is guarded: an error is logged, never
  raised into the user's program.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Mapping, TypeVar

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

from ctxscope.config import DEFAULT_MAX_SESSIONS, settings
from ctxscope.telemetry import metrics as ctx_metrics
from ctxscope.telemetry import shutdown as _shutdown
from ctxscope.telemetry.histogram_records import HistogramRecorder
from ctxscope.telemetry.views import offer_gauge_views
from ctxscope.core.views import calibrate, calibration_target
from ctxscope.schema import (
    CATEGORIES,
    Attr,
    Category,
    CompactionTrigger,
    GenAI,
    InstrumentSpec,
    LimitKind,
    Metric,
    MetricAttr,
    Stage,
    WasteKind,
)

_log = logging.getLogger(__name__)

# A session whose spans carry neither llm.context.session.id nor
# gen_ai.conversation.id (an instrumentation other than ours, or a replay
# without one) is keyed by this id.
UNKNOWN_SESSION = "unknown"

# Recorded spans handed over by observe_call whose on_end has not come yet: a
# span of another tracer provider (without this processor) never ends here.
_MAX_DIRECT = 4096

# The attributes of the GenAI client histograms (as util-genai records them).
_GENAI_METRIC_KEYS = (GenAI.OPERATION_NAME, GenAI.PROVIDER_NAME, GenAI.REQUEST_MODEL, GenAI.RESPONSE_MODEL,
                      GenAI.SERVER_ADDRESS, GenAI.SERVER_PORT, GenAI.ERROR_TYPE)

# A series of one session: ((model, provider), the instrument's own label value).
_Key = tuple[Any, ...]
# A label of a reading's values (a category, a waste kind).
_L = TypeVar("_L")

# Ended series waiting for their last collection; bounded when nothing collects.
_MAX_ENDINGS = 4 * DEFAULT_MAX_SESSIONS

# The stages of a model call's annotation (markers are not calls: no growth, no request).
_CALL_STAGES = (Stage.REQUEST_INPUT, Stage.TRANSCRIPT_OBSERVED)

_hash_attributes: Callable[[Any], Any] | None
try:  # the SDK's series key (private): ended series are forgotten with it (_forget)
    from opentelemetry.sdk.metrics._internal._view_instrument_match import (  # noqa: PLC2701
        _hash_attributes as _sdk_series_key,
    )
    _hash_attributes = _sdk_series_key
except ImportError:  # another SDK release: ended series stay in the SDK's storage
    _hash_attributes = None


@dataclass(slots=True)
class _Records:
    """What one call records on the histograms (and the fleet counter), outside the lock."""

    model: str | None
    provider: str | None
    added: dict[Category, int] = field(default_factory=dict)
    request: dict[Category, int] = field(default_factory=dict)
    compaction: CompactionTrigger | None = None


def _series(base: Mapping[str, Any], category: Category) -> dict[str, Any]:
    """A histogram series' attributes: the call's model and provider, and the category."""
    return {**base, MetricAttr.CATEGORY: category.value}


def calibrated_view(categories: Mapping[Category, int], reported: int | None) -> dict[Category, int]:
    """SPEC section 5 calibrated categories (``unattributed`` included once measured)."""
    # A key that is a Category already skips the enum's lookup (a Python call for each).
    return {c if c.__class__ is Category else Category(c): int(v)
            for c, v in calibrate(categories, reported)[0].items()}


# ---------------------------------------------------------------------------
# Reading a span: only what the metrics need
# ---------------------------------------------------------------------------

# Attribute key -> value, built once from schema (the names are never retyped).
_CATEGORY_KEYS = tuple((Attr.category(c), c) for c in CATEGORIES)
_WASTE_KEYS = tuple((Attr.waste(k), k) for k in WasteKind)
_STAGES: dict[Any, Stage] = {stage.value: stage for stage in Stage}
_LIMIT_KEYS = ((Attr.WINDOW_TOKENS, LimitKind.WINDOW),
               (Attr.EFFECTIVE_WINDOW_TOKENS, LimitKind.EFFECTIVE_WINDOW),
               (Attr.COMPACT_THRESHOLD_TOKENS, LimitKind.COMPACT_THRESHOLD))


@dataclass(slots=True)
class SpanReading:
    """What the metrics take from one annotated span (a part of SPEC section 4)."""

    stage: Stage
    categories: dict[Category, int]  # raw estimates
    estimated: int
    reported: int | None
    learned_correction: int | None
    limits: dict[LimitKind, int]     # positive values only
    waste: dict[WasteKind, int]
    trigger: CompactionTrigger | None
    sample_offset_ns: int
    model: str | None                # llm.context.model
    baseline: bool = False           # llm.context.baseline: a first observation is not growth


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def _present_ints(get: Callable[[str], Any], keys: Iterable[tuple[str, _L]]) -> dict[_L, int]:
    """``label: int(value)`` of each ``(attribute key, label)`` whose attribute is there.

    A loop rather than a comprehension (3.11 calls each as a function), and ``int()`` only
    where the value is not an int already: every annotated span is read so.
    """
    out: dict[_L, int] = {}
    for key, label in keys:
        value = get(key)
        if value is not None:
            out[label] = value if value.__class__ is int else int(value)
    return out


def reading_from_attributes(attrs: Mapping[str, Any]) -> SpanReading | None:
    """The metrics' part of the annotation on span attributes; None when there is none.

    Cheaper than :meth:`Annotation.from_attributes`, which the metrics do not
    need whole: no Annotation is built, and the change events are never read
    (on_end runs on the caller's thread at span end).
    """
    get = attrs.get
    stage = get(Attr.STAGE)
    estimated = get(Attr.ESTIMATED_TOKENS)
    if stage is None or estimated is None:
        return None
    trigger = get(Attr.COMPACTION_TRIGGER)
    model = get(Attr.MODEL)
    return SpanReading(
        # A known stage's member in one dict get (the enum's call is several Python calls); Stage() says
        # what is wrong with another value.
        stage=_STAGES.get(stage) or Stage(stage),
        categories=_present_ints(get, _CATEGORY_KEYS),
        estimated=int(estimated),
        reported=_int_or_none(get(Attr.REPORTED_TOKENS)),
        learned_correction=_int_or_none(get(Attr.LEARNED_CORRECTION_TOKENS)),
        limits={kind: int(v) for key, kind in _LIMIT_KEYS if (v := get(key)) is not None and v > 0},
        waste=_present_ints(get, _WASTE_KEYS),
        trigger=CompactionTrigger(trigger) if trigger is not None else None,
        sample_offset_ns=int(get(Attr.SAMPLE_OFFSET_NS) or 0),
        model=str(model) if model is not None else None,
        baseline=bool(get(Attr.BASELINE)))


def _plain_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes, as a plain dict where the SDK offers one cheaply."""
    if type(span) is ReadableSpan:
        # A finished span built with a plain dict (replay's, telemetry/finished_spans.py): read as it
        # is, not through the read-only view and its copy (the SDK's own spans hold BoundedAttributes).
        held = span._attributes  # noqa: SLF001
        if type(held) is dict:
            return held
    attrs = span.attributes or {}
    # The SDK's read-only view wraps BoundedAttributes, whose copy() is one C
    # dict copy, while each get through the view costs two Python calls.
    copy = getattr(attrs, "copy", None)
    if copy is not None:
        try:
            plain = copy()
        except Exception:  # noqa: BLE001
            return attrs
        if isinstance(plain, dict):
            return plain
    return attrs


@dataclass
class _Session:
    """The latest state of one live session, and its series built once per change."""

    session_id: str
    conversation_id: str | None = None  # gen_ai.conversation.id where the application gave one
    model: str | None = None
    provider: str | None = None
    observed_ns: int = -1
    tokens: dict[Category, int] = field(default_factory=dict)  # read through settled_tokens()
    # The newest call's raw estimates and the total they calibrate to, not yet made into
    # ``tokens``: calibrated when read (a collection, fleet mode's request), once however many calls.
    calibration: tuple[dict[Category, int], int | None] | None = None
    limits: dict[LimitKind, int] = field(default_factory=dict)
    reported: int | None = None
    waste: dict[WasteKind, int] = field(default_factory=dict)
    compactions: dict[CompactionTrigger, int] = field(default_factory=dict)
    # The raw estimates of the newest call (llm.context.added.tokens is their growth).
    raw: dict[Category, int] = field(default_factory=dict)
    # The series last set in the SDK (the counter's: reported), per instrument and series:
    # rebuilt when the state changes, never per collection (docs/telemetry.md, "Cost of a collection").
    series: dict[InstrumentSpec, dict[_Key, Observation]] = field(default_factory=dict)

    def settled_tokens(self) -> dict[Category, int]:
        """The calibrated view of the newest call (SPEC section 5)."""
        if self.calibration is not None:
            categories, measured = self.calibration
            self.tokens = calibrated_view(categories, measured)
            self.calibration = None
        return self.tokens

    def base(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {MetricAttr.SESSION_ID: self.session_id}
        if self.conversation_id:
            attrs[MetricAttr.CONVERSATION_ID] = self.conversation_id
        if self.model:
            attrs[MetricAttr.REQUEST_MODEL] = self.model
        if self.provider:
            attrs[MetricAttr.PROVIDER_NAME] = self.provider
        return attrs

    def build(self) -> dict[InstrumentSpec, dict[_Key, Observation]]:
        """Every series of the newest state, as observations ready to report."""
        base = self.base()
        tokens = self.settled_tokens()
        ident = (self.model, self.provider)  # with the session, what base varies by

        def labelled(key: str, values: Mapping[Any, float]) -> dict[_Key, Observation]:
            return {(ident, v.value): Observation(n, {**base, key: v.value}) for v, n in values.items()}

        out = {
            Metric.TOKENS: labelled(MetricAttr.CATEGORY, tokens),
            Metric.LIMIT_TOKENS: labelled(MetricAttr.LIMIT, self.limits),
            Metric.WASTE_TOKENS: labelled(MetricAttr.WASTE_KIND, self.waste),
            Metric.COMPACTIONS: labelled(MetricAttr.COMPACTION_TRIGGER, self.compactions),
            Metric.REPORTED_TOKENS: {},
            Metric.UTILIZATION: {},
        }
        if self.reported is not None:
            out[Metric.REPORTED_TOKENS] = {(ident, None): Observation(self.reported, base)}
        limit = min(self.limits.values(), default=0)
        if limit > 0:
            out[Metric.UTILIZATION] = {(ident, None): Observation(sum(tokens.values()) / limit, base)}
        return out

    def final(self, spec: InstrumentSpec) -> list[Observation]:
        """What the session reports once when it ends."""
        observations = self.series.get(spec, {}).values()
        if spec.kind != "gauge":
            return list(observations)  # a counter never goes down: its final total
        return [Observation(0, o.attributes) for o in observations]


@dataclass
class _Ending:
    """Series that report their final value once to each metric reader, then leave.

    The gauges' zeros are set once, at the first collection after the end;
    the counter's final totals are observed at each collection until every
    reader has had one (``remaining``).
    """

    series: dict[InstrumentSpec, list[Observation]]
    remaining: int
    published: bool = False


def _metric_readers(meter_provider: Any) -> list[Any] | None:
    """The SDK meter provider's readers; None when it is not the SDK's."""
    for get in (lambda: meter_provider._metric_readers,  # noqa: SLF001 - no public accessor
                lambda: meter_provider._measurement_consumer._reader_storages,  # noqa: SLF001
                lambda: meter_provider._sdk_config.metric_readers):  # noqa: SLF001 - older SDKs
        try:
            return list(get())
        except (AttributeError, TypeError):
            continue
    return None


def _reader_storages(meter_provider: Any) -> list[Any]:
    """The SDK meter provider's per-reader metric storages; [] when it is not the SDK's."""
    try:
        return list(meter_provider._measurement_consumer._reader_storages.values())  # noqa: SLF001
    except (AttributeError, TypeError):
        return []


def _reader_count(meter_provider: Any) -> int:
    """How many metric readers will call our callbacks (each must see the final zeros)."""
    readers = _metric_readers(meter_provider)
    return max(1, len(readers)) if readers is not None else 1


_storage_warned = threading.Event()


def _warn_unknown_storage() -> None:
    """Once a process: ended series cannot be removed from this SDK's storage."""
    if not _storage_warned.is_set():
        _storage_warned.set()
        _log.warning("ctxscope: this OpenTelemetry SDK's metric storage is not the known one: ended sessions' "
                     "gauge series stay in it and report 0 for as long as the process runs")


# A collection waits at most this long for calls still being measured (the rest: the next one).
_COLLECTION_DRAIN_MS = 1000
_flushing = threading.local()


class ContextSpanProcessor(SpanProcessor):
    """Annotated spans -> the ``llm.context.*`` metrics of each live session."""

    def __init__(self, meter_provider: MeterProvider | None = None, *,
                 max_sessions: int = DEFAULT_MAX_SESSIONS, session_key: bool | None = None) -> None:
        """``session_key``: False is fleet mode (default: ``CTXSCOPE_METRICS_SESSION_KEY``)."""
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self._meter_provider = meter_provider
        self._max_sessions = max_sessions
        self.session_key = settings().metrics_session_key if session_key is None else session_key
        self._lock = threading.RLock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._endings: list[_Ending] = []
        # Sessions changed since the last collection: their series are built and set then (_publish).
        self._dirty: dict[str, _Session] = {}
        # Attributes of series whose final value every reader collected, per instrument (_forget).
        self._retired: dict[InstrumentSpec, list[Any]] = {}
        # Span ids of recorded spans whose annotation observe_call already took (insertion order).
        self._direct: dict[int, None] = {}
        self._shutdown = False
        self._views_offered = False  # offer_gauge_views, at the first _publish
        meter = ctx_metrics.get_meter(meter_provider)
        self.instruments: ctx_metrics.Instruments | None = None
        self._instruments: dict[InstrumentSpec, Any] = {}
        if self.session_key:
            self.instruments = ctx_metrics.create_instruments(meter, self._collection_callback())
            made = (self.instruments.tokens, self.instruments.limit_tokens, self.instruments.reported_tokens,
                    self.instruments.utilization, self.instruments.waste_tokens, self.instruments.compactions)
            self._instruments = dict(zip(Metric.ALL, made))
        self.added_tokens: Any = ctx_metrics.create_histogram(meter, Metric.ADDED_TOKENS)
        self.request_tokens: Any = None
        self.fleet_compactions: Any = None
        if not self.session_key:
            self.request_tokens = ctx_metrics.create_histogram(meter, Metric.REQUEST_TOKENS)
            self.fleet_compactions = ctx_metrics.create_fleet_counter(meter)
        self.genai_instruments = ctx_metrics.create_genai_instruments(meter)
        self._added = HistogramRecorder(self.added_tokens)
        self._request = HistogramRecorder(self.request_tokens) if self.request_tokens is not None else None
        # The SDK tracer provider this processor is on (ensure_processor sets it).
        self.tracer_provider: Any = None
        self._hook_meter_shutdown()
        # At exit and on SIGTERM: the live values, then the zeros, within ctxscope's budget.
        _shutdown.watch(self)

    # -- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: could not read the context annotation of a span", exc_info=True)

    def shutdown(self) -> None:
        """End the recording: final zeros are collected and exported now."""
        if self._shutdown:
            return
        self._shutdown = True
        self.stop()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """The calls measured off the call path finish first (their spans end, their metrics update).

        Spans they end reach the provider's other processors after those
        flushed (the SDK flushes its processors in order): flushed again then.
        """
        ran = _shutdown.drain_pending(timeout_millis / 1000)
        if ran > 0 and self.tracer_provider is not None and not getattr(_flushing, "active", False):
            _flushing.active = True
            try:
                self.tracer_provider.force_flush(timeout_millis)
            finally:
                _flushing.active = False
        return ran >= 0

    # -- recording control -----------------------------------------------------

    def stop(self, timeout_millis: int = 10000) -> None:
        """End every live session (a recording's end): export the live values, then the zeros."""
        try:
            _shutdown.drain_pending(timeout_millis / 1000)  # the calls made so far are in the live values
            self._final_export(timeout_millis)
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not end the recording", exc_info=True)

    def _final_export(self, timeout_millis: int) -> None:
        """The latest state reaches every push reader once, then the zeros (docs/telemetry.md).

        A process shorter than the export interval has never been collected:
        ending first would export only the zeros. So collect and export the
        live sessions, then end them, then collect and export their zeros.
        """
        with self._lock:
            live = bool(self._sessions)
        if live:
            self._flush_push_readers(timeout_millis)
        with self._lock:
            for session_id in list(self._sessions):
                self._end_locked(session_id)
            pending = bool(self._endings)
        if pending:  # nothing to export otherwise: spare the backend an empty round trip
            # Push readers only, as the live values: a pull reader's own next collection (a scrape)
            # reports the zeros. Collected here they would wait in its queue, and a scrape already
            # under way would serve them beside its live values, the same series twice: Prometheus
            # keeps the first sample, and the zeros were lost whenever a scrape overlapped the end.
            self._flush_push_readers(timeout_millis)

    def end_session(self, session_id: str) -> bool:
        """End one session: its series report 0 once, then leave. False if not live."""
        try:
            with self._lock:
                return self._end_locked(session_id)
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not end session %s", session_id, exc_info=True)
            return False

    def sessions(self) -> list[str]:
        """Ids of the live sessions, least recently used first."""
        with self._lock:
            return list(self._sessions)

    # -- internals -------------------------------------------------------------

    def observe_call(self, attributes: Mapping[str, Any], start_time_ns: int, span: Any = None,
                     duration_s: float | None = None) -> None:
        """A call's (or marker's) annotation handed over by the instrumentation, whatever its span.

        The metrics do not depend on sampling: ctxscope's instrumentors call
        this with the attributes they give their span, recorded, sampled out
        or not created at all. ``span``: when it is recording, its ``on_end``
        is then skipped, so a call counts once. ``duration_s``: a finished
        model call, which also records the GenAI conventions' client
        histograms (duration, token usage).
        """
        try:
            if duration_s is not None:
                self._record_genai(attributes, duration_s)
            if span is not None and span.is_recording():
                with self._lock:
                    self._direct[span.get_span_context().span_id] = None
                    if len(self._direct) > _MAX_DIRECT:  # spans of a provider without this processor
                        del self._direct[next(iter(self._direct))]
            self._observe_attributes(attributes, start_time_ns,
                                     span.get_span_context() if span is not None else None)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: could not record the context of a call", exc_info=True)

    def _record_genai(self, attributes: Mapping[str, Any], duration_s: float) -> None:
        """``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage`` of one call.

        With util-genai's attributes, names, units and buckets.
        """
        metric_attributes = {k: attributes[k] for k in _GENAI_METRIC_KEYS if k in attributes}
        self.genai_instruments.operation_duration.record(  # type: ignore[attr-defined]
            max(0.0, duration_s), metric_attributes)
        for token_type, key in (("input", GenAI.USAGE_INPUT_TOKENS), ("output", GenAI.USAGE_OUTPUT_TOKENS)):
            count = attributes.get(key)
            if isinstance(count, int) and not isinstance(count, bool):
                self.genai_instruments.token_usage.record(  # type: ignore[attr-defined]
                    count, {**metric_attributes, GenAI.TOKEN_TYPE: token_type})

    def _on_end(self, span: ReadableSpan) -> None:
        if self._direct:
            context = span.context
            if context is not None and context.span_id in self._direct:
                with self._lock:
                    self._direct.pop(context.span_id, None)
                return  # counted when the instrumentation handed it over
        self._observe_attributes(_plain_attributes(span), span.start_time or 0, span.context)

    def _observe_attributes(self, attrs: Mapping[str, Any], start_time_ns: int, span_context: Any = None) -> None:
        conversation_id = attrs.get(GenAI.CONVERSATION_ID)
        # ctxscope's own key first; a foreign or replayed span's conversation id, else "unknown".
        session_id = str(attrs.get(Attr.SESSION_ID) or conversation_id or UNKNOWN_SESSION)
        if attrs.get(Attr.SESSION_ENDED):
            self.end_session(session_id)
            return
        reading = reading_from_attributes(attrs)
        if reading is None:
            return
        model = attrs.get(GenAI.REQUEST_MODEL) or reading.model
        provider = attrs.get(GenAI.PROVIDER_NAME) or attrs.get(GenAI.SYSTEM)
        observed = start_time_ns + reading.sample_offset_ns
        with self._lock:
            if self._shutdown:
                return
            records = self._update(session_id, reading, str(model) if model else None,
                                   str(provider) if provider else None, observed,
                                   str(conversation_id) if conversation_id else None)
        if records:
            self._record_call(records, span_context)

    def _update(self, session_id: str, reading: SpanReading, model: str | None,
                provider: str | None, observed_ns: int, conversation_id: str | None = None) -> _Records | None:
        """The session's new state; what the call's histograms record (None: nothing)."""
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(session_id, conversation_id)
        self._sessions.move_to_end(session_id)
        records: _Records | None = None
        if reading.stage is Stage.POST_COMPACTION:
            trigger = reading.trigger or CompactionTrigger.AUTO
            session.compactions[trigger] = session.compactions.get(trigger, 0) + 1
            if not self.session_key:
                records = _Records(model, provider, compaction=trigger)
        # Spans of concurrent calls may end out of order: keep the newest state.
        if observed_ns >= session.observed_ns:
            if model != session.model:
                session.limits = {}  # limits belong to a model
                session.reported = None
                session.raw = {}
            if reading.stage in _CALL_STAGES and not reading.baseline:
                before = session.raw.get
                added = {c: v - was for c, v in reading.categories.items() if v > (was := before(c, 0))}
                records = records or _Records(model, provider)
                records.added = added
            session.raw = reading.categories
            session.observed_ns = observed_ns
            session.model = model
            session.provider = provider
            # No usage (yet): the estimate plus the learned correction (docs/fidelity.md,
            # "Self-calibration"); the ledger's views use the same rule.
            measured = calibration_target(reading.reported, reading.estimated, reading.learned_correction)
            if measured is not None and measured < 0:
                calibrated_view(reading.categories, measured)  # raises here, as before: the span is not counted
            session.calibration = (reading.categories, measured)
            session.limits.update(reading.limits)
            if reading.reported is not None:
                session.reported = reading.reported
            session.waste = reading.waste
            if not self.session_key and reading.stage in _CALL_STAGES:
                records = records or _Records(model, provider)
                records.request = session.settled_tokens()
        if self.session_key:
            self._dirty[session_id] = session  # built at the next collection, once however many calls
        while len(self._sessions) > self._max_sessions:
            oldest = next(iter(self._sessions))
            _log.debug("ctxscope: more than %d live sessions, ending %s", self._max_sessions, oldest)
            self._end_locked(oldest)
        return records

    def _record_call(self, records: _Records, span_context: Any) -> None:
        """The call's histograms (and the fleet counter), in the call span's context.

        Recorded in the span's context so that the SDK's exemplar filter
        (``trace_based`` by default) attaches the call's trace and span id.
        """
        context = None
        if span_context is not None and span_context.is_valid:
            context = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(span_context))
        model, provider = records.model, records.provider
        base: dict[str, Any] = {}
        if model:
            base[MetricAttr.REQUEST_MODEL] = model
        if provider:
            base[MetricAttr.PROVIDER_NAME] = provider
        for recorder, values in ((self._added, records.added), (self._request, records.request)):
            if recorder is None:
                continue
            # The call's measurements at once; a series' attributes are built once (HistogramRecorder keeps them).
            recorder.record_each(values, (model, provider), partial(_series, base), context)
        if self.fleet_compactions is not None and records.compaction is not None:
            self.fleet_compactions.add(1, {**base, MetricAttr.COMPACTION_TRIGGER: records.compaction.value},
                                       context=context)

    def _publish(self) -> None:
        """Set the series of every session changed since the last collection.

        Endings first, so that a session that restarted with the same id sets
        its new value after the old one's zero (the last value of a series wins).
        """
        if not self._views_offered and self._instruments:  # the SDK reads its views as a gauge is first set
            self._views_offered = True
            provider = self._resolved_meter_provider()
            offer_gauge_views(provider, [self._instruments[spec] for spec in Metric.ALL if spec.kind == "gauge"],
                              _metric_readers(provider) or ())
        dirty, self._dirty = self._dirty, {}
        changed = [self._rebuild(session) for session in dirty.values()]
        for ending in self._endings:
            if not ending.published:
                ending.published = True
                for spec, observations in ending.series.items():
                    if spec.kind == "gauge":
                        self._set(spec, observations)
        for session_changes in changed:
            for spec, values in session_changes.items():
                self._set(spec, values)

    def _set(self, spec: InstrumentSpec, observations: Iterable[Observation]) -> None:
        gauge = self._instruments[spec]
        for o in observations:
            gauge.set(o.value, o.attributes)

    def _rebuild(self, session: _Session) -> dict[InstrumentSpec, list[Observation]]:
        """Build the session's series anew: the gauge values to set; a series that left reports 0 once."""
        old = session.series
        session.series = new = session.build()
        gone: dict[InstrumentSpec, list[Observation]] = {}
        changed: dict[InstrumentSpec, list[Observation]] = {}
        for spec, observations in new.items():
            if spec.kind != "gauge":
                continue
            before = old.get(spec, {})
            # A series whose value did not change stays as the SDK holds it.
            values = [o for k, o in observations.items() if (b := before.get(k)) is None or b.value != o.value]
            if values:
                changed[spec] = values
            left = [Observation(0, o.attributes) for k, o in before.items() if k not in observations]
            if left:
                gone[spec] = left
        if gone:
            self._retire(gone)
        return changed

    def _retire(self, series: dict[InstrumentSpec, list[Observation]]) -> None:
        """Series that report their final value once to each metric reader, then leave."""
        readers = _reader_count(self._resolved_meter_provider())
        self._endings.append(_Ending(series, readers))
        # Without a collecting reader (no SDK meter provider) endings would pile up: the
        # oldest leave the SDK's storage at the next collection, without their final value.
        for dropped in self._endings[:-_MAX_ENDINGS]:
            for spec, observations in dropped.series.items():
                self._retired.setdefault(spec, []).extend(o.attributes for o in observations)
        del self._endings[:-_MAX_ENDINGS]

    def _end_locked(self, session_id: str) -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        if self._dirty.pop(session_id, None) is not None:
            self._rebuild(session)  # the final series include what it had never reported yet
        if self.session_key:
            self._retire({spec: session.final(spec) for spec in Metric.ALL})
        return True

    def _collection_callback(self) -> ctx_metrics.Callback:
        """The compaction counter's callback: the SDK calls it first in every collection of every reader."""
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            try:
                # A collection sees every call made before it (measured off the call path).
                _shutdown.drain_pending(min(options.timeout_millis, _COLLECTION_DRAIN_MS) / 1000)
                return self._collect()
            except Exception:  # noqa: BLE001 - a callback that raises loses every series
                _log.warning("ctxscope: could not report %s", Metric.COMPACTIONS.name, exc_info=True)
                return []
        return callback

    def _collect(self) -> list[Observation]:
        """One reader's collection: the gauges set where they changed, the counter's observations."""
        spec = Metric.COMPACTIONS
        with self._lock:
            # Series whose final value every reader has collected leave the SDK's storage.
            retired, self._retired = self._retired, {}
            for retired_spec, attributes in retired.items():
                self._forget(retired_spec, attributes)
            if self._dirty or any(not e.published for e in self._endings):
                self._publish()
            out: list[Observation] = []
            # Final totals first, so that a session that restarted with the same
            # id reports its new value (the last observation of a series wins).
            done = False
            for ending in self._endings:
                ending.remaining -= 1
                out.extend(ending.series.get(spec, ()))
                if ending.remaining <= 0:
                    for ended_spec, observations in ending.series.items():
                        self._retired.setdefault(ended_spec, []).extend(o.attributes for o in observations)
                    done = True
            if done:
                self._endings = [e for e in self._endings if e.remaining > 0]
            for session in self._sessions.values():
                series = session.series.get(spec)
                if series:
                    out.extend(series.values())
        return out

    def _forget(self, spec: InstrumentSpec, retired: list[Any]) -> None:
        """Drop ended series from the SDK's storage of our instrument.

        The SDK keeps the aggregation of every attribute set an instrument
        ever recorded (cumulative temporality): a synchronous gauge reports
        its last value for ever, an asynchronous counter's series is walked at
        every collection though reported no more; past its cardinality limit
        (2,000 by default) new series go to ``otel.metric.overflow``. A process
        serving many sessions would reach it within a few hundred sessions.
        No public API forgets a series, so this reaches into the SDK's storage
        (guarded: any other SDK keeps its own behaviour). A series that is
        live again is kept.
        """
        instrument = self._instruments.get(spec)
        # The SDK's own instrument behind a proxy's (the global meter provider set later).
        instrument = getattr(instrument, "_real_instrument", None) or instrument
        provider = self._resolved_meter_provider()
        if not isinstance(provider, SdkMeterProvider):
            return  # no SDK storage: nothing holds the series
        storages = _reader_storages(provider)
        if instrument is None or not storages or _hash_attributes is None:
            _warn_unknown_storage()
            return
        keys = []
        for attrs in retired:
            session = self._sessions.get(str(attrs.get(MetricAttr.SESSION_ID)))
            if session is not None and any(o.attributes == attrs for o in session.series.get(spec, {}).values()):
                continue
            keys.append(_hash_attributes(dict(attrs)))
        try:
            for storage in storages:
                for match in storage._instrument_view_instrument_matches.get(instrument, ()):  # noqa: SLF001
                    aggregations = match._attributes_aggregation  # noqa: SLF001 - no public way to forget
                    with match._lock:  # noqa: SLF001
                        for key in keys:
                            aggregations.pop(key, None)
        except (AttributeError, TypeError):
            _warn_unknown_storage()

    def _resolved_meter_provider(self) -> Any:
        return self._meter_provider if self._meter_provider is not None else otel_metrics.get_meter_provider()

    def _flush(self, timeout_millis: int) -> None:
        provider = self._resolved_meter_provider()
        if getattr(provider, "_shutdown", False) or not hasattr(provider, "force_flush"):
            return
        try:
            provider.force_flush(timeout_millis)
        except Exception:  # noqa: BLE001 - an unreachable backend costs the data only
            _log.warning("ctxscope: could not flush the final context metrics", exc_info=True)

    def _flush_push_readers(self, timeout_millis: int) -> None:
        """Collect and export the live values through every push reader (OTLP, console).

        Only push readers: a pull reader (Prometheus) would queue this
        collection beside the zeros' for its next scrape, which then reports
        the live values instead of the zeros; it sees what a scrape finds.
        """
        provider = self._resolved_meter_provider()
        if getattr(provider, "_shutdown", False):
            return
        readers = _metric_readers(provider)
        if readers is None:  # not the SDK's provider: its own flush is all there is
            self._flush(timeout_millis)
            return
        for reader in readers:
            if isinstance(reader, PeriodicExportingMetricReader):
                try:
                    reader.force_flush(timeout_millis)
                except Exception:  # noqa: BLE001 - an unreachable backend costs the data only
                    _log.warning("ctxscope: could not export the final context metrics", exc_info=True)

    def _hook_meter_shutdown(self) -> None:
        """Make the meter provider's own final collection carry the zeros.

        When the application shuts the meter provider down before the tracer
        provider, the final export happens inside ``MeterProvider.shutdown``:
        end the recording just before it.
        """
        provider = self._meter_provider
        if provider is None:
            resolved = otel_metrics.get_meter_provider()
            # The global provider when it is already the SDK's (a proxy cannot be hooked).
            provider = resolved if isinstance(resolved, SdkMeterProvider) else None
        original = getattr(provider, "shutdown", None)
        if provider is None or original is None or getattr(original, "_ctxscope_hooked", False):
            return
        this = weakref.ref(self)

        def shutdown(*args: Any, **kwargs: Any) -> Any:
            processor = this()
            if processor is not None:
                # A reader without a periodic thread does no final collection
                # of its own on shutdown: flush so the live values and the
                # zeros go out regardless.
                processor.stop()
            return original(*args, **kwargs)

        shutdown._ctxscope_hooked = True  # type: ignore[attr-defined]  # noqa: SLF001 - our own marker
        try:
            provider.shutdown = shutdown  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass


# ---------------------------------------------------------------------------
# Installing one processor on a tracer provider
# ---------------------------------------------------------------------------

_installed: "weakref.WeakKeyDictionary[Any, ContextSpanProcessor]" = weakref.WeakKeyDictionary()
# Reentrant: building a processor may install another one (ForeignSpanProcessor installs this one).
_install_lock = threading.RLock()
_P = TypeVar("_P", bound=SpanProcessor)


def install_once(tracer_provider: Any, installed: "weakref.WeakKeyDictionary[Any, _P]",
                 make: Callable[[Any], _P], what: str, without: str) -> _P | None:
    """Add ``make(provider)`` to an SDK tracer provider once; ``installed`` remembers it per provider.

    ``tracer_provider`` defaults to the global one. None when it is not the
    SDK's (no-op or proxy: nothing to attach to; logged at debug level as
    ``without``) or when installing failed (logged, naming ``what``).
    """
    try:
        provider = tracer_provider if tracer_provider is not None else otel_trace.get_tracer_provider()
        if not isinstance(provider, SdkTracerProvider):
            _log.debug("ctxscope: %s is not an SDK TracerProvider; %s", type(provider).__name__, without)
            return None
        with _install_lock:
            existing = installed.get(provider)
            if existing is not None:
                return existing
            processor = make(provider)
            provider.add_span_processor(processor)
            installed[provider] = processor
            return processor
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not install the %s", what, exc_info=True)
        return None


def ensure_processor(tracer_provider: Any = None, meter_provider: MeterProvider | None = None,
                     *, max_sessions: int = DEFAULT_MAX_SESSIONS) -> ContextSpanProcessor | None:
    """Install one :class:`ContextSpanProcessor` on an SDK tracer provider (idempotent).

    ``tracer_provider`` defaults to the global one. Returns the processor, or
    None when the provider is not the SDK's (no-op or proxy: nothing to attach
    to yet) or the installation failed (logged).
    """
    def make(provider: Any) -> ContextSpanProcessor:
        processor = ContextSpanProcessor(meter_provider, max_sessions=max_sessions)
        processor.tracer_provider = provider
        return processor

    return install_once(tracer_provider, _installed, make, "context span processor", "no context metrics")


def installed_processor(tracer_provider: Any = None) -> ContextSpanProcessor | None:
    """The processor :func:`ensure_processor` installed on a provider, if any."""
    provider = tracer_provider if tracer_provider is not None else otel_trace.get_tracer_provider()
    try:
        return _installed.get(provider)
    except TypeError:
        return None
