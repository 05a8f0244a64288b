"""Counting bases (SPEC section 3): chars/4, native-bytes/4, tiktoken/<encoding>.

A :class:`Counter` turns text into tokens under one basis. ``counter_for``
picks the basis for a model; where tiktoken cannot load an encoding (no
network and no cache) it falls back to ``chars/4`` within
:data:`ENCODING_LOAD_TIMEOUT_S`, logs one warning, and the counter's
``basis`` says ``chars/4``.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Callable, Iterable, Protocol

from .schema import BASIS_BYTES, BASIS_CHARS, tiktoken_basis

_log = logging.getLogger(__name__)

ENCODING_LOAD_TIMEOUT_S = 2.0

# Images whose size is unknown: SPEC section 3 ("about 1,600 tokens").
DEFAULT_IMAGE_TOKENS = 1600


class Counter(Protocol):
    basis: str

    def count(self, text: str) -> int: ...


class CharsCounter:
    """``ceil(chars / 4)`` per item."""

    basis = BASIS_CHARS

    def count(self, text: str) -> int:
        return -(-len(text) // 4)


class BytesCounter:
    """``ceil(utf8_bytes / 4)`` per item."""

    basis = BASIS_BYTES

    def count(self, text: str) -> int:
        if text.isascii():
            return -(-len(text) // 4)
        return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


class TiktokenCounter:
    """Exact BPE count with a tiktoken encoding."""

    def __init__(self, encoding: "object", name: str) -> None:
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary  # type: ignore[attr-defined]
        # tiktoken's Encoding.encode_ordinary is a Python wrapper around the
        # Rust CoreBPE method; calling the latter directly saves a frame per
        # item on the cold path. The wrapper's only extra is a retry for
        # strings with lone surrogates, kept below.
        core = getattr(encoding, "_core_bpe", None)
        self._core: Callable[[str], list[int]] = getattr(core, "encode_ordinary", None) or self._encode
        self.encoding = encoding
        self.basis = tiktoken_basis(name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        try:
            return len(self._core(text))
        except UnicodeEncodeError:
            return len(self._encode(text))


# ---------------------------------------------------------------------------
# Encoding choice
# ---------------------------------------------------------------------------

# Models whose tokenizer is cl100k_base: the GPT-3.5 / GPT-4 (non-"o") line and
# the ada-002/text-embedding-3 embeddings (tiktoken's own model table agrees).
_CL100K_PREFIXES = ("gpt-4-", "gpt-4", "gpt-3.5", "gpt-35", "text-embedding-ada-002",
                    "text-embedding-3")
# Current OpenAI models (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3/o4, codex) use o200k_base.
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o",
                   "codex", "gpt-oss", "computer-use")


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding used for a model name.

    o200k_base for current OpenAI models and, as a documented proxy, for
    everything not known to be older (Claude, Gemini, open models: their own
    tokenizers are not public, and o200k_base is the closest modern BPE);
    cl100k_base for the GPT-3.5/GPT-4 line.
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


_encodings: dict[str, object | None] = {}
_encodings_lock = threading.Lock()
_warned = False


def load_encoding(name: str, timeout_s: float = ENCODING_LOAD_TIMEOUT_S) -> object | None:
    """The tiktoken encoding ``name``, or None when it cannot be loaded in time.

    Loading runs in a daemon thread so that a machine without network (where
    tiktoken's download may hang) costs at most ``timeout_s``. A failure is
    remembered for the process: the next call answers at once.
    """
    global _warned
    with _encodings_lock:
        if name in _encodings:
            return _encodings[name]
        result: list[object] = []
        error: list[BaseException] = []

        def load() -> None:
            try:
                import tiktoken

                result.append(tiktoken.get_encoding(name))
            except BaseException as exc:  # noqa: BLE001 - any failure means fallback
                error.append(exc)

        thread = threading.Thread(target=load, name=f"ctxscope-tiktoken-{name}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        encoding = result[0] if result else None
        _encodings[name] = encoding
        if encoding is None and not _warned:
            _warned = True
            # One short line: the exception's first line is enough to act on
            # (a proxy or connection error is otherwise several hundred characters).
            reason = (f"{type(error[0]).__name__}: {str(error[0]).splitlines()[0][:120]}"
                      if error and str(error[0]) else
                      type(error[0]).__name__ if error else f"timed out after {timeout_s:g}s")
            _log.warning("tiktoken encoding %s unavailable (%s); counting with chars/4",
                         name, reason)
        return encoding


def reset_encoding_cache() -> None:
    """Forget loaded encodings and the warning (for tests)."""
    global _warned
    with _encodings_lock:
        _encodings.clear()
        _warned = False


TOKENIZERS = ("auto", "chars", "bytes", "tiktoken")

_CHARS = CharsCounter()
_BYTES = BytesCounter()
_tiktoken_counters: dict[str, TiktokenCounter] = {}


def counter_for(model: str | None = None, tokenizer: str = "auto") -> Counter:
    """The counter for a model under a tokenizer choice.

    ``auto`` and ``tiktoken`` both use tiktoken with the model's encoding and
    fall back to ``chars/4`` where it cannot load; ``chars`` and ``bytes``
    force the heuristics.
    """
    if tokenizer == "chars":
        return _CHARS
    if tokenizer == "bytes":
        return _BYTES
    if tokenizer not in ("auto", "tiktoken"):
        raise ValueError(f"unknown tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZERS)}")
    name = encoding_for_model(model)
    counter = _tiktoken_counters.get(name)
    if counter is not None:
        return counter
    encoding = load_encoding(name)
    if encoding is None:
        return _CHARS
    counter = TiktokenCounter(encoding, name)
    _tiktoken_counters[name] = counter
    return counter


def count_all(counter: Counter, texts: Iterable[str]) -> list[int]:
    count = counter.count
    return [count(t) for t in texts]


# ---------------------------------------------------------------------------
# Images by provider formula
# ---------------------------------------------------------------------------

def openai_image_tokens(width: int, height: int, detail: str = "auto", *, base: int = 85, tile: int = 170) -> int:
    """OpenAI vision cost for tile-priced models (gpt-4o's 85 + 170 a tile by default).

    Source: OpenAI's vision guide ("Calculating costs"): ``low`` detail is a
    flat ``base``; otherwise the image is scaled to fit in 2048x2048, then so
    that its shortest side is 768 px, and costs base + ``tile`` per 512 px tile
    (the figures of each model family: :mod:`ctxscope.media`).
    """
    if detail == "low":
        return base
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return base + tile * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic vision cost: ``(width * height) / 750`` after resizing.

    Source: Anthropic's vision docs ("Calculate image costs"): images whose
    long edge exceeds 1568 px (or over ~1.15 megapixels) are scaled down
    first, keeping the aspect ratio.
    """
    w, h = float(width), float(height)
    scale = min(1.0, 1568 / max(w, h), math.sqrt(1_150_000 / (w * h)) if w * h else 1.0)
    w, h = w * scale, h * scale
    return max(1, math.ceil((w * h) / 750))


def image_tokens(provider: str | None, width: int | None, height: int | None, detail: str = "auto") -> int:
    """Image tokens by the provider's formula where the size is known, else the default."""
    if not width or not height:
        return DEFAULT_IMAGE_TOKENS
    if provider == "anthropic":
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height, detail)


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF, JPEG or WebP image from its header, else None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8 " and len(data) >= 30:
            return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if data[:2] == b"\xff\xd8":
        i = 2
        n = len(data)
        while i + 9 < n:
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(data[i + 2:i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
            i += 2 + length
    return None
