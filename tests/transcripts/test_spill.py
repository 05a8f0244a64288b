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


def test_entries_past_spill_entries_go_to_the_scratch_file_and_are_found_there(monkeypatch):
    """SPILL_ENTRIES 3: adds of 2, 2 and 1 links make a block of 4 (32 bytes: 4 hashes of 4, then 4
    offsets of 4) and leave 1 held; "a" written at 10, 30 and 50 is found in both, latest first."""
    from ctxscope.transcripts import spill

    monkeypatch.setattr(spill, "SPILL_ENTRIES", 3)
    freed = LinkOffsets()
    freed.add(["a", "b"], [10, 20])
    freed.add(["a", "c"], [30, 40])
    freed.add(["a"], [50])
    assert freed._blocks == [(4, 0, 16, "i")] and len(freed._offsets) == 1 and len(freed) == 5
    assert freed.find("a") == [50, 30, 10] and freed.find("c") == [40] and freed.find("d") == []
    assert len(freed.hashes()) == 5 * 4
    freed.add(["d", "e"], [2**31 + 5, 60])  # past 32 bits: the held offsets widen, then a block of 'q'
    assert freed._blocks[1] == (3, 32, 12, "q") and freed.find("d") == [2**31 + 5]


def test_call_keys_in_the_scratch_file_are_found_and_rebuild_the_filter(monkeypatch):
    """5,000 keys spilled 1,000 at a time: the filter, rebuilt from every hash, still finds each one."""
    from ctxscope.transcripts import spill

    monkeypatch.setattr(spill, "SPILL_ENTRIES", 1000)
    keys = KeyOffsets()
    for start in range(0, 5000, 500):
        keys.add([f"key-{n}" for n in range(start, start + 500)], list(range(start, start + 500)))
    assert len(keys) == 5000 and len(keys._index._blocks) == 5
    assert all(keys.find(f"key-{n}") == [n] for n in (0, 999, 1000, 4999))
    assert all(keys.find(f"other-{n}") == [] for n in range(200))


def test_a_scratch_file_that_fails_keeps_the_entries_in_memory(monkeypatch):
    """The file cannot be made: the 4 entries stay held, found as before, and no later add tries again."""
    from ctxscope import _scratch
    from ctxscope.transcripts import spill

    monkeypatch.setattr(spill, "SPILL_ENTRIES", 3)
    tries = []

    def no_file():
        tries.append(1)
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(_scratch, "_open", no_file)
    freed = LinkOffsets()
    freed.add(["a", "b", "c"], [1, 2, 3])
    freed.add(["a"], [4])
    assert freed._blocks == [] and len(freed) == 4 and freed.find("a") == [4, 1] and tries == [1]
