"""tiktoken's exact count in a few megabytes: the live path's counter (chosen in ``core/tokens.py``).

tiktoken's Rust encoder keeps three copies of an encoding's tokens (its
encoder and decoder maps and the sorted token bytes, each entry its own heap
allocation): 41 MB for o200k_base's 199,998, most of a live application's
cost of counting. Counting needs one table: which byte strings are tokens,
and their ranks. :class:`CompactEncoding` keeps it in three flat arrays:

- the tokens' bytes end to end, in rank order (1.4 MB for o200k_base),
- where each token starts (4 bytes a token),
- an open-addressing hash table, CRC-32 of a token's bytes to its rank
  (``2 ** k`` slots of 4 bytes, at most 40% full: 2 MB for o200k_base),

about 4 MB in all, built once from tiktoken's own rank file (its download,
cache and hash check, the same as ``get_encoding``) and kept in ctxscope's
cache (:mod:`ctxscope.core.encoding_load`), so that later processes read it
back in a few milliseconds without building anything. It counts by
tiktoken's own algorithm (``src/lib.rs``): the encoding's pattern splits the
text into pieces; a piece that is a token counts one; any other is merged
pair by pair, the lowest-ranked pair first and the leftmost of equal ones
(``_byte_pair_merge``), and counts the parts left. The pattern runs on the
``regex`` module (a dependency of tiktoken's own; for o200k_base imported
and compiled at the first text that is not ASCII), and an ASCII text on
o200k_base's pattern rewritten for the standard library's ``re`` (the same
pieces for ASCII input, at about 2.5 times the speed, and 29% fewer
instructions a piece since each of its alternatives starts on one character
class: the comment above ``_O200K_ASCII`` says why its pieces are the
original's). Pieces' counts are remembered in a bounded table
(:data:`PIECE_MEMORY`), cleared when full, which merges a new piece where
the sum meets it.

The counts are tiktoken's ``encode_ordinary`` lengths, special tokens'
text counted as text and lone surrogates replaced as tiktoken replaces
them: ``tests/core/test_bpe.py`` compares them on generated text and on
every text of the corpus. Its speed: pure Python and holding the GIL, about
tiktoken's CPU a character on conversation and code, where pieces repeat
(the ``re`` split is most of it, as the regex is most of tiktoken's:
docs/analyze.md "Performance"), up to 7 times it on base64-like text, where
every piece is merged anew. Every counter counts on it (``core/tokens.py``):
the live path for its size, the batch commands (``analyze``, ``replay``,
``watch``) because tiktoken's encoder costs 0.3-0.45 s of CPU to build a
process and 60 MB, more than its faster merges save on a session.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import array
import heapq
import json
import re
import zlib
from typing import Any, Callable, Mapping, cast

from ctxscope.core.encoding_load import cache_path, read_cached, write_cached
from ctxscope.core.match_stack import make_room

# Pieces whose counts are remembered (a dict of str -> int, about 6 MB when full, then cleared): the
# words and spacings a conversation repeats count at a dict lookup rather than a table probe.
PIECE_MEMORY = 1 << 16
# ASCII texts longer than this (characters) are split after :func:`make_room` (core/match_stack.py): under
# it, its 16 allocations cost more than the matches save (about 30 pieces at ~230 instructions).
ROOMY_TEXT = 256
# Pieces longer than this (bytes) merge on a heap (``_long_piece_tokens``): the list scan is quadratic.
LONG_PIECE = 64
_FORMAT = "ctxscope-bpe-1"

# o200k_base's pattern (tiktoken_ext.openai_public) and what it matches in ASCII text, for ``re``:
# \p{L} is [A-Za-z] there, \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M} [A-Z], \p{Ll}\p{Lm}\p{Lo}\p{M} [a-z], \p{N}
# [0-9], and \s Unicode's White_Space, [\t\n\v\f\r ] (not ``re``'s \s, which also takes \x1c-\x1f).
_O200K = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
          "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
          "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
          "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
_S = "\\t\\n\\x0b\\x0c\\r "
_H = "[\\t\\x0b\\x0c ]"  # \s but \r \n
_P = f"[^{_S}A-Za-z0-9]"  # [^\s\p{L}\p{N}]
# o200k's (?i:'s|'t|'re|'ve|'m|'ll|'d)? for ASCII text, as a branch whose last alternative is empty:
# sre compiles the optional group to REPEAT/MAX_UNTIL, entered at every word piece; a branch skips
# the contraction on its first character (') and takes the empty alternative.
_C = "(?:'(?:[sStTdDmM]|[rR][eE]|[vV][eE]|[lL][lL])|)"
# The same pieces, each alternative written to start with one character class: sre's BRANCH tries an
# alternative only when its first class takes the next character (the original's start with optional
# or repeated items and are entered, and fail, at every piece), and the repeats possessive where
# nothing after them could take back a character. 29% fewer instructions a piece than the plain
# rewrite (an eighth of default's texts split: 890 M -> 633 M, callgrind). Why each is the original's, at a
# piece's first character c:
# - a letter: the first two alternatives take no prefix (the prefix is no letter), so [A-Z]*[a-z]+ or
#   [A-Z]+[a-z]*: c lowercase, [a-z]+; c a capital, the capitals then the lowercase letters after
#   them, if any (the first alternative when some follow, the second when none does); then the
#   optional contraction, which starts with ' (no letter: the possessive runs leave it the same
#   characters);
# - c neither letter, digit, \r nor \n, followed by a letter: the same two alternatives with c as the
#   prefix, tried before " ?[^\s\p{L}\p{N}]+" as in the original;
# - a digit: \p{N}{1,3}, three optional digits;
# - " ?[^\s\p{L}\p{N}]+[\r\n/]*" as two alternatives, the space first; its runs end the pattern,
#   so the original takes them whole (possessive: the same);
# - \s*[\r\n]+ takes, of the whitespace run at c, the longest stretch that ends in \r or \n (\s*
#   gives back characters until a newline follows, then [\r\n]+ takes the newlines from there): from
#   a newline c, c then (spaces, newline) repeated; from another space, spaces, a newline, the same;
# - \s+(?!\S) unchanged; \s+ is reached only by one whitespace character before a non-space (any
#   longer run leaves \s+(?!\S) its characters but the last): one character.
# A space's alternatives come first, as one branch after the space (a word, else a run of marks: the
# original's order at a space, a word before " ?[^\s\p{L}\p{N}]+"): a third of the pieces start with
# a space, and " [" or ' "' no longer enter and fail the word alternative before the marks'. Then a
# word after any other prefix character, then the letters' and digits' alternatives, whose first
# classes are disjoint from the prefixes' and each other's (order matters only between alternatives
# that can start on the same character: the space's before the whitespace runs'); with the
# contraction as a branch, 10% fewer instructions for the split (an eighth of default's texts, 660 M
# -> 598 M, callgrind), and the space's branch 3.5% fewer again (678.4 M -> 654.9 M, session 29).
# tests/core/test_bpe.py compares the pieces with the original's on ``regex``.
_O200K_ASCII = (f" (?:[a-z][a-z]*+{_C}|[A-Z][A-Z]*+[a-z]*+{_C}|{_P}{_P}*+[\\r\\n/]*+)"
                f"|[^\\r\\nA-Za-z0-9 ](?:[a-z][a-z]*+|[A-Z][A-Z]*+[a-z]*+){_C}"
                f"|[a-z][a-z]*+{_C}|[0-9][0-9]{{0,2}}+|[A-Z][A-Z]*+[a-z]*+{_C}|{_P}{_P}*+[\\r\\n/]*+"
                f"|[\\r\\n](?:{_H}*+[\\r\\n])*+|{_H}{_H}*+[\\r\\n](?:{_H}*+[\\r\\n])*+"
                f"|[{_S}][{_S}]*(?![^{_S}])|[{_S}]")
_ASCII_PATTERNS = {_O200K: _O200K_ASCII}


class NotCompactableError(Exception):
    """This encoding cannot be kept compact (its ranks are not 0..n-1, or ``regex`` cannot run its pattern)."""


class _PieceMemory(dict[str, int]):
    """Pieces' counts (at most :data:`PIECE_MEMORY`, then cleared): the words and spacings a conversation
    repeats count at a dict lookup rather than a table probe. A missing piece is merged and kept by
    ``__missing__``, which ``dict.__getitem__`` calls from C: a text with a new piece is still one pass in
    C over its split, not a second one, and no set of its pieces (default's 293 texts with a new piece
    hold a quarter of its 2.78 M pieces: 9% of the counting's CPU; docs/analyze.md "Performance")."""

    __slots__ = ("_merge",)

    def __init__(self, merge: Callable[[bytes], int]) -> None:
        super().__init__()
        self._merge = merge

    def __missing__(self, piece: str) -> int:
        if len(self) >= PIECE_MEMORY:
            self.clear()  # bounded; what the next texts repeat comes back at once
        tokens = self[piece] = self._merge(piece.encode("utf-8"))  # a lone surrogate raises: count() replaces it
        return tokens


class CompactEncoding:
    """One encoding's token table in flat arrays, counting as tiktoken's ``encode_ordinary`` does."""

    def __init__(self, name: str, pattern: str, tokens: bytes, starts: array.array[int],
                 slots: array.array[int]) -> None:
        ascii_pattern = _ASCII_PATTERNS.get(pattern)
        if ascii_pattern is None:
            self._split: Callable[[str], list[str]] = _regex_split(name, pattern)
            self._split_ascii = self._split
        else:
            # The original pattern on ``regex`` only for the first text that is not ASCII: importing
            # ``regex`` and compiling o200k's pattern is ~30 ms of CPU, a tenth of what exact counting
            # adds to analyze of an ASCII session. The pattern is one ``regex`` compiles (the tests run
            # it); that the module is there is asked now, so a missing one is still a load's error.
            import importlib.util  # here: a process that counts nothing exactly does not import it

            if importlib.util.find_spec("regex") is None:
                raise NotCompactableError("the regex module is missing")
            self._split = self._split_first
            self._split_ascii = re.compile(ascii_pattern).findall
        self._ascii_on_re = ascii_pattern is not None  # ``re``'s findall: make_room applies
        self.name, self.pattern = name, pattern
        self.n_tokens = len(starts) - 1
        self._tokens, self._starts, self._slots = tokens, starts, slots
        self._mask = len(slots) - 1
        self._pieces = _PieceMemory(self._piece_tokens)
        self._remembered = self._pieces.__getitem__

    def _split_first(self, text: str) -> list[str]:
        """The first text that is not ASCII: the original pattern compiled on ``regex``, then split by it."""
        self._split = _regex_split(self.name, self.pattern)
        return self._split(text)

    def nbytes(self) -> int:
        """What the table holds (its three arrays), in bytes."""
        return (len(self._tokens) + self._starts.itemsize * len(self._starts)
                + self._slots.itemsize * len(self._slots))

    def count(self, text: str) -> int:
        """How many tokens ``len(tiktoken_encoding.encode_ordinary(text))`` is."""
        if not text:
            return 0
        try:
            return self._count(text)
        except UnicodeEncodeError:
            # A lone surrogate: tiktoken's Encoding.encode replaces it the same way and encodes again.
            return self._count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    def _count(self, text: str) -> int:
        # The sum runs in C over the split, each piece's count from the memory; a new piece's is
        # merged in Python (``_PieceMemory.__missing__``) where the sum meets it, in the same pass.
        if not text.isascii():
            return sum(map(self._remembered, self._split(text)))
        if self._ascii_on_re and len(text) > ROOMY_TEXT:
            make_room()  # a free block for each match's stack, not one split off a larger chunk
        return sum(map(self._remembered, self._split_ascii(text)))

    def rank(self, piece: bytes) -> int:
        """The token's rank, or -1 when ``piece`` is no token."""
        slot = zlib.crc32(piece) & self._mask
        slots, starts, tokens = self._slots, self._starts, self._tokens
        while True:
            rank = slots[slot]
            if rank < 0 or tokens[starts[rank]:starts[rank + 1]] == piece:
                return rank
            slot = (slot + 1) & self._mask

    def _piece_tokens(self, piece: bytes) -> int:
        """tiktoken's ``byte_pair_encode`` of one piece, counted: the piece itself, else its merged parts."""
        if self.rank(piece) >= 0:
            return 1
        if len(piece) > LONG_PIECE:
            return self._long_piece_tokens(piece)
        # tiktoken's _byte_pair_merge: parts start at each byte; ranks[i] is the rank of parts i and i + 1
        # joined (no token: past every rank); the lowest joins first, the leftmost of equal ones.
        none = self.n_tokens
        starts = list(range(len(piece) + 1))
        ranks = [self._rank_or(piece[i:i + 2], none) for i in range(len(piece) - 1)]
        while ranks:
            lowest = min(ranks)
            if lowest == none:
                break
            i = ranks.index(lowest)
            del starts[i + 1]
            del ranks[i]
            if i < len(ranks):
                ranks[i] = self._rank_or(piece[starts[i]:starts[i + 2]], none)
            if i > 0:
                ranks[i - 1] = self._rank_or(piece[starts[i - 1]:starts[i + 1]], none)
        return len(starts) - 1

    def _long_piece_tokens(self, piece: bytes) -> int:
        """:meth:`_piece_tokens`'s merges in O(n log n): the candidate pairs in a heap, not a list scanned
        for its lowest at each merge, which is quadratic (a run of 20,000 letters: 3.6 s, now 0.08 s).

        A part is named by where it starts (``following[s]``: where the next part starts;
        ``preceding[s]``: the part before, -1 for none, -2 once merged away). The heap holds
        (rank, start, end) for each pair of parts when it was formed; one whose start is gone or
        whose pair no longer ends there is stale and skipped. The lowest rank joins first, the
        leftmost of equal ones (the heap's order of starts), as tiktoken's ``_byte_pair_merge``.
        """
        n = len(piece)
        rank = self.rank
        following = list(range(1, n + 2))
        preceding = list(range(-1, n))
        heap = [(r, s, s + 2) for s in range(n - 1) if (r := rank(piece[s:s + 2])) >= 0]
        heapq.heapify(heap)
        parts = n
        while heap:
            _, start, end = heapq.heappop(heap)
            middle = following[start]
            if preceding[start] == -2 or middle >= end or following[middle] != end:
                continue  # stale
            preceding[middle] = -2
            following[start] = end
            if end < n:
                preceding[end] = start
                if (r := rank(piece[start:following[end]])) >= 0:
                    heapq.heappush(heap, (r, start, following[end]))
            before = preceding[start]
            if before >= 0 and (r := rank(piece[before:end])) >= 0:
                heapq.heappush(heap, (r, before, end))
            parts -= 1
        return parts

    def _rank_or(self, piece: bytes, none: int) -> int:
        rank = self.rank(piece)
        return none if rank < 0 else rank

    # -- building and keeping -------------------------------------------------------------------------

    @classmethod
    def build(cls, name: str, pattern: str, ranks: Mapping[bytes, int]) -> "CompactEncoding":
        """The table of tiktoken's ``mergeable_ranks`` (ranks 0..n-1, as every public encoding's are)."""
        by_rank: list[bytes | None] = [None] * len(ranks)
        for token, rank in ranks.items():
            if not 0 <= rank < len(by_rank) or by_rank[rank] is not None:
                raise NotCompactableError(f"{name}'s ranks are not 0..{len(ranks) - 1}")
            by_rank[rank] = token
        ordered = cast("list[bytes]", by_rank)  # n distinct ranks in 0..n-1: every place is filled
        tokens = b"".join(ordered)
        starts = array.array("i", [0])
        size = 1 << max(4, (len(ordered) * 5 // 2).bit_length())  # at most 40% full: short probe runs
        slots = array.array("i", [-1]) * size
        mask = size - 1
        offset = 0
        for rank, piece in enumerate(ordered):
            offset += len(piece)
            starts.append(offset)
            slot = zlib.crc32(piece) & mask
            while slots[slot] >= 0:
                slot = (slot + 1) & mask
            slots[slot] = rank
        return cls(name, pattern, tokens, starts, slots)

    def to_bytes(self) -> bytes:
        head = json.dumps({"format": _FORMAT, "name": self.name, "pattern": self.pattern,
                           "tokens": len(self._tokens), "starts": len(self._starts),
                           "slots": len(self._slots)}).encode()
        return b"".join((head, b"\n", self._tokens, self._starts.tobytes(), self._slots.tobytes()))

    @classmethod
    def from_bytes(cls, data: memoryview) -> "CompactEncoding | None":
        """What :meth:`to_bytes` wrote, or None when it is not that (another format, a wrong size)."""
        end = bytes(data[:4096]).find(b"\n")
        if end < 0:
            return None
        try:
            head: dict[str, Any] = json.loads(bytes(data[:end]))
            if head.get("format") != _FORMAT:
                return None
            n_tokens, n_starts, n_slots = int(head["tokens"]), int(head["starts"]), int(head["slots"])
            name, pattern = str(head["name"]), str(head["pattern"])
        except (ValueError, KeyError, TypeError):
            return None
        starts, slots = array.array("i"), array.array("i")
        body = end + 1
        if (len(data) != body + n_tokens + starts.itemsize * (n_starts + n_slots) or n_slots < 1
                or n_slots & (n_slots - 1) or n_starts < 1):
            return None
        tokens = bytes(data[body:body + n_tokens])
        body += n_tokens
        starts.frombytes(data[body:body + starts.itemsize * n_starts])
        slots.frombytes(data[body + starts.itemsize * n_starts:])
        return cls(name, pattern, tokens, starts, slots)


def _regex_split(name: str, pattern: str) -> Callable[[str], list[str]]:
    """``pattern``'s ``findall`` on the ``regex`` module (tiktoken's own dependency, which has ``\\p{..}``)."""
    try:
        import regex
    except ImportError as exc:
        raise NotCompactableError(f"the regex module is missing ({exc})") from exc
    try:
        return cast("Callable[[str], list[str]]", regex.compile(pattern).findall)
    except regex.error as exc:
        raise NotCompactableError(f"the regex module cannot compile {name}'s pattern ({exc})") from exc


def load(name: str, rank_file: str | None, constructor_kwargs: Callable[[], Mapping[str, Any]]) -> CompactEncoding:
    """``name``'s compact table: read back from ctxscope's cache, else built from ``constructor_kwargs()``.

    ``rank_file`` is tiktoken's cached copy of the encoding's ranks (None:
    tiktoken caches nothing, so neither does this): the cache key. Raises
    :class:`NotCompactableError` for an encoding this cannot hold.
    """
    path = cache_path(name, rank_file, "compact") if rank_file else None
    if path is not None:
        data = read_cached(path)
        kept = CompactEncoding.from_bytes(data) if data is not None else None
        if kept is not None and kept.name == name:
            return kept
    kwargs = constructor_kwargs()
    encoding = CompactEncoding.build(name, kwargs["pat_str"], kwargs["mergeable_ranks"])
    if path is None and rank_file:
        path = cache_path(name, rank_file, "compact")  # the constructor has just downloaded it
    if path is not None:
        write_cached(path, encoding.to_bytes())
    return encoding
