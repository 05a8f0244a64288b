"""The encoding's cached constructor output (core/encoding_load.py): read back whole, or the parse again."""

from __future__ import annotations

import platform
import zlib
from pathlib import Path
from typing import Any

import pytest

from ctxscope.core.encoding_load import _checksum, constructor_kwargs, release_freed_memory
from ctxscope.core.tokens import _rank_file


def _cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "ctxscope" / "tiktoken").glob("o200k_base-*.marshal"))


def test_second_load_reads_the_cache_and_gets_the_same_table(o200k: Any, tmp_path: Path) -> None:
    """First load: tiktoken's parse, written once; second: no parse, the very same 199,998 ranks and pattern."""
    constructor, runs = o200k
    first = constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    assert len(runs) == 1 and len(_cached(tmp_path)) == 1
    second = constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    assert len(runs) == 1  # read back, not parsed
    assert len(second["mergeable_ranks"]) == 199998
    assert second == first
    assert second["mergeable_ranks"][b"Hello"] == first["mergeable_ranks"][b"Hello"] == 13225


@pytest.mark.parametrize("damage", ["truncated", "flipped", "foreign"])
def test_a_damaged_cache_is_parsed_again_and_rewritten(o200k: Any, tmp_path: Path, damage: str) -> None:
    """A cut-short, altered or foreign file is never handed to marshal: tiktoken parses, the copy is rewritten."""
    constructor, runs = o200k
    good = constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    (path,) = _cached(tmp_path)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    else:
        path.write_bytes(b"not ours\n" + data)
    again = constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    assert len(runs) == 2 and again == good
    assert path.read_bytes() == data  # rewritten whole
    constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    assert len(runs) == 2


def test_the_checksum_is_the_length_and_crc32_in_hex() -> None:
    """CRC-32's published check value: b"123456789" is 0xcbf43926; 9 bytes, 16 hex digits in all."""
    assert _checksum(b"123456789") == b"00000009cbf43926"
    assert _checksum(memoryview(b"")) == b"0000000000000000"


def test_the_cached_copy_is_the_magic_its_checksum_and_the_payload(o200k: Any, tmp_path: Path) -> None:
    """Format 2: no SHA-256 of 7.6 MB a load; the checksum line is the payload's length and CRC-32."""
    constructor, _ = o200k
    constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    (path,) = _cached(tmp_path)
    magic, check, payload = path.read_bytes().split(b"\n", 2)
    assert magic == b"ctxscope-tiktoken-2"
    assert check == b"%08x%08x" % (len(payload), zlib.crc32(payload))


def test_another_rank_file_is_another_key(o200k: Any, tmp_path: Path) -> None:
    """The key is the rank file's bytes: a different file never reads the other's copy."""
    constructor, runs = o200k
    constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    other = tmp_path / "other-ranks"
    other.write_bytes(Path(_rank_file("o200k_base") or "").read_bytes() + b"\n")
    constructor_kwargs("o200k_base", constructor, str(other))
    assert len(runs) == 2 and len(_cached(tmp_path)) == 2


def test_an_unwritable_cache_still_loads(o200k: Any, tmp_path: Path) -> None:
    """A cache folder that cannot be made: the constructor's output, no exception, nothing written."""
    constructor, runs = o200k
    (tmp_path / "ctxscope").write_text("a file where the folder would be")
    kwargs = constructor_kwargs("o200k_base", constructor, _rank_file("o200k_base"))
    assert len(kwargs["mergeable_ranks"]) == 199998 and len(runs) == 1


def test_no_rank_file_no_cache(o200k: Any, tmp_path: Path) -> None:
    """tiktoken's caching off (no rank file): the constructor every time, ctxscope caches nothing either."""
    constructor, runs = o200k
    constructor_kwargs("o200k_base", constructor, None)
    assert len(runs) == 1 and not (tmp_path / "ctxscope").exists()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_freed_memory_on_glibc() -> None:
    """On glibc the heap's free pages are handed back (malloc_trim is there)."""
    assert release_freed_memory() is True


def test_output_marshal_cannot_hold_is_used_uncached(o200k: Any, tmp_path: Path) -> None:
    """A constructor returning a value marshal cannot write (another tiktoken's): used as is, nothing cached."""
    constructor, runs = o200k

    def odd() -> Any:
        kwargs = dict(constructor())
        kwargs["extra"] = object()
        return kwargs

    kwargs = constructor_kwargs("o200k_base", odd, _rank_file("o200k_base"))
    assert len(kwargs["mergeable_ranks"]) == 199998 and not _cached(tmp_path)
