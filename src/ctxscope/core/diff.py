"""The difference between two item lists, in proportion to what changed.

Used by the ledger (``docs/accounting.md``, "Diff rules"): a common prefix and
suffix of the very same objects are skipped in C; positions holding equal
items (same id and digest) are unchanged too; the rest is compared as
multisets: equal keys match (moved items are no change), then the same id
with another digest is a replacement, and what is left an addition or a
removal.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress, count, islice
from operator import is_not
from typing import Mapping, Sequence

from ctxscope.schema import Item

__all__ = ["ItemDiff", "diff_items", "shared_prefix"]


# Slices compared whole before the element scan: ``==`` of two lists holding
# the same objects runs at a few ns an element (identity is checked first, in
# C), against ~30 ns for the map/compress scan.
_CHUNK = 512


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
    differs = map(is_not, islice(reversed(old), start, stop), islice(reversed(new), start, stop))
    return next(compress(count(start), differs), stop)


@dataclass(slots=True)
class ItemDiff:
    """What changed between two item lists: old items gone, new items come, (old, new) pairs."""

    removed: list[Item] = field(default_factory=list)
    added: list[Item] = field(default_factory=list)
    replaced: list[tuple[Item, Item]] = field(default_factory=list)


def diff_items(old: list[Item], new: list[Item], counted: Mapping[tuple[str, str], int]) -> ItemDiff:
    """Removed, added and replaced items between two lists (multisets by id and digest).

    A new object equal to an old one (same id and digest) is unchanged; it
    gets its ``tokens`` from ``counted`` (``(id, digest) -> tokens``) so that
    every item of ``new`` leaves with its count, without counting it again.
    """
    diff = ItemDiff()
    n_old, n_new = len(old), len(new)
    shortest = min(n_old, n_new)
    # Common prefix: the same objects, or equal (id, digest) keys.
    p = _first_not_identical(old, new, 0, shortest)
    while p < shortest:
        a, b = old[p], new[p]
        if a.id != b.id or a.digest != b.digest:
            break
        b.tokens = counted.get((b.id, b.digest), b.tokens)
        p = _first_not_identical(old, new, p + 1, shortest)
    # Common suffix of what is left.
    room = shortest - p
    s = _first_not_identical_from_end(old, new, 0, room)
    while s < room:
        a, b = old[n_old - 1 - s], new[n_new - 1 - s]
        if a.id != b.id or a.digest != b.digest:
            break
        b.tokens = counted.get((b.id, b.digest), b.tokens)
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
    by_key: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(old_mid):
        by_key.setdefault((item.id, item.digest), []).append(index)
    matched = [False] * len(old_mid)
    unmatched: list[Item] = []
    for item in new_mid:
        slots = by_key.get((item.id, item.digest))
        if slots:
            matched[slots.pop(0)] = True
            item.tokens = counted.get((item.id, item.digest), item.tokens)
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
