"""Counting bases (SPEC section 3): chars/4, native-bytes/4, tiktoken, the offline fallback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import corpus_texts, requires_corpus
from ctxscope.schema import BASIS_BYTES, BASIS_CHARS
from ctxscope.core.tokens import (
    DEFAULT_IMAGE_TOKENS,
    BytesCounter,
    CharsCounter,
    CompactCounter,
    TiktokenCounter,
    anthropic_image_tokens,
    counter_for,
    encoding_for_model,
    image_size,
    image_tokens,
    load_encoding,
    openai_image_tokens,
)


def test_chars_basis_rounds_up_per_item() -> None:
    """ceil(chars / 4): 0 -> 0, 4 -> 1, 5 -> 2, and non-ASCII counts characters."""
    counter = CharsCounter()
    assert counter.basis == BASIS_CHARS
    assert [counter.count(t) for t in ("", "abcd", "abcde", "日本語")] == [0, 1, 2, 1]


def test_bytes_basis_counts_utf8_bytes() -> None:
    """ceil(utf8_bytes / 4): 'héllo' is 6 bytes -> 2, '日本語' 9 bytes -> 3, an emoji 4 bytes -> 1."""
    counter = BytesCounter()
    assert counter.basis == BASIS_BYTES
    assert [counter.count(t) for t in ("abcde", "héllo", "日本語", "😀")] == [2, 2, 3, 1]


def test_bytes_basis_survives_lone_surrogates() -> None:
    """A lone surrogate (seen in broken JSON) is 3 bytes, not an exception: 'a\\ud800' -> ceil(4/4)."""
    assert BytesCounter().count("a\ud800") == 1


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4o-mini", "o200k_base"), ("gpt-4.1", "o200k_base"), ("o3-mini", "o200k_base"),
    ("gpt-5", "o200k_base"), ("openai/gpt-4o", "o200k_base"),
    ("gpt-4-turbo", "cl100k_base"), ("gpt-4", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("claude-sonnet-4-5", "o200k_base"), (None, "o200k_base"),
])
def test_encoding_for_model(model: str | None, encoding: str) -> None:
    """o200k_base for current OpenAI models and as the proxy for others; cl100k_base for GPT-3.5/4."""
    assert encoding_for_model(model) == encoding


def test_forced_heuristics_and_unknown_tokenizer() -> None:
    """tokenizer=chars/bytes force the heuristics; an unknown name is a ValueError."""
    assert counter_for("gpt-4o", "chars").basis == BASIS_CHARS
    assert counter_for("gpt-4o", "bytes").basis == BASIS_BYTES
    with pytest.raises(ValueError, match="unknown tokenizer"):
        counter_for("gpt-4o", "sentencepiece")


def test_tiktoken_exact_counts(tiktoken_ready: None) -> None:
    """'Hello, world!' is Hello|,| world|! (4); '日本語' is 2 tokens in o200k_base, 4 in cl100k_base."""
    o200k = counter_for("gpt-4o")
    cl100k = counter_for("gpt-4")
    assert o200k.basis == "tiktoken/o200k_base"
    assert cl100k.basis == "tiktoken/cl100k_base"
    assert o200k.count("Hello, world!") == 4
    assert cl100k.count("Hello, world!") == 4
    assert o200k.count("hello world") == 2
    assert o200k.count("日本語") == 2
    assert cl100k.count("日本語") == 4
    assert o200k.count("") == 0


def test_tiktoken_split_is_the_one_counted(tiktoken_ready: None) -> None:
    """The 4 counted for 'Hello, world!' are the pieces Hello , world ! as tiktoken decodes them."""
    counter = counter_for("gpt-4o")
    encoding: Any = load_encoding("o200k_base")
    pieces = [encoding.decode([t]) for t in encoding.encode_ordinary("Hello, world!")]
    assert pieces == ["Hello", ",", " world", "!"]
    assert counter.count("Hello, world!") == len(pieces)


def test_a_special_token_in_text_is_counted_as_ordinary_text(tiktoken_ready: None) -> None:
    """The count runs on the Rust core's buffer (no list of ints), with no special token allowed:
    '<|endoftext|>' is < | end of text | > (7) in o200k_base and < | endo ft ext | > (7) in cl100k_base,
    never the 1 special token; with a letter each side, 9."""
    for name, pieces in (("o200k_base", ["<", "|", "end", "of", "text", "|", ">"]),
                         ("cl100k_base", ["<", "|", "endo", "ft", "ext", "|", ">"])):
        encoding: Any = load_encoding(name)
        buffered = TiktokenCounter(encoding, name)  # what counts where tiktoken's registry holds the encoding
        assert buffered._buffer is not None  # noqa: SLF001 - the fast path runs
        compact = counter_for("gpt-4o" if name == "o200k_base" else "gpt-4")
        assert [encoding.decode([t]) for t in encoding.encode_ordinary("<|endoftext|>")] == pieces
        for counter in (buffered, compact):
            assert counter.count("<|endoftext|>") == 7
            assert counter.count("a<|endoftext|>b<|endofprompt|>") == len(
                encoding.encode_ordinary("a<|endoftext|>b<|endofprompt|>"))
            assert counter.count("a<|endoftext|>b") == 9


@requires_corpus
def test_the_buffer_count_is_encode_ordinary_on_every_text_of_the_corpus(tiktoken_ready: None) -> None:
    """TiktokenCounter.count (the buffer) against len(encode_ordinary) (the list) on every distinct corpus text
    (the compact table's counts against the same: tests/core/test_bpe.py)."""
    encoding: Any = load_encoding("o200k_base")
    counter = TiktokenCounter(encoding, "o200k_base")
    seen: set[str] = set()
    differ = []
    for text in corpus_texts():
        if text not in seen:
            seen.add(text)
            if counter.count(text) != len(encoding.encode_ordinary(text)):
                differ.append(text[:80])
    assert len(seen) > 30_000  # the whole corpus was read
    assert differ == []


@pytest.fixture
def tiktoken_registry_without_o200k() -> object:
    """tiktoken's registry without o200k_base and ctxscope's loads forgotten; both restored afterwards."""
    import tiktoken.registry

    from ctxscope.core.tokens import reset_encoding_cache

    registered = tiktoken.registry.ENCODINGS.pop("o200k_base", None)
    reset_encoding_cache()
    yield tiktoken.registry.ENCODINGS
    reset_encoding_cache()
    tiktoken.registry.ENCODINGS.pop("o200k_base", None)
    if registered is not None:
        tiktoken.registry.ENCODINGS["o200k_base"] = registered


def test_own_encoding_counts_as_tiktokens_without_its_python_rank_table(
        tiktoken_ready: None, tiktoken_registry_without_o200k: dict[str, object]) -> None:
    """Not in tiktoken's registry: ctxscope's own o200k encodes exactly as get_encoding's, minus the ~28 MB table."""
    import tiktoken

    from ctxscope.core.tokens import load_encoding

    ours = load_encoding("o200k_base")
    assert "o200k_base" not in tiktoken_registry_without_o200k  # the application's registry is left alone
    theirs = tiktoken.get_encoding("o200k_base")
    assert ours is not theirs
    assert ours._mergeable_ranks == {}  # type: ignore[attr-defined]  # noqa: SLF001 - what was let go
    assert len(theirs._mergeable_ranks) == 199998  # noqa: SLF001 - o200k_base's ranks, kept by tiktoken's own
    for text in ("Hello, world!", "日本語", "def f(x):\n    return x ** 2\n", "a\ud800b", " " * 300 + "x"):
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)  # type: ignore[attr-defined]
    assert ours.n_vocab == theirs.n_vocab == 200019  # type: ignore[attr-defined]
    assert counter_for("gpt-4o").count("Hello, world!") == 4


def test_a_waiting_count_is_on_the_compact_table(
        tiktoken_ready: None, tiktoken_registry_without_o200k: dict[str, object]) -> None:
    """The batch commands' counter (wait=True) counts on ctxscope's compact table, as the live path's does:
    no tiktoken encoder built (about 0.3 s of CPU and 60 MB); 'Hello, world!' is 4 and '日本語' 2."""
    counter = counter_for("gpt-4o", "tiktoken")
    assert isinstance(counter, CompactCounter)
    assert counter is counter_for("gpt-4o", "tiktoken", wait=False)  # one counter, one table, a process
    assert "o200k_base" not in tiktoken_registry_without_o200k
    assert (counter.count("Hello, world!"), counter.count("日本語"), counter.basis) == (4, 2, "tiktoken/o200k_base")


def test_registered_encoding_is_shared(
        tiktoken_ready: None, tiktoken_registry_without_o200k: dict[str, object]) -> None:
    """An encoding the application loaded through tiktoken already is the one ctxscope counts with: one copy."""
    import tiktoken

    from ctxscope.core.tokens import load_encoding

    theirs = tiktoken.get_encoding("o200k_base")
    assert load_encoding("o200k_base") is theirs
    assert counter_for("gpt-4o").encoding is theirs  # type: ignore[attr-defined]


def test_tiktoken_counts_text_with_lone_surrogates(tiktoken_ready: None) -> None:
    """A lone surrogate takes tiktoken's own replacement path: 'a\\ud800b' counts, no exception."""
    # tiktoken replaces the surrogate with U+FFFD: 'a', '\ufffd', 'b' are 3 o200k tokens ([64, 3251, 65]).
    counter = counter_for("gpt-4o")
    assert counter.count("a\ud800b") == 3 == counter.count("a\ufffdb")


_OFFLINE_SCRIPT = textwrap.dedent("""
    import json, logging, time
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("ctxscope").addHandler(Keep())
    logging.getLogger("ctxscope").setLevel(logging.WARNING)
    from ctxscope.core.tokens import counter_for
    started = time.monotonic()
    first = counter_for("gpt-4o")
    second = counter_for("gpt-4")
    again = counter_for("gpt-4o")
    elapsed = time.monotonic() - started
    from ctxscope.core.ledger import SessionLedger
    from ctxscope.schema import Category, Item
    snap = SessionLedger("s").observe(
        [Item("u", Category.PROMPTS, "prompts/text", 9, text="abcdefghi", digest="d")], model="gpt-4o")
    print(json.dumps({"bases": [first.basis, second.basis, again.basis],
                      "ledger": [snap.annotation.basis, snap.annotation.estimated_tokens],
                      "count": first.count("abcdefghi"), "elapsed": elapsed,
                      "warnings": records}))
""")


def test_offline_fallback_to_chars(tmp_path: Path) -> None:
    """No cache and a refused download: chars/4 within 2 s per encoding, one warning in all."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9")
    done = subprocess.run([sys.executable, "-c", _OFFLINE_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bases"] == [BASIS_CHARS, BASIS_CHARS, BASIS_CHARS]
    assert result["count"] == 3  # ceil(9 / 4)
    assert result["ledger"] == [BASIS_CHARS, 3]  # a ledger's annotation says the basis it fell back to
    assert result["elapsed"] < 2 * 2.0 + 0.5  # two encodings, each bounded by 2 s
    assert len(result["warnings"]) == 1
    assert "chars/4" in result["warnings"][0]


def test_offline_fallback_is_bounded_when_the_download_hangs(tmp_path: Path) -> None:
    """A proxy that accepts and never answers: the counter still falls back to chars/4 in about 2 s."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    proxy = f"http://127.0.0.1:{silent.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY=proxy, https_proxy=proxy)
    script = _OFFLINE_SCRIPT.replace('second = counter_for("gpt-4")', "second = first")
    try:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=30)
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bases"] == [BASIS_CHARS] * 3
    assert 1.9 <= result["elapsed"] < 2.6
    assert len(result["warnings"]) == 1 and "timed out after 2s" in result["warnings"][0]


def test_openai_image_formula() -> None:
    """OpenAI's guide: 1024x1024 high is 4 tiles (765), 2048x4096 is 6 tiles (1105), low is 85."""
    assert openai_image_tokens(1024, 1024) == 85 + 170 * 4
    assert openai_image_tokens(2048, 4096) == 1105
    assert openai_image_tokens(4000, 3000, "low") == 85


def test_anthropic_image_formula() -> None:
    """Anthropic: 1000x1000 is 1e6 / 750 = 1333.3 -> 1334; 200x200 is 53.3 -> 54."""
    assert anthropic_image_tokens(1000, 1000) == 1334
    assert anthropic_image_tokens(200, 200) == 54


def test_image_default_and_size_from_header() -> None:
    """Unknown size costs the default 1,600; a PNG header gives its width and height."""
    assert image_tokens("openai", None, None) == DEFAULT_IMAGE_TOKENS
    png = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (640).to_bytes(4, "big") + (480).to_bytes(4, "big")
    assert image_size(png) == (640, 480)
    assert image_tokens("anthropic", 640, 480) == 410  # 307200 / 750 = 409.6 -> 410
