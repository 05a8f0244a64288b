"""Where to find again the links a reader let go: a uuid's line in the file, 16 bytes a link.

A Claude Code compaction or a rewind cuts links off the live chain, but a
later record may still walk back into them (a /rewind to before the
compaction). Rather than keep their items for the session's length, the
reader keeps where each freed link's line starts, and parses that line again
on such a walk (``source.LineSource`` reads it). :class:`LinkOffsets` is that
index: each link as its uuid's hash and its line's byte offset, in two typed
arrays sorted by hash, so a freed link costs 16 bytes instead of its items,
its uuid string and a dict entry. A hash names candidates only: the caller
reads the line and keeps it only when the uuid in it is the one asked for
(equal hashes of two uuids just cost a read more).

Pure: no I/O here, no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

__all__ = ["LinkOffsets"]

# Each cut adds one batch (sorted on its own); past this many they are merged into one, so a
# lookup bisects a few arrays however many rewinds the session had.
_BATCHES = 8


class LinkOffsets:
    """uuid -> the byte offsets of the lines that wrote it, for links no longer held."""

    __slots__ = ("_batches",)

    def __init__(self) -> None:
        self._batches: list[tuple[array[int], array[int]]] = []  # (hashes sorted, offsets in that order)

    def __len__(self) -> int:
        return sum(len(hashes) for hashes, _ in self._batches)

    def __bool__(self) -> bool:
        return bool(self._batches)

    def add(self, uuids: Iterable[str], offsets: Iterable[int]) -> None:
        """Remember that each uuid's line starts at the offset beside it."""
        pairs = sorted(zip(map(hash, uuids), offsets))
        if not pairs:
            return
        self._batches.append(_columns(pairs))
        if len(self._batches) > _BATCHES:
            merged = sorted({pair for hashes, offs in self._batches for pair in zip(hashes, offs)})
            self._batches = [_columns(merged)]

    def find(self, uuid: str) -> list[int]:
        """The offsets whose uuid may be ``uuid`` (its hash's), the latest line first."""
        key = hash(uuid)
        out: list[int] = []
        for hashes, offsets in self._batches:
            i = bisect_left(hashes, key)
            while i < len(hashes) and hashes[i] == key:
                out.append(offsets[i])
                i += 1
        out.sort(reverse=True)
        return out


def _columns(pairs: list[tuple[int, int]]) -> tuple[array[int], array[int]]:
    return array("q", [h for h, _ in pairs]), array("q", [o for _, o in pairs])
