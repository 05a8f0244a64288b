"""Media by the provider's own rules: images per model family, PDFs by page and text, audio by duration.

Every number here has its public source next to it, and docs/fidelity.md
("Media") lists them with the figures they give on the corpus. The readers are
small and pure Python on purpose (no Pillow, no PDF library, no audio
library): they run on the live path, on untrusted bytes, and only need a size,
a page count, a text or a duration, never a decoded picture or sound. Each
reader returns None when it cannot tell; the caller then falls back to a
documented estimate and says so once (:func:`fallback_warning`).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import logging
import math
import re
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Iterator

from ctxscope.core.tokens import DEFAULT_IMAGE_TOKENS, anthropic_image_tokens, image_size, openai_image_tokens

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "ImageRule",
    "PdfInfo",
    "anthropic_page_tokens",
    "audio_duration",
    "audio_tokens",
    "fallback_warning",
    "image_rule",
    "image_tokens",
    "image_tokens_of",
    "is_mp3",
    "is_wav",
    "mp3_duration",
    "mp3_duration_from_head",
    "openai_page_tokens",
    "openai_patches",
    "read_pdf",
    "wav_duration",
]

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Images per model family
# ---------------------------------------------------------------------------

# OpenAI "Images and vision" guide, "Calculating costs": models priced by 512 px
# tiles, (base tokens, tokens a tile) after fitting 2048 px and a 768 px short side.
# Longest prefix wins (gpt-4o-mini before gpt-4o).
OPENAI_TILE_RULES: tuple[tuple[str, int, int], ...] = (
    ("gpt-4o-mini", 2833, 5667),
    ("gpt-4o", 85, 170),
    ("chatgpt-4o", 85, 170),
    ("gpt-4.1", 85, 170),
    ("gpt-4.5", 85, 170),
    ("gpt-5", 70, 140),  # gpt-5, gpt-5-chat-latest
    ("o1", 75, 150),  # o1, o1-pro
    ("o3", 75, 150),
    ("computer-use", 65, 129),
)
# Same guide: models priced by 32 px patches (at most 1536, the image scaled down
# to fit), times a multiplier per model. gpt-4.1-mini 1.62, gpt-4.1-nano 2.46,
# o4-mini 1.72 are the guide's. For gpt-5-mini and gpt-5-nano the guide prints
# 1.62 and 2.46 too, but OpenAI's own pricing-page calculator uses 1.2 and 1.5,
# which is what the API bills (OpenAI developer forum, "GPT-5-mini image input
# token calculation discrepancy with official FAQ formula", 2025, measured
# 77/308/922/1229 tokens for 64/256/768/1024 patches: ceil(patches x 1.2)); a
# corpus recording agrees (597x566 px on gpt-5-mini: 342 patches, billed ~418).
OPENAI_PATCH_MULTIPLIERS: tuple[tuple[str, float], ...] = (
    ("gpt-4.1-mini", 1.62),
    ("gpt-4.1-nano", 2.46),
    ("gpt-5-mini", 1.2),
    ("gpt-5-nano", 1.5),
    ("o4-mini", 1.72),
    ("codex-mini", 1.72),  # the o4-mini model tuned for Codex
)
OPENAI_PATCH_SIZE = 32
OPENAI_MAX_PATCHES = 1536

RULE_TILES = "tiles"
RULE_PATCHES = "patches"
RULE_PIXELS = "pixels"


@dataclass(frozen=True, slots=True)
class ImageRule:
    """How one model family bills an image: tiles (base, tile), patches (multiplier) or pixels."""

    kind: str
    base: int = 0
    tile: int = 0
    multiplier: float = 1.0


_GPT_4O_RULE = ImageRule(RULE_TILES, 85, 170)
_ANTHROPIC_RULE = ImageRule(RULE_PIXELS)


def _model_name(model: str | None) -> str:
    return (model or "").lower().rsplit("/", 1)[-1]


def image_rule(provider: str | None, model: str | None) -> ImageRule:
    """The image rule of a model: Anthropic's pixels, an OpenAI patch or tile family.

    An OpenAI model of no listed family takes gpt-4o's tiles (the guide's first
    and most common rule), as the estimate did before families were told apart.
    """
    if provider == "anthropic":
        return _ANTHROPIC_RULE
    name = _model_name(model)
    for prefix, multiplier in OPENAI_PATCH_MULTIPLIERS:
        if name.startswith(prefix):
            return ImageRule(RULE_PATCHES, multiplier=multiplier)
    for prefix, base, tile in OPENAI_TILE_RULES:
        if name.startswith(prefix):
            return ImageRule(RULE_TILES, base, tile)
    return _GPT_4O_RULE


def openai_patches(width: int, height: int) -> int:
    """32 px patches of an image after the guide's scaling to at most 1536 patches.

    OpenAI "Images and vision", "Calculating costs", patch rule: when
    ceil(w/32) x ceil(h/32) exceeds 1536, scale by r = sqrt(32^2 x 1536 / (w x h)),
    then shrink r so that a whole number of patches fits the width or the height.
    """
    size = OPENAI_PATCH_SIZE
    patches = math.ceil(width / size) * math.ceil(height / size)
    if patches <= OPENAI_MAX_PATCHES:
        return patches
    ratio = math.sqrt(size * size * OPENAI_MAX_PATCHES / (width * height))
    ratio *= min(math.floor(width * ratio / size) / (width * ratio / size),
                 math.floor(height * ratio / size) / (height * ratio / size))
    # The small epsilon keeps an exact fit (33.0 patches) from rounding up to 34.
    resized = math.ceil(width * ratio / size - 1e-9) * math.ceil(height * ratio / size - 1e-9)
    return min(resized, OPENAI_MAX_PATCHES)


def image_tokens(provider: str | None, model: str | None, width: int | None, height: int | None,
                 detail: str = "auto") -> int:
    """Tokens of an image of known size under the model family's rule (DEFAULT_IMAGE_TOKENS when unknown).

    Patch models ignore ``detail`` (the guide gives no low-detail price for them,
    and the forum's measurements show ``low`` changes nothing there).
    """
    rule = image_rule(provider, model)
    if rule.kind == RULE_TILES and detail == "low":
        return rule.base
    if not width or not height:
        return DEFAULT_IMAGE_TOKENS
    if rule.kind == RULE_PIXELS:
        return anthropic_image_tokens(width, height)
    if rule.kind == RULE_PATCHES:
        return math.ceil(openai_patches(width, height) * rule.multiplier - 1e-9)
    return openai_image_tokens(width, height, detail, base=rule.base, tile=rule.tile)


def image_tokens_of(provider: str | None, model: str | None, data: bytes, detail: str = "auto") -> int:
    """Tokens of an image from its first bytes (its size header), by the model family's rule."""
    size = image_size(data) if data else None
    width, height = size if size else (None, None)
    return image_tokens(provider, model, width, height, detail)


# ---------------------------------------------------------------------------
# PDFs
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PdfInfo:
    """What a PDF holds for its cost: pages, their size in points, and the text that can be extracted."""

    pages: int
    text: str
    page_size: tuple[float, float] = (612.0, 792.0)  # US Letter when no MediaBox is found


_STREAM_RE = re.compile(rb"(?<!end)stream\r?\n")
_PAGES_COUNT_RE = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")
_PAGE_RE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_MEDIABOX_RE = re.compile(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]")
_BFCHAR_RE = re.compile(rb"beginbfchar(.*?)endbfchar", re.S)
_BFRANGE_RE = re.compile(rb"beginbfrange(.*?)endbfrange", re.S)
_HEX_RE = re.compile(rb"<([0-9A-Fa-f]*)>")
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f",
            b"(": b"(", b")": b")", b"\\": b"\\"}
# Enough decompressed content for any real prompt document; a bomb stops here.
_MAX_INFLATED = 64 * 1024 * 1024


def _streams(raw: bytes) -> Iterator[bytes]:
    """Every stream's data, inflated where it is Flate-compressed (others as they are)."""
    budget = _MAX_INFLATED
    for match in _STREAM_RE.finditer(raw):
        start = match.end()
        end = raw.find(b"endstream", start)
        if end < 0:
            end = len(raw)  # a truncated file: take what is there
        data = raw[start:end]
        head = raw[max(0, match.start() - 400):match.start()]
        if b"FlateDecode" in head:
            try:
                inflater = zlib.decompressobj()
                data = inflater.decompress(data, budget)
            except zlib.error:
                continue
        budget -= len(data)
        if budget <= 0:
            return
        yield data


def _cmap(streams: list[bytes]) -> dict[bytes, str]:
    """Glyph code -> text of every ToUnicode CMap of the file (bfchar and bfrange), merged."""
    table: dict[bytes, str] = {}
    for data in streams:
        if b"begincmap" not in data:
            continue
        for block in _BFCHAR_RE.findall(data):
            codes = _HEX_RE.findall(block)
            for src, dst in zip(codes[0::2], codes[1::2]):
                if src and len(src) % 2 == 0:
                    table[bytes.fromhex(src.decode())] = _utf16(dst)
        for block in _BFRANGE_RE.findall(data):
            for line in block.splitlines():
                codes = _HEX_RE.findall(line)
                if len(codes) < 3 or b"[" in line or not all(codes[:3]) or len(codes[0]) % 2:
                    continue
                low, high, dst = (int(c, 16) for c in codes[:3])
                width = len(codes[0]) // 2
                for offset in range(max(0, min(high - low, 65535)) + 1):
                    code = low + offset
                    if code >= 256 ** width:
                        break
                    table[code.to_bytes(width, "big")] = chr(dst + offset) if dst + offset < 0x110000 else ""
    return table


def _utf16(hexcode: bytes) -> str:
    try:
        return bytes.fromhex(hexcode.decode()).decode("utf-16-be", "replace")
    except ValueError:
        return ""


def _literal(token: bytes) -> bytes:
    body = token[1:-1]
    if b"\\" not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i:i + 1]
        if ch == b"\\" and i + 1 < len(body):
            nxt = body[i + 1:i + 2]
            if nxt in _ESCAPES:
                out += _ESCAPES[nxt]
                i += 2
                continue
            octal = re.match(rb"[0-7]{1,3}", body[i + 1:i + 4])
            if octal:
                out.append(int(octal.group(), 8) & 0xFF)
                i += 1 + len(octal.group())
                continue
            i += 1  # a backslash before anything else is dropped
            continue
        out += ch
        i += 1
    return bytes(out)


def _decode(code: bytes, cmap: dict[bytes, str]) -> str:
    if cmap:
        for width in (2, 1):
            if len(code) % width == 0 and code[:width] in cmap:
                return "".join(cmap.get(code[i:i + width], "") for i in range(0, len(code), width))
    return code.decode("latin-1")


_STRING = rb"\((?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*\)|<[0-9A-Fa-f\s]*>"
_STRING_RE = re.compile(_STRING, re.S)
# What shows text or moves to another line in a content stream; everything else is skipped
# by the regex engine (a text-heavy page is thousands of operators: no Python loop over them).
_SHOW_RE = re.compile(
    rb"(?P<one>" + _STRING + rb")\s*(?P<op>Tj|'|\")"
    rb"|\[(?P<array>(?:" + _STRING + rb"|[^\]()<])*)\]\s*TJ"
    rb"|(?P<ty>[-+]?\d*\.?\d+)\s+T[dD]\b"
    rb"|(?P<newline>T\*|\bTm\b|\bET\b)", re.S)


def _string_bytes(token: bytes) -> bytes:
    if token[:1] == b"(":
        return _literal(token)
    digits = re.sub(rb"\s", b"", token[1:-1])
    return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode())


def _content_text(data: bytes, cmap: dict[bytes, str]) -> str:
    """The text shown by one content stream: its Tj, TJ, ' and \" operands, lines kept apart.

    A move along the line (``Td`` with no vertical offset) places the next glyph
    run on the same line: no break there ("Dumm" + "y" is one word).
    """
    out: list[str] = []

    def newline() -> None:
        if out and not out[-1].endswith("\n"):
            out.append("\n")

    for match in _SHOW_RE.finditer(data):
        if match.group("one") is not None:
            if match.group("op") != b"Tj":
                newline()
            out.append(_decode(_string_bytes(match.group("one")), cmap))
        elif match.group("array") is not None:
            out.append("".join(_decode(_string_bytes(t), cmap) for t in _STRING_RE.findall(match.group("array"))))
        elif match.group("ty") is not None:
            if float(match.group("ty")) != 0:
                newline()
        else:
            newline()
    return "".join(out)


def read_pdf(raw: bytes) -> PdfInfo | None:
    """Pages, page size and text of a PDF; None when the bytes are not a PDF.

    A small reader of its own (no PDF library: this runs on the live path and
    only needs counts): the page count is the page tree's ``/Count`` (the
    largest, i.e. the root's) or else the ``/Type /Page`` objects, looked for
    in the file and in its compressed object streams; the text is what the
    content streams show with ``Tj``/``TJ``/``'``/``"``, glyph codes mapped
    through the file's ToUnicode CMaps. Encrypted or image-only PDFs give an
    empty text (the page images still count).
    """
    if b"%PDF" not in raw[:1024]:
        return None
    streams = list(_streams(raw))
    haystacks = [raw] + [s for s in streams if b"/Type" in s[:4096] or b"/Page" in s]
    counts = [int(a or b) for hay in haystacks for a, b in _PAGES_COUNT_RE.findall(hay)]
    pages = max(counts) if counts else sum(len(_PAGE_RE.findall(hay)) for hay in haystacks)
    size = (612.0, 792.0)
    for hay in haystacks:
        box = _MEDIABOX_RE.search(hay)
        if box:
            x0, y0, x1, y1 = (float(v) for v in box.groups())
            if abs(x1 - x0) > 1 and abs(y1 - y0) > 1:
                size = (abs(x1 - x0), abs(y1 - y0))
                break
    try:
        cmap = _cmap(streams)
        text = "".join(_content_text(s, cmap) for s in streams
                       if b"BT" in s and b"ET" in s and b"begincmap" not in s)
    except (ValueError, OverflowError):  # a malformed string or CMap: the pages still count
        text = ""
    return PdfInfo(pages=max(pages, 1), text=text.strip(), page_size=size)


# Anthropic "PDF support": each page is converted into an image and its text
# extracted; the image is billed as any image ("Vision": w x h / 750 after
# scaling to at most 1568 px and about 1.15 megapixels). A page rendered at any
# print resolution (a Letter page is 1.15 MP at 110 dpi) hits that cap, so a
# page image costs the capped figure for its aspect ratio: 1,533 tokens or so.
ANTHROPIC_PAGE_RENDER_DPI = 150


def anthropic_page_tokens(info: PdfInfo) -> int:
    """Tokens of the page images of a PDF on Claude (its text is counted as text)."""
    width, height = info.page_size
    scale = ANTHROPIC_PAGE_RENDER_DPI / 72.0
    return info.pages * anthropic_image_tokens(round(width * scale), round(height * scale))


# OpenAI "File inputs" guide: "we put into the model's context both the extracted
# text and an image of each page". The guide gives no size for the page image
# (LangChain noted the same, langchain-ai/langchain#30601). ctxscope's estimate,
# documented in docs/fidelity.md: the page rendered at the vision guide's
# low-resolution size (the long side 512 px: "a low-res 512px x 512px version of
# the image") and counted as 32 px patches at one token each, the same on every
# model (the page image is made by the file pipeline, not the model's own
# vision tier): 192 tokens an A4 page, 208 a Letter page.
OPENAI_PAGE_RENDER_PX = 512


def openai_page_tokens(info: PdfInfo) -> int:
    """Tokens of the page images of a PDF on an OpenAI model (its text is counted as text)."""
    width, height = info.page_size
    scale = OPENAI_PAGE_RENDER_PX / max(width, height)
    return info.pages * openai_patches(max(1, round(width * scale)), max(1, round(height * scale)))


# ---------------------------------------------------------------------------
# Audio
# ---------------------------------------------------------------------------

# OpenAI "Realtime API: managing costs": user audio is one token per 100 ms
# (assistant audio one per 50 ms). Whole 100 ms frames: a 6.96 s WAV in the
# corpus was billed 69 audio tokens.
AUDIO_TOKENS_PER_SECOND = 10

_MP3_BITRATES = {  # kbit/s by (MPEG-1?, layer) and index 1..14
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (False, 3): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


def is_wav(raw: bytes) -> bool:
    return len(raw) >= 12 and raw[:4] in (b"RIFF", b"RF64") and raw[8:12] == b"WAVE"


def wav_duration(raw: bytes, total: int | None = None) -> float | None:
    """Seconds of a RIFF/WAVE file: its data chunk's size over the fmt chunk's byte rate.

    ``raw`` may be only the file's beginning when ``total`` gives the whole
    file's size (the bytes a streamed WAV's data chunk runs to).
    """
    if not is_wav(raw):
        return None
    total = len(raw) if total is None else total
    byte_rate = None
    i = 12
    while i + 8 <= len(raw):
        chunk, size = raw[i:i + 4], struct.unpack("<I", raw[i + 4:i + 8])[0]
        if chunk == b"fmt " and size >= 16 and i + 24 <= len(raw):
            byte_rate = struct.unpack("<I", raw[i + 16:i + 20])[0]
        elif chunk == b"data":
            # A streamed WAV writes 0 or 0xFFFFFFFF here: the bytes that follow are the data.
            available = total - (i + 8)
            if size in (0, 0xFFFFFFFF) or size > available:
                size = available
            return size / byte_rate if byte_rate else None
        i += 8 + size + (size & 1)
    return None


def _id3_end(raw: bytes) -> int:
    if raw[:3] != b"ID3" or len(raw) < 10:
        return 0
    size = (raw[6] & 0x7F) << 21 | (raw[7] & 0x7F) << 14 | (raw[8] & 0x7F) << 7 | (raw[9] & 0x7F)
    return 10 + size + (10 if raw[5] & 0x10 else 0)


def _mp3_frame(raw: bytes, i: int) -> tuple[int, int, int] | None:
    """(frame length in bytes, samples, sample rate) of the MPEG audio frame header at ``i``."""
    if i + 4 > len(raw) or raw[i] != 0xFF or (raw[i + 1] & 0xE0) != 0xE0:
        return None
    version = (raw[i + 1] >> 3) & 3  # 3 MPEG-1, 2 MPEG-2, 0 MPEG-2.5
    layer = 4 - ((raw[i + 1] >> 1) & 3)  # 1, 2, 3 (4: reserved)
    bitrate_index = raw[i + 2] >> 4
    rate_index = (raw[i + 2] >> 2) & 3
    padding = (raw[i + 2] >> 1) & 1
    if version == 1 or layer == 4 or bitrate_index in (0, 15) or rate_index == 3:
        return None
    mpeg1 = version == 3
    bitrate = _MP3_BITRATES[(mpeg1, layer)][bitrate_index - 1] * 1000
    rate = _MP3_RATES[version][rate_index]
    if layer == 1:
        return (12 * bitrate // rate + padding) * 4, 384, rate
    samples = 1152 if (layer == 2 or mpeg1) else 576
    return samples // 8 * bitrate // rate + padding, samples, rate


def mp3_duration(raw: bytes) -> float | None:
    """Seconds of an MPEG audio (MP3) stream: the samples of its frames, walked header to header.

    An ID3v2 tag at the start is skipped; the walk stops at the first byte that
    is not a frame header (an ID3v1 tag, a truncated last frame). None when no
    two consecutive frames are found (not MPEG audio).
    """
    first = _first_frame(raw)
    if first is None:
        return None
    i = first
    seconds = 0.0
    frames = 0
    while True:
        frame = _mp3_frame(raw, i)
        if frame is None or frame[0] <= 0 or i + frame[0] > len(raw) + 1:
            break
        length, samples, rate = frame
        seconds += samples / rate
        frames += 1
        i += length
    return seconds if frames >= 2 else None


def _first_frame(raw: bytes) -> int | None:
    """Offset of the first MPEG audio frame whose successor is a frame too (a lone 0xFFE is noise)."""
    i = _id3_end(raw)
    limit = min(len(raw), i + 65536)
    while i < limit:
        frame = _mp3_frame(raw, i)
        if frame and _mp3_frame(raw, i + frame[0]):
            return i
        i += 1
    return None


def mp3_duration_from_head(head: bytes, total: int, tail: bytes = b"") -> float | None:
    """Seconds of an MP3 from its first bytes and its size, without its middle; None when they cannot tell.

    A Xing/Info or VBRI header in the first frame gives the frame count (VBR
    encoders write it); otherwise, when every frame in ``head`` has the same
    bitrate (constant bitrate), the audio bytes (the size less the ID3v2 tag
    and a trailing 128-byte ID3v1 tag, seen in ``tail``) at that bitrate.
    A variable bitrate without a header gives None: walk the frames then.
    """
    start = _first_frame(head)
    header = _mp3_frame(head, start) if start is not None else None
    if start is None or header is None:  # _first_frame vouches for the header at start
        return None
    length, samples, rate = header
    frame = head[start:start + min(length, 200)]
    for tag, offset in ((b"Xing", 4), (b"Info", 4), (b"VBRI", 14)):
        at = frame.find(tag)
        if at < 0:
            continue
        if tag == b"VBRI":
            count = frame[at + offset:at + offset + 4]
        elif len(frame) >= at + 12 and int.from_bytes(frame[at + 4:at + 8], "big") & 1:
            count = frame[at + 8:at + 12]
        else:
            break
        if len(count) == 4 and int.from_bytes(count, "big"):
            return int.from_bytes(count, "big") * samples / rate
        break
    bitrates = set()
    i = start
    while True:
        header = _mp3_frame(head, i)
        if header is None or i + header[0] > len(head):
            break
        bitrates.add(head[i + 2] >> 4)
        i += header[0]
    if len(bitrates) != 1 or i == start:
        return None
    version_mpeg1 = ((head[start + 1] >> 3) & 3) == 3
    layer = 4 - ((head[start + 1] >> 1) & 3)
    bitrate = _MP3_BITRATES[(version_mpeg1, layer)][(head[start + 2] >> 4) - 1] * 1000
    audio = total - start - (128 if tail[-128:-125] == b"TAG" else 0)
    return max(0, audio) * 8 / bitrate


def is_mp3(raw: bytes, fmt: str | None = None) -> bool:
    """An ID3v2 tag or an MPEG audio frame sync at the start, or the request says mp3."""
    return (raw[:3] == b"ID3" or (len(raw) > 1 and raw[0] == 0xFF and (raw[1] & 0xE0) == 0xE0)
            or (fmt or "").lower() == "mp3")


def audio_duration(raw: bytes, fmt: str | None = None) -> float | None:
    """Seconds of a WAV or MP3 file read from its container, None for any other format."""
    kind = (fmt or "").lower()
    if raw[:4] in (b"RIFF", b"RF64") or kind == "wav":
        return wav_duration(raw)
    if is_mp3(raw, fmt):
        return mp3_duration(raw)
    return None


def audio_tokens(seconds: float) -> int:
    """Audio tokens of a duration: one per whole 100 ms (OpenAI), at least one for any sound."""
    if seconds <= 0:
        return 0
    return max(1, int(seconds * AUDIO_TOKENS_PER_SECOND + 1e-9))


# ---------------------------------------------------------------------------
# Saying once what cannot be read
# ---------------------------------------------------------------------------

_warned: set[str] = set()
_warned_lock = threading.Lock()


def fallback_warning(what: str, fallback: str) -> None:
    """Log once per process that a medium could not be read and which estimate stands in."""
    with _warned_lock:
        if what in _warned:
            return
        _warned.add(what)
    _log.warning("cannot read %s; counting it as %s (docs/fidelity.md, 'Media')", what, fallback)
