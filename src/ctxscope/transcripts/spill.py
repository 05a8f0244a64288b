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

Past :data:`SPILL_ENTRIES` entries held, they go on to an unnamed scratch
file as one block (:class:`ctxscope._scratch.ScratchFile`), and a lookup reads
the blocks back: 8 bytes a link was still what grew with a compacting session
(0.9 MB more live at 200 MB than at 50 MB, issue 14), and lookups are rare.
A scratch file that fails leaves the entries in memory. No other I/O here, no
OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope._scratch import ScratchFile

__all__ = ["KeyOffsets", "LinkOffsets"]

# The low 32 bits of a 64-bit hash: an array('q')'s bytes seen as 32-bit halves, the low one of each.
_LOW = 0 if sys.byteorder == "little" else 1
assert array("i").itemsize == 4 and array("q").itemsize == 8
# Entries an index holds in memory (64 KB of them); then they go to its scratch file, one block.
SPILL_ENTRIES = 8192


class LinkOffsets:
    """uuid -> the byte offsets of the lines that wrote it, for links no longer held.

    ``wide``: each entry keeps its string's whole 64-bit hash (:class:`KeyOffsets` makes its
    filter's two bits from it), not its low 32 bits.
    """

    __slots__ = ("_hashes", "_offsets", "_width", "_blocks", "_spill", "_spilled")

    def __init__(self, wide: bool = False) -> None:
        self._width = 8 if wide else 4  # bytes of an entry's hash
        self._hashes = bytearray()  # entry i's hash at [width i, width (i + 1)), native byte order
        self._offsets: array[int] = array("i")  # array('q') from the first offset past 32 bits
        # The older entries, in the scratch file: each block (entries, where it starts, its hashes'
        # bytes, its offsets' typecode), its hashes then its offsets. _spill is False once the file failed.
        self._blocks: list[tuple[int, int, int, str]] = []
        self._spill: ScratchFile | bool | None = None
        self._spilled = 0  # entries in the blocks

    def __len__(self) -> int:
        return self._spilled + len(self._offsets)

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
        if len(self._offsets) >= SPILL_ENTRIES and self._spill is not False:
            self._spill_block()

    def _spill_block(self) -> None:
        """The entries held to the scratch file, one block; memory starts again empty."""
        from ctxscope._scratch import ScratchFile

        hashes, offsets = self._hashes, self._offsets
        try:
            if not isinstance(self._spill, ScratchFile):
                self._spill = ScratchFile()
            at = self._spill.append(hashes + offsets.tobytes())
        except OSError:  # no scratch file (a full disk, no temporary folder): the entries stay in memory
            self._spill = False
            return
        self._blocks.append((len(offsets), at, len(hashes), offsets.typecode))
        self._spilled += len(offsets)
        self._hashes = bytearray()
        self._offsets = array("i")

    def _keys(self, hashes: array[int]) -> bytes:
        """The stored bytes of 64-bit ``hashes``: as they are, or each one's low 32 bits (in C)."""
        if self._width == 8:
            return hashes.tobytes()
        return memoryview(hashes).cast("B").cast("i")[_LOW::2].tobytes()

    def hashes(self) -> bytearray:
        """Every entry's hash, in native order (:class:`KeyOffsets` rebuilds its filter from them)."""
        if not self._blocks:
            return self._hashes
        out = bytearray()
        for hashes, _ in self._spilled_blocks():
            out += hashes
        return out + self._hashes

    def find(self, uuid: str) -> list[int]:
        """The offsets whose uuid may be ``uuid`` (its hash's), the latest line first."""
        key = self._keys(array("q", (hash(uuid),)))
        out = self._found(key, self._hashes, self._offsets)
        if self._blocks:
            for hashes, offsets in self._spilled_blocks():
                out += self._found(key, hashes, offsets)
        out.sort(reverse=True)
        return out

    def _found(self, key: bytes, hashes: bytearray, offsets: array[int]) -> list[int]:
        """The offsets beside the entries of ``hashes`` equal to ``key``."""
        width = self._width
        out: list[int] = []
        at = hashes.find(key)
        while at >= 0:
            if at % width == 0:  # an entry's bytes, not the seam of two
                out.append(offsets[at // width])
            at = hashes.find(key, at + 1)
        return out

    def _spilled_blocks(self) -> Iterable[tuple[bytearray, array[int]]]:
        """Each block of the scratch file read back: its hashes and its offsets, the oldest first."""
        spill = self._spill
        assert spill is not None and not isinstance(spill, bool)
        for entries, at, size, typecode in self._blocks:
            offsets = array(typecode)
            data = spill.read(at, size + entries * offsets.itemsize)
            offsets.frombytes(data[size:])
            yield data[:size], offsets


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
