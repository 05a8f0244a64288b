"""One call's accounting, the same on every path: items -> ledger -> limits -> waste -> reported input.

The live tracker, ``replay`` and ``watch``, ``analyze``, ``inspect`` and the
foreign-span processor each used to put a call through the ledger
themselves, and they had drifted apart (one looked the model's window up,
another did not; one tracked waste, another not). :class:`SessionAccount`
is the one place that does it: a source hands it what the call showed
(:class:`CallFacts`), it answers with the annotated
:class:`~ctxscope.core.ledger.Snapshot`, and the source writes that wherever it
goes (a span, a report row, a store record).

Two steps, because the live path knows the request before the response:
:meth:`SessionAccount.observe` takes the request's items (the snapshot
carries the raw annotation, its waste, its limits) and
:meth:`SessionAccount.report` attaches the provider-reported input once
usage arrives; a transcript call, which knows both, passes ``reported`` to
``observe``.

The sources in front of it: :class:`RequestAccount` for request bodies as
the live tracker (``ctxscope.telemetry.tracker``, hence the foreign-span
processor too) sees them, incremental so that a long history costs nothing
more per call; :class:`TranscriptAccount` for transcript calls (``analyze``,
``replay``, ``watch``); ``inspect`` and ``fidelity`` hand one body's items
to a fresh :class:`SessionAccount`.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxscope._record import Record
from ctxscope.core import limits as _limits
from ctxscope.core.diff import ItemRun
from ctxscope.core.ledger import SessionLedger, Snapshot, release_texts
from ctxscope.schema import CompactionTrigger, Coverage, Item, Stage
from ctxscope.core.tokens import Counter, counter_for
from ctxscope.core.waste import WasteOptions, WasteTracker

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.core.framing.incremental import FramingCache
    from ctxscope.transcripts.model import TranscriptCall

__all__ = ["CallFacts", "RequestAccount", "SessionAccount", "TranscriptAccount"]

_log = logging.getLogger(__name__)

# Enum members read once: on this Python an enum class's attribute is looked up through
# EnumType's __getattr__ hook (several times a plain attribute's cost), on every call here.
_PARTIAL, _UNRECORDED = Coverage.PARTIAL, Coverage.UNRECORDED
_TRANSCRIPT_OBSERVED = Stage.TRANSCRIPT_OBSERVED


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class CallFacts(Record):
    """What one model call showed of its context, whatever the source."""

    items: Sequence[Item]
    model: str | None = None
    provider: str | None = None
    stage: Stage = Stage.REQUEST_INPUT
    coverage: Coverage = Coverage.COMPLETE
    compaction: CompactionTrigger | None = None
    # The window the source itself states (a transcript's), over the model's known window.
    window_tokens: int | None = None
    timestamp_ns: int | None = None
    sample_offset_ns: int | None = None
    # The items new since the source's previous call, when the source knows them (transcript
    # readers do): waste then looks at those alone instead of comparing the whole context.
    added: Sequence[Item] | None = None
    reported: int | None = None  # the provider-reported input, when known with the request


class SessionAccount:
    """One session's ledger, waste tracker and limits: every path's accounting of its calls.

    ``waste=False`` leaves waste out (``inspect`` of a single body); an error in
    waste tracking turns it off for the session with one warning, the
    annotation stands without it. ``wait_for_encoding=False`` (the live path)
    never holds a call for the tokenizer's load (``tokens.counter_for``).
    ``pause`` runs between the steps of a call (the live path lets a waiting
    caller's thread run: ``tracker.let_others_run``).
    """

    def __init__(self, session_id: str, *, tokenizer: str = "auto", counter: Counter | None = None,
                 capture_labels: bool = False, proxy_encoding: bool = False, waste: bool = True,
                 waste_options: WasteOptions | None = None, wait_for_encoding: bool = True,
                 pause: Callable[[], None] | None = None, part_sizes: bool = True) -> None:
        self.session_id = session_id
        self.ledger = SessionLedger(session_id, counter=counter, tokenizer=tokenizer,
                                    capture_labels=capture_labels, proxy_encoding=proxy_encoding,
                                    wait_for_encoding=wait_for_encoding, part_sizes=part_sizes)
        self.waste: WasteTracker | None = WasteTracker(waste_options) if waste else None
        self.pause = pause
        self.calls = 0

    @property
    def latest(self) -> Snapshot | None:
        return self.ledger.latest

    def observe(self, facts: CallFacts) -> Snapshot:
        """The call's snapshot: diffed against the session's previous call, with its limits and waste."""
        return self.observe_call(facts.items, facts.model, facts.provider, facts.stage, facts.coverage,
                                 facts.compaction, facts.window_tokens, facts.timestamp_ns, facts.sample_offset_ns,
                                 facts.added, facts.reported)

    def observe_call(self, items: Sequence[Item], model: str | None, provider: str | None, stage: Stage,
                     coverage: Coverage, compaction: CompactionTrigger | None, window_tokens: int | None,
                     timestamp_ns: int | None, sample_offset_ns: int | None, added: Sequence[Item] | None,
                     reported: int | None) -> Snapshot:
        """:meth:`observe` with :class:`CallFacts`' fields as arguments, in its order (a transcript's
        account calls this, without building the facts of each call)."""
        limits = _limits.limits_for(model, provider)
        snapshot = self.ledger.observe(
            items, model=model, stage=stage, coverage=coverage, compaction=compaction,
            window_tokens=window_tokens or limits.window_tokens,
            effective_window_tokens=limits.effective_window_tokens,
            compact_threshold_tokens=limits.compact_threshold_tokens,
            timestamp_ns=timestamp_ns, sample_offset_ns=sample_offset_ns)
        self.calls += 1
        if self.pause is not None:
            self.pause()
        if reported is not None:
            snapshot = self.report(snapshot, reported)
        # A restarted history (the same opening again: another conversation) is the caller's to
        # put in a new session; its waste against this session's calls would mean nothing.
        if self.waste is not None and not snapshot.restarted:
            self._track_waste(snapshot, added)
        return snapshot

    def report(self, snapshot: Snapshot, reported: int | None,
               cleared: Iterable[tuple[str, int]] | None = None) -> Snapshot:
        """Attach the provider-reported input (SPEC sections 4-5); raw estimates stay raw.

        ``cleared``: what the provider's context editing removed from this call's
        context (``Usage.cleared``), taken off the estimate first.
        """
        if cleared:
            self.ledger.provider_cleared(snapshot, cleared)
        return self.ledger.report(snapshot, reported)

    def _track_waste(self, snapshot: Snapshot, added: Sequence[Item] | None) -> None:
        tracker = self.waste
        assert tracker is not None
        try:
            if added is not None:
                totals = tracker.observe_added(added, snapshot.items)
            else:
                totals = tracker.observe(snapshot)
            snapshot.annotation.waste = totals  # a new dict of WasteKind -> int on every call
        except Exception:  # noqa: BLE001 - waste is an extra: the annotation stands without it
            # Logged as text, once (the live path runs here: a record holding the traceback would
            # hold the caller's frames; faultlog says why).
            from ctxscope.faultlog import log_failure

            log_failure(_log, "ctxscope: waste tracking failed; off for session %s", self.session_id)
            self.waste = None


class RequestAccount:
    """A live session's request bodies: items, provider framing, then :class:`SessionAccount`.

    Incremental, as the live path must be (issues 15/16: per-call work in
    proportion to what changed): the extractor reuses the items of the
    messages it has seen (:class:`ctxscope.core.items.RequestExtractor`), the
    framing cache the framing of an unchanged head
    (:class:`ctxscope.core.framing.incremental.FramingCache`), and the ledger
    counts only the new items. ``framing=False``: the items' raw content only
    (as ``ctxscope inspect --no-framing``). A failure of the framing turns it
    off for the session, logged once: the items stand without it.
    """

    def __init__(self, session_id: str, *, tokenizer: str = "auto", capture_labels: bool = False,
                 framing: bool = True, wait_for_encoding: bool = True,
                 pause: Callable[[], None] | None = None) -> None:
        # Request bodies only (the transcript commands never build one): imported here, with
        # every wire format and framing model behind them.
        from ctxscope.core.framing.incremental import FramingCache
        from ctxscope.core.items import RequestExtractor

        # Claude's proxy-encoding item belongs to the framing: on with it.
        self.account = SessionAccount(session_id, tokenizer=tokenizer, capture_labels=capture_labels,
                                      proxy_encoding=framing, wait_for_encoding=wait_for_encoding,
                                      pause=pause)
        self.extractor = RequestExtractor()
        self.framing: FramingCache | None = FramingCache() if framing else None
        self._tokenizer = tokenizer
        self._wait_for_encoding = wait_for_encoding
        self._pause = pause

    @property
    def session_id(self) -> str:
        return self.account.session_id

    @property
    def ledger(self) -> SessionLedger:
        return self.account.ledger

    @property
    def latest(self) -> Snapshot | None:
        return self.account.latest

    def observe(self, body: Mapping[str, Any], api: str, *, model: str | None = None,
                provider: str | None = None, coverage: Coverage = Coverage.COMPLETE,
                compaction: CompactionTrigger | None = None, timestamp_ns: int | None = None) -> Snapshot:
        """One request body's snapshot: its items and framing through the session's account."""
        # The extractor reads SDK objects (pydantic messages) as they are.
        items = self.extractor.extract(body, api)
        self._paused()
        # Without content there is nothing to frame: no invented overhead.
        if self.framing is not None and coverage is not Coverage.UNRECORDED:
            items = self._with_framing(items, body, api, model)
            self._paused()
        return self.account.observe(CallFacts(items, model=model, provider=provider, coverage=coverage,
                                              compaction=compaction, timestamp_ns=timestamp_ns))

    def report(self, snapshot: Snapshot, reported: int | None,
               cleared: Iterable[tuple[str, int]] | None = None) -> Snapshot:
        return self.account.report(snapshot, reported, cleared)

    def _paused(self) -> None:
        if self._pause is not None:
            self._pause()

    def _with_framing(self, items: list[Item], body: Mapping[str, Any], api: str,
                      model: str | None) -> list[Item]:
        """The request's items plus its provider framing (the ledger's counter, so the same basis)."""
        assert self.framing is not None
        try:
            counter = counter_for(model, self._tokenizer, wait=self._wait_for_encoding)
            framing = self.framing.framing_items(body, api, counter.count, model=model, counter_key=counter)
            return items + framing if framing else items
        except Exception:  # noqa: BLE001 - framing is an estimate on top: the items stand without it
            from ctxscope.faultlog import log_failure

            log_failure(_log, "ctxscope: provider framing failed; disabling it for session %s", self.session_id)
            self.framing = None
            return items


class TranscriptAccount:
    """A transcript session's calls through the hidden-prefix inference and :class:`SessionAccount`.

    ``analyze``, ``replay`` and ``watch`` share it, so a session has the same
    estimate on every path: Claude content through the proxy encoding the live
    path uses, the system prompt and tools the transcript never holds as the
    inferred prefix (:class:`ctxscope.transcripts.prefix.PrefixLearner`),
    the model's window where the transcript does not state one.

    ``keep_text=False``: each call's new items let their text go once counted
    (:func:`~ctxscope.core.ledger.release_texts`: the results stay those of
    keeping every text), so memory follows the counts, not the file. A caller
    that reads the items' texts after the call keeps them. ``part_sizes``: the
    snapshots carry characters and bytes per part (a local store's record,
    ``Snapshot.part_bytes``), which needs no text after the call.
    """

    def __init__(self, session_id: str, *, tokenizer: str = "auto", counter: Counter | None = None,
                 capture_labels: bool = False, waste_options: WasteOptions | None = None,
                 keep_text: bool = True, part_sizes: bool = False) -> None:
        from ctxscope.transcripts.prefix import PrefixLearner

        self.account = SessionAccount(session_id, tokenizer=tokenizer, counter=counter,
                                      capture_labels=capture_labels, proxy_encoding=True,
                                      waste_options=waste_options, part_sizes=part_sizes)
        self.prefix = PrefixLearner()
        self.keep_text = keep_text

    @property
    def latest(self) -> Snapshot | None:
        return self.account.latest

    def observe(self, call: "TranscriptCall", *, timestamp_ns: int | None = None,
                sample_offset_ns: int | None = None) -> tuple[Snapshot, int]:
        """The call's snapshot (reported input attached) and the inferred prefix's tokens in it."""
        compaction = call.compaction
        coverage = transcript_coverage(call.items)
        # A call without text has no composition to complete: no prefix inferred, none learned.
        prefix = None if coverage is _UNRECORDED else self.prefix.item_for(
            call.index, call.model, compaction is not None,
            compaction.pre_tokens if compaction is not None else None)
        # A new sequence: a reader may keep the one it handed over. A reader's run
        # (itemdiff.ItemRun) takes the prefix as its tail, in O(1).
        items: Sequence[Item] = call.items
        if prefix is not None:
            items = items.with_tail(prefix) if isinstance(items, ItemRun) else [*items, prefix]
        reported = call.reported_tokens  # a property of the call: read once
        # CallFacts' fields, in its order (SessionAccount.observe_call: no facts object a call).
        snapshot = self.account.observe_call(
            items, call.model, call.provider, _TRANSCRIPT_OBSERVED, coverage,
            compaction.trigger if compaction is not None else None, call.window_tokens,
            call.timestamp_ns if timestamp_ns is None else timestamp_ns, sample_offset_ns,
            # The reader says what is new: waste need not compare the whole context again.
            None if call.reset else call.added, reported)
        inferred = (prefix.fixed_tokens or 0) if prefix is not None else 0
        if coverage is not _UNRECORDED:
            self.prefix.learn(call.index, call.model, snapshot.annotation.estimated_tokens - inferred, reported)
        if not self.keep_text:
            release_texts(call.items if call.reset else call.added)
        return snapshot, inferred


def transcript_coverage(items: Sequence[Item]) -> Coverage:
    """A transcript call's coverage: ``partial`` (SPEC section 4), ``unrecorded`` when it holds no text.

    A transcript that kept the calls' usage but none of their content (redacted,
    stripped, an export without messages) has no composition to measure: its
    reported total stands alone rather than being taken for system prompt and tools.
    """
    for item in items:
        if item.chars or item.fixed_tokens:
            return _PARTIAL
    return _UNRECORDED
