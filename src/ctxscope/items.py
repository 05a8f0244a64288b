"""Request bodies -> items: OpenAI chat completions, OpenAI Responses, Anthropic Messages.

:func:`items_from_request` turns one request body into a list of
:class:`ctxscope.schema.Item` (SPEC sections 1-2): every system section, tool
definition, message and content block, with a stable id, a category and a
part path. :class:`RequestExtractor` does the same for a session's
successive requests and returns the *same* ``Item`` objects for messages it
has already seen, so that work grows with what is new.

Bodies are plain dicts from JSON or what users hand to the SDKs: lists
holding SDK pydantic objects (read by attribute), TypedDicts, tuples. The
provider SDKs are never imported.

The rules (ids, text of each kind of block, images, documents) are written
down in docs/items.md. Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import os
import re
from itertools import compress, count, islice
from operator import ne
from typing import Any, Callable, Iterable, Mapping

from . import classify
from .environment_variables import CTXSCOPE_HASH_KEY
from .schema import Category, Item
from .tokens import image_size, image_tokens

__all__ = [
    "API_ANTHROPIC",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    "APIS",
    "DOCUMENT_PAGE_TOKENS",
    "RequestExtractor",
    "detect_api",
    "item_id",
    "items_from_request",
    "tool_definition_text",
]

_log = logging.getLogger(__name__)

API_OPENAI_CHAT = "openai.chat"
API_OPENAI_RESPONSES = "openai.responses"
API_ANTHROPIC = "anthropic.messages"
APIS = (API_OPENAI_CHAT, API_OPENAI_RESPONSES, API_ANTHROPIC)

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

_DEFAULT_HASH_KEY = b"ctxscope/items/v1"


def _hash_key() -> bytes:
    raw = os.environ.get(CTXSCOPE_HASH_KEY)
    if not raw:
        return _DEFAULT_HASH_KEY
    key = raw.encode("utf-8", "surrogatepass")
    # BLAKE2b keys are at most 64 bytes: a longer key is hashed down first.
    return key if len(key) <= 64 else hashlib.blake2b(key).digest()


# Read once at import (configuration is never read per request).
_KEY = _hash_key()


def _hash(*parts: str) -> str:
    h = hashlib.blake2b(key=_KEY, digest_size=8)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def item_id(role: str, content: str) -> str:
    """The id of an item without a provider id: a keyed hash of role and content."""
    return "h:" + _hash(role, content)


# ---------------------------------------------------------------------------
# Reading SDK objects and dicts alike
# ---------------------------------------------------------------------------

def _get(obj: Any, key: str, default: Any = None) -> Any:
    if type(obj) is dict:
        return obj.get(key, default)
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _plain(obj: Any) -> Any:
    """A JSON-able form of a value: SDK objects through ``model_dump``."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(mode="json", exclude_none=True))
        except Exception:  # noqa: BLE001 - an odd object is counted by its str
            pass
    if hasattr(obj, "__dict__"):
        return {k: _plain(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return str(obj)


# Keys that carry no readable context: signatures, ciphertext, cache markers.
_NOISE_KEYS = frozenset(("signature", "encrypted_content", "encrypted_index", "cache_control"))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        drop_data = value.get("type") == "base64"
        return {k: _strip(v) for k, v in value.items()
                if k not in _NOISE_KEYS and not (drop_data and k == "data")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """Structured content as it is counted: compact JSON, noise keys and base64 data left out."""
    return json.dumps(_strip(_plain(value)), separators=(",", ":"), ensure_ascii=False, default=str)


def _args_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(_plain(arguments), separators=(",", ":"), ensure_ascii=False, default=str)


def _as_list(value: Any) -> list[Any] | None:
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
# Tool definitions
# ---------------------------------------------------------------------------

def _tool_name(api: str, tool: Any) -> tuple[str, str | None]:
    """``(name, mcp server)`` of a tool definition."""
    kind = _get(tool, "type")
    if api == API_OPENAI_CHAT:
        fn = _get(tool, "function")
        if fn is not None:
            return str(_get(fn, "name") or "function"), None
        custom = _get(tool, "custom")
        if custom is not None:
            return str(_get(custom, "name") or "custom"), None
    if kind == "mcp":
        label = str(_get(tool, "server_label") or "mcp")
        return label, label
    if kind == "mcp_toolset":
        server = str(_get(tool, "mcp_server_name") or "mcp")
        return "toolset", server
    name = _get(tool, "name")
    return str(name or kind or "tool"), None


def tool_definition_text(api: str, tool: Any) -> str:
    """The text counted for one tool definition: for now its compact JSON.

    Deferred tools (``defer_loading``) are not in the prompt until searched
    for: their catalog entry (the name) is counted. Developer F's framing
    module replaces this with the provider's own rendering.
    """
    if _get(tool, "defer_loading") is True:
        return str(_get(tool, "name") or "")
    return json.dumps(_plain(tool), separators=(",", ":"), ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------
# Media
# ---------------------------------------------------------------------------

_DATA_URL_RE = re.compile(r"\Adata:([^;,]*)(;[^,]*)?,")


def _b64_prefix_bytes(data: str, limit: int) -> bytes:
    chunk = data[:limit]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk)
    except (ValueError, TypeError):
        return b""


def _split_data_url(url: str) -> tuple[str | None, str | None]:
    """``(media type, base64 data)`` of a ``data:`` URL, else ``(None, None)``."""
    match = _DATA_URL_RE.match(url[:200])
    if not match or "base64" not in (match.group(2) or ""):
        return None, None
    return match.group(1) or None, url[match.end():]


def _image_tokens_b64(provider: str, data: str | None, detail: str) -> int:
    size = image_size(_b64_prefix_bytes(data, _IMAGE_HEADER_B64)) if data else None
    width, height = size if size else (None, None)
    return image_tokens(provider, width, height, detail)


def _pdf_tokens(data: str | None) -> int:
    """A PDF's tokens: its pages (``/Type /Page`` objects) times DOCUMENT_PAGE_TOKENS."""
    if not data:
        return DOCUMENT_PAGE_TOKENS
    raw = _b64_prefix_bytes(data, len(data))
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw))
    if pages == 0:
        # Compressed object streams hide the page objects: about 3 KB a page.
        pages = max(1, math.ceil(len(raw) / 3000))
    return pages * DOCUMENT_PAGE_TOKENS


def _b64_len_tokens(data: Any, bytes_per_token: int) -> int:
    if not isinstance(data, str) or not data:
        return 0
    return math.ceil(len(data) * 3 / 4 / bytes_per_token)


# ---------------------------------------------------------------------------
# Building items
# ---------------------------------------------------------------------------

_CATEGORY_OF: dict[str, Category] = {}


def _category(part: str) -> Category:
    category = _CATEGORY_OF.get(part)
    if category is None:
        category = Category(part.split("/", 1)[0])
        _CATEGORY_OF[part] = category
    return category


_DEFAULT_PART = {
    "system": "system", "developer": "system",
    "user": "prompts/text",
    "assistant": "assistant/text", "model": "assistant/text",
}


def _role_part(role: str) -> str:
    return _DEFAULT_PART.get(role, "prompts/text")


class _Ids:
    """Id assignment within one request: occurrence suffixes keep ids unique."""

    __slots__ = ("counts", "used", "calls")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.used: set[str] = set()
        # call id -> (tool name, reference), for results later in the request
        self.calls: dict[str, tuple[str, str | None]] = {}

    def unique(self, base: str) -> str:
        n = self.counts.get(base, 0) + 1
        candidate = base if n == 1 else f"{base}#{n}"
        while candidate in self.used:
            n += 1
            candidate = f"{base}#{n}"
        self.counts[base] = n
        self.used.add(candidate)
        return candidate

    def register(self, item: Item) -> bool:
        """Take a reused item's id; False if another item already holds it."""
        if item.id in self.used:
            return False
        self.used.add(item.id)
        base = item.id.partition("#")[0]
        self.counts[base] = self.counts.get(base, 0) + 1
        if item.source_kind == "tool_call" and item.source_call_id and item.label:
            self.calls.setdefault(item.source_call_id, (item.label, item.reference))
        return True


class _Builder:
    """Appends the items of blocks to ``out``; one per extraction."""

    def __init__(self, api: str, ids: _Ids) -> None:
        self.api = api
        self.provider = "anthropic" if api == API_ANTHROPIC else "openai"
        self.ids = ids
        self.out: list[Item] = []

    # -- primitives -----------------------------------------------------------

    def add(self, part: str, text: str, *, role: str, base: str | None = None,
            fixed_tokens: int | None = None, label: str | None = None,
            source_kind: str | None = None, call_id: str | None = None,
            reference: str | None = None, content_key: str | None = None,
            chars: int | None = None) -> None:
        key = content_key if content_key is not None else text
        digest = _hash(role, key)
        item = Item(
            id=self.ids.unique(base if base is not None else "h:" + digest),
            category=_category(part), part=part,
            chars=len(text) if chars is None else chars, text=text,
            fixed_tokens=fixed_tokens, label=label, source_kind=source_kind,
            source_call_id=call_id, reference=reference, digest=digest)
        self.out.append(item)

    def text(self, text: str, role: str, default_part: str, *, source_kind: str = "text",
             base: str | None = None, label: str | None = None, call_id: str | None = None,
             reference: str | None = None) -> None:
        """A text, split by :func:`classify.classify_text`; ``base`` goes to the role's own part."""
        segments = classify.classify_text(text, role) if text else [classify.Segment(text)]
        n = 0
        for seg in segments:
            if seg.part is None:
                seg_base = base if (base is None or n == 0) else f"{base}:{n}"
                n += 1
                self.add(default_part, seg.text, role=role, base=seg_base, label=label,
                         source_kind=source_kind, call_id=call_id, reference=reference)
            else:
                self.add(seg.part, seg.text, role=role, label=seg.label, source_kind=source_kind)

    def image(self, part: str, role: str, data: str | None, url: str | None, detail: str = "auto",
              **kw: Any) -> None:
        tokens = _image_tokens_b64(self.provider, data, detail or "auto")
        self.add(part, "", role=role, fixed_tokens=tokens, content_key=data or url or "",
                 source_kind=kw.pop("source_kind", "image"), **kw)

    def document(self, part: str, role: str, media_type: str | None, data: str | None,
                 text: str | None = None, key: str | None = None, **kw: Any) -> None:
        source_kind = kw.pop("source_kind", "document")
        if text is not None:
            self.add(part, text, role=role, source_kind=source_kind, **kw)
            return
        if media_type and media_type.startswith("text/") and data:
            try:
                decoded = base64.b64decode(data).decode("utf-8", "replace")
            except ValueError:
                decoded = None
            if decoded is not None:
                self.add(part, decoded, role=role, source_kind=source_kind, **kw)
                return
        self.add(part, "", role=role, fixed_tokens=_pdf_tokens(data), content_key=data or key or "",
                 source_kind=source_kind, **kw)

    def structured(self, part: str, role: str, value: Any, **kw: Any) -> None:
        self.add(part, compact_json(value), role=role, **kw)

    # -- tools ------------------------------------------------------------------

    def tools(self, tools: Any) -> None:
        for tool in _as_list(tools) or ():
            name, server = _tool_name(self.api, tool)
            part = classify.tool_part(name, server)
            self.add(part, tool_definition_text(self.api, tool), role="tool-definition",
                     base=f"tool:{server + '/' if server else ''}{name}", label=name,
                     source_kind="tool_definition")

    def call(self, call_id: Any, name: Any, arguments: Any, *, role: str = "assistant") -> None:
        name = str(name or "unknown")
        text = _args_text(arguments)
        reference = classify.tool_reference(name, arguments if not isinstance(arguments, str) else text)
        cid = str(call_id) if call_id else None
        if cid:
            self.ids.calls.setdefault(cid, (name, reference))
        self.add(f"assistant/calls/{name}", text, role=role, base=cid, label=name,
                 source_kind="tool_call", call_id=cid, reference=reference)

    def result_target(self, call_id: Any, name: Any = None) -> tuple[str, str | None, str | None]:
        """``(tool name, reference, call id)`` of a result, found from its call."""
        cid = str(call_id) if call_id else None
        found = self.ids.calls.get(cid) if cid else None
        if found is not None:
            return found[0], found[1], cid
        return str(name or "unknown"), None, cid

    def result(self, call_id: Any, content: Any, *, name: Any = None, role: str = "tool") -> None:
        """A tool result: a string or a list of parts (text, image, document, other)."""
        tool, reference, cid = self.result_target(call_id, name)
        part = f"results/{tool}"
        base = f"{cid}:result" if cid else None
        common = dict(label=tool, call_id=cid, reference=reference)
        if content is None or isinstance(content, str):
            self.text(content or "", "tool", part, source_kind="tool_result", base=base, **common)
            return
        blocks = _as_list(content)
        if blocks is None:
            self.structured(part, "tool", content, base=base, source_kind="tool_result", **common)
            return
        for n, block in enumerate(blocks):
            block_base = None if base is None else (base if n == 0 else f"{base}:{n}")
            kind = _get(block, "type")
            if isinstance(block, str):
                self.text(block, "tool", part, source_kind="tool_result", base=block_base, **common)
            elif kind in ("text", "input_text", "output_text"):
                self.text(_get(block, "text") or "", "tool", part, source_kind="tool_result",
                          base=block_base, **common)
            elif kind in ("image", "image_url", "input_image"):
                self.media(block, part, "tool", base=block_base, **common)
            elif kind in ("document", "file", "input_file"):
                self.media(block, part, "tool", base=block_base, **common)
            else:
                self.structured(part, "tool", block, base=block_base, source_kind="tool_result", **common)

    # -- media blocks of any format -----------------------------------------------

    def media(self, block: Any, part: str | None, role: str, **kw: Any) -> None:
        kind = _get(block, "type")
        if kind == "image_url":  # chat
            spec = _get(block, "image_url")
            url = spec if isinstance(spec, str) else (_get(spec, "url") or "")
            detail = "auto" if isinstance(spec, str) else (_get(spec, "detail") or "auto")
            _, data = _split_data_url(url)
            self.image(part or "prompts/media/image", role, data, url, detail, **kw)
        elif kind == "input_image":  # Responses
            url = _get(block, "image_url") or ""
            _, data = _split_data_url(url) if url else (None, None)
            self.image(part or "prompts/media/image", role, data, url or _get(block, "file_id"),
                       _get(block, "detail") or "auto", **kw)
        elif kind == "image":  # Anthropic
            source = _get(block, "source") or {}
            data = _get(source, "data") if _get(source, "type") == "base64" else None
            self.image(part or "prompts/media/image", role, data,
                       _get(source, "url") or _get(source, "file_id"), **kw)
        elif kind == "document":  # Anthropic
            source = _get(block, "source") or {}
            stype = _get(source, "type")
            target = part or "prompts/media/document"
            if stype == "text":
                self.document(target, role, "text/plain", None, text=_get(source, "data") or "", **kw)
            elif stype == "content":
                inner = _as_list(_get(source, "content")) or []
                texts = [(_get(b, "text") or "") if not isinstance(b, str) else b for b in inner]
                self.document(target, role, "text/plain", None, text="\n".join(texts), **kw)
            else:
                self.document(target, role, _get(source, "media_type"),
                              _get(source, "data") if stype == "base64" else None,
                              key=_get(source, "url") or _get(source, "file_id"), **kw)
        elif kind in ("file", "input_file"):  # chat / Responses
            spec = _get(block, "file") if kind == "file" else block
            url = _get(spec, "file_data") or ""
            media_type, data = _split_data_url(url) if url else (None, None)
            self.document(part or "prompts/media/document", role, media_type, data,
                          key=_get(spec, "file_id") or _get(spec, "file_url") or _get(spec, "filename"), **kw)
        elif kind == "document_url":  # Mistral-style chat part
            url = _get(block, "document_url") or ""
            media_type, data = _split_data_url(url) if url else (None, None)
            self.document(part or "prompts/media/document", role, media_type, data, key=url, **kw)
        elif kind == "input_audio":
            spec = _get(block, "input_audio") or block
            data = _get(spec, "data")
            self.add(part or "prompts/media/audio", "", role=role,
                     fixed_tokens=_b64_len_tokens(data, AUDIO_BYTES_PER_TOKEN),
                     content_key=data if isinstance(data, str) else "", source_kind="audio", **kw)
        else:
            self.structured(part or _role_part(role), role, block, source_kind=str(kind or "unknown"), **kw)


# ---------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------

_MEDIA_KINDS = frozenset(("image_url", "input_image", "image", "document", "file", "input_file",
                          "document_url", "input_audio"))
_TEXT_KINDS = frozenset(("text", "input_text", "output_text"))


def _content(b: _Builder, role: str, content: Any) -> None:
    """A message's content (any format): a string or a list of blocks."""
    default = _role_part(role)
    if content is None:
        return
    if isinstance(content, str):
        b.text(content, role, default)
        return
    blocks = _as_list(content)
    if blocks is None:
        b.structured(default, role, content, source_kind="unknown")
        return
    for block in blocks:
        if isinstance(block, str):
            b.text(block, role, default)
            continue
        kind = _get(block, "type")
        if kind in _TEXT_KINDS:
            b.text(_get(block, "text") or "", role, default)
        elif kind == "refusal":
            b.text(_get(block, "refusal") or "", role, default, source_kind="refusal")
        elif kind in _MEDIA_KINDS:
            b.media(block, None if role in ("user", "system", "developer") else default, role)
        elif kind == "thinking":
            b.add("assistant/thinking", _get(block, "thinking") or "", role=role, source_kind="thinking")
        elif kind == "redacted_thinking":
            data = _get(block, "data")
            b.add("assistant/thinking", "", role=role, content_key=data or "",
                  fixed_tokens=_b64_len_tokens(data, ENCRYPTED_BYTES_PER_TOKEN), source_kind="thinking")
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            b.call(_get(block, "id"), _get(block, "name"), _get(block, "input"), role=role)
        elif kind in ("tool_result", "mcp_tool_result"):
            b.result(_get(block, "tool_use_id"), _get(block, "content"))
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            # Server tools (web search, code execution...): results in the assistant turn.
            tool, reference, cid = b.result_target(_get(block, "tool_use_id"), kind[: -len("_tool_result")])
            b.structured(f"results/{tool}", "tool", _get(block, "content"),
                         base=f"{cid}:result" if cid else None, label=tool,
                         source_kind="tool_result", call_id=cid, reference=reference)
        else:
            b.structured(default, role, block, source_kind=str(kind or "unknown"))


def _chat_message(b: _Builder, msg: Any) -> None:
    role = str(_get(msg, "role") or "user")
    if role == "tool":
        b.result(_get(msg, "tool_call_id"), _get(msg, "content"), name=_get(msg, "name"))
        return
    if role == "function":  # legacy function results
        name = _get(msg, "name")
        b.result(None, _get(msg, "content"), name=name)
        return
    if role == "assistant":
        for key in ("reasoning_content", "reasoning"):
            reasoning = _get(msg, key)
            if isinstance(reasoning, str) and reasoning:
                b.add("assistant/thinking", reasoning, role=role, source_kind="thinking")
        for detail in _as_list(_get(msg, "reasoning_details")) or ():
            text = _get(detail, "text") or _get(detail, "summary")
            if isinstance(text, str) and text:
                b.add("assistant/thinking", text, role=role, source_kind="thinking")
        _content(b, role, _get(msg, "content"))
        refusal = _get(msg, "refusal")
        if isinstance(refusal, str) and refusal:
            b.text(refusal, role, "assistant/text", source_kind="refusal")
        for call in _as_list(_get(msg, "tool_calls")) or ():
            fn = _get(call, "function")
            if fn is not None:
                b.call(_get(call, "id"), _get(fn, "name"), _get(fn, "arguments"))
            else:
                custom = _get(call, "custom") or call
                b.call(_get(call, "id"), _get(custom, "name"), _get(custom, "input"))
        legacy = _get(msg, "function_call")
        if legacy is not None:
            b.call(None, _get(legacy, "name"), _get(legacy, "arguments"))
        return
    _content(b, role, _get(msg, "content"))


def _responses_item(b: _Builder, item: Any) -> None:
    if isinstance(item, str):
        b.text(item, "user", "prompts/text")
        return
    kind = _get(item, "type")
    role = _get(item, "role")
    if kind in (None, "message") and role is not None:
        _content(b, str(role), _get(item, "content"))
    elif kind in ("function_call", "custom_tool_call"):
        args = _get(item, "arguments") if kind == "function_call" else _get(item, "input")
        b.call(_get(item, "call_id") or _get(item, "id"), _get(item, "name"), args)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        b.result(_get(item, "call_id"), _get(item, "output"))
    elif kind == "reasoning":
        texts = [_get(s, "text") or "" for s in _as_list(_get(item, "summary")) or ()]
        texts += [_get(c, "text") or "" for c in _as_list(_get(item, "content")) or ()]
        b.add("assistant/thinking", "\n".join(t for t in texts if t), role="assistant",
              source_kind="thinking")
    elif kind in ("compaction", "compaction_summary"):
        data = _get(item, "encrypted_content")
        b.add("summaries", "", role="assistant", content_key=data or "",
              fixed_tokens=_b64_len_tokens(data, ENCRYPTED_BYTES_PER_TOKEN), source_kind="summary")
    elif kind == "mcp_list_tools":
        server = str(_get(item, "server_label") or "mcp")
        for tool in _as_list(_get(item, "tools")) or ():
            name = str(_get(tool, "name") or "tool")
            b.add(classify.tool_part(name, server), compact_json(tool), role="tool-definition",
                  base=f"tool:{server}/{name}", label=name, source_kind="tool_definition")
    elif kind == "mcp_call":
        cid = _get(item, "id")
        b.call(cid, _get(item, "name"), _get(item, "arguments"))
        if _get(item, "output") is not None or _get(item, "error") is not None:
            b.result(cid, _get(item, "output") or _get(item, "error"))
    elif kind == "item_reference":
        # A stored item the provider expands: its content is not in the body.
        b.add("messages", "", role="reference", base=f"ref:{_get(item, 'id')}", source_kind="item_reference")
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        b.result(_get(item, "call_id") or _get(item, "id"), _get(item, "output"),
                 name=kind[: -len("_call_output")])
    elif isinstance(kind, str) and kind.endswith("_call"):
        # Hosted and local tool calls (web search, file search, computer, shell...).
        name = kind[: -len("_call")]
        value = {k: v for k, v in (_plain(item) or {}).items()
                 if k not in ("type", "id", "call_id", "status")}
        cid = _get(item, "call_id") or _get(item, "id")
        b.call(cid, name, value.get("action", value))
    else:
        b.structured(_role_part(str(role or "assistant")), str(role or "assistant"), item,
                     source_kind=str(kind or "unknown"))


def _anthropic_message(b: _Builder, msg: Any) -> None:
    _content(b, str(_get(msg, "role") or "user"), _get(msg, "content"))


_MESSAGE_FN: dict[str, Callable[[_Builder, Any], None]] = {
    API_OPENAI_CHAT: _chat_message,
    API_OPENAI_RESPONSES: _responses_item,
    API_ANTHROPIC: _anthropic_message,
}


def _head(b: _Builder, body: Mapping[str, Any]) -> None:
    """Items before the conversation: system / instructions and tool definitions."""
    api = b.api
    if api == API_ANTHROPIC:
        system = _get(body, "system")
        if isinstance(system, str):
            b.text(system, "system", "system", source_kind="system")
        elif system is not None:
            for block in _as_list(system) or ():
                if isinstance(block, str):
                    b.text(block, "system", "system", source_kind="system")
                elif _get(block, "type") == "text":
                    b.text(_get(block, "text") or "", "system", "system", source_kind="system")
                else:
                    b.structured("system", "system", block, source_kind="system")
        for server in _as_list(_get(body, "mcp_servers")) or ():
            # The connector's tools are fetched by the provider: their size is
            # unknown here, so the server is an empty item (calibration shows the rest).
            name = str(_get(server, "name") or "mcp")
            b.add(f"tools/mcp/{name}/server", "", role="tool-definition", base=f"tool:mcp/{name}",
                  label=name, source_kind="tool_definition")
    elif api == API_OPENAI_RESPONSES:
        instructions = _get(body, "instructions")
        if isinstance(instructions, str):
            b.text(instructions, "system", "system", source_kind="system")
        elif instructions is not None:
            for item in _as_list(instructions) or ():
                _responses_item(b, item)
    b.tools(_get(body, "tools"))


def _messages_of(body: Mapping[str, Any], api: str) -> list[Any]:
    if api == API_OPENAI_RESPONSES:
        value = _get(body, "input")
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
    else:
        value = _get(body, "messages")
    if value is None:
        return []
    listed = _as_list(value)
    if listed is None:
        raise ValueError(f"{'input' if api == API_OPENAI_RESPONSES else 'messages'} is not a list")
    return listed


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

_ANTHROPIC_BLOCKS = frozenset(("tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                               "server_tool_use", "search_result", "mcp_tool_use", "mcp_tool_result"))
_CHAT_BLOCKS = frozenset(("image_url", "input_audio", "file", "refusal"))


def detect_api(body: Mapping[str, Any]) -> str:
    """Which API a request body is for; ValueError when it is none of the three."""
    if not isinstance(body, Mapping):
        raise ValueError("a request body must be a JSON object")
    if "messages" not in body:
        if "input" in body or "instructions" in body:
            return API_OPENAI_RESPONSES
        raise ValueError("not a request body: no 'messages' (chat, Anthropic) or 'input' (Responses)")
    for tool in _as_list(body.get("tools")) or ():
        # Chat tools nest their name under "function"; Anthropic's carry it on top.
        if _get(tool, "input_schema") is not None or _get(tool, "name") is not None:
            return API_ANTHROPIC
        if _get(tool, "function") is not None:
            return API_OPENAI_CHAT
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and "function" not in choice and choice.get("type") in ("auto", "any", "tool", "none"):
        return API_ANTHROPIC
    if "system" in body or "anthropic_version" in body or "thinking" in body:
        return API_ANTHROPIC
    for msg in islice(_as_list(body.get("messages")) or (), 200):
        if _get(msg, "tool_calls") is not None or _get(msg, "role") in ("tool", "developer", "function"):
            return API_OPENAI_CHAT
        content = _get(msg, "content")
        for block in (_as_list(content) or ()) if not isinstance(content, str) else ():
            kind = _get(block, "type")
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and _get(block, "source") is not None):
                return API_ANTHROPIC
            if kind in _CHAT_BLOCKS:
                return API_OPENAI_CHAT
    # Plain text conversations look alike: Anthropic requires max_tokens, and
    # its models are named claude-*.
    model = body.get("model")
    if "max_tokens" in body and isinstance(model, str) and model.startswith("claude"):
        return API_ANTHROPIC
    return API_OPENAI_CHAT


def items_from_request(body: Mapping[str, Any], api: str | None = None) -> list[Item]:
    """The items of one request body (``api`` detected when not given)."""
    return RequestExtractor().extract(body, api or detect_api(body))


def _snapshot(value: Any) -> Any:
    """A copy of dicts, lists and tuples that shares the leaves (strings, SDK objects).

    Comparing a later message with this copy (``==``, all in C) notices any
    in-place edit of the message, its content list, blocks and their fields,
    while unchanged strings compare by identity at once.
    """
    kind = type(value)
    if kind is dict:
        return {k: _snapshot(v) for k, v in value.items()}
    if kind is list:
        return [_snapshot(v) for v in value]
    if kind is tuple:
        return tuple(_snapshot(v) for v in value)
    return value


class RequestExtractor:
    """Items of a session's successive requests, reusing those of unchanged messages.

    Keep one per session (not thread-safe: calls of one session are serialised
    by the caller). A request that repeats the previous one's messages and
    appends new ones costs one C-level comparison of the old messages plus
    the extraction of the new; anything else (an edited, removed or inserted
    message, a new system prompt or tool list) is handled too, reusing the
    items of messages that are still equal at the same position.
    """

    def __init__(self) -> None:
        self._api: str | None = None
        self._head_key: Any = None
        self._head_items: list[Item] = []
        self._snaps: list[Any] = []          # snapshot of each previous message
        self._ends: list[int] = []           # end offset of each message's items in _msg_items
        self._msg_items: list[Item] = []
        self._ids = _Ids()

    def extract(self, body: Mapping[str, Any], api: str | None = None) -> list[Item]:
        """The items of ``body``; items of unchanged messages are the previous call's objects."""
        api = api or detect_api(body)
        if api not in _MESSAGE_FN:
            raise ValueError(f"unknown api {api!r}: one of {', '.join(APIS)}")
        messages = _messages_of(body, api)
        head = (_get(body, "system"), _get(body, "instructions"), _get(body, "tools"),
                _get(body, "mcp_servers"))
        n = len(self._snaps)
        if (api == self._api and head == self._head_key and len(messages) >= n
                and messages[:n] == self._snaps):
            # The common case: the same history plus new messages.
            builder = _Builder(api, self._ids)
            self._append(builder, messages, n)
            return self._head_items + self._msg_items
        return self._rebuild(body, api, _snapshot(head), messages)

    def _append(self, builder: _Builder, messages: list[Any], start: int) -> None:
        fn = _MESSAGE_FN[builder.api]
        out = builder.out
        builder.out = self._msg_items
        for msg in islice(messages, start, None):
            fn(builder, msg)
            self._snaps.append(_snapshot(msg))
            self._ends.append(len(self._msg_items))
        builder.out = out

    def _rebuild(self, body: Mapping[str, Any], api: str, head_key: Any, messages: list[Any]) -> list[Item]:
        ids = _Ids()
        builder = _Builder(api, ids)
        if api == self._api and head_key == self._head_key and all(map(ids.register, self._head_items)):
            head_items = self._head_items
        else:
            ids = _Ids()
            builder = _Builder(api, ids)
            _head(builder, body)
            head_items = builder.out
        old_snaps, old_ends, old_items = self._snaps, self._ends, self._msg_items
        same_api = api == self._api
        fn = _MESSAGE_FN[api]
        snaps: list[Any] = []
        ends: list[int] = []
        items: list[Item] = []
        builder.out = items
        # The unchanged prefix is found by one C-level scan; past it, each
        # message is compared with the previous one at its position.
        shared = min(len(messages), len(old_snaps)) if same_api else 0
        first_diff = next(compress(count(), map(ne, islice(messages, shared), islice(old_snaps, shared))), shared)
        for i, msg in enumerate(messages):
            reused = False
            if same_api and i < len(old_snaps) and (i < first_diff or msg == old_snaps[i]):
                start = old_ends[i - 1] if i else 0
                chunk = old_items[start:old_ends[i]]
                if all(ids.register(item) for item in chunk):
                    items.extend(chunk)
                    reused = True
                else:  # an id clash with a new item before it: extract afresh
                    for item in chunk:
                        ids.used.discard(item.id)
            if not reused:
                fn(builder, msg)
            snaps.append(old_snaps[i] if reused else _snapshot(msg))
            ends.append(len(items))
        self._api, self._head_key, self._head_items = api, head_key, head_items
        self._snaps, self._ends, self._msg_items, self._ids = snaps, ends, items, ids
        return head_items + items
