"""What a freed link or tool call costs in :mod:`ctxscope.transcripts.spill`, and that it is found again exactly.

A compacting session lets go of about 3.4 links a call (issue 14): each is the
low 32 bits of its uuid's hash (4 bytes) and its line's offset (4 bytes while
the offsets hold in 32 bits, 8 from the first one past 2 GiB). Call keys
(:class:`KeyOffsets`) keep the whole 64-bit hash, which their filter's two bits
are made from.
"""

from __future__ import annotations

from ctxscope.transcripts.spill import KeyOffsets, LinkOffsets


def test_a_freed_link_costs_eight_bytes():
    """1,000 links: 4,000 bytes of hashes and 4,000 of offsets, each found at its own offset."""
    freed = LinkOffsets()
    uuids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(1000)]
    freed.add(uuids, [100 * n for n in range(1000)])
    assert len(freed) == 1000
    assert len(freed.hashes()) == 4 * 1000
    assert freed.find(uuids[0]) == [0]
    assert freed.find(uuids[999]) == [99_900]
    assert freed.find("not-a-freed-uuid") == []


def test_an_offset_past_2_gib_is_kept_exactly():
    """Offsets 1, 2**31 + 5 (past a 32-bit int: the column widens) and 3: each uuid's, latest first."""
    freed = LinkOffsets()
    freed.add(["a", "b"], [1, 2**31 + 5])
    freed.add(["a"], [3])
    assert len(freed) == 3
    assert freed.find("a") == [3, 1]
    assert freed.find("b") == [2**31 + 5]


def test_call_keys_keep_their_whole_hash():
    """5,000 keys (the filter rebuilt as they double): 8 bytes of hash each, every key found, others not."""
    keys = KeyOffsets()
    for start in range(0, 5000, 500):
        keys.add([f"key-{n}" for n in range(start, start + 500)], list(range(start, start + 500)))
    assert len(keys) == 5000
    assert keys.find("key-0") == [0]
    assert keys.find("key-4999") == [4999]
    assert all(keys.find(f"other-{n}") == [] for n in range(200))
