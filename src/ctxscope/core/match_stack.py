"""Room for ``re``'s match stack ahead of a long split (used by ``core/bpe.py``): fewer instructions a match.

CPython's ``re`` (sre) allocates its data stack at every match and frees it at
the next (``state_reset``): in ``findall``, one ``malloc`` and one ``free`` a
piece, of :data:`SRE_STACK_BYTES` (1,024 bytes, a match context and a quarter
of it). That is past glibc's tcache (at most 1,032 bytes) and its fast bins,
so each goes through the bins: where the heap's free chunk is larger,
``malloc`` splits it, ``free`` merges the block back into the remainder, and
the next match splits it again, about 230 instructions more a match (a
twentieth of exact counting's on the bench's default session, docs/analyze.md
"Session 30"). A free chunk of exactly that size between two in use is taken
whole from the unsorted bin and given back there unmerged: :func:`make_room`
leaves such chunks, allocating :data:`BLOCKS` blocks of the size and keeping
every other one until its next call, so that the ones between are freed
between blocks in use wherever the allocator placed them side by side.

Only a cost of its own (16 small blocks a call, 9 KB kept) under another
allocator or an interpreter whose stack is another size: the counts never
depend on it.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import sys

# sre's first data stack (Modules/_sre/sre.c, data_stack_grow): the match context (56 bytes on a 64-bit
# CPython 3.11-3.13) plus a quarter of it plus 1,024. glibc rounds it to a 1,104-byte chunk, as it does
# every request of 1,081-1,096 bytes: a few bytes of difference between versions still fit exactly.
SRE_STACK_BYTES = 56 + 56 // 4 + 1024
# Blocks allocated a call; every other one is kept. 4 leave no isolated chunk in default's heap, 8 and 16 do
# (the ping-pong's unlink_chunk: 145 M -> 22 M and 4 M instructions): 16, for heaps laid out otherwise.
BLOCKS = 16
_BLOCK = SRE_STACK_BYTES - sys.getsizeof(b"")  # a bytes object's header and final NUL come on top

_kept: list[bytes] = []  # the blocks in use beside the free ones, until the next call replaces them


def make_room() -> None:
    """Leave free chunks of sre's stack size between blocks in use, for the ``findall`` that follows."""
    global _kept
    blocks = [bytes(_BLOCK) for _ in range(BLOCKS)]
    _kept = blocks[::2]  # the previous ones are let go only now, after the new blocks were placed
