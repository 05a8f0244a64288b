"""A session's context over time: snapshots, diffs, compaction, the parts cap.

:class:`SessionLedger` takes the items of each observed request (or transcript
call) and returns a :class:`Snapshot`: the raw annotation of SPEC section 4
(categories, estimated tokens, basis, baseline) and the changes against the
previous snapshot. Work grows with what changed: items the previous request
already held are neither counted nor visited again when the new list shares
them by identity (``items.RequestExtractor`` hands back the same objects), and
the totals per category and per part are running sums updated by deltas.

The rules where SPEC is silent (replacement, compaction inference, the parts
cap, baseline deltas) are written down in ``docs/accounting.md``.

Options: ``capture_labels`` (SPEC section 7: change labels are the items'
references, paths and commands included, only when opted in) and
``proxy_encoding`` (for Claude models, the overhead item
``framing:proxy-encoding`` recomputed from running token sums per kind of
content, since it needs every item's count: ``docs/instrumentation.md``).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter as Multiset
from dataclasses import dataclass, replace
from typing import Callable, Final, Iterable, Literal, Sequence, Union

from ctxscope._record import Record
from ctxscope.core import framing as _framing
from ctxscope.core.framing.claude_proxy import looks_like_json, proxy_encoding_item, proxy_encoding_tokens_of_sums
from ctxscope.core.views import apportion, calibrate, calibration_target, free_tokens
from ctxscope.core.diff import ItemDiff, ItemRun, diff_items
from ctxscope.schema import (
    CATEGORIES,
    MAX_CHANGES_PER_SPAN,
    MAX_PARTS_PER_SESSION,
    Annotation,
    Category,
    Change,
    ChangeType,
    CompactionTrigger,
    Coverage,
    Item,
    Stage,
    other_part,
)
from ctxscope.core.tokens import FALLBACK_LOADING, TOKENIZERS, Counter, counter_for

__all__ = [
    "CONVERSATION_CATEGORIES",
    "NAMED_PARTS_CAP",
    "Compaction",
    "SessionLedger",
    "Snapshot",
]

# Named parts a session keeps before new ones go to ``<category>/other``. One
# slot per category is held back for those overflow parts (and ``unattributed``
# in the apportioned view), so a session never shows more than 256 parts.
NAMED_PARTS_CAP = MAX_PARTS_PER_SESSION - len(CATEGORIES)

# Texts whose counts the ledger keeps for a body seen again under another id, at most: a cache
# only (a miss counts the text again). Without a bound it held every text of a context that
# never shrinks, for the whole session (issue 14: memory flat in the session's size).
TEXT_COUNTS_KEPT = 8192

# What :meth:`SessionLedger._history_change` finds: a compaction's trigger, a
# restart (a new conversation from the same opening), or nothing.
RESTART: Final = "restart"
HistoryChange = Union[CompactionTrigger, Literal["restart"], None]

# Categories that make up the conversation history, the part a compaction rewrites.
CONVERSATION_CATEGORIES = frozenset({
    Category.PROMPTS, Category.ASSISTANT, Category.RESULTS, Category.MESSAGES, Category.SUMMARIES,
})


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Compaction(Record):
    """One compaction: declared by the caller or inferred from a rewritten history."""

    trigger: CompactionTrigger
    declared: bool
    tokens_before: int | None  # estimated tokens of the previous snapshot (None: none seen)
    tokens_after: int
    removed: list[Item]
    added: list[Item]
    annotation: Annotation  # for the ``post-compaction`` span


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Snapshot(Record):
    """A session's composition at one observation (raw estimates in ``annotation``)."""

    annotation: Annotation
    parts: dict[str, int]
    items: Sequence[Item]  # a list, or an itemdiff.ItemRun (a transcript's growing context)
    compaction: Compaction | None = None
    timestamp_ns: int | None = None
    first: bool = False  # the session's first observation: emit a capture-start span
    session_id: str = ""
    # The history was cut back to its opening (docs/accounting.md): a new
    # conversation from the same start; the tracker gives a fingerprint session a new key.
    restarted: bool = False
    # Characters and UTF-8 bytes per part, keyed as ``parts`` (the local store's record): running
    # sums the ledger keeps as items come and go, so a call costs what changed, not the context.
    # None when the ledger keeps none (``part_sizes=False``): not ``{}``, an empty context's sizes,
    # so that a record cannot take "not measured" for "nothing there" (store.record_from_observation).
    part_chars: dict[str, int] | None = None
    part_bytes: dict[str, int] | None = None

    @property
    def measured(self) -> bool:
        """Whether a provider-reported input exists for this snapshot."""
        return self.annotation.reported_tokens is not None

    @property
    def learned(self) -> bool:
        """Whether the views rest on a learned correction (no reported input, one learned)."""
        ann = self.annotation
        return ann.reported_tokens is None and ann.learned_correction_tokens is not None

    @property
    def target(self) -> int | None:
        """What the calibrated view sums to (:func:`calibration.calibration_target`: the span processor's rule)."""
        ann = self.annotation
        return calibration_target(ann.reported_tokens, ann.estimated_tokens, ann.learned_correction_tokens)

    @property
    def apportioned_label(self) -> str:
        """``apportioned`` (a measurement split), ``learned`` (estimate + learned correction) or ``estimated``."""
        if self.measured:
            return "apportioned"
        return "learned" if self.learned else "estimated"

    @property
    def used(self) -> int:
        """Tokens in use: reported where measured, else the estimate plus a learned correction, else the estimate."""
        target = self.target
        return target if target is not None else self.annotation.estimated_tokens

    def free(self) -> int | None:
        """``max(0, window - used)``, or None without a known window."""
        return free_tokens(self.annotation.window_tokens, self.used)

    def calibrated(self) -> dict[Category, int]:
        """SPEC section 5 per category; holds ``unattributed`` once measured or a correction is learned.

        Without usage, a learned correction stands in for the measurement (the
        processor's gauges do the same): a positive one is ``unattributed``, a
        negative one scales the categories down; :attr:`apportioned_label`
        says ``learned``.
        """
        return calibrate(self.annotation.categories, self.target)[0]

    def apportioned(self) -> dict[str, int]:
        """SPEC section 5 per part: each category's calibrated tokens split among its parts.

        Parts of a category share that category's calibrated value by their
        estimates (largest remainder, parts in path order), so the parts add
        up to the calibrated categories and so to the measurement exactly; the
        shortfall of the estimates appears as the part ``unattributed``.
        Without a measurement the estimate plus a learned correction takes its
        place (:attr:`apportioned_label` ``learned``); with neither the parts
        keep their estimates (``estimated``).
        """
        if self.target is None:
            return dict(self.parts)
        calibrated = self.calibrated()
        by_category: dict[Category, dict[str, int]] = {}
        for part in sorted(self.parts):
            by_category.setdefault(_category_of(part), {})[part] = self.parts[part]
        out: dict[str, int] = {}
        for category, parts in by_category.items():
            out.update(apportion(parts, calibrated.get(category, 0)))
        unattributed = calibrated.get(Category.UNATTRIBUTED, 0)
        if unattributed:
            out[Category.UNATTRIBUTED.value] = unattributed
        return out

    def annotation_for(self, stage: Stage) -> Annotation:
        """A copy of the annotation for another span, e.g. ``capture-start``.

        ``item_stage`` records the stage the items were attributed at when it
        differs from the new span's stage.
        """
        ann = self.annotation
        item_stage = ann.item_stage or (ann.stage if ann.stage is not stage else None)
        return replace(ann, stage=stage, item_stage=item_stage,
                       categories=dict(ann.categories), changes=list(ann.changes))


def _category_of(part: str) -> Category:
    return Category(part.split("/", 1)[0])


class SessionLedger:
    """The snapshots of one session. Thread-safe: observations are serialised."""

    def __init__(self, session_id: str, *, counter: Counter | None = None, tokenizer: str = "auto",
                 capture_labels: bool = False, proxy_encoding: bool = False,
                 wait_for_encoding: bool = True, part_sizes: bool = True) -> None:
        if counter is None and tokenizer not in TOKENIZERS:
            # A configuration error: raised when the ledger is built, not per request.
            raise ValueError(f"unknown tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZERS)}")
        self.session_id = session_id
        # SPEC section 7: labels are tool names unless file paths and commands
        # are opted in (CTXSCOPE_CAPTURE_LABELS), then an item's reference.
        self.capture_labels = capture_labels
        # Claude's proxy encoding (framing.proxy_encoding_items) as the overhead
        # item framing:proxy-encoding, from running token sums per kind of
        # content: it needs every item's count, which only the ledger has.
        self.proxy_encoding = proxy_encoding
        self._proxy_sums: dict[str, int] | None = None  # kind -> tokens; None: not kept
        self._proxy_item: Item | None = None  # the last item of self._items when set
        self._fixed_counter = counter
        self._tokenizer = tokenizer
        # False on the live path: a request is never held for the encoding's load
        # (counted chars/4 with basis_fallback "loading" until it is ready; tokens.counter_for).
        self._wait_for_encoding = wait_for_encoding
        self._counters: dict[str | None, Counter] = {}
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._items: Sequence[Item] = []
        self._basis: str | None = None
        self._model: str | None = None
        # No count per item is kept beside the items: an item in context carries its own
        # (``item.tokens``, set when it came in and never changed while it stays), which is what
        # a removal subtracts; a dict of (id, digest) -> tokens for every item of a context that
        # only grows was ~180 bytes an item for the session's length (issue 14).
        # (digest, characters) -> tokens of a text under the current basis: the
        # same body under another id (a file read again, a result repeated) is
        # counted once on the incremental path. Cleared by a rebuild, whose
        # cold count stays a plain loop (it must keep near tiktoken's own
        # speed); pruned to the context's texts when it outgrows it.
        self._text_counts: dict[tuple[str, int], int] = {}
        self._part_map: dict[tuple[Category, str], str] = {}
        self._named_parts: set[str] = set()
        self._cat_tokens: dict[Category, int] = {}
        self._cat_items: dict[Category, int] = {}
        self._part_tokens: dict[str, int] = {}
        self._part_items: dict[str, int] = {}
        # Characters and UTF-8 bytes per part (Snapshot.part_chars, part_bytes: the local store's
        # record), kept by the same deltas as the tokens; ``part_sizes=False`` (analyze: no store)
        # keeps none, since measuring every item's bytes was ~3.7% of analyze's instructions.
        self.part_sizes = part_sizes
        self._part_chars: dict[str, int] = {}
        self._part_bytes: dict[str, int] = {}
        self.compactions = 0

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    # -- public ------------------------------------------------------------

    def observe(
        self,
        items: Iterable[Item],
        *,
        model: str | None = None,
        stage: Stage = Stage.REQUEST_INPUT,
        coverage: Coverage = Coverage.COMPLETE,
        compaction: CompactionTrigger | None = None,
        window_tokens: int | None = None,
        effective_window_tokens: int | None = None,
        compact_threshold_tokens: int | None = None,
        timestamp_ns: int | None = None,
        sample_offset_ns: int | None = None,
        item_stage: Stage | None = None,
    ) -> Snapshot:
        """Count, diff and annotate the items of one observation (sets ``item.tokens``)."""
        with self._lock:
            return self._observe(
                items if isinstance(items, ItemRun) else list(items), model, stage, coverage, compaction,
                window_tokens,
                effective_window_tokens, compact_threshold_tokens, timestamp_ns,
                sample_offset_ns, item_stage)

    def provider_cleared(self, snapshot: Snapshot, edits: Iterable[tuple[str, int]]) -> Snapshot:
        """Provider-side context editing: what the provider cleared before the model saw the request.

        Each edit is a removal on the call's annotation (a change the span shows),
        its tokens taken off the category it cleared (tool results, or thinking
        for ``clear_thinking_*``), never below 0: the client still sends the full
        history, so the next call starts from it again. The items and parts stay.
        """
        annotation = snapshot.annotation
        with self._lock:
            for edit_type, tokens in edits:
                category = Category.ASSISTANT if edit_type.startswith("clear_thinking") else Category.RESULTS
                left = max(0, annotation.categories.get(category, 0) - int(tokens))
                annotation.categories[category] = left
                change = Change(id=f"provider-edit:{edit_type}", category=category, estimated_tokens=0,
                                delta_tokens=-int(tokens), change_type=ChangeType.REMOVAL, label=edit_type,
                                source_kind="context_edit")
                changes = sorted([change, *annotation.changes], key=lambda c: -abs(c.delta_tokens))
                annotation.omitted_changes += max(0, len(changes) - MAX_CHANGES_PER_SPAN)
                annotation.changes = changes[:MAX_CHANGES_PER_SPAN]
            annotation.estimated_tokens = sum(v for c, v in annotation.categories.items()
                                              if c is not Category.UNATTRIBUTED)
        return snapshot

    def report(self, snapshot: Snapshot, reported_tokens: int | None) -> Snapshot:
        """Attach the provider-reported input and the calibration factor (raw estimates stay)."""
        if reported_tokens is None:
            return snapshot
        factor = _calibration_factor(snapshot.annotation.categories, reported_tokens)
        with self._lock:
            for ann in (snapshot.annotation,
                        snapshot.compaction.annotation if snapshot.compaction else None):
                if ann is not None:
                    ann.reported_tokens = int(reported_tokens)
                    ann.calibration_factor = factor
        return snapshot

    # -- observation ---------------------------------------------------------

    def _counter(self, model: str | None) -> Counter:
        if self._fixed_counter is not None:
            return self._fixed_counter
        counter = self._counters.get(model)
        if counter is None:
            counter = counter_for(model, self._tokenizer, wait=self._wait_for_encoding)
            if getattr(counter, "fallback", None) != FALLBACK_LOADING:
                self._counters[model] = counter  # a stand-in while the encoding loads is asked again
        return counter

    def _observe(self, items: Sequence[Item], model: str | None, stage: Stage, coverage: Coverage,
                 declared: CompactionTrigger | None, window_tokens: int | None,
                 effective_window_tokens: int | None, compact_threshold_tokens: int | None,
                 timestamp_ns: int | None, sample_offset_ns: int | None,
                 item_stage: Stage | None) -> Snapshot:
        prev = self._latest
        counter = self._counter(model)
        first = prev is None
        basis_changed = not first and counter.basis != self._basis
        model_changed = (not first and model is not None and self._model is not None
                         and model != self._model)
        # Inferred only where the whole request was seen (below): a transcript's calls never need it.
        infer = declared is None and not first and coverage is _COMPLETE
        conversation_before = self._conversation_tokens() if infer else 0
        tokens_before = prev.annotation.estimated_tokens if prev is not None else None

        diff = diff_items(self._items, items)
        rebuilt = first or basis_changed
        if rebuilt:
            self._basis = counter.basis
            self._rebuild(items, counter)
        else:
            self._apply(diff, counter)
        if self.proxy_encoding or self._proxy_item is not None:
            items = self._proxy(items, diff, rebuilt, model, counter)
        if model is not None:
            self._model = model

        trigger, inferred, restarted = declared, False, False
        # Inferred only where the whole request was seen: a partial view (a
        # Responses chain, a transcript branch after a rewind) can lose history
        # without any compaction, and transcript formats declare theirs.
        if infer:
            change = self._history_change(self._items, diff, conversation_before)
            if change is RESTART:
                restarted = True
            elif isinstance(change, CompactionTrigger):  # not None, and (for mypy) not RESTART
                trigger, inferred = change, True
        baseline = first or model_changed or basis_changed or trigger is not None

        cat_tokens, cat_items = self._cat_tokens, self._cat_items
        categories = {c: cat_tokens[c] for c in CATEGORIES if cat_items.get(c)}
        estimated = sum(categories.values())
        basis, fallback = counter.basis, getattr(counter, "fallback", None)
        if baseline:
            changes, omitted = self._baseline_changes(items)
        else:
            changes, omitted = self._diff_changes(diff)
        # Positional, in Annotation's field order (stage, basis, coverage, baseline, categories,
        # estimated_tokens, item_stage, sample_offset_ns, reported_tokens, window_tokens,
        # effective_window_tokens, compact_threshold_tokens, model, calibration_factor,
        # learned_correction_tokens, basis_fallback, omitted_changes, changes): once a call, and a
        # class called with keywords builds a dict of them for its __init__ (with Snapshot: ~9,900
        # instructions a call).
        annotation = Annotation(stage, basis, coverage, baseline, categories, estimated, item_stage,
                                sample_offset_ns, None, window_tokens, effective_window_tokens,
                                compact_threshold_tokens, model, None, None, fallback, omitted, changes)
        record = None
        if trigger is not None:
            self.compactions += 1
            post_changes, post_omitted = self._diff_changes(diff)
            post_item_stage = item_stage or (stage if stage is not Stage.POST_COMPACTION else None)
            # The call's annotation's values (sample_offset_ns aside), after the compaction.
            post = Annotation(stage=Stage.POST_COMPACTION, basis=basis, coverage=coverage, baseline=False,
                              categories=dict(categories), estimated_tokens=estimated,
                              item_stage=post_item_stage, window_tokens=window_tokens,
                              effective_window_tokens=effective_window_tokens,
                              compact_threshold_tokens=compact_threshold_tokens, model=model,
                              basis_fallback=fallback, omitted_changes=post_omitted, changes=post_changes,
                              compaction_trigger=trigger)
            record = Compaction(
                trigger=trigger, declared=not inferred, tokens_before=tokens_before,
                tokens_after=estimated,
                removed=diff.removed + [old for old, _ in diff.replaced],
                added=diff.added + [new for _, new in diff.replaced],
                annotation=post)
        self._prune_cache(items)
        self._items = items
        # Positional, in Snapshot's field order (annotation, parts, items, compaction, timestamp_ns,
        # first, session_id, restarted, part_chars, part_bytes): once a call, as Annotation above.
        sized = self.part_sizes
        snapshot = Snapshot(annotation, dict(self._part_tokens), items, record, timestamp_ns, first,
                            self.session_id, restarted, dict(self._part_chars) if sized else None,
                            dict(self._part_bytes) if sized else None)
        self._latest = snapshot
        return snapshot

    # -- counting and totals -------------------------------------------------

    def _measure(self, item: Item) -> None:
        # An item's size, taken while it has its text (a released one keeps the size it was given).
        if self.part_sizes and not item.released:
            item.utf8_bytes = text_bytes(item)

    def _tokens(self, item: Item, counter: Counter) -> int:
        self._measure(item)
        tokens = item.fixed_tokens
        if tokens is None:
            if item.released:
                return item.tokens
            tokens = self._count_text(item, counter.count)
        item.tokens = tokens
        return tokens

    def _count_text(self, item: Item, count_text: Callable[[str], int]) -> int:
        text_key = (item.digest, len(item.text))
        text_counts = self._text_counts
        tokens = text_counts.get(text_key)
        if tokens is None:
            if len(text_counts) >= TEXT_COUNTS_KEPT:
                text_counts.clear()  # a bound on memory, not an LRU: a miss only costs a count
            tokens = text_counts[text_key] = count_text(item.text)
        return tokens

    def _part(self, item: Item) -> str:
        key = (item.category, item.part)
        part = self._part_map.get(key)
        if part is None:
            part = self._admit(item.category, item.part)
            self._part_map[key] = part
        return part

    def _admit(self, category: Category, part: str) -> str:
        # A part path starts with its category (SPEC section 2); one that does
        # not is placed under it, so every part maps back to one category.
        name = category.value
        if part != name and not part.startswith(name + "/"):
            part = f"{name}/{part}" if part else name
        if part in self._named_parts or len(self._named_parts) < NAMED_PARTS_CAP:
            self._named_parts.add(part)
            return part
        return other_part(category)

    def _add(self, item: Item, tokens: int, sign: int) -> None:
        category = item.category
        # _part's lookup first, written out (this runs for every item a call adds or drops).
        part = self._part_map.get((category, item.part)) or self._part(item)
        self._cat_tokens[category] = self._cat_tokens.get(category, 0) + sign * tokens
        self._cat_items[category] = self._cat_items.get(category, 0) + sign
        self._part_tokens[part] = self._part_tokens.get(part, 0) + sign * tokens
        sizes = self.part_sizes
        if sizes:
            self._part_chars[part] = self._part_chars.get(part, 0) + sign * item.chars
            self._part_bytes[part] = self._part_bytes.get(part, 0) + sign * item.utf8_bytes
        left = self._part_items.get(part, 0) + sign
        if left:
            self._part_items[part] = left
        else:
            del self._part_items[part]
            del self._part_tokens[part]
            if sizes:
                del self._part_chars[part]
                del self._part_bytes[part]

    def _rebuild(self, items: Sequence[Item], counter: Counter) -> None:
        # The cold path (first observation, new basis): _tokens and _add
        # inlined, since it runs per item and must stay near tiktoken's own speed.
        cache: dict[tuple[str, str], int] = {}
        cat_tokens: dict[Category, int] = {}
        cat_items: dict[Category, int] = {}
        part_tokens: dict[str, int] = {}
        part_items: dict[str, int] = {}
        part_map = self._part_map
        count_text = counter.count
        for item in items:
            key = (item.id, item.digest)
            tokens = cache.get(key)
            if tokens is None:
                fixed = item.fixed_tokens
                if fixed is not None:
                    tokens = fixed
                elif item.released:
                    tokens = item.tokens
                else:
                    tokens = count_text(item.text)
                cache[key] = tokens
            item.tokens = tokens
            category = item.category
            part_key = (category, item.part)
            part = part_map.get(part_key)
            if part is None:
                part = part_map[part_key] = self._admit(category, item.part)
            cat_tokens[category] = cat_tokens.get(category, 0) + tokens
            cat_items[category] = cat_items.get(category, 0) + 1
            part_tokens[part] = part_tokens.get(part, 0) + tokens
            part_items[part] = part_items.get(part, 0) + 1
        self._text_counts = {}  # a new basis counts anew; the cold path itself skips this cache
        self._cat_tokens, self._cat_items = cat_tokens, cat_items
        self._part_tokens, self._part_items = part_tokens, part_items
        self._part_chars, self._part_bytes = {}, {}
        if self.part_sizes:
            self._add_sizes(items)

    def _apply(self, diff: ItemDiff, counter: Counter) -> None:
        for item in diff.removed:
            self._add(item, item.tokens, -1)
        for old, new in diff.replaced:
            self._add(old, old.tokens, -1)
            self._add(new, self._tokens(new, counter), 1)
        if diff.added:
            self._add_new(diff.added, counter.count)

    def _add_new(self, added: list[Item], count_text: Callable[[str], int]) -> None:
        # _tokens, _count_text and _add (sign +1) for each item a call adds, written out in one loop:
        # the incremental path's per-item work, most of what a transcript call does here.
        text_counts = self._text_counts
        part_map = self._part_map
        cat_tokens, cat_items = self._cat_tokens, self._cat_items
        part_tokens, part_items = self._part_tokens, self._part_items
        through_add: set[int] = set()  # the ids of items counted by _add itself (a part at -1 items)
        for item in added:
            tokens = item.fixed_tokens
            if tokens is None:
                if item.released:
                    tokens = item.tokens
                else:
                    text_key = (item.digest, len(item.text))
                    tokens = text_counts.get(text_key)
                    if tokens is None:
                        if len(text_counts) >= TEXT_COUNTS_KEPT:
                            text_counts.clear()  # a bound on memory, not an LRU: a miss only costs a count
                        tokens = text_counts[text_key] = count_text(item.text)
                    item.tokens = tokens
            else:
                item.tokens = tokens
            category = item.category
            part = part_map.get((category, item.part)) or self._part(item)
            held = part_items.get(part, 0)
            if held == -1:
                # One more leaves the part at 0 items: _add drops it, its sizes with it, so _add_sizes
                # skips the item. (A count below 0 came from an item taken as unchanged, same id and
                # digest, in another part than the one counted; diff_items makes that a replacement
                # since session 30, and this stays _add's rule should a count go below 0 another way.)
                self._measure(item)
                self._add(item, tokens, 1)
                through_add.add(id(item))
                continue
            cat_tokens[category] = cat_tokens.get(category, 0) + tokens
            cat_items[category] = cat_items.get(category, 0) + 1
            part_tokens[part] = part_tokens.get(part, 0) + tokens
            part_items[part] = held + 1
        if self.part_sizes:
            self._add_sizes(added if not through_add else [i for i in added if id(i) not in through_add])

    def _add_sizes(self, added: Sequence[Item]) -> None:
        # The characters and bytes of items coming in, in a loop of their own: the counting loops
        # stay as they were when no size is kept. Their parts are mapped already (counted first).
        part_map = self._part_map
        part_chars, part_bytes = self._part_chars, self._part_bytes
        for item in added:
            if not item.released:  # _measure, written out: once an item added
                item.utf8_bytes = text_bytes(item)
            part = part_map[item.category, item.part]
            part_chars[part] = part_chars.get(part, 0) + item.chars
            part_bytes[part] = part_bytes.get(part, 0) + item.utf8_bytes

    # -- Claude's proxy encoding ---------------------------------------------------

    def _proxy(self, items: Sequence[Item], diff: ItemDiff, rebuilt: bool, model: str | None,
               counter: Counter) -> Sequence[Item]:
        """Keep the proxy-encoding item at the end of ``items``, its totals and its change.

        The previous item (the last of the previous list) is absent from the
        caller's list, so the diff holds it as removed and ``_apply`` has
        subtracted it; here it is taken back out of the diff and becomes no
        change (same tokens), a replacement, or stays a removal. Work is in
        proportion to the diff: the sums per kind of content move by the
        diff's items, and the correction is recomputed from them.
        """
        old = self._proxy_item
        if not rebuilt and old is not None:
            removed = diff.removed
            if removed and removed[-1] is old:
                removed.pop()
            else:  # not where the rule puts it: find it by identity
                diff.removed = [i for i in removed if i is not old]
        new: Item | None = None
        if self.proxy_encoding and _framing.is_claude(model):
            sums = self._proxy_sums
            if rebuilt or sums is None:
                sums = self._proxy_sums = _proxy_sums(items)
            else:
                _proxy_update(sums, diff)
            tokens = proxy_encoding_tokens_of_sums(model, sums)
            # The same correction is the same item (its digest is of the tokens): no new one.
            same = old is not None and not rebuilt and old.fixed_tokens == tokens
            new = old if same else proxy_encoding_item(tokens)
        else:
            self._proxy_sums = None
        if old is not None and new is not None and not rebuilt and new.digest == old.digest:
            new = old  # unchanged: back into the totals, no change event
            self._add(old, self._tokens(old, counter), 1)
        elif new is not None:
            self._add(new, self._tokens(new, counter), 1)
            if rebuilt:
                pass  # a baseline: its changes are made from the whole list
            elif old is not None:
                diff.replaced.append((old, new))
            else:
                diff.added.append(new)
        elif old is not None and not rebuilt:
            diff.removed.append(old)  # already subtracted: a removal
        self._proxy_item = new
        if new is None:
            return items
        if isinstance(items, ItemRun):
            return items.with_tail(new)
        assert isinstance(items, list)
        items.append(new)
        return items

    def _prune_cache(self, items: Sequence[Item]) -> None:
        # Only the texts in context are worth keeping counts of. Pruning once the
        # cache holds twice the context plus 1,024 keeps a short session's cache
        # small at O(1) amortised (TEXT_COUNTS_KEPT bounds a long one's).
        if len(self._text_counts) > 2 * len(items) + 1024:
            texts = {(i.digest, len(i.text)) for i in items}
            self._text_counts = {k: v for k, v in self._text_counts.items() if k in texts}

    def _conversation_tokens(self) -> int:
        return sum(self._cat_tokens.get(c, 0) for c in CONVERSATION_CATEGORIES)

    # -- compaction --------------------------------------------------------------

    def _history_change(self, prev: Sequence[Item], diff: ItemDiff, conversation_before: int) -> HistoryChange:
        """The inference rule of docs/accounting.md: what a rewritten conversation history is.

        - a ``summaries`` item appeared while history went: a compaction (``auto``);
        - the oldest turns went (at least two items) and the newest stayed: a
          sliding window, a compaction with trigger ``trim``;
        - the history was cut back to its opening (the first message kept, all
          from some point on gone, at most half of the conversation kept): a
          new conversation from the same start (an eval loop, a retry), never
          a compaction;
        - anything else (a tool call and its result taken out of the middle,
          a history emptied outright): an edit, no compaction.
        """
        removed = [i for i in diff.removed if i.category in CONVERSATION_CATEGORIES]
        shrunk = any(old.category in CONVERSATION_CATEGORIES
                     and new.tokens < old.tokens
                     for old, new in diff.replaced)
        if not removed and not shrunk:
            return None
        summary_added = any(i.category is Category.SUMMARIES for i in diff.added) or any(
            new.category is Category.SUMMARIES for _, new in diff.replaced)
        if summary_added:
            return CompactionTrigger.AUTO
        if not removed:
            return None
        history = [(i.id, i.digest) for i in prev if i.category in CONVERSATION_CATEGORIES]
        gone = Multiset((i.id, i.digest) for i in removed)
        cut = len(removed)
        if cut >= len(history):
            return None  # emptied: a new start with nothing kept, no compaction
        if Multiset(history[-cut:]) == gone:
            kept = conversation_before - sum(i.tokens for i in removed)
            if 2 * kept <= conversation_before:
                return RESTART
        if cut >= 2 and Multiset(history[:cut]) == gone:
            return CompactionTrigger.TRIM
        return None

    # -- changes ---------------------------------------------------------------

    def _baseline_changes(self, items: Sequence[Item]) -> tuple[list[Change], int]:
        # A baseline change's delta is the item's whole size: it ranks the
        # largest items first, and change_type baseline says it is not growth.
        order = _largest([item.tokens for item in items])
        full = self.capture_labels
        changes = [_change(items[i], ChangeType.BASELINE, items[i].tokens, items[i].tokens, full)
                   for i in order]
        return changes, len(items) - len(changes)

    def _diff_changes(self, diff: ItemDiff) -> tuple[list[Change], int]:
        # (delta, item, tokens, change type), in a fixed order: removals in the
        # previous list's order, then replacements and additions in the new one's.
        rows: list[tuple[int, Item, int, ChangeType]] = []
        for item in diff.removed:
            tokens = item.tokens
            rows.append((-tokens, item, tokens, _REMOVAL))
        for old, new in diff.replaced:
            before = old.tokens
            rows.append((new.tokens - before, new, new.tokens, _REPLACEMENT))
        for item in diff.added:
            rows.append((item.tokens, item, item.tokens, _ADDITION))
        order = _largest([abs(row[0]) for row in rows])
        if self.capture_labels:
            changes = [_change(rows[i][1], rows[i][3], rows[i][2], rows[i][0], True) for i in order]
            return changes, len(rows) - len(changes)
        changes = []
        append = changes.append
        for i in order:
            delta, item, tokens, change_type = rows[i]
            # _change without the call (up to 64 a call), positional in Change's field order.
            append(Change(item.id, item.category, tokens, delta, change_type, item.chars, item.label,
                          item.source_kind, item.source_call_id))
        return changes, len(rows) - len(changes)


# Enum members read once: on this Python an enum class's attribute is looked up through
# EnumType's __getattr__ hook (~850 instructions, several times a plain global), once a
# call or once a change here.
_COMPLETE = Coverage.COMPLETE
_REMOVAL, _REPLACEMENT, _ADDITION = ChangeType.REMOVAL, ChangeType.REPLACEMENT, ChangeType.ADDITION
_UNATTRIBUTED = Category.UNATTRIBUTED

# The kinds of content framing.proxy_kind tells apart, in the order their sums are kept.
_PROXY_KINDS = (_framing.PROXY_CODE, _framing.PROXY_PROSE)


def text_bytes(item: Item) -> int:
    """UTF-8 bytes of an item's text; one kept without its text (media, encrypted) by its characters.

    (Base64 and ids are ASCII.) ``str.isascii()`` is O(1) in CPython: the common case costs a length.
    """
    text = item.text
    if not text:
        return item.chars
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def release_texts(items: Iterable[Item]) -> None:
    """Let counted items' texts go, keeping all the ledger reads of them later (``analyze``: memory follows counts).

    Each keeps its count in ``tokens`` (``released``: never counted again) and
    ``fixed_tokens`` stays None: the item is still counted text, which Claude's
    proxy encoding weighs (a fixed count is skipped there). The text becomes
    a stand-in that keeps the one property read after counting, whether it
    looks like JSON (``framing.proxy_kind``: code or prose).
    """
    for item in items:
        text = item.text
        if not text or item.released:
            continue
        item.released = True
        head = text[0]
        # The test of proxy_kind that reads the text, and only for a text that can pass it: one that
        # starts with "{" or "[", or with whitespace strip() would drop (looks_like_json's first test).
        # The kinds proxy_kind gives whatever the text (tool schemas, call arguments) keep either
        # stand-in. (A Python call an item costs ~2% of analyze.)
        item.text = _CODE_STAND_IN if (head in "{[" or head.isspace()) and looks_like_json(text) else ""


_CODE_STAND_IN = "{}"  # what a released JSON-like text becomes (release_texts)


def _proxy_sums(items: Iterable[Item]) -> dict[str, int]:
    """Tokens per kind of content of the items the proxy ratio applies to (counted, not fixed)."""
    sums = {kind: 0 for kind in _PROXY_KINDS}
    kind_of = _framing.proxy_kind
    for item in items:
        if item.fixed_tokens is None and item.tokens:
            sums[kind_of(item)] += item.tokens
    return sums


def _proxy_update(sums: dict[str, int], diff: ItemDiff) -> None:
    kind_of = _framing.proxy_kind
    for item in diff.removed:
        if item.fixed_tokens is None:
            sums[kind_of(item)] -= item.tokens
    for old, new in diff.replaced:
        if old.fixed_tokens is None:
            sums[kind_of(old)] -= old.tokens
        if new.fixed_tokens is None:
            sums[kind_of(new)] += new.tokens
    for item in diff.added:
        if item.fixed_tokens is None:
            sums[kind_of(item)] += item.tokens


def _calibration_factor(categories: dict[Category, int], reported: int) -> float:
    """The factor :func:`calibration.calibrate` returns, without building the calibrated view.

    ``reported / estimated`` when the estimates exceed the measurement, else 1.0
    (SPEC section 5); a call's response needs the factor only.
    """
    if reported < 0:
        raise ValueError(f"reported tokens cannot be negative ({reported})")
    # The ledger's categories (whole numbers >= 0, no unattributed) give the same sum in C: a
    # sum of ints is an int, one float among them makes it a float and takes the general rule.
    values = categories.values()
    try:
        estimated = sum(values)
    except TypeError:  # not numbers: the general rule's int() says what they are
        estimated = None
    if type(estimated) is not int or _UNATTRIBUTED in categories or min(values, default=0) < 0:
        estimated = sum(max(0, int(v)) for c, v in categories.items() if c is not _UNATTRIBUTED)
    return reported / estimated if estimated > reported else 1.0


def _largest(sizes: list[int]) -> list[int]:
    """Indices of the (at most 64) largest sizes, largest first, ties in index order.

    ``heapq.nlargest`` is documented as ``sorted(..., reverse=True)[:n]``,
    which is stable, so equal sizes keep their index order; only the kept
    rows are sorted in full, and the key is a C method, not a lambda.
    """
    if len(sizes) > MAX_CHANGES_PER_SPAN:
        return heapq.nlargest(MAX_CHANGES_PER_SPAN, range(len(sizes)), key=sizes.__getitem__)
    return sorted(range(len(sizes)), key=sizes.__getitem__, reverse=True)


def _change(item: Item, change_type: ChangeType, tokens: int, delta: int, full_label: bool = False) -> Change:
    # full_label: the item's reference (``Read:file_path=src/app.py``) where it has one.
    label = (item.reference or item.label) if full_label else item.label
    # Positional, in Change's field order (id, category, estimated_tokens, delta_tokens, change_type, chars,
    # label, source_kind, source_call_id): keywords cost a name match each, for up to 64 changes a call.
    return Change(item.id, item.category, tokens, delta, change_type, item.chars, label,
                  item.source_kind, item.source_call_id)
