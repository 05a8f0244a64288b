"""The common model of a transcript: one :class:`TranscriptCall` per provider call.

Every reader (Claude Code, Codex, message arrays and request bodies) turns
records into calls. A call holds the live context that was sent to the
provider, as :class:`ctxscope.schema.Item` objects, and what the provider
reported about it. Readers are incremental: ``feed(record, line)`` returns
the calls that record completes, ``finish()`` the calls still pending.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Protocol

from ctxscope._record import Record
from ctxscope import jsonio as _jsonio

from ctxscope.core.apis import anthropic_usage as _anthropic_usage
from ctxscope.core.observation import Usage
from ctxscope.schema import CompactionTrigger, Item

# The one JSON switch (orjson, else json): re-exported, the readers import them from here.
loads = _jsonio.loads
dumps = _jsonio.dumps


FORMAT_CLAUDE_CODE = "claude-code"
FORMAT_CODEX = "codex"
FORMAT_MESSAGES = "messages"
FORMATS = (FORMAT_CLAUDE_CODE, FORMAT_CODEX, FORMAT_MESSAGES)


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Compaction(Record):
    """A compaction that happened before a call (its context starts anew)."""

    trigger: CompactionTrigger | None
    pre_tokens: int | None = None  # as the agent declared it, when it did
    line: int | None = None
    logical_parent: str | None = None  # Claude Code: the link the compacted chain ended at


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class TranscriptCall(Record):
    """One provider call seen in a transcript.

    ``items`` is the whole live context sent with the call. ``added`` are the
    items new since the session's previous call when ``reset`` is False, so
    that a consumer can work in proportion to what changed; when ``reset`` is
    True (first call, rewind to another branch, compaction) ``items`` must be
    taken whole.
    """

    session_id: str
    index: int
    items: Sequence[Item]  # a list, or an itemdiff.ItemRun of the reader's growing list (never changes)
    added: list[Item]
    reset: bool
    provider: str
    model: str | None = None
    usage: Usage | None = None
    compaction: Compaction | None = None
    timestamp_ns: int | None = None
    line: int | None = None
    parent_session_id: str | None = None  # a subagent's or sidechain's parent
    window_tokens: int | None = None

    @property
    def reported_tokens(self) -> int | None:
        return self.usage.reported_input if self.usage is not None else None


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Problem(Record):
    """Something wrong in the input, for a one-line message ``path:line: message``."""

    line: int | None
    message: str


class Reader(Protocol):
    format: str
    records: int  # well-formed records taken
    problems: list[Problem]

    def feed(self, record: Any, line: int) -> list[TranscriptCall]: ...

    def finish(self) -> list[TranscriptCall]: ...


def record_type(record: Any, line: int, problems: list[Problem]) -> str | None:
    """The ``type`` of a JSONL record; None, with the problem noted, when it is not an object with one."""
    if not isinstance(record, dict):
        problems.append(Problem(line, f"expected a JSON object, got {type(record).__name__}"))
        return None
    kind = record.get("type")
    if not isinstance(kind, str):
        problems.append(Problem(line, "record without a type, skipped"))
        return None
    return kind


def note_new_content(kind: str, line: int, said: set[str], problems: list[Problem], where: str) -> None:
    """Say once a file that content of a type this version does not know was counted as its JSON.

    A block or item type inside a message (a new Anthropic block, a new Codex response item) may be
    context: it is counted by the rule request bodies follow (docs/items.md, "Nothing is dropped"),
    and said, since the count is then only as good as the JSON's length.
    """
    key = "content:" + kind  # the record types' set, kept apart from their names
    if key in said:
        return
    said.add(key)
    problems.append(Problem(line, f"content type {kind!r} is new to ctxscope: counted as its JSON in {where} "
                                  "(said once a file)"))


def note_new_type(kind: str, line: int, said: set[str], problems: list[Problem]) -> None:
    """Say once a file that a record type this version does not know was read as carrying no context.

    Agents add record types with new versions (Claude Code's titles, modes, links...): they are read,
    never an error, but not in silence, since one of them may one day carry context.
    """
    if kind in said:
        return
    said.add(kind)
    problems.append(Problem(line, f"record type {kind!r} is new to ctxscope: read as carrying no context "
                                  "(said once a file)"))


def content_digest(text: str) -> str:
    """A short digest of content, to tell equal bodies apart from different ones, within this process.

    A transcript item's digest is only ever compared (the item diff, the
    ledger's counts, the waste groups) and never written out: waste names a
    body-keyed group by its tool, never by the digest. So it is Python's own
    string hash (64-bit SipHash, computed in C straight on the string, no
    UTF-8 copy) in hex, not a BLAKE2b of the text: this CPython's
    ``_blake2`` is the portable reference code, and on the bench's default
    session its digests were ~12% of ``analyze``'s instructions. It differs
    between processes (``PYTHONHASHSEED``); nothing keeps it across one.
    """
    return hex(hash(text))


def parse_timestamp_ns(value: Any) -> int | None:
    """Nanoseconds since the epoch from an ISO 8601 string (``Z`` allowed), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        text = value[:-1] + "+00:00" if value.endswith("Z") else value
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return int(moment.timestamp() * 1_000_000) * 1000


def as_int(value: Any) -> int:
    """A usage count as an int: missing or malformed counts are 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value:
        return max(0, int(value))
    return 0


def anthropic_usage(usage: dict[str, Any]) -> Usage:
    """Anthropic usage (Claude Code records it as the API returns it): :mod:`ctxscope.core.apis.anthropic_usage`."""
    return _anthropic_usage.usage(usage) or Usage()
