"""Process-wide sessions of live instrumentation.

For each session (``ctxscope.session``) the tracker keeps a request extractor
(items), a ledger (snapshots) and, where :mod:`ctxscope.waste` offers one, a
waste tracker. The instrumentors call :meth:`Tracker.observe_request` while
the model call's span is open and :meth:`Tracker.observe_response` once the
response (or the stream's last event) arrives; each finished call is handed to
the listeners as an :class:`~ctxscope.observation.Observation` (the local store
subscribes with :meth:`Tracker.add_listener`).

Bounded: at most ``max_sessions`` live sessions (``CTXSCOPE_MAX_SESSIONS``,
default 64); past it the least recently used is dropped and the eviction
listeners are told (the instrumentation then ends its metric series).

Thread-safe: agents call from threads and asyncio tasks at once. A lock guards
the session table; each session's observations are serialised by its own lock,
so two sessions never wait for each other's counting.

No OpenTelemetry here: spans are the instrumentation's business.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import limits as _limits
from . import session as _session
from .environment_variables import CTXSCOPE_MAX_SESSIONS, CTXSCOPE_TOKENIZER
from .observation import Observation, Usage
from .schema import CompactionTrigger, Coverage, WasteKind

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "PendingCall",
    "Tracker",
    "get_tracker",
]

_log = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 64
# Responses API: response id -> session, so that a request chained with
# previous_response_id (whose input holds only the new turn) stays in its session.
_MAX_RESPONSE_IDS = 4096

Listener = Callable[[Observation], None]
EvictionListener = Callable[[str], None]


@dataclass
class _Session:
    session_id: str
    extractor: Any
    ledger: Any
    waste: Any | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    observations: int = 0


@dataclass
class PendingCall:
    """A model call between its request and its response."""

    session_id: str
    provider: str
    api: str
    request_model: str | None
    snapshot: Any  # ledger.Snapshot
    started_ns: int
    first: bool
    body: dict[str, Any] = field(repr=False, default_factory=dict)


def _default_max_sessions() -> int:
    raw = os.environ.get(CTXSCOPE_MAX_SESSIONS)
    if raw:
        try:
            value = int(raw)
            if value > 0:
                return value
        except ValueError:
            pass
        _log.warning("ctxscope: ignoring %s=%r (a positive number is needed)", CTXSCOPE_MAX_SESSIONS, raw)
    return DEFAULT_MAX_SESSIONS


class Tracker:
    """Sessions of a process: extraction, ledger and waste per session, LRU-bounded."""

    def __init__(self, *, max_sessions: int | None = None, tokenizer: str | None = None) -> None:
        self.max_sessions = max_sessions if max_sessions is not None else _default_max_sessions()
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.tokenizer = tokenizer or os.environ.get(CTXSCOPE_TOKENIZER) or "auto"
        self._sessions: "OrderedDict[str, _Session]" = OrderedDict()
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._eviction_listeners: list[EvictionListener] = []
        self._response_sessions: "OrderedDict[str, str]" = OrderedDict()

    # -- listeners ---------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(observation)`` after every finished model call."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners = [x for x in self._listeners if x != listener]

    def add_eviction_listener(self, listener: EvictionListener) -> None:
        """Call ``listener(session_id)`` when a session is dropped (LRU or :meth:`end_session`)."""
        with self._lock:
            if listener not in self._eviction_listeners:
                self._eviction_listeners = [*self._eviction_listeners, listener]

    def remove_eviction_listener(self, listener: EvictionListener) -> None:
        with self._lock:
            self._eviction_listeners = [x for x in self._eviction_listeners if x != listener]

    # -- sessions ------------------------------------------------------------------

    def sessions(self) -> list[str]:
        """Live session ids, least recently used first."""
        with self._lock:
            return list(self._sessions)

    def ledger(self, session_id: str) -> Any | None:
        with self._lock:
            state = self._sessions.get(session_id)
            return state.ledger if state is not None else None

    def end_session(self, session_id: str) -> bool:
        """Forget a session (its next call starts a new recording); tells the eviction listeners."""
        with self._lock:
            found = self._sessions.pop(session_id, None) is not None
        if found:
            self._evicted([session_id])
        return found

    def clear(self) -> None:
        """Forget every session without telling anyone (tests)."""
        with self._lock:
            self._sessions.clear()
            self._response_sessions.clear()

    def _session(self, session_id: str) -> tuple[_Session, bool]:
        evicted: list[str] = []
        with self._lock:
            state = self._sessions.get(session_id)
            created = state is None
            if state is None:
                state = self._new_session(session_id)
                self._sessions[session_id] = state
                while len(self._sessions) > self.max_sessions:
                    oldest, _ = self._sessions.popitem(last=False)
                    evicted.append(oldest)
            else:
                self._sessions.move_to_end(session_id)
        if evicted:
            self._evicted(evicted)
        return state, created

    def _new_session(self, session_id: str) -> _Session:
        from .items import RequestExtractor
        from .ledger import SessionLedger

        waste = None
        try:
            from .waste import WasteTracker  # D's incremental waste, where present

            waste = WasteTracker()
        except ImportError:
            pass
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: waste tracking unavailable", exc_info=True)
        return _Session(session_id, RequestExtractor(), SessionLedger(session_id, tokenizer=self.tokenizer),
                        waste)

    def _evicted(self, session_ids: list[str]) -> None:
        for session_id in session_ids:
            for listener in self._eviction_listeners:
                try:
                    listener(session_id)
                except Exception:  # noqa: BLE001 - a listener must not break the call
                    _log.warning("ctxscope: session eviction listener failed", exc_info=True)

    # -- observation -----------------------------------------------------------------

    def session_for(self, body: Mapping[str, Any], api: str, session_id: str | None = None) -> str:
        """The session key of a request (``ctxscope.session`` rules, plus Responses chaining)."""
        if session_id is None and api == "openai.responses" and _session.current_session_id() is None:
            # The provider's own conversation object is the natural key.
            conversation = body.get("conversation")
            if isinstance(conversation, Mapping):
                conversation = conversation.get("id")
            if isinstance(conversation, str) and conversation:
                return conversation
            previous = body.get("previous_response_id")
            if isinstance(previous, str):
                with self._lock:
                    chained = self._response_sessions.get(previous)
                if chained is not None and _session.current_session_id() is None:
                    return chained
        return _session.resolve(body, api, session_id)

    def observe_request(self, body: Mapping[str, Any], api: str, *, provider: str,
                        session_id: str | None = None, model: str | None = None,
                        timestamp_ns: int | None = None, coverage: Coverage | None = None) -> PendingCall:
        """Extract, count and diff a request; the snapshot carries the raw annotation.

        ``coverage``: PARTIAL when the caller knows the body shows only part of the
        request (ctxscope.foreign: a chained request seen through another instrumentation).
        """
        started = timestamp_ns if timestamp_ns is not None else time.time_ns()
        key = self.session_for(body, api, session_id)
        model = model or (body.get("model") if isinstance(body.get("model"), str) else None)
        state, _ = self._session(key)
        limits = _limits.limits_for(model, provider)
        if coverage is None:
            coverage = Coverage.COMPLETE
        if api == "openai.responses" and (body.get("previous_response_id") or body.get("conversation")):
            # The provider prepends context this request does not show.
            coverage = Coverage.PARTIAL
        compaction: CompactionTrigger | None = _session.take_compaction(key)
        with state.lock:
            # The extractor reads SDK objects (pydantic messages) as they are.
            items = state.extractor.extract(body, api)
            snapshot = state.ledger.observe(
                items, model=model, coverage=coverage, compaction=compaction,
                window_tokens=limits.window_tokens,
                effective_window_tokens=limits.effective_window_tokens,
                compact_threshold_tokens=limits.compact_threshold_tokens,
                timestamp_ns=started)
            state.observations += 1
            if state.waste is not None:
                self._add_waste(state, snapshot)
        return PendingCall(session_id=key, provider=provider, api=api, request_model=model,
                           snapshot=snapshot, started_ns=started, first=bool(getattr(snapshot, "first", False)))

    @staticmethod
    def _add_waste(state: _Session, snapshot: Any) -> None:
        try:
            found = state.waste.observe(snapshot)
            totals = getattr(found, "by_kind", found)
            if callable(totals):
                totals = totals()
            if isinstance(totals, Mapping):
                snapshot.annotation.waste = {WasteKind(k): int(v) for k, v in totals.items()}
        except Exception:  # noqa: BLE001 - waste is an extra: the annotation stands without it
            _log.warning("ctxscope: waste tracking failed; disabling it for session %s", state.session_id,
                         exc_info=True)
            state.waste = None

    def observe_response(self, call: PendingCall, usage: Usage | None = None, *,
                         response_model: str | None = None, response_id: str | None = None,
                         error: str | None = None, ended_ns: int | None = None) -> Observation:
        """Attach the reported input and calibration; hand the observation to the listeners."""
        usage = usage or Usage()
        ended = ended_ns if ended_ns is not None else time.time_ns()
        snapshot = call.snapshot
        if usage.reported_input is not None and snapshot is not None:
            with self._lock:
                state = self._sessions.get(call.session_id)
            ledger = state.ledger if state is not None else None
            if ledger is not None:
                with state.lock:  # type: ignore[union-attr]
                    ledger.report(snapshot, usage.reported_input)
        if response_id and call.api == "openai.responses":
            with self._lock:
                self._response_sessions[response_id] = call.session_id
                while len(self._response_sessions) > _MAX_RESPONSE_IDS:
                    self._response_sessions.popitem(last=False)
        observation = Observation(
            session_id=call.session_id, provider=call.provider, request_model=call.request_model,
            response_model=response_model, snapshot=snapshot, usage=usage,
            timestamp_ns=call.started_ns, duration_ns=max(0, ended - call.started_ns), error=error)
        for listener in self._listeners:
            try:
                listener(observation)
            except Exception:  # noqa: BLE001 - a listener must not break the call
                _log.warning("ctxscope: observation listener %r failed", listener, exc_info=True)
        return observation


_tracker: Tracker | None = None
_tracker_lock = threading.Lock()


def get_tracker() -> Tracker:
    """The process-wide tracker the instrumentors use."""
    global _tracker
    if _tracker is None:
        with _tracker_lock:
            if _tracker is None:
                _tracker = Tracker()
    return _tracker
