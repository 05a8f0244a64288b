"""Reading request payloads: dicts from JSON and SDK objects alike, and media estimates.

Request bodies arrive as plain dicts or as what users pass to the SDKs (lists
holding pydantic objects, TypedDicts, tuples). :func:`get` reads either;
:func:`plain` and :func:`compact_json` turn structured values into the JSON
that is counted. The media helpers decode what a rule needs from base64 (an
image's size header, a PDF, an audio container's header) and hand it to
:mod:`ctxscope.core.media`, which holds the providers' rules; opaque ciphertext
counts by its size. Base64 text is never counted. The rules are in
docs/items.md and docs/fidelity.md ("Media").

Pure: no OpenTelemetry, no provider SDK (SDK objects are read by attribute).
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any, Iterable, Mapping

from ctxscope._lazy_pattern import lazy_pattern
from ctxscope.core.tokens import DEFAULT_IMAGE_TOKENS, image_size

__all__ = [
    "AUDIO_BYTES_PER_TOKEN",
    "DOCUMENT_PAGE_TOKENS",
    "audio_tokens_b64",
    "document_b64",
    "ENCRYPTED_BYTES_PER_TOKEN",
    "args_text",
    "as_list",
    "b64_len_tokens",
    "compact_json",
    "get",
    "image_tokens_b64",
    "pdf_tokens",
    "plain",
    "split_data_url",
]

# A document that cannot be read (a file id, a URL, bytes that are not a PDF):
# Anthropic's PDF guide puts a page at 1,500-3,000 tokens; we take 2,000 a page
# and one page (the media module reads real PDFs: pages, text, page images).
DOCUMENT_PAGE_TOKENS = 2000
# Audio in a format whose duration cannot be read (not WAV or MP3): OpenAI's 10
# tokens a second (media.AUDIO_TOKENS_PER_SECOND) at 128 kbit/s, a common
# compressed rate, i.e. one token per 1,600 bytes.
AUDIO_BYTES_PER_TOKEN = 1600
# Opaque encrypted content (redacted thinking, compaction items): the
# plaintext is about the decoded size, at about 4 bytes a token.
ENCRYPTED_BYTES_PER_TOKEN = 4
# Enough base64 to reach an image's size header (JPEG EXIF blocks run to 64 KB).
_IMAGE_HEADER_B64 = 87384
# Enough base64 for a WAV's chunks before its samples (LIST/INFO chunks are small).
_AUDIO_HEADER_B64 = 8192
# An MP3's ID3v2 tag (cover art runs to tens of KB) and its first frames.
_MP3_HEAD_B64 = 174768


# ---------------------------------------------------------------------------
# Reading SDK objects and dicts alike
# ---------------------------------------------------------------------------

def get(obj: Any, key: str, default: Any = None) -> Any:
    if type(obj) is dict:
        return obj.get(key, default)
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def plain(obj: Any) -> Any:
    """A JSON-able form of a value: SDK objects through ``model_dump``."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", exclude_none=True))
        except Exception:  # noqa: BLE001 - an odd object is counted by its str
            pass
    if hasattr(obj, "__dict__"):
        return {k: plain(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return str(obj)


# Keys that carry no readable context: signatures, ciphertext, cache markers.
_NOISE_KEYS = frozenset(("signature", "encrypted_content", "encrypted_index", "cache_control"))


def strip_noise(value: Any) -> Any:
    if isinstance(value, dict):
        drop_data = value.get("type") == "base64"
        return {k: strip_noise(v) for k, v in value.items()
                if k not in _NOISE_KEYS and not (drop_data and k == "data")}
    if isinstance(value, list):
        return [strip_noise(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """Structured content as it is counted: compact JSON, noise keys and base64 data left out."""
    return json.dumps(strip_noise(plain(value)), separators=(",", ":"), ensure_ascii=False, default=str)


def args_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(plain(arguments), separators=(",", ":"), ensure_ascii=False, default=str)


def as_list(value: Any) -> list[Any] | None:
    """A list of a value that is a list, a tuple or a re-iterable; None for scalars and one-shot iterators."""
    if value is None or isinstance(value, (str, bytes, Mapping)):
        return None
    if type(value) is list:
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Iterable) and iter(value) is not value:
        return list(value)
    return None



# ---------------------------------------------------------------------------
# Media
# ---------------------------------------------------------------------------

# Only an image given as a data URL reaches it.
_DATA_URL_RE = lazy_pattern(r"\Adata:([^;,]*)(;[^,]*)?,")


def b64_prefix_bytes(data: str, limit: int) -> bytes:
    chunk = data[:limit]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk)
    except (ValueError, TypeError):
        return b""


def split_data_url(url: str) -> tuple[str | None, str | None]:
    """``(media type, base64 data)`` of a ``data:`` URL, else ``(None, None)``."""
    match = _DATA_URL_RE().match(url[:200])
    if not match or "base64" not in (match.group(2) or ""):
        return None, None
    return match.group(1) or None, url[match.end():]


def image_tokens_b64(provider: str, data: str | None, detail: str, model: str | None = None) -> int:
    """An image's tokens from its base64 data (size header) by the model family's rule (:mod:`ctxscope.core.media`).

    Without data (a URL, a file id) or a readable header, the default of
    SPEC section 3 (``tokens.DEFAULT_IMAGE_TOKENS``), except a tile model at
    low detail, whose price does not depend on the size.
    """
    from ctxscope.core import media  # here: its rules (and their import) only for media

    raw = b64_prefix_bytes(data, _IMAGE_HEADER_B64) if data else b""
    tokens = media.image_tokens_of(provider, model, raw, detail)
    if tokens == DEFAULT_IMAGE_TOKENS and image_size(raw) is None:
        media.fallback_warning("the size of an image given by URL or file id, or with an unknown header",
                               f"{DEFAULT_IMAGE_TOKENS} tokens (SPEC section 3)")
    return tokens


def document_b64(provider: str, data: str | None, model: str | None = None) -> tuple[str, int]:
    """``(extracted text, page-image tokens)`` of a base64 PDF by the provider's rule.

    The text is counted as text by the caller (it is what the provider puts in
    the context besides the page images). A document that cannot be read (no
    data, not a PDF) is ``("", DOCUMENT_PAGE_TOKENS)``, said once in the log.
    """
    from ctxscope.core import media  # here: its rules (and their import) only for media

    info = media.read_pdf(b64_prefix_bytes(data, len(data))) if data else None
    if info is None:
        media.fallback_warning("a document without readable PDF data (a file id, a URL, another format)",
                               f"{DOCUMENT_PAGE_TOKENS} tokens, one page")
        return "", DOCUMENT_PAGE_TOKENS
    if provider == "anthropic":
        return info.text, media.anthropic_page_tokens(info)
    return info.text, media.openai_page_tokens(info)


def pdf_tokens(data: str | None, provider: str = "anthropic", model: str | None = None) -> int:
    """A PDF's tokens as one figure: its page images plus its text at about 4 characters a token.

    For callers that keep a document as one item of fixed tokens; request
    bodies count the text with the session's counter (:func:`document_b64`).
    """
    text, pages = document_b64(provider, data, model)
    return pages + -(-len(text) // 4)


def audio_tokens_b64(data: Any, fmt: str | None = None) -> int:
    """Audio tokens of base64 audio by its duration (WAV header, MP3 frames), else by its size (said once)."""
    from ctxscope.core import media  # here: its rules (and their import) only for media

    if not isinstance(data, str) or not data:
        return 0
    head = b64_prefix_bytes(data, _AUDIO_HEADER_B64)
    if media.is_wav(head):
        # A WAV's header says it all: no need to decode minutes of samples. Its size
        # (for a streamed WAV without one) follows from the base64 length.
        seconds = media.wav_duration(head, total=_decoded_size(data))
    else:
        seconds = None
        if media.is_mp3(head, fmt):
            # Constant bitrate or a Xing/VBRI frame count: the head and the size tell the duration.
            tail = b64_prefix_bytes(data[-(172 + len(data) % 4):] if len(data) > 8192 else data, 8192)[-128:]
            seconds = media.mp3_duration_from_head(b64_prefix_bytes(data, _MP3_HEAD_B64), _decoded_size(data),
                                                   tail)
        if seconds is None:
            seconds = media.audio_duration(b64_prefix_bytes(data, len(data)), fmt)
    if seconds is None:
        media.fallback_warning(f"the duration of {fmt or 'unknown'} audio (only WAV and MP3 are read)",
                               f"one token per {AUDIO_BYTES_PER_TOKEN} bytes")
        return b64_len_tokens(data, AUDIO_BYTES_PER_TOKEN)
    return media.audio_tokens(seconds)


def b64_len_tokens(data: Any, bytes_per_token: int) -> int:
    """Tokens of base64 data by its decoded size (padding excluded) at ``bytes_per_token``."""
    if not isinstance(data, str) or not data:
        return 0
    return math.ceil(_decoded_size(data) / bytes_per_token)


def _decoded_size(data: str) -> int:
    """Bytes that base64 text decodes to, padding excluded (without copying the text)."""
    return len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)

