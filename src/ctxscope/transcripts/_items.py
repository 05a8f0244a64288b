"""Building :class:`~ctxscope.schema.Item` objects from transcript content blocks.

Shared by the readers. Categories of free text come from
:mod:`ctxscope.core.classify` (rules, skills, environment, summaries), references
for waste from ``classify.tool_reference(tool, args)`` and image sizes from
:mod:`ctxscope.core.payload`, as for request bodies, so that a transcript and a
live request give the same parts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable

from ctxscope.core import classify as _classify
from ctxscope.core import payload
from ctxscope.schema import Category, Item
from ctxscope.core.tokens import DEFAULT_IMAGE_TOKENS
from ctxscope.transcripts.model import Problem, content_digest, dumps, note_new_content

# Enum members read once: on this Python an enum class's attribute is looked up through
# EnumType's __getattr__ hook (~850 instructions, several times a plain global); a reader
# makes several items a call.
_SUMMARIES, _ASSISTANT, _SYSTEM = Category.SUMMARIES, Category.ASSISTANT, Category.SYSTEM
_PROMPTS, _RESULTS = Category.PROMPTS, Category.RESULTS


def reference(tool: str, args: Any) -> str | None:
    """The normalised reference of a tool call (``Read:file_path=src/app.py``), never a call id."""
    if not isinstance(args, dict):
        args = {"input": args} if args not in (None, "", {}) else {}
    try:
        return _classify.tool_reference(tool, args)
    except Exception:  # noqa: BLE001 - a classifier bug must not stop reading
        return tool


def text_item(item_id: str, text: str, role: str, *, summary: bool = False,
              label: str | None = None) -> Item:
    """A text block: a prompt, assistant text, or what the classifier says it is."""
    if summary:
        category, part = _SUMMARIES, "summaries"
    elif role == "assistant":
        category, part = _ASSISTANT, "assistant/text"
    elif role in ("system", "developer"):
        category, part = _SYSTEM, "system"
    else:
        category, part = _PROMPTS, "prompts/text"
    # Items are built positionally here, in Item's field order (id, category, part, chars, text,
    # fixed_tokens, label, source_kind, source_call_id, reference, digest): a reader makes several a
    # call, and a keyword costs a name match each.
    return Item(item_id, category, part, len(text), text, None, label or part.rsplit("/", 1)[-1], role,
                None, None, content_digest(text))


def text_items(item_id: str, text: str, role: str, *, summary: bool = False,
               label: str | None = None) -> list[Item]:
    """A user or system text split by the classifier (rules, skills, environment, summaries)."""
    if summary or role == "assistant":
        return [text_item(item_id, text, role, summary=summary, label=label)]
    try:
        segments = _classify.classify_text(text, role)
    except Exception:  # noqa: BLE001 - a classifier bug must not stop reading
        segments = None
    if not segments or (len(segments) == 1 and segments[0].part is None):
        return [text_item(item_id, text, role, label=label)]
    out = []
    for index, segment in enumerate(segments):
        if not segment.text:
            continue
        sub_id = item_id if index == 0 else f"{item_id}.{index}"
        item = text_item(sub_id, segment.text, role, label=segment.label or label)
        if segment.part is not None:
            item.part = segment.part
            item.category = _part_category(segment.part)
            item.label = segment.label or segment.part.rsplit("/", 1)[-1]
        out.append(item)
    return out


def result_items(item_id: str, tool: str | None, text: str, call_id: str | None,
                 ref: str | None) -> list[Item]:
    """A tool result, with reminders the harness appended to it split off (environment)."""
    if "<system-reminder>" not in text:
        return [result_item(item_id, tool, text, call_id, ref)]
    try:
        segments = _classify.classify_text(text, "tool")
    except Exception:  # noqa: BLE001
        return [result_item(item_id, tool, text, call_id, ref)]
    body = "".join(s.text for s in segments if s.part is None)
    out = [result_item(item_id, tool, body, call_id, ref)]
    for index, segment in enumerate(segments):
        if segment.part is not None and segment.text:
            item = text_item(f"{item_id}.{index}", segment.text, "user", label=segment.label)
            item.part = segment.part
            item.category = _part_category(segment.part)
            out.append(item)
    return out


def thinking_item(item_id: str, text: str) -> Item:
    return Item(item_id, _ASSISTANT, "assistant/thinking", len(text), text, None, "thinking",
                "assistant", None, None, content_digest(text))  # positional: see text_item


def call_item(call_id: str, tool: str, args: Any) -> tuple[Item, str | None]:
    """A tool call (its arguments are context) and its reference."""
    is_text = isinstance(args, str)
    text = args if is_text else dumps(args)
    digest = content_digest(text)
    # The reference follows from the tool and the arguments' JSON text: a call made again
    # (a file read again, the same command) is normalised once. Keyed by the digest the
    # item needs anyway, so the cache holds no argument text.
    key = (tool, digest, len(text), is_text)
    if key in _references:
        ref = _references[key]
    else:
        ref = reference(tool, _maybe_json(args))
        if len(_references) >= _REFERENCES_KEPT:
            _references.clear()
        _references[key] = ref
    name = _name(tool)
    item = Item(call_id, _ASSISTANT, _call_part(name), len(text), text, None, name, "tool_call",
                call_id, ref, digest)  # positional: see text_item
    return item, ref


# (tool, digest and length of the arguments' text, whether they were text) -> reference.
_references: dict[tuple[str, str, int, bool], str | None] = {}
# Then cleared: a bound on memory, not an LRU (a miss only costs the normalising). An entry is about
# 300 bytes (its key, the digest, the reference): 4,096 of them were 1.2 MB that a long session filled
# and a 50 MB one did not (issue 14); 2,048 still hold dense50's 1,295 distinct calls (1,024: 1,347
# normalisings, 4.5 M instructions more).
_REFERENCES_KEPT = 2048


class ToolCalls:
    """The tool calls a reader has seen (call id -> tool name, reference), to name their results."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        # call id -> (the call id as the call's item holds it, tool, reference, the call's line
        # offset or -1): a result's source_call_id is then the call's string, not a second copy
        # for the session's length; the offset says which line noted it (let_go, a reader's re-read).
        self._seen: dict[str, tuple[str, str, str | None, int]] = {}

    def call_item(self, call_id: str, tool: str, args: Any, line: int = -1) -> Item:
        """A tool call's item (:func:`call_item`), remembered for its result (``line``: where it was read)."""
        item, ref = call_item(call_id, tool, args)
        self._seen[call_id] = (call_id, tool, ref, line)
        return item

    def result_items(self, call_id: Any, text: str, fallback_id: Callable[[], str],
                     call: tuple[str, str, str | None] | None = None) -> list[Item]:
        """A tool result's items (:func:`result_items`): id ``result:<call id>``, named after its call.

        ``fallback_id()`` gives the id of a result without a call id (called only then);
        ``call`` is what :meth:`call_item` noted for a call :meth:`let_go` gave up, found again.
        """
        if not isinstance(call_id, str):
            return result_items(fallback_id(), "unknown", text, None, None)
        note = call or self._seen.get(call_id)
        name, ref = ("unknown", None) if note is None else (note[1], note[2])
        call_id = call_id if note is None else note[0]
        return result_items(f"result:{call_id}", name, text, call_id, ref)

    def note(self, call_id: str) -> tuple[str, str, str | None, int] | None:
        """What :meth:`call_item` noted for ``call_id`` last, with its line; None when nothing stands."""
        return self._seen.get(call_id)

    def let_go(self, items: Iterable[Item], line: int) -> list[str]:
        """Forget the calls these items of the line at ``line`` noted (a reader that can find them again).

        Only the line that made a note lets it go: one the same id noted later stands.
        Their call ids.
        """
        seen = self._seen
        out = []
        for item in items:
            if item.source_kind == "tool_call" and item.source_call_id is not None:
                note = seen.get(item.source_call_id)
                if note is not None and note[3] == line:
                    del seen[item.source_call_id]
                    out.append(item.source_call_id)
        return out


def result_item(item_id: str, tool: str | None, text: str, call_id: str | None,
                ref: str | None) -> Item:
    name = _name(tool or "unknown")
    return Item(item_id, _RESULTS, _result_part(name), len(text), text, None, name, "tool_result",
                call_id, ref, content_digest(text))  # positional: see text_item


def encrypted_item(item_id: str, data: Any, part: str, label: str) -> Item:
    """Content the provider keeps encrypted (redacted thinking, a compaction's summary), counted by its
    decoded size, by the rule request bodies follow (``payload.b64_len_tokens`` at
    ``ENCRYPTED_BYTES_PER_TOKEN``): the text is not there to count."""
    tokens = payload.b64_len_tokens(data, payload.ENCRYPTED_BYTES_PER_TOKEN)
    return Item(id=item_id, category=_part_category(part), part=part, chars=0, fixed_tokens=tokens, label=label,
                source_kind=label, digest=content_digest(data if isinstance(data, str) and data else item_id))


def unknown_item(item_id: str, value: Any, kind: str, role: str) -> Item:
    """Content of a type this version does not know, counted as its compact JSON in its role's default
    part: the rule request bodies follow (``core.apis._builder``'s ``structured``; docs/items.md,
    "Nothing is dropped"). The reader says once a file that it did so."""
    from ctxscope.core.apis._builder import role_part  # here: the readers' start-up does not load the extractors

    text = payload.compact_json(value)
    part = role_part(role)
    return Item(item_id, _part_category(part), part, len(text), text, None, kind, kind,
                None, None, content_digest(text))  # positional: see text_item


def image_item(item_id: str, source: Any, provider: str, role: str, kind: str = "image",
               tokens: int | None = None, model: str | None = None) -> Item:
    """An image or document, counted by its pixel size where the header gives it, never its base64.

    ``model`` picks the OpenAI image rule of its family (ctxscope.core.media); Claude's rule is one.
    """
    data = _b64_data(source)
    if tokens is None:  # else the caller measured it (media_items: a PDF's page images)
        if kind == "image":
            tokens = payload.image_tokens_b64(provider, data, "auto", model)
        elif kind == "document":
            tokens = payload.pdf_tokens(data)
        else:
            tokens = DEFAULT_IMAGE_TOKENS
    category = Category.RESULTS if role == "tool" else Category.PROMPTS
    part = "results/media" if role == "tool" else f"prompts/media/{kind}"
    digest = content_digest(data[:4096] + str(len(data))) if isinstance(data, str) else content_digest(item_id)
    return Item(id=item_id, category=category, part=part, chars=0, fixed_tokens=tokens,
                label=kind, source_kind=role, digest=digest)


def media_items(item_id: str, source: Any, provider: str, role: str, kind: str = "image") -> list[Item]:
    """An image or document as items: a PDF is its page images and its extracted text (id ``<id>:text``),
    by the same rule as request bodies (ctxscope.core.media via payload.document_b64)."""
    if kind != "document":
        return [image_item(item_id, source, provider, role, kind)]
    text, pages = payload.document_b64(provider, _b64_data(source))
    item = image_item(item_id, source, provider, role, kind, tokens=pages)
    out = [item]
    if text:
        out.append(Item(id=f"{item_id}:text", category=item.category, part=item.part, chars=len(text), text=text,
                        label=kind, source_kind=role, digest=content_digest(text)))
    return out


def _b64_data(source: Any) -> str | None:
    data = None
    if isinstance(source, dict):
        data = source.get("data")
        if data is None and isinstance(source.get("url"), str):
            data = source["url"].partition("base64,")[2] or None
    elif isinstance(source, str):
        data = source.partition("base64,")[2] or None
    return data if isinstance(data, str) else None


# A tool result's blocks by how they count (the rule of ``core.apis._builder``'s ``Builder.result``):
# text as text, media by their own rule (the reader makes their items: ``result_media``), any other
# block as its compact JSON. The JSON types below are the API's own, counted without being said new
# (in a tool result, and by the Claude reader in a message's content).
TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
MEDIA_BLOCKS = frozenset({"image", "input_image", "document"})
JSON_BLOCKS = frozenset({"search_result", "tool_reference"})


def block_text(content: Any, new_kinds: list[str] | None = None) -> str:
    """The text of a tool result's content: a string, or its blocks one after another (``\\n``).

    A text block gives its text, an image or a document nothing (the reader counts it as media:
    :func:`result_media`), any other block its compact JSON, as request bodies count it: a
    deferred tool's ``tool_reference`` or a block type ctxscope does not know is context, not
    nothing (docs/items.md, "Nothing is dropped"). The types of blocks not in :data:`JSON_BLOCKS`
    counted that way are appended to ``new_kinds``, for the reader to say once.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind is not None and not isinstance(kind, str):
                    kind = "unknown"  # a list or a number names no type (and a list cannot be looked up)
                text = block.get("text")
                if isinstance(text, str) and (kind is None or kind in TEXT_BLOCKS):
                    out.append(text)
                elif kind not in MEDIA_BLOCKS and kind not in TEXT_BLOCKS:
                    out.append(payload.compact_json(block))
                    if new_kinds is not None and kind not in JSON_BLOCKS:
                        new_kinds.append(kind or "unknown")
        return "\n".join(out)
    if content is None:
        return ""
    return dumps(content)


def result_text(content: Any, line: int, said: set[str], problems: list[Problem]) -> str:
    """:func:`block_text` of a tool result read at ``line``; a block type new to ctxscope is said once
    a file (:func:`~ctxscope.transcripts.model.note_new_content`, ``said``: the reader's set)."""
    if not isinstance(content, list):
        return block_text(content)
    new_kinds: list[str] = []
    text = block_text(content, new_kinds)
    for kind in new_kinds:
        note_new_content(kind, line, said, problems, "a tool result")
    return text


def result_media(item_id: str, content: Any, provider: str, result: Item, model: str | None = None) -> list[Item]:
    """The images and documents of a tool result's content (a list of blocks), ids ``<item_id>:<n>``,
    counted by the rule request bodies follow (:func:`media_items`) and named as that rule names them:
    ``result``'s part, tool, call and reference (docs/items.md). :func:`block_text` has the rest."""
    out: list[Item] = []
    if not isinstance(content, list):
        return out
    for n, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "image" or kind == "input_image":  # Anthropic's source, or a Responses image_url (Codex)
            source = block.get("source") if "source" in block else block.get("image_url")
            media = [image_item(f"{item_id}:{n}", source, provider, "tool", model=model)]
        elif kind == "document":  # Anthropic: a PDF's page images and text, or its text
            media = media_items(f"{item_id}:{n}", block.get("source"), provider, "tool", "document")
        else:
            continue
        for item in media:
            item.part, item.label, item.source_kind = result.part, result.label, "tool_result"
            item.source_call_id, item.reference = result.source_call_id, result.reference
        out.extend(media)
    return out


def _maybe_json(args: Any) -> Any:
    if isinstance(args, str) and args[:1] == "{":
        from ctxscope.transcripts.model import loads

        try:
            return loads(args)
        except ValueError:
            return args
    return args


# A tool's part-path segment, asked for every call and result (two regular expressions
# each): a session uses a few dozen tool names.
_name = lru_cache(maxsize=1024)(_classify.tool_segment)


@lru_cache(maxsize=256)
def _part_category(part: str) -> Category:
    """The category a classifier's part path names (its first segment), looked up once a part.

    ``Category(value)`` goes through EnumType's ``__call__`` (a few thousand instructions);
    a session's segments name a handful of parts.
    """
    return Category(part.split("/", 1)[0])


# The part paths of a tool's calls and results: one string per tool, not one per item (an item
# stays in context, and so in memory, as long as the session's chain holds it: issue 14).
@lru_cache(maxsize=1024)
def _call_part(name: str) -> str:
    return f"assistant/calls/{name}"


@lru_cache(maxsize=1024)
def _result_part(name: str) -> str:
    return f"results/{name}"
