"""The compact table (core/bpe.py): tiktoken's counts, in a few megabytes, kept in ctxscope's cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_texts, requires_corpus
from ctxscope.core import bpe
from ctxscope.core.encoding_load import constructor_kwargs
from ctxscope.core.tokens import _rank_file

# A toy vocabulary whose merges can be followed by hand: single letters, then ab, bc, abc, and a space.
TOY = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5, b" ": 6}


def toy() -> bpe.CompactEncoding:
    return bpe.CompactEncoding.build("toy", r"\S+|\s+", TOY)


def test_a_piece_that_is_a_token_counts_one_and_others_merge_lowest_rank_first() -> None:
    """abc is a token (1). abcb: a|b|c|b, ab (3) joins first, then abc (5): abc|b = 2. bcab: ab (3) before
    bc (4): bc|ab = 2. cbc: c|bc = 2. "abcb bcab" is abcb, space, bcab: 2 + 1 + 2."""
    encoding = toy()
    assert [encoding.count(t) for t in ("abc", "abcb", "bcab", "cbc", "abcb bcab", "")] == [1, 2, 2, 2, 5, 0]
    assert [encoding.rank(t) for t in (b"abc", b"ab", b"cb", b"")] == [5, 3, -1, -1]


def test_a_full_piece_memory_is_cleared_and_the_counts_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for one piece: each new piece clears the memory first (abcb bcab: abcb is new, then the space,
    then bcab again: each is merged anew), and the counts are those above; the last piece merged (cbc, 2) is
    what is left."""
    monkeypatch.setattr(bpe, "PIECE_MEMORY", 1)
    encoding = toy()
    assert [encoding.count(t) for t in ("abc", "abcb", "bcab", "abcb bcab", "abc abc", "cbc")] == [1, 2, 2, 5, 3, 2]
    assert encoding._pieces == {"cbc": 2}  # noqa: SLF001


def test_ranks_must_be_0_to_n_minus_1() -> None:
    with pytest.raises(bpe.NotCompactableError, match="not 0..1"):
        bpe.CompactEncoding.build("gappy", r"\S+", {b"a": 0, b"b": 2})


def test_without_regex_the_table_is_not_compactable(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``regex`` module: a load's error (the counters then use tiktoken's own encoder), for a pattern
    compiled at once (the toy's) and for o200k's, whose original pattern waits for a text that is not ASCII."""
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "regex", None)  # import regex raises ImportError
    with pytest.raises(bpe.NotCompactableError, match="regex module is missing"):
        toy()
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "regex" else find_spec(name, *a))
    with pytest.raises(bpe.NotCompactableError, match="regex module is missing"):
        bpe.CompactEncoding.build("o200k_base", bpe._O200K, TOY)  # noqa: SLF001


def test_the_table_round_trips_through_its_bytes() -> None:
    encoding = toy()
    again = bpe.CompactEncoding.from_bytes(memoryview(encoding.to_bytes()))
    assert again is not None
    assert (again.name, again.pattern, again.n_tokens) == ("toy", r"\S+|\s+", 7)
    assert again.count("abcb bcab") == 5
    assert bpe.CompactEncoding.from_bytes(memoryview(encoding.to_bytes()[:-4])) is None  # cut short
    assert bpe.CompactEncoding.from_bytes(memoryview(b'{"format": "other"}\n')) is None


# -- against tiktoken ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def encodings(tiktoken_ready: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any]]:
    """Each public encoding as tiktoken's get_encoding and as the compact table (built in a fresh cache)."""
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    folder = tmp_path_factory.mktemp("cache")
    pairs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        for name in ("o200k_base", "cl100k_base"):
            rank_file = _rank_file(name)
            compact = bpe.load(name, rank_file,
                               lambda n=name, r=rank_file: constructor_kwargs(n, ENCODING_CONSTRUCTORS[n], r))
            pairs[name] = (tiktoken.get_encoding(name), compact)
    return pairs


def test_o200k_counts_as_tiktoken_on_hand_picked_text(encodings: dict[str, tuple[Any, Any]]) -> None:
    """Hello|,| world|! is 4; 日本語 2 in o200k_base and 4 in cl100k_base; special tokens' text is text;
    a lone surrogate is replaced (U+FFFD) as tiktoken replaces it: a|\\ufffd|b, 3."""
    o200k, cl100k = encodings["o200k_base"][1], encodings["cl100k_base"][1]
    assert o200k.count("Hello, world!") == 4 == cl100k.count("Hello, world!")
    assert (o200k.count("日本語"), cl100k.count("日本語")) == (2, 4)
    assert o200k.count("a\ud800b") == 3 == o200k.count("a\ufffdb")
    tiktoken_o200k = encodings["o200k_base"][0]
    for text in ("<|endoftext|> and <|endofprompt|>", "def f(x):\n    return x ** 2\n", " " * 300 + "x",
                 "I'M HERE, they'll see 12345678 ſ", "\x1c\x1f\x85\xa0\u3000x\r\n\r\n  y"):
        assert o200k.count(text) == len(tiktoken_o200k.encode_ordinary(text)), text


# Every class the patterns tell apart: cases, marks, digits, the contractions, spaces Unicode's and
# ASCII's (\x1c-\x1f are re's \s but not Unicode's White_Space), punctuation, CJK, emoji, surrogates.
ALPHABET = list("aZz09 \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000.,;'/\\-_éÉ日本語😀ſİ\u0301\u200dsSlLtTdDmM")
ALPHABET += ["'s", "'LL", "'re", "\ud800", "\udc00", "  \n", "123456"]


@given(st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_counts_as_tiktoken_on_generated_text(encodings: dict[str, tuple[Any, Any]], text: str) -> None:
    for name, (theirs, ours) in encodings.items():
        assert ours.count(text) == len(theirs.encode_ordinary(text)), name


@given(st.lists(st.sampled_from(["a", "b", "ab", "ba", "e", "ing", "日", "é", "\u0301"]), min_size=20, max_size=400)
       .map("".join))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_long_pieces_merge_on_the_heap_as_tiktoken(encodings: dict[str, tuple[Any, Any]], text: str) -> None:
    """One long piece of letters (over LONG_PIECE bytes: the heap's merges) counts as tiktoken's."""
    for name, (theirs, ours) in encodings.items():
        assert ours.count(text) == len(theirs.encode_ordinary(text)), name


def test_a_long_run_of_one_letter_counts_as_tiktoken_without_the_quadratic_merge(
        encodings: dict[str, tuple[Any, Any]]) -> None:
    """20,000 a's: one piece, merged on the heap (3.6 s with the list scan, about 0.1 s now)."""
    theirs, ours = encodings["o200k_base"]
    for text in ("a" * 20_000, "ab" * 3_000, "a" * (bpe.LONG_PIECE + 1)):
        assert ours.count(text) == len(theirs.encode_ordinary(text))


@given(st.text(st.characters(codec="ascii"), max_size=60))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_ascii_text_splits_on_re_as_on_regex(encodings: dict[str, tuple[Any, Any]], text: str) -> None:
    """o200k_base's pattern rewritten for ``re`` gives the pieces of the original on ``regex``, ASCII text."""
    ours = encodings["o200k_base"][1]
    assert ours._split_ascii(text) == ours._split(text)  # noqa: SLF001


# Every character class the ASCII rewrite tells apart, and the runs at its alternatives' edges: a newline
# before '/', whitespace-only lines, punctuation before a newline, \r\n, \x0b \x0c, capitals before
# lowercase, contractions in both cases, digit runs past three, a text starting or ending with spaces.
TRICKY = list("aAzZ09 \t\n\r\x0b\x0c\x1c\x1f\x7f/.'_-(sSdDtTmMlLrReEvV")
TRICKY += ["\n/", "\n \n", ".\n", "\r\n", "  ", "'s", "'LL", "'Re", "HTTPServer", "1234", "\t\t", " /"]


@given(st.lists(st.sampled_from(TRICKY), max_size=30).map("".join))
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_ascii_rewrite_splits_as_the_original_on_tricky_text(encodings: dict[str, tuple[Any, Any]],
                                                              text: str) -> None:
    """The rewrite's alternatives (first classes, possessive runs) give the original pattern's pieces."""
    ours = encodings["o200k_base"][1]
    assert ours._split_ascii(text) == ours._split(text)  # noqa: SLF001


def test_ascii_rewrite_counts_as_tiktoken_at_every_alternative_edge(encodings: dict[str, tuple[Any, Any]]) -> None:
    theirs, ours = encodings["o200k_base"]
    for text in ("a\n/b", "x.\n/\n/y", "a \n \n b", "  \n\n  ", "end.\n", "\r\n\r\n  x", "a\x0b\x0c b",
                 "\t\tfoo\t", "     3\tfrom __future__ import annotations\n", "HTTPServer fooBar ABC",
                 "I'M they'll we'Re don't 'S", "12345 1 22 333", "   leading", "trailing   ", " ", "\n",
                 "a_b.c(d) ((e)) //f ...\n", "x  1", "\x1c\x1fz\x7f"):
        assert ours._split_ascii(text) == ours._split(text), text  # noqa: SLF001
        assert ours.count(text) == len(theirs.encode_ordinary(text)), text


@requires_corpus
def test_counts_as_tiktoken_on_every_text_of_the_corpus(encodings: dict[str, tuple[Any, Any]]) -> None:
    theirs, ours = encodings["o200k_base"]
    seen: set[str] = set()
    differ = []
    for text in corpus_texts():
        if text in seen:
            continue
        seen.add(text)
        if ours.count(text) != len(theirs.encode_ordinary(text)):
            differ.append(text[:80])
    assert len(seen) > 30_000  # the whole corpus was read
    assert differ == []


# -- ctxscope's cache ---------------------------------------------------------------------------------

def test_the_second_load_reads_the_table_back_without_building(o200k: Any, tmp_path: Path) -> None:
    """ctxscope's o200k constructor (tests/conftest.py) runs once; the table is read back after."""
    constructor, runs = o200k
    rank_file = _rank_file("o200k_base")
    first = bpe.load("o200k_base", rank_file, constructor)
    kept = sorted((tmp_path / "ctxscope" / "tiktoken").glob("o200k_base-*.compact"))
    assert len(runs) == 1 and len(kept) == 1
    second = bpe.load("o200k_base", rank_file, constructor)
    assert len(runs) == 1  # read back
    assert second.n_tokens == first.n_tokens == 199_998
    assert 3_000_000 < second.nbytes() < 5_000_000  # the three arrays: tokens, starts, slots
    assert second.count("Hello, world!") == 4
    kept[0].write_bytes(kept[0].read_bytes()[:-100])  # cut short: built again and rewritten
    assert bpe.load("o200k_base", rank_file, constructor).count("Hello, world!") == 4
    assert len(runs) == 2
    assert bpe.load("o200k_base", rank_file, constructor).n_tokens == 199_998 and len(runs) == 2


def test_an_ascii_process_reads_the_table_back_without_regex_or_ctypes(tiktoken_ready: None, tmp_path: Path) -> None:
    """Read back from the cache, o200k counts ASCII text on ``re`` alone: ``regex`` (~30 ms to import and compile
    the original pattern) waits for the first text that is not ASCII, and no trim (ctypes) follows a read. The
    first process builds the table; the second reads it: Hello|,| world|! 4, then 日本語 2 on ``regex``."""
    import os
    import subprocess
    import sys

    code = ("import sys; from ctxscope.core import tokens;"
            "e = tokens.load_encoding('o200k_base', engine=tokens.ENGINE_COMPACT);"
            "a = e.count('Hello, world!'); before = sorted(m for m in ('regex', 'ctypes') if m in sys.modules);"
            "print(a, before, e.count('日本語'), 'regex' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0].split()[0] == "4"  # built: the trim may have imported ctypes
    assert runs[1] == "4 [] 2 True\n"
