"""One pass over transcript files: per session, the composition of every call and the waste.

Each :class:`~ctxscope.transcripts.TranscriptCall` goes through the session's
:class:`~ctxscope.core.pipeline.TranscriptAccount` (the accounting ``replay`` and
``watch`` use too: inferred prefix, ledger, limits, waste; a
``transcript-observed`` snapshot with ``partial`` coverage, its reported input
attached). Only one row of numbers per call is
kept, packed (:class:`~ctxscope.report.call_rows.CallRows`), never the
snapshots, so memory follows the live context, not the file.
Item texts are released once counted (``TranscriptAccount(keep_text=False)``,
:func:`~ctxscope.core.ledger.release_texts`: the count stays, the item is still
counted text) unless ``keep_text``.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable

from ctxscope._record import Record
from ctxscope.schema import Category, ChangeType, Coverage
from ctxscope.core.tokens import counter_for
from ctxscope.core.pipeline import TranscriptAccount
from ctxscope.report.call_rows import CallRow, CallRows
from ctxscope.transcripts import Problem, TranscriptCall, TranscriptFile
from ctxscope.gc_pause import cyclic_gc_paused
from ctxscope.transcripts.prefix import INFERENCE, PrefixMove
from ctxscope.core.waste import Report, WasteOptions, WasteTracker


# How many of a session's largest additions are kept (a bounded heap: memory follows counts).
ADDITIONS_KEPT = 20


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Addition(Record):
    """One item a call added to the context (an ``addition`` or a growing ``replacement`` change).

    ``tool_call_id`` and ``tool`` where the transcript recorded the contributing
    tool call; otherwise the request (``call``, ``line``) is the way back.
    """

    tokens: int
    call: int
    line: int | None
    category: str
    item: str
    tool: str | None = None
    tool_call_id: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "category": self.category, "call": self.call, "line": self.line,
                "item": self.item, "tool": self.tool, "tool_call_id": self.tool_call_id}


# Categories sent again on every turn whatever the conversation does: the prefix. Read once (an enum
# class attribute is looked up through EnumType's hook): _account looks each up in a call's categories.
_SYSTEM, _TOOLS, _RULES, _SKILLS = Category.SYSTEM, Category.TOOLS, Category.RULES, Category.SKILLS
EVERY_TURN = frozenset((_SYSTEM, _TOOLS, _RULES, _SKILLS))


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class SessionFinding(Record):
    """One waste source over the whole session: its tokens summed over the calls it rode along in."""

    kind: str
    reference: str
    token_calls: int
    cost_usd: Decimal | None  # at the model's input price; None where the price is unknown


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class SessionWaste(Record):
    """The session view users pay for (docs/analyze.md, "Waste over the session")."""

    findings: list[SessionFinding]
    every_turn_token_calls: int  # system, tools, rules, skills: paid again on every call
    conversation_token_calls: int  # the rest: paid each call too, but it could be compacted away
    input_price_per_mtok: Decimal | None

    @property
    def token_calls(self) -> int:
        return sum(f.token_calls for f in self.findings)

    def cost(self, token_calls: int) -> Decimal | None:
        return _cost(token_calls, self.input_price_per_mtok)


def _cost(token_calls: int, price: Decimal | None) -> Decimal | None:
    return None if price is None else (Decimal(token_calls) * price / Decimal(1_000_000))


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class SessionResult(Record):
    session_id: str
    path: str
    format: str
    provider: str
    parent_session_id: str | None = None
    rows: CallRows = field(default_factory=CallRows)  # one packed row per call (call_rows)
    parts: dict[str, int] = field(default_factory=dict)  # apportioned parts of the last call
    basis: str = ""
    model: str | None = None
    window: int | None = None
    waste: Report | None = None
    compactions: int = 0
    inference: str = INFERENCE
    prefix_moves: list[PrefixMove] = field(default_factory=list)
    session_waste: SessionWaste | None = None
    every_turn_token_calls: int = 0
    conversation_token_calls: int = 0
    coverage: str = Coverage.PARTIAL.value  # of the last call; "unrecorded": the transcript holds no text
    # The largest additions: a min-heap of (tokens, -call, n, addition), at most ADDITIONS_KEPT.
    additions: list[tuple[int, int, int, Addition]] = field(default_factory=list)

    @property
    def largest_additions(self) -> list[Addition]:
        """The largest additions, largest first (ties: the earlier call, then the call's order)."""
        return [entry[3] for entry in sorted(self.additions, key=lambda e: (-e[0], -e[1], -e[2]))]

    @property
    def recorded(self) -> bool:
        """Whether the last call's breakdown was measured (else its reported total stands alone)."""
        return self.coverage != Coverage.UNRECORDED.value

    @property
    def counting(self) -> str:
        """The basis, and the Claude proxy when the live path applies it (framing.proxy_encoding_items)."""
        from ctxscope.core.framing import is_claude

        if self.basis and is_claude(self.model):
            return f"{self.basis} x Claude proxy ratio per kind of content (overhead framing:proxy-encoding)"
        return self.basis

    @property
    def inferred_prefix(self) -> int:
        """The inferred system+tools size of the last call (0 before anything was learned)."""
        last = self.last
        return last.inferred if last else 0

    @property
    def last(self) -> CallRow | None:
        return self.rows[-1] if self.rows else None

    @property
    def used(self) -> int:
        last = self.last
        return last.used if last else 0

    @property
    def peak(self) -> int:
        rows = self.rows
        return rows.max_used() if isinstance(rows, CallRows) else max((r.used for r in rows), default=0)

    @property
    def waste_ratio(self) -> float:
        return self.waste.ratio if self.waste is not None else 0.0


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class FileResult(Record):
    path: str
    format: str | None
    records: int
    problems: list[Problem]
    sessions: list[SessionResult]


class _Live:
    __slots__ = ("account", "result")

    def __init__(self, account: TranscriptAccount, result: SessionResult) -> None:
        self.account, self.result = account, result


def analyze_file(path: str, *, format: str | None = None, tokenizer: str = "auto",
                 options: WasteOptions | None = None, keep_text: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> FileResult:
    """Read one transcript and account for every call of every session in it."""
    with cyclic_gc_paused():
        return _analyze_file(path, format, tokenizer, options, keep_text, progress)


def _analyze_file(path: str, format: str | None, tokenizer: str, options: WasteOptions | None,
                  keep_text: bool, progress: Callable[[int, int], None] | None) -> FileResult:
    source = TranscriptFile(path, format, progress=progress)
    live: dict[str, _Live] = {}
    for call in source.calls():
        state = live.get(call.session_id)
        if state is None:
            counter = counter_for(call.model, tokenizer)
            result = SessionResult(call.session_id, path, source.format or "", call.provider,
                                   call.parent_session_id)
            state = live[call.session_id] = _Live(
                TranscriptAccount(call.session_id, counter=counter, waste_options=options, keep_text=keep_text),
                result)
        _account(state, call)
    sessions = []
    for state in live.values():
        result = state.result
        latest = state.account.latest
        waste = state.account.account.waste
        if latest is not None:
            result.parts = latest.apportioned()
            if waste is not None:
                result.waste = waste.report(result.used)
            result.basis = latest.annotation.basis
            result.coverage = latest.annotation.coverage.value
        result.prefix_moves = state.account.prefix.moves
        if waste is not None:
            result.session_waste = _session_waste(result, waste)
        sessions.append(result)
    # Parents first, then their subagents, each in order of appearance.
    sessions.sort(key=lambda s: s.parent_session_id is not None)
    return FileResult(path, source.format, source.records, source.problems, sessions)


def _account(state: _Live, call: TranscriptCall) -> None:
    snapshot, inferred = state.account.observe(call)  # texts let go once counted, unless keep_text
    waste = snapshot.annotation.waste
    ann = snapshot.annotation
    calibrated = snapshot.calibrated()
    result = state.result
    categories = ann.categories
    get = categories.get
    every_turn = get(_SYSTEM, 0) + get(_TOOLS, 0) + get(_RULES, 0) + get(_SKILLS, 0)  # EVERY_TURN
    result.every_turn_token_calls += every_turn
    result.conversation_token_calls += ann.estimated_tokens - every_turn
    _keep_additions(result, call, ann.changes)
    compaction = None
    # Only compactions the transcript declares count: a rewind also drops
    # history, and the ledger's inference cannot tell the two apart here.
    if call.compaction is not None:
        trigger = call.compaction.trigger
        compaction = trigger.value if trigger is not None else "auto"
        result.compactions += 1
    # The categories shown: those with tokens (calibrated() is a new dict of the call's, kept by no one:
    # as it is when none is 0, the usual case, and 0 found in C).
    shown = {c: v for c, v in calibrated.items() if v} if 0 in calibrated.values() else calibrated
    rows = result.rows
    if type(rows) is CallRows:
        # No CallRow object a call: its values go straight into the packed columns.
        rows.add(call.index, call.line, call.timestamp_ns, call.model, ann.estimated_tokens, ann.reported_tokens,
                 inferred, shown, sum(waste.values()), compaction, sum(shown.values()))
    else:
        rows.append(CallRow(call.index, call.line, call.timestamp_ns, call.model, ann.estimated_tokens,
                            ann.reported_tokens, inferred, shown, sum(waste.values()), compaction,
                            sum(shown.values())))
    if call.model and call.model != result.model:
        result.model = call.model
        # The window of the model, as replay and the live path know it (limits.limits_for):
        # Claude Code transcripts never say it; a Codex token_count does (below).
        from ctxscope.core.limits import limits_for

        result.window = limits_for(call.model, call.provider).window_tokens or result.window
    if call.window_tokens:
        result.window = call.window_tokens


_GROWING = (ChangeType.ADDITION, ChangeType.REPLACEMENT)
_ORDER = itertools.count()  # ties among equal additions of one call: their order


def _keep_additions(result: SessionResult, call: TranscriptCall, changes: list) -> None:
    """The call's additions into the session's bounded heap of the largest ones.

    ``changes`` come largest first by size (``abs(delta_tokens)``: the ledger's order,
    ``ledger._largest``): once the heap is full and a change is too small for it, so is
    every one after it, and the rest of the call's changes are not looked at.
    """
    heap = result.additions
    for change in changes:
        delta = change.delta_tokens
        full = len(heap) >= ADDITIONS_KEPT
        if full:
            # ``key <= heap[0][:3]`` below without building the key: the order count only grows,
            # so among equal (tokens, call) the new one is the smaller.
            smallest = heap[0]
            size = delta if delta >= 0 else -delta
            if size < smallest[0] or (size == smallest[0] and -call.index <= smallest[1]):
                break  # not among the largest, and no later change is larger: no Addition made
        if delta <= 0 or change.change_type not in _GROWING:
            continue
        # The smallest leaves first, and among equals the latest call's.
        key = (delta, -call.index, -next(_ORDER))
        addition = Addition(delta, call.index, call.line, change.category.value, change.id,
                            change.label if change.source_call_id else None, change.source_call_id)
        if full:
            heapq.heapreplace(heap, (*key, addition))
        else:
            heapq.heappush(heap, (*key, addition))


def _session_waste(result: SessionResult, tracker: WasteTracker) -> SessionWaste:
    from ctxscope.core.limits import prices_for

    prices = prices_for(result.model, result.provider)
    price = prices.input if prices is not None else None
    findings = [SessionFinding(kind, reference, calls, _cost(calls, price))
                for (kind, reference), calls in tracker.token_calls().items() if calls > 0]
    findings.sort(key=lambda f: (-f.token_calls, f.kind, f.reference))
    return SessionWaste(findings, result.every_turn_token_calls, result.conversation_token_calls, price)
