"""Where to find again the links a reader let go: a uuid's line in the file, 8 bytes a link.

A Claude Code compaction or a rewind cuts links off the live chain, but a
later record may still walk back into them (a /rewind to before the
compaction). Rather than keep their items for the session's length, the
reader keeps where each freed link's line starts, and parses that line again
on such a walk (``source.LineSource`` reads it). :class:`LinkOffsets` is that
index: each link as the low 32 bits of its uuid's hash (four bytes of a
``bytearray``) and its line's byte offset (an ``array('i')`` beside it, 64
bits wide from the first offset past 2 GiB), appended as links are let go, so
a freed link costs 8 bytes instead of its items, its uuid string and a dict
entry, and adding one builds no object that lasts (a compacting session's
freed links and tool calls are most of what still grows with it: issue 14).
A lookup is ``bytearray.find`` over the hashes (C, a few hundred KB for the
longest sessions), made only when a walk leaves the chain and its nodes (a
rewind back into what a cut freed). A hash names candidates only: the caller
reads the line and keeps it only when the uuid in it is the one asked for
(equal hashes of two uuids just cost a read more: with 32 bits, about one in
40,000 lookups among 100,000 freed links).

Pure: no I/O here, no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

__all__ = ["KeyOffsets", "LinkOffsets"]

# The low 32 bits of a 64-bit hash: an array('q')'s bytes seen as 32-bit halves, the low one of each.
_LOW = 0 if sys.byteorder == "little" else 1
assert array("i").itemsize == 4 and array("q").itemsize == 8


class LinkOffsets:
    """uuid -> the byte offsets of the lines that wrote it, for links no longer held.

    ``wide``: each entry keeps its string's whole 64-bit hash (:class:`KeyOffsets` makes its
    filter's two bits from it), not its low 32 bits.
    """

    __slots__ = ("_hashes", "_offsets", "_width")

    def __init__(self, wide: bool = False) -> None:
        self._width = 8 if wide else 4  # bytes of an entry's hash
        self._hashes = bytearray()  # entry i's hash at [width i, width (i + 1)), native byte order
        self._offsets: array[int] = array("i")  # array('q') from the first offset past 32 bits

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, uuids: Iterable[str], offsets: list[int]) -> None:
        """Remember that each uuid's line starts at the offset beside it."""
        self._hashes += self._keys(array("q", map(hash, uuids)))
        at = len(self._offsets)
        try:
            self._offsets.extend(offsets)
        except OverflowError:  # an offset past 2 GiB: 64 bits from now on (extend stopped at it)
            del self._offsets[at:]
            self._offsets = array("q", self._offsets)
            self._offsets.extend(offsets)

    def _keys(self, hashes: array[int]) -> bytes:
        """The stored bytes of 64-bit ``hashes``: as they are, or each one's low 32 bits (in C)."""
        if self._width == 8:
            return hashes.tobytes()
        return memoryview(hashes).cast("B").cast("i")[_LOW::2].tobytes()

    def hashes(self) -> bytearray:
        """Every entry's hash, in native order (:class:`KeyOffsets` rebuilds its filter from them)."""
        return self._hashes

    def find(self, uuid: str) -> list[int]:
        """The offsets whose uuid may be ``uuid`` (its hash's), the latest line first."""
        hashes, width = self._hashes, self._width
        key = self._keys(array("q", (hash(uuid),)))
        out: list[int] = []
        at = hashes.find(key)
        while at >= 0:
            if at % width == 0:  # an entry's bytes, not the seam of two
                out.append(self._offsets[at // width])
            at = hashes.find(key, at + 1)
        out.sort(reverse=True)
        return out


class KeyOffsets:
    """Strings seen long ago (a reader's call keys), each as :class:`LinkOffsets` holds a uuid.

    Asked about every new string, so a Bloom filter (two bits of the hash, 16
    to 64 bits a key, rebuilt as the keys double) answers "never seen" without
    a scan; "maybe" gives the offsets to check, as :meth:`LinkOffsets.find`
    does. 14 to 20 bytes a key instead of the string and its set slot.
    """

    __slots__ = ("_index", "_bits", "_mask")

    def __init__(self) -> None:
        self._index = LinkOffsets(wide=True)
        self._bits = bytearray()
        self._mask = 0

    def __len__(self) -> int:
        return len(self._index)

    def add(self, keys: list[str], offsets: list[int]) -> None:
        self._index.add(keys, offsets)
        if len(self._index) * 16 > 8 * len(self._bits):
            self._resize()  # every hash so far, into a filter twice as large or more
        else:
            self._set(map(hash, keys))

    def find(self, key: str) -> list[int]:
        """The offsets whose key may be ``key``; none at once when the filter says it was never added."""
        h = hash(key)
        mask, bits = self._mask, self._bits
        a, b = h & mask, (h >> 32) & mask
        if not (bits[a >> 3] >> (a & 7)) & (bits[b >> 3] >> (b & 7)) & 1:
            return []
        return self._index.find(key)

    def _resize(self) -> None:
        size = 1 << max(10, (len(self._index) * 32).bit_length())  # bits: a power of two, >= 32 a key
        self._bits = bytearray(size >> 3)
        self._mask = size - 1
        self._set(array("q", bytes(self._index.hashes())))

    def _set(self, hashes: Iterable[int]) -> None:
        bits, mask = self._bits, self._mask
        for h in hashes:
            a, b = h & mask, (h >> 32) & mask
            bits[a >> 3] |= 1 << (a & 7)
            bits[b >> 3] |= 1 << (b & 7)
