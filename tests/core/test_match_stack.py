"""Room for re's match stack (core/match_stack.py): free blocks of its size between kept ones, before a long split."""

from __future__ import annotations

import sys

import pytest

from ctxscope.core import bpe, match_stack

TOY = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5, b" ": 6}


def test_the_blocks_are_sres_first_data_stack_and_every_other_one_is_kept() -> None:
    """1,024 + the 56-byte match context + a quarter of it = 1,094 bytes an allocation; 8 of the 16 kept."""
    assert match_stack.SRE_STACK_BYTES == 1094
    match_stack.make_room()
    kept = match_stack._kept
    assert len(kept) == 8
    assert {sys.getsizeof(block) for block in kept} == {1094}


def test_only_a_long_ascii_text_split_by_re_makes_room_and_the_counts_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    """o200k's pattern on a toy table: "ab" is 1 token, " ab" 2 (" " + "ab"), " " 1; room past 256 characters."""
    pytest.importorskip("regex")
    encoding = bpe.CompactEncoding.build("toy", bpe._O200K, TOY)
    calls: list[int] = []
    monkeypatch.setattr(bpe, "make_room", lambda: calls.append(1))
    assert encoding.count("ab " * 85) == 1 + 84 * 2 + 1 and calls == []  # 255 characters
    assert encoding.count("ab " * 86) == 1 + 85 * 2 + 1 and calls == [1]  # 258
    # Not ASCII: the original pattern on ``regex``, no room made. "éab" is é's two bytes and "ab": 3 tokens.
    assert encoding.count("é" + "ab " * 86) == 3 + 85 * 2 + 1 and calls == [1]
    # Another pattern (regex's findall for ASCII text too): no room made.
    other = bpe.CompactEncoding.build("toy", r"\S+|\s+", TOY)
    assert other.count("ab " * 86) == 86 + 86 and calls == [1]  # "ab" and " " alternately
