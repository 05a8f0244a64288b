"""Waste in a context window (SPEC section 8) and a suggested compaction plan.

Four disjoint sources; a token is counted in one at most:

- **duplicate**: a tool result whose body, or whose reference (tool and
  normalised arguments, e.g. ``Read:file_path=src/app.py``), appears again
  while an earlier copy is in context. Within one reference the newest result
  is the one kept; every other copy of the kept body, and every repeated body,
  is a duplicate. Across references, identical bodies count once.
- **stale**: an older result of a reference, superseded by a newer result
  with a different body.
- **bloat**: tokens above the cap (default 400) of each kept result, each
  unique body charged once.
- **tool_definition_overage**: tool schema tokens above a budget (default
  800), per request.

Results whose reference was not used again for ``aging_calls`` calls are
flagged as aging (a finding, not waste). :class:`WasteTracker` keeps these
totals incrementally for the live path; :func:`analyze` gives findings and
the compaction plan for one context.

Pure: no OpenTelemetry, no provider SDK. References come from the readers
and extractors (``Item.reference``), never from call ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

from ctxscope._record import FrozenRecord, Record
from ctxscope.core.diff import ItemRun, shared_prefix
from ctxscope.schema import Category, Item, WasteKind

DEFAULT_RESULT_CAP = 400
DEFAULT_TOOL_BUDGET = 800
DEFAULT_AGING_CALLS = 20
# Repeated text shorter than this ("ok", "continue") is not worth a finding.
MIN_DUPLICATE_TEXT_TOKENS = 8
# The kinds' names as findings and the session view key them (an enum's .value is a
# descriptor call: these run for every result added).
_DUPLICATE = WasteKind.DUPLICATE.value
_STALE = WasteKind.STALE.value
_BLOAT = WasteKind.BLOAT.value
_OVERAGE = WasteKind.TOOL_DEFINITION_OVERAGE.value
# Enum members read once: on this Python an enum class's attribute is looked up through
# EnumType's __getattr__ hook (~850 instructions, several times a plain global), and these
# run for every item added (dense50: ~80,000 lookups).
_TOOLS, _RESULTS, _ASSISTANT = Category.TOOLS, Category.RESULTS, Category.ASSISTANT
_WASTE_DUPLICATE, _WASTE_STALE = WasteKind.DUPLICATE, WasteKind.STALE
_WASTE_BLOAT, _WASTE_OVERAGE = WasteKind.BLOAT, WasteKind.TOOL_DEFINITION_OVERAGE
_TEXT_CATEGORIES = frozenset((Category.PROMPTS, Category.ENVIRONMENT, Category.RULES, Category.SKILLS,
                              Category.SUMMARIES, Category.ASSISTANT))


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class WasteOptions(FrozenRecord):
    """The waste rules' thresholds: a tool result's cap, the tool definitions' budget, the aging age."""

    result_cap: int = DEFAULT_RESULT_CAP
    tool_budget: int = DEFAULT_TOOL_BUDGET
    aging_calls: int = DEFAULT_AGING_CALLS

    def __post_init__(self) -> None:
        if self.result_cap < 0 or self.tool_budget < 0 or self.aging_calls < 1:
            raise ValueError("waste caps and budgets must be >= 0 and aging_calls >= 1")


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Finding(Record):
    """One kind of waste of one reference, and what dropping or summarising it would save."""

    kind: str  # a WasteKind value, or "aging"
    severity: str  # high, medium, low
    reference: str
    count: int
    tokens_saved: int
    action: str  # drop or summarise

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "reference": self.reference,
                "count": self.count, "tokens_saved": self.tokens_saved, "action": self.action}


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Plan(Record):
    """Drop these, summarise those: what a compaction would save."""

    drop: list[Finding] = field(default_factory=list)
    summarise: list[Finding] = field(default_factory=list)

    @property
    def saving(self) -> int:
        return sum(f.tokens_saved for f in self.drop) + sum(f.tokens_saved for f in self.summarise)

    def to_json(self) -> dict[str, Any]:
        return {"saving": self.saving, "drop": [f.to_json() for f in self.drop],
                "summarise": [f.to_json() for f in self.summarise]}


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Report(Record):
    """A context's waste by kind, over its total tokens, with the findings and the plan they make."""

    waste: dict[WasteKind, int]
    total: int
    findings: list[Finding]
    plan: Plan

    @property
    def wasted(self) -> int:
        return sum(self.waste.values())

    @property
    def ratio(self) -> float:
        return self.wasted / self.total if self.total > 0 else 0.0


def severity(tokens: int, total: int) -> str:
    """high: at least 5% of the context or 5,000 tokens; medium: 1% or 1,000; else low."""
    share = tokens / total if total > 0 else 0.0
    if tokens >= 5000 or share >= 0.05:
        return "high"
    if tokens >= 1000 or share >= 0.01:
        return "medium"
    return "low"


def _key(item: Item) -> str:
    return item.reference or ("body:" + item.digest)


class _Group:
    """The results of one reference in context, oldest first.

    Every copy but the newest is a duplicate when its body recurs later in the
    group, else stale. Appending a result moves at most two copies (the old
    newest, and the last earlier copy of the new body), so the sums are kept
    as results are appended; a removal (a rewind, a compaction) has them
    worked out again from the list at the next look.
    """

    __slots__ = ("items", "duplicate", "stale", "kept", "since", "dup_now", "stale_now", "dup_count", "stale_count",
                 "last", "exact")

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.duplicate = 0  # as charged to the tracker's totals
        self.stale = 0
        self.kept: Item | None = None
        self.since = 0  # the call from which duplicate and stale hold their values
        self.dup_now = 0  # of ``items`` as they are now, while ``exact`` (the tracker reads them there)
        self.stale_now = 0
        self.dup_count = 0  # how many copies those are (the report's counts, without a split)
        self.stale_count = 0
        self.last: dict[str, Item] = {}  # digest -> its newest copy
        self.exact = True

    def append(self, item: Item) -> None:
        items = self.items
        if self.exact and items:
            newest = items[-1]
            if newest.digest == item.digest:
                self.dup_now += newest.tokens
                self.dup_count += 1
            else:
                self.stale_now += newest.tokens
                earlier = self.last.get(item.digest)
                if earlier is None:
                    self.stale_count += 1
                else:  # its body recurs now: stale -> duplicate
                    self.stale_now -= earlier.tokens
                    self.dup_now += earlier.tokens
                    self.dup_count += 1
        items.append(item)
        self.last[item.digest] = item

    def remove(self, item: Item) -> None:
        """Take ``item`` out (ValueError when it is not here); the sums are worked out again when asked."""
        self.items.remove(item)
        self.exact = False

    def totals(self) -> tuple[int, int]:
        """(duplicate, stale) tokens of the group as it is now."""
        if not self.exact:
            dup, stale = self.split()
            self.dup_now = sum(i.tokens for i in dup)
            self.stale_now = sum(i.tokens for i in stale)
            self.dup_count, self.stale_count = len(dup), len(stale)
            self.last = {i.digest: i for i in self.items}
            self.exact = True
        return self.dup_now, self.stale_now

    def split(self) -> tuple[list[Item], list[Item]]:
        """(duplicates, stale): every copy but the newest, split by whether its body recurs later."""
        items = self.items
        dup: list[Item] = []
        stale: list[Item] = []
        later: set[str] = set()
        for item in reversed(items[:-1]):
            (dup if item.digest in later or item.digest == items[-1].digest else stale).append(item)
            later.add(item.digest)
        return dup, stale


class WasteTracker:
    """Waste totals of one session, kept incrementally from snapshot to snapshot.

    ``observe(snapshot)`` (or ``observe_items(items)``) finds what was added and
    removed since the previous call by object identity, as the ledger does (a
    shared prefix is scanned in C), and updates only the groups touched: the
    Python work follows the items added and removed.
    """

    def __init__(self, options: WasteOptions | None = None) -> None:
        self.options = options or WasteOptions()
        self._items: Sequence[Item] = []
        self._groups: dict[str, _Group] = {}
        self._kept: dict[str, list[int]] = {}  # digest -> [kept copies, tokens, bloat since, duplicate since]
        self._duplicate = 0  # within groups
        self._stale = 0
        self._cross_duplicate = 0  # identical kept bodies under different references
        # Other content repeated verbatim (a reminder re-injected, a prompt pasted
        # twice, the same tool call again): digest -> [copies, tokens, name, since]; every
        # copy after the first is duplicate.
        self._texts: dict[str, list] = {}
        self._text_duplicate = 0
        self._bloat = 0
        self._tools = 0
        self.calls = 0
        self._last_use: dict[str, int] = {}  # reference -> call index it was last called or returned
        # The session view: (kind, reference) -> tokens x calls the waste rode along in. Kept
        # lazily: a value is charged for its calls when it changes (or at the end), so the
        # work follows the groups touched, never the whole context.
        self._token_calls: dict[tuple[str, str], int] = {}
        self._kept_refs: dict[str, str] = {}  # digest -> reference of the group that first kept it

    # -- public ------------------------------------------------------------------

    def observe(self, snapshot: Any) -> dict[WasteKind, int]:
        """Waste per kind after a ledger snapshot (anything with ``.items``)."""
        return self.observe_items(snapshot.items)

    def observe_items(self, items: Sequence[Item]) -> dict[WasteKind, int]:
        old = self._items
        # Two runs of one reader's list share their first items by construction: no scan of those.
        p = items.shared_with(old) if isinstance(items, ItemRun) else 0
        old_rest, new_rest = old[p:], items[p:]
        p = shared_prefix(old_rest, new_rest)
        return self._update(old_rest[p:], new_rest[p:], items)

    def observe_added(self, added: Sequence[Item], items: Sequence[Item]) -> dict[WasteKind, int]:
        """Waste after a call that only appended ``added`` to the previous context (no scan at all)."""
        return self._update((), added, items)

    def _update(self, removed: Sequence[Item], added: Sequence[Item], items: Sequence[Item]) -> dict[WasteKind, int]:
        # In the order first touched (a dict, not a set): which group keeps a body shared by
        # several references first names it, and a set's order changed with PYTHONHASHSEED.
        touched: dict[str, None] = {}
        for item in removed:
            self._remove(item, touched)
        for item in added:
            self._add(item, touched)
        for key in touched:
            self._regroup(key)
        # Kept as given: a list, or an ItemRun that shares its items with the next call's (O(1)).
        self._items = items
        self.calls += 1
        return self.totals()

    def totals(self) -> dict[WasteKind, int]:
        overage = self._tools - self.options.tool_budget
        return {_WASTE_DUPLICATE: self._duplicate + self._cross_duplicate + self._text_duplicate,
                _WASTE_STALE: self._stale, _WASTE_BLOAT: self._bloat,
                _WASTE_OVERAGE: overage if overage > 0 else 0}

    def report(self, total: int) -> Report:
        """Findings and the compaction plan for the current context (``total``: its used tokens)."""
        return _findings(self, total)

    # -- bookkeeping -----------------------------------------------------------------

    def _add(self, item: Item, touched: dict[str, None]) -> None:
        # The categories by identity, the most frequent first (dense50: 12,220 assistant items,
        # 5,726 results, 2,759 other texts). A result or a tool call's reference is used now
        # (aging): set here, so a group that leaves in this call keeps it (_regroup).
        category = item.category
        if category is _RESULTS:
            reference = item.reference
            key = reference or "body:" + item.digest
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group()
            group.append(item)
            touched[key] = None
            if reference:
                self._last_use[reference] = self.calls
            return
        if category is _TOOLS:
            self._tools += item.tokens
            return
        if category is _ASSISTANT:
            if item.reference:
                self._last_use[item.reference] = self.calls
        elif category not in _TEXT_CATEGORIES:
            return
        tokens = item.tokens
        if tokens >= MIN_DUPLICATE_TEXT_TOKENS and item.digest:
            entry = self._texts.get(item.digest)
            if entry is None:
                # Named by the call's reference for repeated tool calls, else by its part.
                name = f"repeated call {item.reference}" if item.reference else _identical_text(item.part)
                self._texts[item.digest] = [1, tokens, name, self.calls]
            else:
                # _charge's body: (copies - 1) x tokens for the calls since the count last changed.
                calls = self.calls
                if entry[0] > 1 and calls > entry[3]:  # entry[1] >= MIN_DUPLICATE_TEXT_TOKENS
                    charged = (_DUPLICATE, entry[2])
                    self._token_calls[charged] = self._token_calls.get(charged, 0) + \
                        (entry[0] - 1) * entry[1] * (calls - entry[3])
                entry[3] = calls
                entry[0] += 1
                self._text_duplicate += entry[1]

    def _remove(self, item: Item, touched: dict[str, None]) -> None:
        if item.category is _TOOLS:
            self._tools -= item.tokens
        elif item.category in _TEXT_CATEGORIES:
            entry = self._texts.get(item.digest) if item.tokens >= MIN_DUPLICATE_TEXT_TOKENS else None
            if entry is not None:
                self._charge(_DUPLICATE, entry[2], (entry[0] - 1) * entry[1], entry[3])
                entry[3] = self.calls
                entry[0] -= 1
                if entry[0] == 0:
                    del self._texts[item.digest]
                else:
                    self._text_duplicate -= entry[1]
        elif item.category is _RESULTS:
            key = _key(item)
            group = self._groups.get(key)
            if group is not None:
                try:
                    group.remove(item)
                except ValueError:
                    return
                touched[key] = None

    def _charge(self, kind: str, reference: str, tokens: int, since: int) -> None:
        if tokens > 0 and self.calls > since:
            key = (kind, reference)
            self._token_calls[key] = self._token_calls.get(key, 0) + tokens * (self.calls - since)

    def token_calls(self) -> dict[tuple[str, str], int]:
        """Session view: ``(kind, reference) -> tokens x calls`` each waste rode along in, up to now."""
        out = dict(self._token_calls)

        def add(kind: str, reference: str, tokens: int, since: int) -> None:
            if tokens > 0 and self.calls > since:
                out[(kind, reference)] = out.get((kind, reference), 0) + tokens * (self.calls - since)

        for key, group in self._groups.items():
            reference = _reference(key, group.items[-1]) if group.items else key
            add(_DUPLICATE, reference, group.duplicate, group.since)
            add(_STALE, reference, group.stale, group.since)
        cap = self.options.result_cap
        for digest, entry in self._kept.items():
            reference = self._kept_refs.get(digest, "body:" + digest)
            add(_BLOAT, reference, entry[1] - cap, entry[2])
            if entry[0] > 1:  # the name made only for a body kept more than once
                add(_DUPLICATE, f"{reference} (same body under other references)",
                    (entry[0] - 1) * entry[1], entry[3])
        calls = self.calls
        for copies, tokens, name, since in self._texts.values():
            # add's body, inlined: most texts were seen once (dense50: 82 of 8,361 repeat).
            if copies > 1 and calls > since:  # tokens >= MIN_DUPLICATE_TEXT_TOKENS
                charged = (_DUPLICATE, name)
                out[charged] = out.get(charged, 0) + (copies - 1) * tokens * (calls - since)
        return out

    def _regroup(self, key: str) -> None:
        group = self._groups[key]
        calls = self.calls
        items = group.items
        kept = items[-1] if items else group.kept
        # The group's name, made once here (charges and the kept body's name read it).
        reference = key if not key.startswith("body:") else _reference(key, kept)
        duplicate, stale = group.duplicate, group.stale
        since = group.since
        if calls > since:  # _charge's test, for the values held since the group last changed
            token_calls = self._token_calls
            if duplicate > 0:
                charged = (_DUPLICATE, reference)
                token_calls[charged] = token_calls.get(charged, 0) + duplicate * (calls - since)
            if stale > 0:
                charged = (_STALE, reference)
                token_calls[charged] = token_calls.get(charged, 0) + stale * (calls - since)
        group.since = calls
        if group.kept is not None:
            self._unkeep(group.kept)
            group.kept = None
        if not items:
            del self._groups[key]
            self._duplicate -= duplicate
            self._stale -= stale
            group.duplicate = group.stale = 0
            # Its last use is read only while the group is there (aging), and set again by the
            # result that makes it anew: a compaction's references leave with their groups, but
            # not one used in this very call (_add set it: a tool call of the same reference).
            if self._last_use.get(key) != calls:
                self._last_use.pop(key, None)
            return
        if group.exact:  # only appended to: the sums as append kept them (no call of totals())
            group.duplicate, group.stale = group.dup_now, group.stale_now
        else:
            group.duplicate, group.stale = group.totals()
        self._duplicate += group.duplicate - duplicate
        self._stale += group.stale - stale
        group.kept = kept = items[-1]
        self._keep(kept, reference)

    def _keep(self, item: Item, reference: str) -> None:
        digest = item.digest
        entry = self._kept.get(digest)
        if entry is None:
            tokens = item.tokens
            self._kept[digest] = [1, tokens, self.calls, self.calls]
            self._kept_refs.setdefault(digest, reference)
            if tokens > self.options.result_cap:
                self._bloat += tokens - self.options.result_cap
        else:
            self._charge_cross(digest, entry)
            entry[0] += 1
            self._cross_duplicate += entry[1]

    def _unkeep(self, item: Item) -> None:
        digest = item.digest
        entry = self._kept.get(digest)
        if entry is None:
            return
        self._charge_cross(digest, entry)
        entry[0] -= 1
        if entry[0] == 0:
            reference = self._kept_refs.pop(digest, None)
            bloat = entry[1] - self.options.result_cap
            if bloat > 0:
                self._charge(_BLOAT, reference if reference is not None else "body:" + digest, bloat, entry[2])
                self._bloat -= bloat
            del self._kept[digest]
        else:
            self._cross_duplicate -= entry[1]

    def _charge_cross(self, digest: str, entry: list[int]) -> None:
        # _charge's test first: the finding's name is made only when there is something to charge
        # (most kept bodies have one copy: this runs for every result added).
        if entry[0] > 1 and self.calls > entry[3]:
            reference = self._kept_refs.get(digest, "body:" + digest)
            self._charge(_DUPLICATE, f"{reference} (same body under other references)",
                         (entry[0] - 1) * entry[1], entry[3])
        entry[3] = self.calls


def _reference(key: str, kept: Item | None) -> str:
    """How a group is named in findings: its reference, or what its body-keyed result was."""
    if not key.startswith("body:"):
        return key
    return f"identical result of {(kept.label if kept is not None else None) or 'a tool'}"


def waste_of(items: Iterable[Item], options: WasteOptions | None = None) -> dict[WasteKind, int]:
    """Waste per kind of one context (items counted: ``item.tokens`` set)."""
    tracker = WasteTracker(options)
    return tracker.observe_items(list(items))


def analyze(items: Iterable[Item], total: int | None = None,
            options: WasteOptions | None = None) -> Report:
    """Findings and plan of one context; ``total`` defaults to the items' tokens."""
    items = list(items)
    tracker = WasteTracker(options)
    tracker.observe_items(items)
    return tracker.report(total if total is not None else sum(i.tokens for i in items))


def _findings(tracker: WasteTracker, total: int) -> Report:
    # WasteTracker.report's body, kept out of the class for its length: it reads the tracker's state.
    options = tracker.options
    findings: list[Finding] = []
    plan = Plan()
    seen_kept: dict[str, str] = {}
    cross: dict[str, list[int]] = {}  # digest -> [copies, tokens] of identical kept bodies
    aging_cut = tracker.calls - 1 - options.aging_calls

    def add(kind: str, reference: str, count: int, tokens: int, action: str, into: list[Finding]) -> None:
        if tokens <= 0:
            return  # an empty body costs nothing: no finding
        level = "low" if kind == "aging" else severity(tokens, total)
        finding = Finding(kind, level, reference, count, tokens, action)
        findings.append(finding)
        into.append(finding)

    for key, group in tracker._groups.items():  # noqa: SLF001 - WasteTracker.report's body
        kept = group.items[-1]
        reference = _reference(key, kept)
        group.totals()  # exact already after an update: the sums and counts as appends kept them
        copy = kept.digest in seen_kept
        if copy:
            entry = cross.setdefault(kept.digest, [0, kept.tokens])
            entry[0] += 1
        else:
            seen_kept[kept.digest] = reference
        add(_DUPLICATE, reference, group.dup_count, group.dup_now, "drop", plan.drop)
        add(_STALE, reference, group.stale_count, group.stale_now, "drop", plan.drop)
        if copy:
            continue
        # Aging: not used again for many calls, whatever its size; summarised to a quarter of the cap.
        last_use = tracker._last_use  # noqa: SLF001 - WasteTracker.report's body
        aging = bool(kept.reference and last_use.get(kept.reference, tracker.calls) <= aging_cut)
        if kept.tokens > options.result_cap:
            # A bloated result that is also aging is summarised once, as aging (the larger saving).
            add(_BLOAT, reference, 1, kept.tokens - options.result_cap, "summarise",
                [] if aging else plan.summarise)
        if aging:
            add("aging", reference, 1, kept.tokens - min(kept.tokens, options.result_cap // 4), "summarise",
                plan.summarise)
    for digest, (copies, tokens) in cross.items():
        # The same body returned under other references (e.g. "Todos have been modified"):
        # one finding for all its extra copies, named by the first one kept.
        add(_DUPLICATE, f"{seen_kept[digest]} (same body under other references)", copies,
            copies * tokens, "drop", plan.drop)
    for copies, tokens, name, _ in tracker._texts.values():  # noqa: SLF001 - WasteTracker.report's body
        if copies > 1:
            add(_DUPLICATE, name, copies - 1, (copies - 1) * tokens, "drop", plan.drop)
    totals = tracker.totals()
    overage = totals[WasteKind.TOOL_DEFINITION_OVERAGE]
    if overage:
        findings.append(Finding(_OVERAGE, severity(overage, total),
                                "tools", 1, overage, "trim"))
    findings.sort(key=lambda f: (-f.tokens_saved, f.kind, f.reference))
    plan.drop.sort(key=lambda f: -f.tokens_saved)
    plan.summarise.sort(key=lambda f: -f.tokens_saved)
    return Report(waste=totals, total=total, findings=findings, plan=plan)


@lru_cache(maxsize=1024)
def _identical_text(part: str) -> str:
    """A repeated text's name: one string per part, not one per text kept (they last the session)."""
    return f"identical {part} text"
