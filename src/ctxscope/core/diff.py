"""The difference between two item lists, in proportion to what changed.

Used by the ledger (``docs/accounting.md``, "Diff rules"): a common prefix and
suffix of the very same objects are skipped in C; positions holding equal
items (same id and digest) are unchanged too; the rest is compared as
multisets: equal keys match (moved items are no change), then the same id
with another digest is a replacement, and what is left an addition or a
removal.

A context that only grows between calls (a transcript's live chain) is
passed as an :class:`ItemRun`: the first ``length`` items of a list the
owner only appends to, plus a few trailing items. Two runs over the same
list share their first ``length`` items by construction, so the diff starts
after them: no scan at all of what the calls share.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, islice
from operator import attrgetter, is_not
from typing import Any, overload

from ctxscope._record import Record
from ctxscope.schema import Category, Item

__all__ = ["ItemDiff", "ItemRun", "diff_items", "shared_prefix"]


class ItemRun(Sequence[Item]):
    """``base[:length]`` followed by ``tail``: a context handed over in O(1), whatever its size.

    ``base`` is a list its owner only ever appends to (it starts a new list
    rather than cutting one), so a run never changes once made, and two runs
    over the same ``base`` share their first ``min(length)`` items: the diff,
    the ledger and the waste tracker skip those without looking at them.
    """

    __slots__ = ("base", "length", "tail")

    def __init__(self, base: list[Item], length: int | None = None, tail: tuple[Item, ...] = ()) -> None:
        self.base = base
        self.length = len(base) if length is None else length
        self.tail = tail

    def with_tail(self, *items: Item) -> "ItemRun":
        """The same run with ``items`` after its tail."""
        return ItemRun(self.base, self.length, self.tail + items)

    def shared_with(self, older: Sequence[Item]) -> int:
        """How many leading items this run shares, by construction, with ``older`` (0 if not a run of its list)."""
        if isinstance(older, ItemRun) and older.base is self.base:
            return min(older.length, self.length)
        return 0

    def __len__(self) -> int:
        return self.length + len(self.tail)

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> list[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | list[Item]:
        length = self.length
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            head = self.base[start:min(stop, length)] if start < length else []
            if stop > length:
                head.extend(self.tail[max(0, start - length):stop - length])
            return head
        if index < 0:
            index += len(self)
        if 0 <= index < length:
            return self.base[index]
        if index < 0:
            raise IndexError("ItemRun index out of range")
        return self.tail[index - length]

    def __iter__(self) -> Iterator[Item]:
        return chain(islice(self.base, self.length), self.tail)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (list, tuple, ItemRun)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __repr__(self) -> str:
        return f"ItemRun({list(self)!r})"


# Slices compared whole before the element scan: ``==`` of two lists holding
# the same objects runs at a few ns an element (identity is checked first, in
# C), against ~30 ns for the map/compress scan.
_CHUNK = 512
_ID = attrgetter("id")
# A range this short is scanned by a plain loop: the C scan's five iterators cost more to build
# (a transcript call's tails: two or three items, on every call).
_SHORT = 8


def _first_not_identical(old: Sequence[Item], new: Sequence[Item], start: int, stop: int) -> int:
    """The first index in ``[start, stop)`` where the lists hold different objects, else ``stop``.

    Equal items (same fields) at a position may be skipped as if identical:
    callers treat an equal item (same id and digest) as unchanged anyway.
    """
    while start < stop:
        end = min(stop, start + _CHUNK)
        if old[start:end] != new[start:end]:
            break
        start = end
    if start >= stop:
        return stop
    if stop - start <= _SHORT:
        for index in range(start, stop):
            if old[index] is not new[index]:
                return index
        return stop
    # compress/map/islice keep the scan in C.
    differs = map(is_not, islice(old, start, stop), islice(new, start, stop))
    return next(compress(count(start), differs), stop)


def shared_prefix(old: Sequence[Item], new: Sequence[Item]) -> int:
    """How many leading positions hold the same (or equal) items in both lists.

    For callers that find what was appended by identity (the waste tracker):
    whole slices are compared first, so a long shared prefix costs a few ns
    an item instead of a Python-level or map/compress scan.
    """
    return _first_not_identical(old, new, 0, min(len(old), len(new)))


def _first_not_identical_from_end(old: Sequence[Item], new: Sequence[Item], start: int, stop: int) -> int:
    """How many trailing positions in ``[start, stop)`` hold the same object in both lists."""
    if stop - start <= _SHORT:
        for back in range(start, stop):
            if old[-1 - back] is not new[-1 - back]:
                return back
        return stop
    differs = map(is_not, islice(reversed(old), start, stop), islice(reversed(new), start, stop))
    return next(compress(count(start), differs), stop)


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class ItemDiff(Record):
    """What changed between two item lists: old items gone, new items come, (old, new) pairs."""

    removed: list[Item] = field(default_factory=list)
    added: list[Item] = field(default_factory=list)
    replaced: list[tuple[Item, Item]] = field(default_factory=list)


def diff_items(old: Sequence[Item], new: Sequence[Item]) -> ItemDiff:
    """Removed, added and replaced items between two lists (multisets by id and digest).

    A new object equal to an old one (same id, digest, category and part) is unchanged; it
    gets its ``tokens`` and ``utf8_bytes`` from the old one it matches, so that
    every item of ``new`` leaves with its count and size, without counting it again.
    The same id and digest in another part (a tool call's arguments under another tool's
    name) is a replacement: taken as unchanged, the ledger kept it in its old part, which held
    its tokens, characters and bytes after it left (and the new part went below 0 items).
    Two :class:`ItemRun` of one list are compared from where they part: the
    items before are the same objects, which the scan would skip anyway.
    """
    diff = ItemDiff()
    if isinstance(new, ItemRun) and isinstance(old, ItemRun) and old.base is new.base:
        # Two runs of one list (a transcript's consecutive calls): what follows the
        # shared items is a slice of the list and a tail, built without ItemRun's slicing.
        if old.length <= new.length:
            appended = new.base[old.length:new.length]
            if not old.tail or set(map(_ID, old.tail)).isdisjoint(map(_ID, appended)):
                # The items the list grew by cannot match the old tail (no id in common):
                # they are additions, ahead of whatever the tails' own diff finds.
                _diff_lists(diff, list(old.tail), list(new.tail))
                diff.added = appended + diff.added
                return diff
        shared = min(old.length, new.length)
        old_rest = old.base[shared:old.length]
        old_rest.extend(old.tail)
        new_rest = new.base[shared:new.length]
        new_rest.extend(new.tail)
        return _diff_lists(diff, old_rest, new_rest)
    shared = new.shared_with(old) if isinstance(new, ItemRun) else 0
    return _diff_lists(diff, list(old[shared:]) if shared or not isinstance(old, list) else old,
                       list(new[shared:]) if shared or not isinstance(new, list) else new)


def _diff_lists(diff: ItemDiff, old: list[Item], new: list[Item]) -> ItemDiff:
    n_old, n_new = len(old), len(new)
    shortest = min(n_old, n_new)
    # Common prefix: the same objects, or equal (id, digest) keys.
    p = _first_not_identical(old, new, 0, shortest)
    while p < shortest:
        a, b = old[p], new[p]
        if a.id != b.id or a.digest != b.digest or a.part != b.part or a.category is not b.category:
            break
        b.tokens, b.utf8_bytes = a.tokens, a.utf8_bytes
        p = _first_not_identical(old, new, p + 1, shortest)
    # Common suffix of what is left.
    room = shortest - p
    s = _first_not_identical_from_end(old, new, 0, room)
    while s < room:
        a, b = old[n_old - 1 - s], new[n_new - 1 - s]
        if a.id != b.id or a.digest != b.digest or a.part != b.part or a.category is not b.category:
            break
        b.tokens, b.utf8_bytes = a.tokens, a.utf8_bytes
        s = _first_not_identical_from_end(old, new, s + 1, room)
    old_mid = old[p:n_old - s]
    new_mid = new[p:n_new - s]
    if not old_mid:
        diff.added = new_mid
        return diff
    if not new_mid:
        diff.removed = old_mid
        return diff
    # Middle: match equal keys first (moved items are unchanged), then the
    # same id with another digest (a replacement), in list order.
    by_key: dict[tuple[str, str, Category, str], list[int]] = {}
    for index, item in enumerate(old_mid):
        by_key.setdefault((item.id, item.digest, item.category, item.part), []).append(index)
    matched = [False] * len(old_mid)
    unmatched: list[Item] = []
    for item in new_mid:
        slots = by_key.get((item.id, item.digest, item.category, item.part))
        if slots:
            index = slots.pop(0)
            matched[index] = True
            matched_old = old_mid[index]
            item.tokens, item.utf8_bytes = matched_old.tokens, matched_old.utf8_bytes
        else:
            unmatched.append(item)
    by_id: dict[str, list[int]] = {}
    for index, item in enumerate(old_mid):
        if not matched[index]:
            by_id.setdefault(item.id, []).append(index)
    for item in unmatched:
        slots = by_id.get(item.id)
        if slots:
            index = slots.pop(0)
            matched[index] = True
            diff.replaced.append((old_mid[index], item))
        else:
            diff.added.append(item)
    diff.removed = [item for index, item in enumerate(old_mid) if not matched[index]]
    return diff
