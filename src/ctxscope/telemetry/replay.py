"""Transcripts as telemetry: the spans a live session would have produced.

:class:`CallEmitter` turns :class:`~ctxscope.transcripts.TranscriptCall`
objects into the spans the live instrumentation writes, through the same
span writer (:mod:`ctxscope.telemetry.spans`), so dashboards treat replayed
and live sessions alike:

- one ``chat <model>`` CLIENT span per provider call, with the GenAI
  attributes (``gen_ai.conversation.id`` = the transcript's session id; a
  subagent has its own), the provider's usage, and the context annotation
  at stage ``transcript-observed``, coverage ``partial``, with the reported
  input and the calibration (SPEC sections 4-5);
- a ``capture-start`` child span at a session's first call in the recording;
- a ``post-compaction`` child span where the transcript compacted;
- a ``session-end`` marker span (``llm.context.session_ended``) when a
  session ends, so the :class:`~ctxscope.telemetry.processor.ContextSpanProcessor`
  reports its series as 0 once and drops them.

Spans carry the transcript's own timestamps (see :mod:`ctxscope.transcripts.follow`).
For ``watch`` (``stable_ids``, ``hold``) a call's span ids derive from the
call (:mod:`ctxscope.telemetry.ids`) and its spans are written only when
the watch releases them, just before it exports and saves its state.
:func:`replay_files` drives a whole replay: read, emit, optionally pace the
calls (``speed``), then end the recording.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sized

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import OTEL_BSP_MAX_QUEUE_SIZE
from opentelemetry.trace import Tracer

from ctxscope import config
from ctxscope.transcripts.follow import FollowedFile, TimedCall
from ctxscope.gc_pause import cyclic_gc_paused
from ctxscope.core.ledger import Snapshot
from ctxscope.core.observation import Observation, Usage
from ctxscope.core.pipeline import TranscriptAccount
from ctxscope.schema import INSTRUMENTATION_SCOPE, Annotation, Attr, GenAI, SpanName, Stage
from ctxscope.telemetry.ids import CallIds, call_seed, session_end_seed
from ctxscope.telemetry.spans import SpanWriter, usage_attributes
from ctxscope.transcripts import Problem

__all__ = ["CallEmitter", "ReplayResult", "replay_files"]

_log = logging.getLogger(__name__)
# The SDK's default OTEL_BSP_MAX_QUEUE_SIZE.
_DEFAULT_BSP_QUEUE = 2048


@dataclass
class _Session:
    account: TranscriptAccount  # the accounting analyze uses too
    emitted: int = 0  # calls emitted in this recording
    last_index: int = -1  # the index of the last call emitted
    last_time_ns: int | None = None  # the latest time a call of the session carried (emitted or absorbed)
    sized: bool = False  # its ledger keeps characters and bytes per part (a listener was there as it began)


class CallEmitter:
    """Transcript calls -> spans, one ledger (and waste tracker) per session.

    ``emit`` writes a call's spans; ``absorb`` feeds a call to the session's
    ledger without any span (to rebuild the context before resuming);
    ``end_session`` ends a session's recording.

    ``stable_ids``: a call's trace and span ids derive from its session id and
    index, so a call emitted again (a watch killed after exporting it, before
    saving its state) is the same span. ``hold``: spans are computed at
    ``emit`` but written (and handed to ``listener``) only by :meth:`release`,
    so a watch decides when they may leave.

    ``listener`` (a local store's ``record``) is given when the emitter is
    built, or set before its first call: a session's ledger keeps the
    characters and bytes per part a store's record needs only when a listener
    is there as the session begins (the texts are let go once counted, so they
    cannot be measured later). Setting one once a session has begun without
    them raises ``ValueError``: its calls could not be stored, and a store
    that only warns would lose them silently.
    """

    def __init__(self, tracer: Tracer, *, tokenizer: str = "auto",
                 listener: Callable[[Observation], None] | None = None, stable_ids: bool = False,
                 hold: bool = False) -> None:
        self.tracer = tracer
        self._ids: CallIds | None = None
        fallback = getattr(tracer, "id_generator", None)
        if stable_ids and fallback is not None:
            # The SDK tracer asks its own id_generator (a tracer per get_tracer call, this
            # emitter's alone), so live spans of the same provider keep random ids.
            self._ids = CallIds(fallback)
            tracer.id_generator = self._ids  # type: ignore[attr-defined]
        self.hold = hold
        self._held: list[Callable[[], None]] = []
        self._held_unsized: dict[str, None] = {}  # sessions with held calls that carry no sizes per part
        self.writer = SpanWriter(tracer)
        self.tokenizer = tokenizer
        self._listener = listener
        # SPEC section 7 labels opt-in, read once: CTXSCOPE_CAPTURE_LABELS through config, as the
        # tracker reads it (its capture_labels_from_env), without importing the live path's tracker.
        self.capture_labels = config.settings().capture_labels
        self._sessions: dict[str, _Session] = {}

    @classmethod
    def for_provider(cls, tracer_provider: Any, **kwargs: Any) -> "CallEmitter":
        return cls(trace.get_tracer(INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider), **kwargs)

    @property
    def listener(self) -> Callable[[Observation], None] | None:
        """Called with each emitted call's :class:`Observation` (when its spans are written)."""
        return self._listener

    @listener.setter
    def listener(self, listener: Callable[[Observation], None] | None) -> None:
        if listener is not None:
            unsized = self._unsized()
            if unsized:
                raise ValueError(
                    f"CallEmitter.listener set after {len(unsized)} session(s) began without one "
                    f"({', '.join(unsized[:3])}{', ...' if len(unsized) > 3 else ''}): their calls carry no "
                    "characters or bytes per part and could not be stored; give the listener when the "
                    "emitter is built (CallEmitter(..., listener=...)) or before its first call")
        self._listener = listener

    def _unsized(self) -> list[str]:
        """Sessions whose calls (live, or held for :meth:`release`) carry no sizes per part."""
        unsized = [sid for sid, state in self._sessions.items() if not state.sized]
        return unsized + [sid for sid in self._held_unsized if sid not in unsized]

    def sessions(self) -> list[str]:
        return list(self._sessions)

    @property
    def held(self) -> int:
        """Writes waiting for :meth:`release` (calls and session ends)."""
        return len(self._held)

    def release(self) -> int:
        """Write the held spans, in the order they were emitted; how many writes were released."""
        held, self._held = self._held, []
        self._held_unsized = {}
        for write in held:
            try:
                write()
            except Exception:  # noqa: BLE001
                _log.warning("ctxscope: could not write a held span", exc_info=True)
        return len(held)

    # -- calls ---------------------------------------------------------------------

    def absorb(self, timed: TimedCall) -> None:
        """Count a call into its session's context without emitting it (a resume's silent part)."""
        try:
            self._observe(timed)
        except Exception:  # noqa: BLE001 - ours: log, keep going
            _log.warning("ctxscope: could not count call %s of %s", timed.call.index, timed.call.session_id,
                         exc_info=True)

    def emit(self, timed: TimedCall) -> Snapshot | None:
        """The spans of one call (capture-start / post-compaction / request); its snapshot."""
        try:
            return self._emit(timed)
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not emit call %s of %s", timed.call.index, timed.call.session_id,
                         exc_info=True)
            return None

    def end_session(self, session_id: str) -> None:
        """End a session's recording: a marker span makes the processor report its series as 0, then drop them."""
        state = self._sessions.pop(session_id, None)
        if state is None or not state.emitted:
            return
        seed = session_end_seed(session_id, state.last_index)

        def write() -> None:
            try:
                with self._seeded(seed):
                    self.writer.end(self.writer.session_end({GenAI.CONVERSATION_ID: session_id,
                                                             Attr.SESSION_ENDED: True}))
            except Exception:  # noqa: BLE001
                _log.warning("ctxscope: could not end session %s", session_id, exc_info=True)

        self._write(write)

    def end_all(self, flush_spans: Callable[[], Any] | None = None) -> None:
        """End every session; ``flush_spans`` as in :func:`replay_files` (a replay of thousands of
        sessions writes as many session-end markers here)."""
        every = span_flush_interval()
        for n, session_id in enumerate(list(self._sessions), 1):
            self.end_session(session_id)
            if flush_spans is not None and n % every == 0:
                flush_spans()

    # -- internals -------------------------------------------------------------------

    def _write(self, write: Callable[[], None]) -> None:
        if self.hold:
            self._held.append(write)
        else:
            write()

    def _untimed_start(self, state: _Session) -> int:
        """The start of a call whose transcript gives it no time: now; with stable ids, the session's
        latest known time (a call emitted again must be the same span, not one stamped later)."""
        if self._ids is not None and state.last_time_ns is not None:
            return state.last_time_ns
        return time.time_ns()

    def _seeded(self, seed: str) -> Any:
        return self._ids.seeded(seed) if self._ids is not None else nullcontext()

    def _state(self, session_id: str) -> _Session:
        state = self._sessions.get(session_id)
        if state is None:
            # Texts let go once counted (memory follows the counts, as analyze's), a local store's listener
            # included: its record takes characters and bytes per part from the ledger (Snapshot.part_bytes).
            sized = self._listener is not None
            account = TranscriptAccount(session_id, tokenizer=self.tokenizer, capture_labels=self.capture_labels,
                                        keep_text=False, part_sizes=sized)
            state = self._sessions[session_id] = _Session(account, sized=sized)
        return state

    def _observe(self, timed: TimedCall) -> tuple[_Session, Snapshot]:
        state = self._state(timed.call.session_id)
        snapshot, _ = state.account.observe(timed.call, timestamp_ns=timed.start_ns, sample_offset_ns=0)
        for known in (timed.start_ns, timed.end_ns):
            if known is not None and (state.last_time_ns is None or known > state.last_time_ns):
                state.last_time_ns = known
        return state, snapshot

    def _emit(self, timed: TimedCall) -> Snapshot:
        call = timed.call
        state, snapshot = self._observe(timed)
        start = timed.start_ns if timed.start_ns is not None else self._untimed_start(state)
        end = timed.end_ns if timed.end_ns is not None and timed.end_ns >= start else start
        base: dict[str, Any] = {GenAI.OPERATION_NAME: SpanName.OPERATION_CHAT, GenAI.PROVIDER_NAME: call.provider,
                                GenAI.CONVERSATION_ID: call.session_id}
        if call.model:
            base[GenAI.REQUEST_MODEL] = call.model
        attributes = {**base, **usage_attributes(call.usage), **snapshot.annotation.to_attributes()}
        if call.usage is None:
            attributes[Attr.USAGE_MISSING] = True  # said, not left to an absent attribute
        markers: list[tuple[str, Annotation]] = []
        # The recording of this session starts here (a replay, a watch that
        # began or resumed mid-session): the baseline is not growth.
        if not state.emitted:
            markers.append((SpanName.CAPTURE_START, snapshot.annotation_for(Stage.CAPTURE_START)))
        if snapshot.compaction is not None:
            post = snapshot.compaction.annotation
            post.sample_offset_ns = 0
            markers.append((SpanName.POST_COMPACTION, post))
        state.emitted += 1
        state.last_index = call.index
        if self.hold and not state.sized:
            self._held_unsized[call.session_id] = None
        seed = call_seed(call.session_id, call.index)

        # A held write runs later: everything it uses is final here (a snapshot is
        # not changed once observe returned it).
        def write() -> None:
            with self._seeded(seed):
                self.writer.write_call(call.model, attributes, snapshot.annotation, markers, base, start, end)
            listener = self._listener
            if listener is not None:
                try:
                    listener(Observation(session_id=call.session_id, provider=call.provider,
                                              request_model=call.model, response_model=None, snapshot=snapshot,
                                              usage=call.usage or Usage(), timestamp_ns=start,
                                              duration_ns=end - start))
                except Exception:  # noqa: BLE001
                    _log.warning("ctxscope: observation listener failed", exc_info=True)

        self._write(write)
        return snapshot


# ---------------------------------------------------------------------------
# A whole replay
# ---------------------------------------------------------------------------

@dataclass
class ReplayResult:
    calls: int = 0
    sessions: list[str] = field(default_factory=list)
    problems: list[tuple[str, Problem]] = field(default_factory=list)


def span_flush_interval(environ: Mapping[str, str] | None = None) -> int:
    """Calls between two flushes of the spans: a quarter of the batch span processor's queue.

    A replay writes spans faster than a ``BatchSpanProcessor`` exports them,
    and the SDK drops the spans that find its queue full (a quiet machine
    lost 2,512 of dense50's 5,585). A call writes at most three spans (the
    call, a capture-start and a post-compaction marker), a session's end one,
    so flushing every quarter of the queue's size in calls (or ends) never fills it.
    """
    try:
        queue = int(config.otel(environ, OTEL_BSP_MAX_QUEUE_SIZE) or _DEFAULT_BSP_QUEUE)
    except ValueError:
        queue = _DEFAULT_BSP_QUEUE  # the SDK warns about the bad value and uses its default too
    return max(1, queue // 4)


def span_queue(span_processor: Any) -> tuple[Sized, int] | None:
    """A ``BatchSpanProcessor``'s queue and its size, or None (another processor, another SDK's layout).

    The SDK (1.45) keeps the spans waiting for export in a ``deque`` of its ``BatchProcessor``; earlier
    releases kept a ``queue`` and ``max_queue_size`` on the span processor itself.
    """
    for holder in (getattr(span_processor, "_batch_processor", None), span_processor):
        queue = getattr(holder, "_queue", None) if holder is not None else None
        if queue is None and holder is span_processor:
            queue = getattr(holder, "queue", None)
        size = getattr(holder, "_max_queue_size", None) if holder is not None else None
        if size is None and holder is span_processor:
            size = getattr(holder, "max_queue_size", None)
        if isinstance(queue, Sized) and isinstance(size, int) and size > 0:
            return queue, size
    return None


def replay_files(paths: Iterable[str], emitter: CallEmitter, *, format: str | None = None,
                 speed: float | None = None, sleep: Callable[[float], None] = time.sleep,
                 flush_spans: Callable[[], Any] | None = None,
                 queue: tuple[Sized, int] | None = None) -> ReplayResult:
    """Emit every call of the files, file after file, then end every session.

    ``speed`` paces the calls by their original spacing divided by it (2.0
    replays twice as fast); None or 0 replays as fast as possible. The
    caller ends the recording (flushing the metrics first, so the last
    values are exported before the zeros). ``flush_spans`` (the tracer
    provider's ``force_flush``) runs every :func:`span_flush_interval` calls:
    the back-pressure that keeps the span processor's queue from dropping.
    With the processor's ``queue`` (:func:`span_queue`) it runs only when needed:
    after a call that left less than half of the queue free (or room for less
    than one call's three spans), so the processor's own thread exports the
    rest while the replay reads on, its round trips to the receiver not waited for.
    """
    with cyclic_gc_paused():
        return _replay_files(paths, emitter, format, speed, sleep, flush_spans, queue)


def _replay_files(paths: Iterable[str], emitter: CallEmitter, format: str | None, speed: float | None,
                  sleep: Callable[[float], None], flush_spans: Callable[[], Any] | None,
                  queue: tuple[Sized, int] | None) -> ReplayResult:
    result = ReplayResult()
    flush_every = span_flush_interval()
    waiting, full = (queue[0], min(queue[1] // 2, queue[1] - 3)) if queue is not None else (None, 0)

    def problem(path: str, found: Problem) -> None:
        result.problems.append((path, found))

    previous_ns: int | None = None
    for path in paths:
        followed = FollowedFile(path, format=format, documents=True, on_problem=problem)
        for timed in followed.iter_calls(final=True):
            if speed and timed.start_ns is not None:
                if previous_ns is not None and timed.start_ns > previous_ns:
                    sleep(min((timed.start_ns - previous_ns) / 1e9 / speed, 3600.0))
                previous_ns = timed.start_ns
            if emitter.emit(timed) is not None:
                result.calls += 1
                if flush_spans is None:
                    pass
                elif waiting is not None:
                    if len(waiting) > full:
                        flush_spans()
                elif result.calls % flush_every == 0:
                    flush_spans()
                if timed.call.session_id not in result.sessions:
                    result.sessions.append(timed.call.session_id)
    return result
