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

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxscope.core import limits as _limits
from ctxscope.core.diff import ItemRun
from ctxscope.core.ledger import SessionLedger, Snapshot
from ctxscope.schema import CompactionTrigger, Coverage, Item, Stage
from ctxscope.core.tokens import Counter
from ctxscope.core.waste import WasteOptions, WasteTracker

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.transcripts.model import TranscriptCall

__all__ = ["CallFacts", "SessionAccount", "TranscriptAccount"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class CallFacts:
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
    annotation stands without it.
    """

    def __init__(self, session_id: str, *, tokenizer: str = "auto", counter: Counter | None = None,
                 capture_labels: bool = False, proxy_encoding: bool = False, waste: bool = True,
                 waste_options: WasteOptions | None = None) -> None:
        self.session_id = session_id
        self.ledger = SessionLedger(session_id, counter=counter, tokenizer=tokenizer,
                                    capture_labels=capture_labels, proxy_encoding=proxy_encoding)
        self.waste: WasteTracker | None = WasteTracker(waste_options) if waste else None
        self.calls = 0

    @property
    def latest(self) -> Snapshot | None:
        return self.ledger.latest

    def observe(self, facts: CallFacts) -> Snapshot:
        """The call's snapshot: diffed against the session's previous call, with its limits and waste."""
        limits = _limits.limits_for(facts.model, facts.provider)
        snapshot = self.ledger.observe(
            facts.items, model=facts.model, stage=facts.stage, coverage=facts.coverage,
            compaction=facts.compaction,
            window_tokens=facts.window_tokens or limits.window_tokens,
            effective_window_tokens=limits.effective_window_tokens,
            compact_threshold_tokens=limits.compact_threshold_tokens,
            timestamp_ns=facts.timestamp_ns, sample_offset_ns=facts.sample_offset_ns)
        self.calls += 1
        if facts.reported is not None:
            snapshot = self.report(snapshot, facts.reported)
        if self.waste is not None:
            self._track_waste(snapshot, facts.added)
        return snapshot

    def report(self, snapshot: Snapshot, reported: int | None) -> Snapshot:
        """Attach the provider-reported input (SPEC sections 4-5); raw estimates stay raw."""
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
            _log.warning("waste tracking failed; off for session %s", self.session_id, exc_info=True)
            self.waste = None


class TranscriptAccount:
    """A transcript session's calls through the hidden-prefix inference and :class:`SessionAccount`.

    ``analyze``, ``replay`` and ``watch`` share it, so a session has the same
    estimate on every path: Claude content through the proxy encoding the live
    path uses, the system prompt and tools the transcript never holds as the
    inferred prefix (:class:`ctxscope.transcripts.prefix.PrefixLearner`),
    the model's window where the transcript does not state one.
    """

    def __init__(self, session_id: str, *, tokenizer: str = "auto", counter: Counter | None = None,
                 capture_labels: bool = False, waste_options: WasteOptions | None = None) -> None:
        from ctxscope.transcripts.prefix import PrefixLearner

        self.account = SessionAccount(session_id, tokenizer=tokenizer, counter=counter,
                                      capture_labels=capture_labels, proxy_encoding=True,
                                      waste_options=waste_options)
        self.prefix = PrefixLearner()

    @property
    def latest(self) -> Snapshot | None:
        return self.account.latest

    def observe(self, call: "TranscriptCall", *, timestamp_ns: int | None = None,
                sample_offset_ns: int | None = None) -> tuple[Snapshot, int]:
        """The call's snapshot (reported input attached) and the inferred prefix's tokens in it."""
        compaction = call.compaction
        coverage = transcript_coverage(call.items)
        # A call without text has no composition to complete: no prefix inferred, none learned.
        prefix = None if coverage is Coverage.UNRECORDED else self.prefix.item_for(
            call.index, call.model, compaction is not None,
            compaction.pre_tokens if compaction is not None else None)
        # A new sequence: a reader may keep the one it handed over. A reader's run
        # (itemdiff.ItemRun) takes the prefix as its tail, in O(1).
        items: Sequence[Item] = call.items
        if prefix is not None:
            items = items.with_tail(prefix) if isinstance(items, ItemRun) else [*items, prefix]
        facts = CallFacts(
            items, model=call.model, provider=call.provider, stage=Stage.TRANSCRIPT_OBSERVED,
            coverage=coverage, compaction=call.compaction.trigger if call.compaction is not None else None,
            window_tokens=call.window_tokens,
            timestamp_ns=call.timestamp_ns if timestamp_ns is None else timestamp_ns,
            sample_offset_ns=sample_offset_ns,
            # The reader says what is new: waste need not compare the whole context again.
            added=None if call.reset else call.added, reported=call.reported_tokens)
        snapshot = self.account.observe(facts)
        inferred = (prefix.fixed_tokens or 0) if prefix is not None else 0
        if coverage is not Coverage.UNRECORDED:
            self.prefix.learn(call.index, call.model, snapshot.annotation.estimated_tokens - inferred,
                              call.reported_tokens)
        return snapshot, inferred


def transcript_coverage(items: Sequence[Item]) -> Coverage:
    """A transcript call's coverage: ``partial`` (SPEC section 4), ``unrecorded`` when it holds no text.

    A transcript that kept the calls' usage but none of their content (redacted,
    stripped, an export without messages) has no composition to measure: its
    reported total stands alone rather than being taken for system prompt and tools.
    """
    for item in items:
        if item.chars or item.fixed_tokens:
            return Coverage.PARTIAL
    return Coverage.UNRECORDED
