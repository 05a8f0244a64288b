"""Provider framing of a session's successive requests, in proportion to what is new.

:func:`ctxscope.core.framing.framing_items` walks every message of a request: on a
2,000-message conversation that is 3 ms (OpenAI chat) to 6 ms (Anthropic) a
request, ten times the tracker's whole per-call budget. The framing of a
message depends only on that message and the tool calls before it, so
:class:`FramingCache` (one per session) keeps each message's contribution and
reuses it for the unchanged prefix of the next request's messages (one
C-level comparison of the message list with the previous one, as
:class:`ctxscope.core.items.RequestExtractor` does); only new or changed messages,
and always the last previously seen one (an agent may append a block to it in
place), are walked. The head (tools, tool choice, response format, hidden
prompt) is computed by :func:`ctxscope.core.framing.framing_parts` itself, on the
body without its messages, and cached while it stays equal.

The result equals :func:`ctxscope.core.framing.framing_items` of the whole body
(``tests/telemetry/test_selfcal_live.py`` checks it on every corpus recording and on
edited histories); the rules and their sources are those of the sibling
modules (``openai_chat``, ``anthropic_messages``, ...). One deliberate
difference: an OpenAI tool result is named after a tool call *before* it
(:func:`ctxscope.core.framing.openai_framing` looks at every call of the request; a
result before its call does not happen in a valid conversation).

A message object edited in place deep in the history (same object, another
role or other tool calls) keeps its old framing until it leaves the prefix;
content edits (clearing an old tool result) do not change framing. A tool
call id used by two messages is forgotten when the later one leaves the
history (providers' ids are unique).

Memory: about 130 KiB for a 2,000-message history (a reference and a small
record per message; messages framed alike share one record).

Pure: imports neither OpenTelemetry nor a provider SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ctxscope.core.apis import TEMPLATE_ANTHROPIC, WireFormat
from ctxscope.core.items import first_unequal
from ctxscope.core.payload import as_list as _as_list
from ctxscope.schema import Item
from ctxscope.core.framing.anthropic_messages import anthropic_message_framing
from ctxscope.core.framing.body_fields import rules_of
from ctxscope.core.framing.openai_chat import OPENAI_TOKENS_PER_MESSAGE, openai_message_framing, responses_message
from ctxscope.core.framing.parts import CountFn, FramingPart, parts_to_items
from ctxscope.core.framing.request import framing_parts

__all__ = ["FramingCache"]

# Memoised counts of framing strings (roles, headers, wrappers with a tool name):
# a session uses a handful; past this many the memo starts again.
_MEMO_LIMIT = 4096


@dataclass(slots=True)
class _Contribution:
    """What one message adds to the request's framing."""

    tokens: int = 0  # "messages" part (OpenAI) / turn prefixes (Anthropic)
    call_tokens: int = 0  # Anthropic tool-call wrappers
    result_tokens: int = 0  # Anthropic tool-result wrappers
    systems: int = 0  # OpenAI: 1 for a system or developer message (the functions block is 4 smaller)
    call_ids: tuple[str, ...] = ()  # the tool calls it names, forgotten when it leaves the history

    def add(self, other: _Contribution, sign: int = 1) -> None:
        self.tokens += sign * other.tokens
        self.call_tokens += sign * other.call_tokens
        self.result_tokens += sign * other.result_tokens
        self.systems += sign * other.systems


class FramingCache:
    """The framing items of one session's requests; keep one per session (not thread-safe)."""

    def __init__(self) -> None:
        self._counter_key: Any = None
        self._api: str | None = None
        self._model: str | None = None
        self._reset()

    def framing_items(self, body: Mapping[str, Any], api: str, count_fn: CountFn, *,
                      model: str | None = None, counter_key: Any = None) -> list[Item]:
        """The framing items of ``body``, equal to :func:`ctxscope.core.framing.framing_items`.

        ``count_fn`` is the session's counter (the ledger's basis); ``counter_key``
        identifies it: when it changes (or the api or model does), every cached
        count is dropped.
        """
        if not isinstance(model, str):
            named = body.get("model")
            model = named if isinstance(named, str) else None
        wire = rules_of(api)
        if wire.framing is not None:  # a format with its own framing model: whole-request framing
            return parts_to_items(framing_parts(body, api, count_fn, model=model))
        if counter_key != self._counter_key or api != self._api or model != self._model:
            self._reset()
            self._counter_key, self._api, self._model = counter_key, api, model
        memo = self._memo
        if len(memo) > _MEMO_LIMIT:
            memo.clear()

        def count(text: str) -> int:
            value = memo.get(text)
            if value is None:
                value = memo[text] = count_fn(text)
            return value

        self._update(_message_list(body, wire), wire, count, count_fn)
        return self._parts_items(self._parts(body, api, wire, model, count))

    # -- messages ----------------------------------------------------------------------

    def _reset(self) -> None:
        self._memo: dict[str, int] = {}
        self._messages: list[Any] = []  # the previous request's messages (references, not copies)
        self._contribs: list[_Contribution] = []
        self._shapes: dict[tuple[int, ...], _Contribution] = {}  # shared contributions without tool calls
        self._names: dict[str, str] = {}  # tool call id -> tool name
        self._total = _Contribution()
        self._head_key: Any = None
        self._head_parts: list[FramingPart] = []
        self._items: dict[tuple[str, int, str], Item] = {}

    def _update(self, messages: list[Any], wire: WireFormat, count: CountFn, raw: CountFn) -> None:
        old = self._messages
        # In C: the same objects compare equal at once (rebuilt equal dicts compare
        # deeply); only a changed history is scanned for its first change.
        keep = first_unequal(messages, old, 0, min(len(old), len(messages)))
        # The last message seen before may have been extended in place: walk it again.
        if keep and keep == len(old):
            keep -= 1
        for contribution in islice(self._contribs, keep, None):
            self._total.add(contribution, -1)
            for call_id in contribution.call_ids:
                self._names.pop(call_id, None)
        del self._contribs[keep:]
        typed = wire.typed_items
        anthropic = wire.template == TEMPLATE_ANTHROPIC
        for message in islice(messages, keep, None):
            if typed:
                message = _responses_message(message)
            if message is None or isinstance(message, (str, int, float)):
                contribution = _Contribution()  # body_fields.messages_of skips these
            elif anthropic:
                contribution = _anthropic_message(message, count, raw, self._names)
            else:
                contribution = _openai_message(message, count, self._names)
            if not contribution.call_ids:
                # Most messages frame alike (a user turn: 3 + "user"): one shared object each.
                shape = (contribution.tokens, contribution.call_tokens, contribution.result_tokens,
                         contribution.systems)
                contribution = self._shapes.setdefault(shape, contribution)
            self._contribs.append(contribution)
            self._total.add(contribution)
        self._messages = messages

    # -- parts -------------------------------------------------------------------------

    def _parts(self, body: Mapping[str, Any], api: str, wire: WireFormat, model: str | None,
               count: CountFn) -> list[FramingPart]:
        total = self._total
        messages = total.tokens
        anthropic = wire.template == TEMPLATE_ANTHROPIC
        if wire.instructions_field and body.get(wire.instructions_field):
            # openai_chat._typed_messages: instructions are a developer message.
            messages += OPENAI_TOKENS_PER_MESSAGE + count("developer")
        out: list[FramingPart] = []
        for piece in self._head(body, api, wire, model, count):
            if piece.key == "messages":
                out.append(FramingPart("messages", messages))
            elif piece.key == "tool-calls":
                continue  # never in the head: it has no messages
            else:
                out.append(piece)
            if piece.key == "priming" and anthropic and (total.call_tokens or total.result_tokens):
                out.append(FramingPart("tool-calls", max(0, total.call_tokens + total.result_tokens)))
        return out

    def _head(self, body: Mapping[str, Any], api: str, wire: WireFormat, model: str | None,
              count: CountFn) -> list[FramingPart]:
        """framing_parts of the body without its messages, cached while the head stays equal.

        One system message stands in for the real ones (OpenAI): only whether
        there is one changes the head (the functions block, the hidden prompt).
        """
        has_system = self._total.systems > 0 or bool(wire.instructions_field and body.get(wire.instructions_field))
        tools = body.get("tools")
        # A shallow copy: a tool appended to the same list in place is noticed.
        key = (has_system, tuple(tools) if isinstance(tools, list) else tools, body.get("tool_choice"),
               body.get("response_format"), body.get("text"))
        if key == self._head_key:
            return self._head_parts
        head = {k: v for k, v in body.items() if k not in ("messages", "input", "instructions")}
        # (Anthropic's system prompt is no message: nothing stands in for it.)
        stand_in = [{"role": "system"}] if has_system and wire.template != TEMPLATE_ANTHROPIC else []
        head[wire.conversation_field] = stand_in
        parts = framing_parts(head, api, count, model=model)
        self._head_key, self._head_parts = key, parts
        return parts

    def _parts_items(self, parts: list[FramingPart]) -> list[Item]:
        """Items of the parts: the same objects as last time for unchanged parts (the ledger skips them)."""
        items: list[Item] = []
        fresh: dict[tuple[str, int, str], Item] = {}
        for piece in parts:
            key = (piece.key, piece.tokens, piece.part)
            item = self._items.get(key) or parts_to_items([piece])[0]
            fresh[key] = item
            items.append(item)
        self._items = fresh
        return items


def _message_list(body: Mapping[str, Any], wire: WireFormat) -> list[Any]:
    """The messages (chat, Anthropic) or typed input items (Responses) of a body, as a list."""
    value = body.get(wire.conversation_field)
    if wire.typed_items and isinstance(value, str):
        return [_STRING_INPUT]
    return list(_as_list(value) or ())


_STRING_INPUT = {"role": "user"}  # a Responses string input is one user message


# ---------------------------------------------------------------------------
# One message's framing (the rules of the framing modules, message by message)
# ---------------------------------------------------------------------------

def _openai_message(message: Any, count: CountFn, names: dict[str, str]) -> _Contribution:
    """openai_chat.openai_message_framing as a contribution (call names registered as they come)."""
    tokens, role, call_ids = openai_message_framing(message, count, names, register=True)
    return _Contribution(tokens=tokens, systems=int(role in ("system", "developer")), call_ids=call_ids)


def _responses_message(item: Any) -> Any:
    """A Responses input item as the chat-like message framing makes of it."""
    return item if item is _STRING_INPUT else responses_message(item)


def _anthropic_message(message: Any, count: CountFn, raw: CountFn, names: dict[str, str]) -> _Contribution:
    """anthropic_messages.anthropic_message_framing as a contribution."""
    turn, calls, results, call_ids = anthropic_message_framing(message, count, raw, names)
    return _Contribution(tokens=turn, call_tokens=calls, result_tokens=results, call_ids=call_ids)
