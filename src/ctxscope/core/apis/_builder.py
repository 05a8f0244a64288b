"""Blocks -> items: the builder every wire format's walker appends to (ctxscope.core.apis after the move).

A :class:`Builder` appends the items of blocks to a list, assigning ids
(provider ids, else keyed hashes, with occurrence suffixes) through
:class:`Ids`. Each format module (``openai_chat``, ``openai_responses``,
``anthropic_messages``, ``gemini``, ``ollama``) walks its own messages and
head with it (its :class:`~ctxscope.core.apis.WireFormat`'s ``message`` and
``head``); :func:`content` walks a content value of any of them (a string or
a list of typed blocks), since the block types do not collide across APIs.
Callers use :mod:`ctxscope.core.items`; this module is its engine.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any, Callable, Mapping

from ctxscope.core import classify
from ctxscope.config import settings
from ctxscope.core.payload import (
    ENCRYPTED_BYTES_PER_TOKEN,
    compact_json,
)
from ctxscope.core.payload import args_text as _args_text
from ctxscope.core.payload import as_list as _as_list
from ctxscope.core.payload import b64_len_tokens as _b64_len_tokens
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import audio_tokens_b64 as _audio_tokens_b64
from ctxscope.core.payload import document_b64 as _document_b64
from ctxscope.core.payload import image_tokens_b64 as _image_tokens_b64
from ctxscope.core.payload import split_data_url as _split_data_url
from ctxscope.schema import Category, Item

__all__ = ["Builder", "Ids", "ToolText", "content", "keyed_hash", "listed", "role_part", "tool_name"]

ToolText = Callable[[str, Any], str]

_DEFAULT_HASH_KEY = b"ctxscope/items/v1"


# Read once at import (configuration is never read per request).
_KEY = settings().hash_key or _DEFAULT_HASH_KEY


# A keyed hasher to copy: copying skips the key set-up of every new hasher.
_KEYED = hashlib.blake2b(key=_KEY, digest_size=8)


def keyed_hash(*parts: str) -> str:
    """BLAKE2b (8 bytes, hex) of the parts under the CTXSCOPE_HASH_KEY key: ids and digests."""
    h = _KEYED.copy()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


# ---------------------------------------------------------------------------
# Tool definitions
# ---------------------------------------------------------------------------

def tool_name(tool: Any) -> tuple[str, str | None]:
    """``(name, mcp server)`` of a tool definition that carries its name on top (every format but chat's)."""
    kind = _get(tool, "type")
    if kind == "mcp":
        label = str(_get(tool, "server_label") or "mcp")
        return label, label
    if kind == "mcp_toolset":
        server = str(_get(tool, "mcp_server_name") or "mcp")
        return "toolset", server
    name = _get(tool, "name")
    return str(name or kind or "tool"), None


ToolName = Callable[[Any], "tuple[str, str | None]"]


def listed(body: Mapping[str, Any], key: str) -> list[Any]:
    """The list a body holds at ``key`` (absent: empty); ValueError when it is no list (a one-shot
    iterator is refused rather than consumed: the provider SDK still has to read it)."""
    value = _get(body, key)
    if value is None or (not value and not isinstance(value, (list, tuple))):
        return []  # absent, or an SDK sentinel (NOT_GIVEN / omit are falsy)
    found = _as_list(value)
    if found is None:
        if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
            raise ValueError(f"{key} is a one-shot iterator: not read, so that the SDK still can (pass a list)")
        raise ValueError(f"{key} is not a list but {type(value).__name__}")
    return found


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


def role_part(role: str) -> str:
    return _DEFAULT_PART.get(role, "prompts/text")


class Ids:
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

    def release(self, items: list[Item]) -> None:
        """Give back the ids of items dropped from the end of the request (undoes
        :meth:`register` / :meth:`unique` for them), so that the messages after
        an edit are extracted again with the ids a fresh pass would give."""
        used, counts = self.used, self.counts
        for item in items:
            used.discard(item.id)
            base = item.id.partition("#")[0]
            left = counts.get(base, 0) - 1
            if left > 0:
                counts[base] = left
            else:
                counts.pop(base, None)
        for item in items:
            # A call id stays known while an earlier call item (whose id is the call id) holds it.
            cid = item.source_call_id
            if item.source_kind == "tool_call" and cid and cid not in used:
                self.calls.pop(cid, None)

    def register_all(self, items: list[Item]) -> bool:
        """Take the ids of a reused message's items, all or none."""
        taken: list[Item] = []
        for item in items:
            if not self.register(item):
                for done in taken:
                    self.used.discard(done.id)
                    base = done.id.partition("#")[0]
                    self.counts[base] -= 1
                return False
            taken.append(item)
        return True


class Builder:
    """Appends the items of blocks to ``out``; one per extraction."""

    def __init__(self, api: str, ids: Ids, tool_text: ToolText, model: str | None = None, *,
                 media_rules: str = "openai") -> None:
        self.api = api
        self.tool_text = tool_text  # items.tool_definition_text: one place decides a tool's text
        self.provider = media_rules  # whose published media formulas price images and documents (ctxscope.core.media)
        self.model = model  # media rules differ by model family (ctxscope.core.media)
        self.ids = ids
        self.out: list[Item] = []

    # -- primitives -----------------------------------------------------------

    def add(self, part: str, text: str, *, role: str, base: str | None = None,
            fixed_tokens: int | None = None, label: str | None = None,
            source_kind: str | None = None, call_id: str | None = None,
            reference: str | None = None, content_key: str | None = None,
            chars: int | None = None) -> None:
        if not isinstance(text, str):  # a malformed block: count what is there, never fail
            text = compact_json(text)
        key = content_key if content_key is not None else text
        digest = keyed_hash(role, key)
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
        if not isinstance(text, str):  # a malformed block: count what is there, never fail
            text = compact_json(text)
        segments = classify.classify_text(text, role) if text else [classify.Segment(text)]
        n = 0
        for seg in segments:
            if seg.part is None:
                seg_base = base if (base is None or n == 0) else f"{base}:{n}"
                n += 1
                self.add(default_part, seg.text, role=role, base=seg_base, label=label,
                         source_kind=source_kind, call_id=call_id, reference=reference)
            else:
                # Split off (a reminder in a result, CLAUDE.md in a prompt): plain text,
                # not a result or a prompt of its own.
                self.add(seg.part, seg.text, role=role, label=seg.label, source_kind="text")

    def image(self, part: str, role: str, data: str | None, url: str | None, detail: str = "auto",
              **kw: Any) -> None:
        tokens = _image_tokens_b64(self.provider, data, detail or "auto", self.model)
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
        # A PDF is its extracted text (counted as text) and its page images (fixed tokens):
        # what the provider puts in the context (ctxscope.core.media).
        extracted, page_tokens = _document_b64(self.provider, data, self.model)
        self.add(part, "", role=role, fixed_tokens=page_tokens, content_key=data or key or "",
                 source_kind=source_kind, **kw)
        if extracted:
            kw = {k: v for k, v in kw.items() if k != "base"}
            self.add(part, extracted, role=role, source_kind=source_kind, **kw)

    def structured(self, part: str, role: str, value: Any, **kw: Any) -> None:
        self.add(part, compact_json(value), role=role, **kw)

    # -- tools ------------------------------------------------------------------

    def tools(self, tools: Any, name_of: ToolName = tool_name) -> None:
        for tool in _as_list(tools) or ():
            name, server = name_of(tool)
            part = classify.tool_part(name, server)
            self.add(part, self.tool_text(self.api, tool), role="tool-definition",
                     base=f"tool:{server + '/' if server else ''}{name}", label=name,
                     source_kind="tool_definition")

    def call(self, call_id: Any, name: Any, arguments: Any, *, role: str = "assistant") -> None:
        name = str(name or "unknown")
        text = _args_text(arguments)
        reference = classify.tool_reference(name, arguments if not isinstance(arguments, str) else text)
        cid = str(call_id) if call_id else None
        if cid:
            self.ids.calls.setdefault(cid, (name, reference))
        self.add(f"assistant/calls/{classify.tool_segment(name)}", text, role=role, base=cid, label=name,
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
        part = f"results/{classify.tool_segment(tool)}"
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
            elif kind in ("image", "image_url", "input_image", "document", "file", "input_file"):
                self.media(block, part, "tool", base=block_base, source_kind="tool_result", **common)
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
            if url and data is None and not url.startswith("data:"):
                data = url  # Responses also takes the bare base64
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
                     fixed_tokens=_audio_tokens_b64(data, _get(spec, "format")),
                     content_key=data if isinstance(data, str) else "", source_kind="audio", **kw)
        else:
            self.structured(part or role_part(role), role, block, source_kind=str(kind or "unknown"), **kw)


# ---------------------------------------------------------------------------
# Content values of any format
# ---------------------------------------------------------------------------

_MEDIA_KINDS = frozenset(("image_url", "input_image", "image", "document", "file", "input_file",
                          "document_url", "input_audio"))
_TEXT_KINDS = frozenset(("text", "input_text", "output_text"))


def content(b: Builder, role: str, value: Any) -> None:
    """A message's content (any format): a string or a list of blocks (their types do not collide)."""
    default = role_part(role)
    if value is None:
        return
    if isinstance(value, str):
        b.text(value, role, default)
        return
    blocks = _as_list(value)
    if blocks is None:
        b.structured(default, role, value, source_kind="unknown")
        return
    for block in blocks:
        if isinstance(block, str):
            b.text(block, role, default)
            continue
        kind = _get(block, "type")
        if not isinstance(kind, str):
            kind = None  # a list or number names no block type (and a list cannot be looked up): unknown content
        if kind in _TEXT_KINDS:
            b.text(_get(block, "text") or "", role, default)
        elif kind == "refusal":
            b.text(_get(block, "refusal") or "", role, default, source_kind="refusal")
        elif kind in _MEDIA_KINDS:
            b.media(block, None if role in ("user", "system", "developer") else default, role)
        elif kind == "thinking":
            b.add("assistant/thinking", _get(block, "thinking") or "", role=role, source_kind="thinking")
        elif kind == "compaction":
            # Anthropic server-side compaction: the summary that stands for the history before it
            # (without content, a failed compaction the server ignores).
            if _get(block, "content") is not None:
                b.add("summaries", _get(block, "content"), role=role, source_kind="summary")
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
            b.structured(f"results/{classify.tool_segment(tool)}", "tool", _get(block, "content"),
                         base=f"{cid}:result" if cid else None, label=tool,
                         source_kind="tool_result", call_id=cid, reference=reference)
        else:
            b.structured(default, role, block, source_kind=str(kind or "unknown"))
