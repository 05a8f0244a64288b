"""Request bodies -> items, for every wire format of :mod:`ctxscope.core.apis`.

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
down in docs/items.md. The walking of each API's messages lives in its
module of :mod:`ctxscope.core.apis` (its ``WireFormat``'s ``conversation``,
``message`` and ``head``, all appending to one ``apis._builder.Builder``),
the reading of values and media estimates in :mod:`ctxscope.core.payload`. Pure:
no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import json
from itertools import compress, count, islice
from operator import ne
from typing import Any, Mapping

from ctxscope.core import framing as _framing
from ctxscope.core.payload import DOCUMENT_PAGE_TOKENS, compact_json
from ctxscope.core import apis
from ctxscope.core.apis import APIS
from ctxscope.core.payload import get as _get
from ctxscope.core.payload import plain as _plain
from ctxscope.core.apis import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES
from ctxscope.core.apis._builder import Builder, Ids, keyed_hash
from ctxscope.schema import Item

__all__ = [
    "API_ANTHROPIC",
    "API_OPENAI_CHAT",
    "API_OPENAI_RESPONSES",
    "APIS",
    "DOCUMENT_PAGE_TOKENS",
    "RequestExtractor",
    "compact_json",
    "detect_api",
    "item_id",
    "items_from_request",
    "tool_definition_text",
]


def item_id(role: str, content: str) -> str:
    """The id of an item without a provider id: a keyed hash of role and content."""
    return "h:" + keyed_hash(role, content)


def tool_definition_text(api: str, tool: Any) -> str:
    """The text counted for one tool definition: the provider's own rendering of it.

    Deferred tools (``defer_loading``) are not in the prompt until searched
    for: their catalog entry (the name) is counted. Other tools are rendered
    as the provider writes them into the prompt (:func:`ctxscope.core.framing.tool_definition_text`:
    OpenAI's ``namespace functions`` TypeScript, Claude's ``<function>`` JSON;
    server tools as their compact JSON).
    """
    if _get(tool, "defer_loading") is True:
        return str(_get(tool, "name") or "")
    value = _plain(tool)
    if isinstance(value, Mapping):
        return _framing.tool_definition_text(api, value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def detect_api(body: Mapping[str, Any]) -> str:
    """Which API a request body is for; ValueError when it is none of them (:func:`ctxscope.core.apis.detect`)."""
    return apis.detect(body)


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
    # Leaves are returned in place without a call: most values are strings.
    if kind is dict:
        return {k: _snapshot(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if kind is list:
        return [_snapshot(v) if type(v) in _CONTAINERS else v for v in value]
    if kind is tuple:
        return tuple([_snapshot(v) if type(v) in _CONTAINERS else v for v in value])
    return value


_CONTAINERS = frozenset((dict, list, tuple))

# Which old messages are compared with their snapshots (docs/items.md, "What is
# noticed"): the last DEEP_CHECK_WINDOW on every call, and SWEEP_PER_CALL of the
# older ones in rotation, so an in-place edit anywhere is seen within
# ceil(older / SWEEP_PER_CALL) calls. The rest is checked by object identity.
DEEP_CHECK_WINDOW = 64
SWEEP_PER_CALL = 128


def first_unequal(new: list[Any], old: list[Any], start: int, stop: int) -> int:
    """The first index in ``[start, stop)`` where ``new`` and ``old`` differ (``!=``), else ``stop``."""
    # A whole-slice comparison first (identical elements compare in C without
    # touching the objects); the element scan only runs where something differs.
    if new[start:stop] == old[start:stop]:
        return stop
    return next(compress(count(start), map(ne, islice(new, start, stop), islice(old, start, stop))), stop)


def _message_items(builder: Builder, fn: Any, msg: Any, i: int, old_snaps: list[Any], old_ends: list[int],
                   old_items: list[Item]) -> Any:
    """Append the items of message ``i`` to ``builder.out`` and return its snapshot.

    A message equal to the previous request's snapshot at the same position
    keeps that request's items (same objects: the ledger skips them), unless
    one of their ids is now taken by a new item before it: then it is
    extracted afresh.
    """
    if i < len(old_snaps) and msg == old_snaps[i]:
        chunk = old_items[(old_ends[i - 1] if i else 0):old_ends[i]]
        if builder.ids.register_all(chunk):
            builder.out.extend(chunk)
            return old_snaps[i]
    fn(builder, msg)
    return _snapshot(msg)


class RequestExtractor:
    """Items of a session's successive requests, reusing those of unchanged messages.

    Keep one per session (not thread-safe: calls of one session are serialised
    by the caller). A request that repeats the previous one's message objects
    and appends new ones costs one C-level identity comparison of the history,
    a deep comparison of the last :data:`DEEP_CHECK_WINDOW` messages and of
    :data:`SWEEP_PER_CALL` older ones (in rotation) with their snapshots, plus
    the extraction of the new messages. Anything else (an edited, removed or
    inserted message, a new system prompt or tool list) is handled too: the
    messages before the first change keep their items, later ones keep theirs
    where they still equal the snapshot at their position.
    """

    def __init__(self) -> None:
        self._api: str | None = None
        self._model: str | None = None  # media rules differ by model family (ctxscope.core.media)
        self._head_key: Any = None
        self._head_items: list[Item] = []
        self._msgs: list[Any] = []           # the previous request's message objects
        self._snaps: list[Any] = []          # snapshot of each (_snapshot)
        self._ends: list[int] = []           # end offset of each message's items in _msg_items
        self._msg_items: list[Item] = []
        self._ids = Ids()
        self._sweep = 0                      # where the rotating deep check starts next

    def extract(self, body: Mapping[str, Any], api: str | None = None) -> list[Item]:
        """The items of ``body``; items of unchanged messages are the previous call's objects."""
        api = api or detect_api(body)
        messages = apis.known(api).conversation(body)
        head_values = (_get(body, "system"), _get(body, "instructions"), _get(body, "tools"),
                       _get(body, "mcp_servers"), _get(body, "systemInstruction"))  # the last: Gemini
        model = _get(body, "model")
        model = model if isinstance(model, str) else None
        if api != self._api or model != self._model or head_values != self._head_key:
            return self._rebuild(body, api, _snapshot(head_values), messages, model)
        n = len(self._msgs)
        checked = self._checked_ranges(n)
        snaps = self._snaps
        # ``==`` of two lists passes identical elements without touching them; a
        # new but equal message object (a framework rebuilding its dicts) is
        # compared with the old object.
        if (len(messages) >= n and messages[:n] == self._msgs
                and all(messages[a:b] == snaps[a:b] for a, b in checked)):
            kept = n  # the common case: the same history plus new messages
        else:
            kept = self._unchanged_prefix(messages, checked)
        self._extend(api, messages, kept)
        return self._head_items + self._msg_items

    def _checked_ranges(self, n: int) -> tuple[tuple[int, int], ...]:
        """The message ranges compared deeply this call: the window, and the sweep's next slice."""
        tail = max(0, n - DEEP_CHECK_WINDOW)
        if not tail:
            return ((0, n),)
        start = self._sweep if self._sweep < tail else 0
        stop = min(tail, start + SWEEP_PER_CALL)
        self._sweep = stop
        return ((tail, n), (start, stop))

    def _unchanged_prefix(self, messages: list[Any], checked: tuple[tuple[int, int], ...]) -> int:
        """How many leading messages are unchanged (same or equal objects, equal to their
        snapshots where checked deeply)."""
        first = first_unequal(messages, self._msgs, 0, min(len(messages), len(self._msgs)))
        for a, b in checked:
            if a < first:
                first = first_unequal(messages, self._snaps, a, min(b, first))
        return first

    def _extend(self, api: str, messages: list[Any], kept: int) -> None:
        """Keep the items of messages ``[0, kept)``; compare or extract the rest."""
        old_msgs, old_snaps, old_ends, old_items = self._msgs, self._snaps, self._ends, self._msg_items
        n_old = len(old_msgs)
        ids = self._ids
        if kept < n_old:
            # Items after the first change leave; their ids are free again.
            start = old_ends[kept - 1] if kept else 0
            ids.release(old_items[start:])
            items = old_items[:start]
            msgs, snaps, ends = old_msgs[:kept], old_snaps[:kept], old_ends[:kept]
        else:
            items, msgs, snaps, ends = old_items, old_msgs, old_snaps, old_ends
        wire = apis.get(api)
        builder = Builder(api, ids, tool_definition_text, self._model, media_rules=wire.media_rules)
        builder.out = items
        fn = wire.message
        for i in range(kept, len(messages)):
            msg = messages[i]
            # Past an edit, a message still equal to the snapshot at its position keeps its items
            # (without an edit the lists are the old ones, grown in step: i is past their end).
            snaps.append(_message_items(builder, fn, msg, i, old_snaps, old_ends, old_items))
            msgs.append(msg)
            ends.append(len(items))
        self._msg_items, self._msgs, self._snaps, self._ends = items, msgs, snaps, ends

    def _rebuild(self, body: Mapping[str, Any], api: str, head_key: Any, messages: list[Any],
                 model: str | None = None) -> list[Item]:
        """A new API, model, system prompt or tool list: new head items, message items by position."""
        ids = Ids()
        wire = apis.get(api)
        builder = Builder(api, ids, tool_definition_text, model, media_rules=wire.media_rules)
        wire.head(builder, body)
        head_items = builder.out
        # Every message is compared with its snapshot here: none is kept unchecked. Another
        # model re-extracts every message: its media may be billed by another rule.
        same_api = api == self._api and model == self._model
        old_snaps = self._snaps if same_api else []
        old_ends, old_items = self._ends, self._msg_items
        fn = wire.message
        msgs: list[Any] = []
        snaps: list[Any] = []
        ends: list[int] = []
        items: list[Item] = []
        builder.out = items
        for i, msg in enumerate(messages):
            snaps.append(_message_items(builder, fn, msg, i, old_snaps, old_ends, old_items))
            msgs.append(msg)
            ends.append(len(items))
        self._api, self._model, self._head_key, self._head_items, self._ids = api, model, head_key, head_items, ids
        self._msgs, self._snaps, self._ends, self._msg_items = msgs, snaps, ends, items
        return head_items + items
