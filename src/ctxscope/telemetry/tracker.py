"""Process-wide sessions of live instrumentation.

For each session (``ctxscope.session``) the tracker keeps the session's
accounting, :class:`ctxscope.core.pipeline.RequestAccount`: the request
extractor (items), the framing cache, and the :class:`~ctxscope.core.pipeline.SessionAccount`
every other path uses too (ledger, limits, waste, reported input). The
tracker's own jobs are around it: which session a call is (identity,
restarts, the provider's chained responses), the learned correction, the
listeners. The instrumentors call :meth:`Tracker.observe_request` while
the model call's span is open and :meth:`Tracker.observe_response` once the
response (or the stream's last event) arrives; each finished call is handed to
the listeners as an :class:`~ctxscope.core.observation.Observation` (the local store
subscribes with :meth:`Tracker.add_listener`).

Provider framing: each request's items get the framing items of
:mod:`ctxscope.core.framing` (per-message overhead, reply priming, the functions
block, hidden prompts: ``overhead``; server tools' hidden parts:
``tools/server/<type>``), computed incrementally per session by the account's
:class:`ctxscope.core.framing.incremental.FramingCache` so that a long history costs
nothing more per call; for Claude models the ledger adds the proxy-encoding
item (``SessionLedger(proxy_encoding=True)``) from its running counts.

Labels: ``CTXSCOPE_CAPTURE_LABELS`` is read once, when the tracker is built,
and handed to every session's ledger (SPEC section 7).

Self-calibration: one :class:`ctxscope.core.learned_correction.SelfCalibrator` per tracker
(the process-wide tracker: one per process) learns, per model and tool set,
from every call whose usage arrives, and gives a request whose usage has not
arrived its learned correction (``llm.context.learned_correction_tokens``).
With the local store attached (:meth:`Tracker.use_calibration_store`), what was
learned is restored from it and saved to it. Rules in ``docs/fidelity.md``.

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
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ctxscope.telemetry import shutdown as _shutdown
from ctxscope.core import apis
from ctxscope.faultlog import log_failure
from ctxscope.core import framing as _framing
from ctxscope.core import conversation as _session
from ctxscope.config import DEFAULT_MAX_SESSIONS, settings
from ctxscope.core.observation import Observation, Usage
from ctxscope.core.pipeline import RequestAccount
from ctxscope.schema import CompactionTrigger, Coverage
from ctxscope.core.learned_correction import MIN_PAIRS, SelfCalibrator

__all__ = [
    "CALIBRATION_SAVE_INTERVAL_S",
    "DEFAULT_MAX_SESSIONS",
    "LEARN_TOLERANCE",
    "LIVE_CALIBRATION_WINDOW",
    "CalibrationStore",
    "PendingCall",
    "Tracker",
    "calibration_key",
    "capture_labels_from_env",
    "get_tracker",
    "let_others_run",
    "session_end_time_ns",
]

_log = logging.getLogger(__name__)

# Responses API: response id -> session, so that a request chained with
# previous_response_id (whose input holds only the new turn) stays in its session.
_MAX_RESPONSE_IDS = 4096

# Pairs kept per model and tool set by the tracker's calibrator: the fit is
# quadratic in them (Theil-Sen), and it runs on the caller's thread.
LIVE_CALIBRATION_WINDOW = 16
# A call whose reported input the current correction already predicts this
# closely is not learned from: a steady state costs no fit per call.
LEARN_TOLERANCE = 0.005

# A model's learned calibration is written to the store at most this often from
# the call path (the first time at once); the rest when the store is detached or
# the process exits.
CALIBRATION_SAVE_INTERVAL_S = 5.0

# Reading a session's state waits at most this long for the calls still being measured
# (the live path measures off the caller's thread: instrumentation/_worker.py).
_READ_DRAIN_S = 10.0

Listener = Callable[[Observation], None]
EvictionListener = Callable[[str], None]

# While a call is observed on this thread: its start, which is when a session it ends (a restart, an
# eviction) ended. The listeners run on the measuring worker, later than the call: the marker keeps the time.
_ending = threading.local()


def session_end_time_ns() -> int | None:
    """When the session an eviction listener is told of ended (the ending call's start), or None: now."""
    return getattr(_ending, "at_ns", None)


# A thread that has run this long since it last let others run lets them now (see let_others_run).
_YIELD_AFTER_S = 0.001
_last_yield = 0.0


def let_others_run() -> None:
    """Between the steps of a request: a thread waiting for the interpreter gets it now.

    The live path measures on a background thread (instrumentation/_worker.py);
    without this, under the GIL, a caller wanting the interpreter back could
    wait a whole switch interval (5 ms) for a step to end. Only once a
    millisecond has passed since the last time: ``time.sleep(0)`` is a system
    call, and on a loaded machine the kernel may give the CPU away with it.
    """
    global _last_yield
    now = time.perf_counter()
    if now - _last_yield >= _YIELD_AFTER_S:
        time.sleep(0)
        _last_yield = time.perf_counter()


class CalibrationStore(Protocol):
    """Where learned self-calibration is kept (``ctxscope.telemetry.store.LocalStore``)."""

    def save_calibration(self, model: str, data: Mapping[str, Any]) -> Any: ...

    def load_calibration(self, model: str) -> dict[str, Any] | None: ...


def calibration_key(model: str, basis: str) -> str:
    """The self-calibration key of a model under a counting basis.

    Pairs learned with one basis say nothing of another's estimates (chars/4
    against tiktoken), so the basis is part of the key (and of the store's file).
    """
    return f"{model}|{basis}"


@dataclass
class _Session:
    session_id: str
    account: RequestAccount  # items, framing, ledger, limits, waste: the one call pipeline
    # (tools as sent, their self-calibration key, whether a server tool is among them)
    tools_memo: tuple[Any, str, bool] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ledger(self) -> Any:
        return self.account.ledger


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
    # Self-calibration: the key it learns under (None: not learnable, e.g. a partial view).
    calibration_key: str | None = None
    tools_key: str = "-"
    server_tools: bool = False
    # The id the application (or the provider) gave the conversation: gen_ai.conversation.id.
    # None for a fingerprint session, whose key is ctxscope's own (llm.context.session.id).
    conversation_id: str | None = None


def capture_labels_from_env() -> bool:
    """``CTXSCOPE_CAPTURE_LABELS``: whether file paths and commands may enter change labels (SPEC section 7)."""
    return settings().capture_labels


class Tracker:
    """Sessions of a process: extraction, ledger and waste per session, LRU-bounded."""

    def __init__(self, *, max_sessions: int | None = None, tokenizer: str | None = None,
                 framing: bool = True, calibrator: SelfCalibrator | None = None,
                 capture_labels: bool | None = None) -> None:
        self.max_sessions = max_sessions if max_sessions is not None else settings().max_sessions
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.tokenizer = tokenizer or settings().tokenizer
        # framing=False: the items' raw content only (as ``ctxscope inspect --no-framing``).
        self.framing = framing
        # Read once here (STYLE: configuration at start, never per request).
        self.capture_labels = capture_labels if capture_labels is not None else capture_labels_from_env()
        self.calibrator = calibrator if calibrator is not None else SelfCalibrator(LIVE_CALIBRATION_WINDOW)
        self._calibration_store: CalibrationStore | None = None
        self._restored: set[str] = set()
        self._saved_at: dict[str, float] = {}
        self._unsaved: set[str] = set()
        self._calibration_lock = threading.Lock()
        self._exit_hook = False
        self._sessions: "OrderedDict[str, _Session]" = OrderedDict()
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._eviction_listeners: list[EvictionListener] = []
        # Response id -> (session key, conversation id) of the call that produced it.
        self._response_sessions: "OrderedDict[str, tuple[str, str | None]]" = OrderedDict()
        # Fingerprint key -> (its current conversation's session key, how many it had).
        self._generations: "OrderedDict[str, tuple[str, int]]" = OrderedDict()

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
        """Live session ids, least recently used first (once the calls made so far are measured)."""
        _shutdown.drain_pending(_READ_DRAIN_S)
        with self._lock:
            return list(self._sessions)

    def ledger(self, session_id: str) -> Any | None:
        """A session's ledger (once the calls made so far are measured), or None."""
        _shutdown.drain_pending(_READ_DRAIN_S)
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
            self._generations.clear()

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
        # wait_for_encoding=False: a call is never held for the tokenizer's load.
        return _Session(session_id, RequestAccount(session_id, tokenizer=self.tokenizer,
                                                   capture_labels=self.capture_labels, framing=self.framing,
                                                   wait_for_encoding=False, pause=let_others_run))

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
        return self._identity(body, api, session_id)[0]

    def _identity(self, body: Mapping[str, Any], api: str,
                  session_id: str | None) -> tuple[str, str | None, str | None]:
        """(session key, the conversation id the application or provider gave, the fingerprint key).

        The fingerprint key (None for a given id) is what the request hashes
        to; the session key is its current conversation (:meth:`_restart`).
        """
        wire = apis.find(api)
        if (session_id is None and wire is not None and wire.server_state
                and _session.current_session_id() is None):
            # The provider's own conversation object is the natural key.
            conversation = wire.provider_conversation(body)
            if conversation is not None:
                return conversation, conversation, None
            previous = wire.previous_response(body)
            if previous is not None:
                with self._lock:
                    chained = self._response_sessions.get(previous)
                if chained is not None:
                    return chained[0], chained[1], None
        key, given = _session.resolve_identity(body, api, session_id)
        if given:
            return key, key, None
        with self._lock:
            current = self._generations.get(key)
        return (current[0] if current is not None else key), None, key

    def _restart(self, fingerprint_key: str, old_key: str) -> str:
        """A new conversation from the same opening: its own session key; the old session ends."""
        with self._lock:
            _, n = self._generations.get(fingerprint_key, (fingerprint_key, 1))
            key = f"{fingerprint_key}.{n + 1}"
            self._generations[fingerprint_key] = (key, n + 1)
            self._generations.move_to_end(fingerprint_key)
            while len(self._generations) > _MAX_RESPONSE_IDS:
                self._generations.popitem(last=False)
        self.end_session(old_key)
        return key

    def observe_request(self, body: Mapping[str, Any], api: str, *, provider: str,
                        session_id: str | None = None, model: str | None = None,
                        timestamp_ns: int | None = None, coverage: Coverage | None = None,
                        compactions_before: int | None = None) -> PendingCall:
        """Extract, count and diff a request; the snapshot carries the raw annotation.

        ``coverage``: PARTIAL when the caller knows the body shows only part of the
        request (ctxscope.interop: a chained request seen through another instrumentation).
        ``compactions_before``: ``conversation.compaction_marks()`` when the request was sent
        (measured later, off the call path: a compaction declared since is the next call's).
        """
        started = timestamp_ns if timestamp_ns is not None else time.time_ns()
        _ending.at_ns = started  # a session this call ends, ends at its start (session_end_time_ns)
        try:
            key, conversation_id, fingerprint_key = self._identity(body, api, session_id)
            model = model or (body.get("model") if isinstance(body.get("model"), str) else None)
            if coverage is None:
                coverage = Coverage.COMPLETE
            wire = apis.find(api)
            if (wire is not None and wire.server_state and coverage is not Coverage.UNRECORDED
                    and wire.stored_context(body)):
                # The provider prepends context this request does not show.
                coverage = Coverage.PARTIAL
            compaction: CompactionTrigger | None = _session.take_compaction(key, compactions_before)
            snapshot, tools = self._observe_in(key, body, api, model, provider, coverage, compaction, started)
            if snapshot.restarted and fingerprint_key is not None:
                # The history went back to its opening: the same fingerprint, another conversation.
                key = self._restart(fingerprint_key, key)
                snapshot, tools = self._observe_in(key, body, api, model, provider, coverage, compaction, started)
            call = PendingCall(session_id=key, provider=provider, api=api, request_model=model,
                               snapshot=snapshot, started_ns=started, first=bool(getattr(snapshot, "first", False)),
                               conversation_id=conversation_id)
            self._apply_calibration(call, tools, coverage)
            return call
        finally:
            _ending.at_ns = None

    def _observe_in(self, key: str, body: Mapping[str, Any], api: str, model: str | None, provider: str,
                    coverage: Coverage, compaction: CompactionTrigger | None, started: int) -> tuple[Any, Any]:
        """One request through its session's account (items, framing, ledger, limits, waste):
        (snapshot, tool-set info)."""
        state, _ = self._session(key)
        with state.lock:
            snapshot = state.account.observe(body, api, model=model, provider=provider, coverage=coverage,
                                             compaction=compaction, timestamp_ns=started)
            tools = self._tools_info(state, body, api)
        return snapshot, tools

    @staticmethod
    def _tools_info(state: _Session, body: Mapping[str, Any], api: str) -> tuple[str, bool] | None:
        """The tool set's self-calibration key and whether it has a server tool, cached while the tools stay."""
        try:
            tools = body.get("tools")
            # A shallow copy: a tool appended to the same list in place is noticed.
            seen = tuple(tools) if isinstance(tools, list) else tools
            memo = state.tools_memo
            if memo is None or memo[0] != seen:
                memo = state.tools_memo = (seen, _framing.tools_key(body), _framing.has_server_tools(body, api))
            return memo[1], memo[2]
        except Exception:  # noqa: BLE001 - no key: the call is neither corrected nor learned from
            log_failure(_log, "ctxscope: could not key the tool set of a %s call", api)
            return None

    # -- self-calibration -------------------------------------------------------------

    def use_calibration_store(self, store: CalibrationStore | None) -> None:
        """Restore learned calibration from ``store`` and save to it (None: unsaved learning is saved, then detach)."""
        self.flush_calibration()
        with self._calibration_lock:
            self._calibration_store = store
            self._restored.clear()
            self._saved_at.clear()
            if store is not None and not self._exit_hook:
                self._exit_hook = True
                _shutdown.at_exit(self.flush_calibration)

    @property
    def calibration_store(self) -> CalibrationStore | None:
        return self._calibration_store

    def flush_calibration(self) -> None:
        """Save every model's learning not yet in the store (never raises)."""
        with self._calibration_lock:
            store, keys = self._calibration_store, sorted(self._unsaved)
            self._unsaved.clear()
        for key in keys:
            self._save(store, key)

    def _apply_calibration(self, call: PendingCall, tools: tuple[str, bool] | None, coverage: Coverage) -> None:
        """Key the call for learning; put the learned correction on its annotation when one is known."""
        try:
            annotation = call.snapshot.annotation
            if call.request_model is None or tools is None or coverage is not Coverage.COMPLETE:
                return  # a partial view's estimate misses what the provider prepends
            key = calibration_key(call.request_model, annotation.basis)
            call.calibration_key = key
            call.tools_key, call.server_tools = tools
            self._restore(key)
            correction = self.calibrator.correction_tokens(key, call.tools_key, annotation.estimated_tokens)
            if correction is not None:
                annotation.learned_correction_tokens = int(correction)
        except Exception:  # noqa: BLE001 - calibration is an extra: the raw annotation stands
            log_failure(_log, "ctxscope: self-calibration failed for a %s call", call.api)

    def _learn(self, call: PendingCall, usage: Usage, error: str | None) -> None:
        """Learn from a finished call's (estimate, reported) pair where it says something stable."""
        reported = usage.reported_input
        if call.calibration_key is None or reported is None or error is not None or call.snapshot is None:
            return
        if call.server_tools and usage.server_tool_calls != 0:
            return  # a server-tool run (or one not known not to be) reports the whole loop's input
        try:
            estimated = call.snapshot.annotation.estimated_tokens
            known = self.calibrator.correction(call.calibration_key, call.tools_key)
            if (known is not None and known.tools_key == call.tools_key and known.pairs >= MIN_PAIRS
                    and abs(known.apply(estimated) - reported) <= LEARN_TOLERANCE * reported):
                return  # already predicted: nothing to learn, no fit to pay for
            self.calibrator.learn(call.calibration_key, call.tools_key, estimated, int(reported))
            self._saved(call.calibration_key)
        except Exception:  # noqa: BLE001
            log_failure(_log, "ctxscope: self-calibration could not learn from a %s call", call.api)

    def _restore(self, key: str) -> None:
        with self._calibration_lock:
            store = self._calibration_store
            if store is None or key in self._restored:
                return
            self._restored.add(key)
        try:
            self.calibrator.restore(store.load_calibration(key))
        except Exception:  # noqa: BLE001 - an unreadable sidecar means learning afresh
            _log.warning("ctxscope: could not restore the self-calibration of %s", key, exc_info=True)

    def _saved(self, key: str) -> None:
        """Save a model's learning now if not saved lately, else mark it for the next flush."""
        now = time.monotonic()
        with self._calibration_lock:
            store = self._calibration_store
            if store is None:
                return
            last = self._saved_at.get(key)
            if last is not None and now - last < CALIBRATION_SAVE_INTERVAL_S:
                self._unsaved.add(key)
                return
            self._saved_at[key] = now
            self._unsaved.discard(key)
        self._save(store, key)

    def _save(self, store: CalibrationStore | None, key: str) -> None:
        if store is None:
            return
        try:
            store.save_calibration(key, self.calibrator.model_json(key))
        except Exception:  # noqa: BLE001 - the store is a convenience: never break the call
            _log.warning("ctxscope: could not save the self-calibration of %s", key, exc_info=True)

    def observe_response(self, call: PendingCall, usage: Usage | None = None, *,
                         response_model: str | None = None, response_id: str | None = None,
                         error: str | None = None, ended_ns: int | None = None,
                         compactions_at_end: int | None = None) -> Observation:
        """Attach the reported input and calibration; hand the observation to the listeners.

        ``compactions_at_end``: ``conversation.compaction_marks()`` when the response ended
        (measured off the call path, a provider's compaction belongs to the calls sent after it).
        """
        usage = usage or Usage()
        ended = ended_ns if ended_ns is not None else time.time_ns()
        snapshot = call.snapshot
        if usage.reported_input is not None and snapshot is not None:
            with self._lock:
                state = self._sessions.get(call.session_id)
            if state is not None:
                with state.lock:
                    state.account.report(snapshot, usage.reported_input, usage.cleared)
        if usage.provider_compaction and error is None:
            # The provider compacted during this call; the next request sends the summary
            # back: it is the post-compaction request, whatever ctxscope infers from it.
            _session.declare_compaction(CompactionTrigger.AUTO, call.session_id, compactions_at_end)
        self._learn(call, usage, error)
        wire = apis.find(call.api)
        if response_id and wire is not None and wire.server_state:
            # A later request may continue from this response: it stays in this session.
            with self._lock:
                self._response_sessions[response_id] = (call.session_id, call.conversation_id)
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
                log_failure(_log, "ctxscope: observation listener %r failed", listener)
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
