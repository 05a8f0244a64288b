"""Reading request payloads: dicts from JSON and SDK objects alike, and media estimates.

Request bodies arrive as plain dicts or as what users pass to the SDKs (lists
holding pydantic objects, TypedDicts, tuples). :func:`get` reads either;
:func:`plain` and :func:`compact_json` turn structured values into the JSON
that is counted. The media helpers estimate images (by their size header),
PDFs (by page), audio and opaque ciphertext without ever counting base64
text. The rules are in docs/items.md.

Pure: no OpenTelemetry, no provider SDK (SDK objects are read by attribute).
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any, Iterable, Mapping

from .tokens import image_size, image_tokens, openai_image_tokens

__all__ = [
    "AUDIO_BYTES_PER_TOKEN",
    "DOCUMENT_PAGE_TOKENS",
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

# A PDF page as the providers bill it: its text plus an image of the page.
# Anthropic's PDF guide puts a page at 1,500-3,000 tokens; we take 2,000.
DOCUMENT_PAGE_TOKENS = 2000
# Audio: about 10 tokens a second at 128 kbit/s, i.e. one token per 1,600 bytes.
AUDIO_BYTES_PER_TOKEN = 1600
# Opaque encrypted content (redacted thinking, compaction items): the
# plaintext is about the decoded size, at about 4 bytes a token.
ENCRYPTED_BYTES_PER_TOKEN = 4
# Enough base64 to reach an image's size header (JPEG EXIF blocks run to 64 KB).
_IMAGE_HEADER_B64 = 87384


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

_DATA_URL_RE = re.compile(r"\Adata:([^;,]*)(;[^,]*)?,")


def b64_prefix_bytes(data: str, limit: int) -> bytes:
    chunk = data[:limit]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk)
    except (ValueError, TypeError):
        return b""


def split_data_url(url: str) -> tuple[str | None, str | None]:
    """``(media type, base64 data)`` of a ``data:`` URL, else ``(None, None)``."""
    match = _DATA_URL_RE.match(url[:200])
    if not match or "base64" not in (match.group(2) or ""):
        return None, None
    return match.group(1) or None, url[match.end():]


def image_tokens_b64(provider: str, data: str | None, detail: str) -> int:
    """An image's tokens from its base64 data (size header), else the provider's default."""
    if provider != "anthropic" and detail == "low":
        return openai_image_tokens(1, 1, "low")  # a flat price whatever the size, URL images too
    size = image_size(b64_prefix_bytes(data, _IMAGE_HEADER_B64)) if data else None
    width, height = size if size else (None, None)
    return image_tokens(provider, width, height, detail)


def pdf_tokens(data: str | None) -> int:
    """A PDF's tokens: its pages (``/Type /Page`` objects) times DOCUMENT_PAGE_TOKENS."""
    if not data:
        return DOCUMENT_PAGE_TOKENS
    raw = b64_prefix_bytes(data, len(data))
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw))
    if pages == 0:
        # Compressed object streams hide the page objects: about 3 KB a page.
        pages = max(1, math.ceil(len(raw) / 3000))
    return pages * DOCUMENT_PAGE_TOKENS


def b64_len_tokens(data: Any, bytes_per_token: int) -> int:
    if not isinstance(data, str) or not data:
        return 0
    return math.ceil(len(data) * 3 / 4 / bytes_per_token)

