"""Claude Code session JSONL (``~/.claude/projects/<cwd>/<session>.jsonl``) -> calls.

The facts this reader follows (``shared/corpus/README.md``):

- One API response is written as several lines, one per content block,
  sharing ``message.id`` and ``requestId``: one call, emitted at its first
  line; the later lines are context for the next call.
- ``parentUuid`` forms a tree (rewinds, edits): a call's context is the chain
  walked back from its first line's parent. Only the nodes walked since the
  previous call are visited, so the work follows what is new.
- Every record with a ``uuid`` is a link of the chain, whatever its type:
  ``progress`` and ``system`` records (``stop_hook_summary``,
  ``turn_duration``) sit inside it in 2.1.x, and new versions add types.
  Only user, assistant and attachment links carry context items.
- A ``compact_boundary`` system line (``parentUuid: null``,
  ``logicalParentUuid`` naming the chain before it) cuts the chain there;
  the ``isCompactSummary`` user line after it is a summary. Any root link
  with a ``logicalParentUuid`` is such a boundary.
- A ``microcompact_boundary`` system link (2.1.9+) stays in the chain; the
  results of its ``compactedToolIds`` are sent cleared from then on (a short
  stand-in text), until a rewind goes back before it.
- Lines with ``isSidechain: true`` (subagents, old in-file sidechains) belong
  to a session of their own, keyed by ``agentId``: never added to the parent.
- Reported input = ``input_tokens + cache_creation_input_tokens +
  cache_read_input_tokens``. ``<synthetic>`` messages are not provider calls.
- The system prompt and tool schemas are not in the file: coverage is partial.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ctxscope._record import Record
from ctxscope.core.diff import ItemRun
from ctxscope.core.payload import compact_json
from ctxscope.schema import Category, CompactionTrigger, Item
from ctxscope.transcripts import _items
from ctxscope.transcripts.spill import KeyOffsets, LinkOffsets
from ctxscope.transcripts.model import (FORMAT_CLAUDE_CODE, Compaction, Problem, TranscriptCall, anthropic_usage,
                                        as_int, dumps, note_new_content, note_new_type, parse_timestamp_ns,
                                        record_type)

if TYPE_CHECKING:
    from ctxscope.transcripts.source import LineSource

PROVIDER = "anthropic"
# Record types this reader knows: the ones that carry context and those seen (../shared/corpus, versions
# 1.0 to 2.1.80) that do not. Others come with new versions: read as links of the parentUuid chain when
# they have a uuid, else as no context; said once a file.
KNOWN_TYPES = frozenset({
    "user", "assistant", "system", "progress", "attachment", "summary", "file-history-snapshot",
    "queue-operation", "permission-mode", "last-prompt", "started", "result", "worktree-state", "mode",
    "agent-name", "custom-title", "ai-title", "frame-link", "pr-link", "relocated", "bridge-session",
    "atis-latch"})
# A microcompaction (2.1.9+) clears old tool results in what is sent, keeping the messages:
# ``microcompactMetadata.compactedToolIds`` names them; their content becomes this stand-in.
MICROCOMPACT_SUBTYPE = "microcompact_boundary"
CLEARED_RESULT_TEXT = "[Old tool result content cleared]"
# Attachment types injected into context as reminders, and where they count.
# Call keys kept as strings (the calls being written: one response's lines follow each other); past
# twice this many, all but the latest go to their lines (KeyOffsets), when the file can be read again.
_RECENT_CALLS = 2048
_NO_IDS: frozenset[str] = frozenset()  # a link that clears nothing (built once, not a call a link)
# Content blocks that are a call, and block types that never reach the model: Claude Code's marker of
# a model fallback (2.1.80: ``from``, ``to``), which the API would refuse, so the harness drops it.
_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_NO_CONTEXT_BLOCKS = frozenset({"fallback"})
_ATTACHMENT_PARTS = {"skill_listing": "skills", "invoked_skills": "skills", "dynamic_skill": "skills",
                     "nested_memory": "rules", "deferred_tools_delta": "tools",
                     "mcp_instructions_delta": "system"}


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class _Node(Record):
    """A link of the parentUuid chain as ``_Session.nodes`` keeps it (off the live chain, or on it and
    not plain: a boundary, a microcompaction, the chain's first link): parent, items, line, what it marks."""

    parent: str | None
    items: tuple[Item, ...]
    offset: int = -1  # where its line starts in the file, when the reader can read it again (else -1)
    compaction: Compaction | None = None
    cleared: frozenset[str] = _NO_IDS  # a microcompaction: tool call ids whose results were cleared


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class _Session(Record):
    """One session's links and live chain.

    ``nodes`` holds the links a later call may still walk: those off the live
    chain (not reached yet, or on a branch a rewind left) and the chain's
    links a cut could not rebuild. A plain link on the chain (no compaction, no
    microcompaction, its parent the link before it) lives in the chain alone:
    its parent is the link before it and its items are its slice of
    ``items``, so a rewind that cuts it off makes its node again
    (``ClaudeCodeReader._advance``). In a session without rewinds the chain
    is the whole file, and this keeps no second copy of it (issue 14).

    When the reader can read its file again (``spill_from``), a plain link a
    cut removes from the chain (a compaction, a rewind's abandoned branch)
    gets no node: ``freed`` keeps where its line starts, 8 bytes, and a later
    walk into it parses that line again (``ClaudeCodeReader._restore``).
    """

    session_id: str
    parent_session_id: str | None
    nodes: dict[str, _Node] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)  # uuids from the root to the tip
    position: dict[str, int] = field(default_factory=dict)  # uuid -> index in chain
    counts: array[int] = field(default_factory=lambda: array("q"))  # items before chain[i] (cumulative)
    offsets: array[int] = field(default_factory=lambda: array("q"))  # chain[i]'s line offset (-1: none)
    freed: LinkOffsets = field(default_factory=LinkOffsets)  # links let go, found again by their line
    items: list[Item] = field(default_factory=list)  # the live context along the chain
    calls: int = 0
    last_root_compaction: Compaction | None = None
    cleared: list[tuple[int, frozenset[str]]] = field(default_factory=list)  # (chain position, call ids)
    stubs: dict[str, Item] = field(default_factory=dict)  # result item id -> its cleared stand-in


class ClaudeCodeReader:
    """Incremental reader: ``feed(record, line)`` returns the calls a record starts."""

    format = FORMAT_CLAUDE_CODE

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.records = 0
        self.problems: list[Problem] = []
        self._sessions: dict[str, _Session] = {}
        # One string a call (_key_of): a tuple of two strings cost twice as much, for every call of the file.
        # -> the offset of the call's first line; the older ones in _old_calls (_retire_calls).
        self._seen_calls: dict[str, int] = {}
        self._old_calls: KeyOffsets | None = None
        # The ids of the last call key taken, when both were strings (_maybe_call's later lines of a response).
        self._last_message_id: str | None = None
        self._last_request_id: str | None = None
        self._tools = _items.ToolCalls()
        self._new_types: set[str] = set()
        # The file read again by offset (spill_from), and the offset of the line being fed, which
        # the file reader sets before each feed: without a file to read again nothing is let go.
        self._lines: LineSource | None = None
        self.line_offset = -1
        self._lost = False  # a freed link not found again was said (once a file)
        self._restoring = False  # feed() is reading a freed link's line again (_restore)
        # call id -> line, of the tool calls _let_go gave up and of those a later call of the id replaced
        self._freed_calls: LinkOffsets | None = None

    # -- public -------------------------------------------------------------

    def feed(self, record: Mapping[str, Any], line: int) -> list[TranscriptCall]:
        # record_type's answer for the usual record (an object with a string type), without the call.
        kind = record.get("type") if type(record) is dict else None
        if not isinstance(kind, str):
            kind = record_type(record, line, self.problems)
            if kind is None:
                return []
        self.records += 1
        if kind not in KNOWN_TYPES:
            note_new_type(kind, line, self._new_types, self.problems)
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            return []  # not a link of the chain (snapshots, queue operations, titles): not context
        # Any record with a uuid is a link of the parentUuid chain, whatever its
        # type (progress, system, attachment and the types new versions add):
        # the chain is walked through it. Only some links carry context.
        base = record.get("sessionId")
        # _session's usual case written out (a known string sessionId, not a sidechain): once a link.
        session = self._sessions.get(base) if type(base) is str and record.get("isSidechain") is not True else None
        if session is None:
            session = self._session(record)
        parent = record.get("parentUuid")
        parent = parent if isinstance(parent, str) else None
        offset = self.line_offset
        # Only a system line or a new root can be a boundary (_compaction), and only a system
        # line a microcompaction: most lines are neither, and go straight to their kind.
        if kind == "system" or parent is None:
            compaction = _compaction(record, kind, parent, line)
            if compaction is not None:
                session.nodes[uuid] = _Node(None, (), offset, compaction)
                return []
            if kind == "system" and record.get("subtype") == MICROCOMPACT_SUBTYPE:
                session.nodes[uuid] = _Node(parent, (), offset, None, _cleared_ids(record))
                return []
        if kind == "attachment":
            session.nodes[uuid] = _Node(parent, self._attachment_items(uuid, record.get("attachment")), offset)
            return []
        message = record.get("message") if kind == "assistant" or kind == "user" else None
        if not isinstance(message, dict):
            session.nodes[uuid] = _Node(parent, (), offset)
            return []
        calls: list[TranscriptCall] = []
        if kind == "assistant":
            if not self._restoring:
                call = self._maybe_call(session, record, message, parent, line)
                if call is not None:
                    calls.append(call)
            items = self._assistant_items(uuid, message, line)
        else:
            items = self._user_items(uuid, record, message, line)
        session.nodes[uuid] = _Node(parent, items, offset)
        return calls

    def finish(self) -> list[TranscriptCall]:
        return []

    def spill_from(self, lines: LineSource) -> None:
        """Let go of the links a cut removes, and read their lines from ``lines`` when walked again.

        The file reader calls it for a file it can read again (a regular file), and sets
        ``line_offset`` before each ``feed``; without it the reader keeps every link (a pipe).
        """
        self._lines = lines

    # -- links ------------------------------------------------------------------

    def _restore(self, session: _Session, uuid: str) -> _Node | None:
        """A link a cut let go, parsed again from its line (None when the file no longer has it).

        Through :meth:`feed` itself, so its node is the one the first read made; ``_restoring``
        makes that read start no call and note no tool call (the first read did both).
        """
        lines = self._lines
        assert lines is not None
        for offset in session.freed.find(uuid):
            record = lines.record(offset)
            if type(record) is not dict or record.get("uuid") != uuid or not isinstance(record.get("type"), str):
                continue  # another uuid of the same hash, or a file rewritten since
            records, line_offset = self.records, self.line_offset
            self._restoring, self.line_offset = True, offset
            try:
                self.feed(record, 0)
            finally:
                self._restoring, self.line_offset, self.records = False, line_offset, records
            return session.nodes.get(uuid)
        if session.freed.find(uuid) and not self._lost:
            self._lost = True
            self.problems.append(Problem(None, f"link {uuid} is no longer where it was read (the file changed): "
                                               "a call walking back into it goes without what it held"))
        return None

    def held(self, session_id: str) -> tuple[int, int]:
        """(items the reader holds for the session, links it let go to the file): what cuts freed (issue 14).

        The items are the live chain's and those of the links off it that it still keeps.
        """
        session = self._sessions[session_id]
        off_chain = sum(len(node.items) for uuid, node in session.nodes.items() if uuid not in session.position)
        return len(session.items) + off_chain, len(session.freed)

    # -- calls ------------------------------------------------------------------

    def _maybe_call(self, session: _Session, record: Mapping[str, Any], message: Mapping[str, Any],
                    parent: str | None, line: int) -> TranscriptCall | None:
        model = message.get("model")
        if model == "<synthetic>":
            return None
        # A response's later lines (one a content block) follow its first: the same two ids as the
        # last key taken, which is in _seen_calls (no retirement since: only a new key retires).
        message_id = message.get("id")
        if type(message_id) is str and message_id == self._last_message_id \
                and record.get("requestId") == self._last_request_id:
            return None
        key = _key_of(record, message)
        seen = self._seen_calls
        if key in seen:
            self._remember_ids(message_id, record.get("requestId"))
            return None
        if self._old_calls is not None and self._called_before(key):
            return None
        seen[key] = self.line_offset
        self._remember_ids(message_id, record.get("requestId"))
        if len(seen) > 2 * _RECENT_CALLS and self._lines is not None:
            self._retire_calls()
        added, reset, compaction = self._advance(session, parent)
        usage_data = message.get("usage")
        usage = anthropic_usage(usage_data) if isinstance(usage_data, dict) else None
        # The live context as a run of the session's list: O(1) however long it is.
        items: Sequence[Item] = ItemRun(session.items)
        if session.cleared:
            items, added, reset = self._clear(session, items, added, reset)
        # Positional, in TranscriptCall's field order (session_id, index, items, added, reset, provider,
        # model, usage, compaction, timestamp_ns, line, parent_session_id): one a call.
        call = TranscriptCall(
            session.session_id, session.calls, items, added, reset, PROVIDER,
            model if isinstance(model, str) else None, usage, compaction,
            parse_timestamp_ns(record.get("timestamp")), line, session.parent_session_id)
        session.calls += 1
        return call

    def _remember_ids(self, message_id: Any, request_id: Any) -> None:
        """The ids of the key in ``_seen_calls`` last taken, when both are strings (equal ids, equal key)."""
        if type(message_id) is str and type(request_id) is str:
            self._last_message_id, self._last_request_id = message_id, request_id
        else:
            self._last_message_id = self._last_request_id = None

    def _retire_calls(self) -> None:
        """All call keys but the latest _RECENT_CALLS to their lines: a hash and an offset each."""
        items = list(self._seen_calls.items())
        old = items[:-_RECENT_CALLS]
        if self._old_calls is None:
            self._old_calls = KeyOffsets()
        self._old_calls.add([k for k, _ in old], [o for _, o in old])
        # A new dict, not the old one with its first keys deleted (iterating it would scan their slots).
        self._seen_calls = dict(items[-_RECENT_CALLS:])

    def _called_before(self, key: str) -> bool:
        """Whether a call key retired by _retire_calls is ``key`` (its line read again to tell)."""
        assert self._old_calls is not None and self._lines is not None
        offsets = self._old_calls.find(key)
        if not offsets:
            return False
        lines = self._lines
        try:
            for offset in offsets:
                record = lines.record(offset)
                message = record.get("message") if type(record) is dict else None
                if isinstance(message, dict) and _key_of(record, message) == key:
                    return True
            return False
        finally:
            lines.close()

    def _advance(self, session: _Session, tip: str | None) -> tuple[list[Item], bool, Compaction | None]:
        """Move the live chain to end at ``tip``: the items added, whether it was reset, a compaction."""
        walked: list[str] = []
        nodes, position = session.nodes, session.position
        current = tip
        seen: set[str] = set()
        restored = False
        while True:
            while current is not None and current not in position:
                walking = nodes.get(current)
                if walking is None or current in seen:
                    break
                seen.add(current)  # a cycle in a corrupt file must not loop forever
                walked.append(current)
                current = walking.parent
            if current is None or current in position or current in seen or not session.freed:
                break
            # A link a cut let go (_Session.freed): its line parsed again, a node until it is walked.
            node = self._restore(session, current)
            restored = True
            if node is None:
                break
            nodes[current] = node
        if restored and self._lines is not None:
            self._lines.close()
        reset = session.calls == 0
        fork = position.get(current) if current is not None else None
        keep = fork + 1 if fork is not None else 0
        if keep < len(session.chain):
            reset = True  # a rewind or a new root: items after the fork leave the context
            chain, counts = session.chain, session.counts
            if self._lines is not None:
                self._let_go(session, keep, seen)  # the file can be read again: offsets, not nodes
            else:
                for i in range(keep, len(chain)):
                    if chain[i] not in nodes:  # a plain link (see _Session): its node again, a later call may walk it
                        end = counts[i + 1] if i + 1 < len(counts) else len(session.items)
                        nodes[chain[i]] = _Node(chain[i - 1], tuple(session.items[counts[i]:end]))
            if session.cleared:
                session.cleared = [(p, ids) for p, ids in session.cleared if p < keep]
            for uuid in session.chain[keep:]:
                del position[uuid]
            del session.chain[keep:]
            cut = session.counts[keep] if keep < len(session.counts) else len(session.items)
            del session.counts[keep:]
            del session.offsets[keep:]
            # A new list, never a cut one: calls already handed out hold runs of the old list.
            session.items = session.items[:cut]
        compaction = None
        # The session's lists read once: this runs for every link of the file. The chain's length,
        # its last link and the items' count are kept as the walk goes, the walked links put on the
        # chain at once after it, and the items added are the list's new end.
        chain, counts, offsets, items = session.chain, session.counts, session.offsets, session.items
        start = count = len(items)
        at = len(chain)
        last = chain[-1] if at else None
        walked.reverse()
        for uuid in walked:
            node = nodes[uuid]
            node_compaction, cleared = node.compaction, node.cleared
            if node_compaction is None and not cleared:
                # A plain link lives in the chain alone from now on (_Session); the first one keeps its
                # node, its parent may be a link this file never had.
                if at and node.parent == last:
                    del nodes[uuid]
            else:
                if node_compaction is not None:
                    compaction = node_compaction
                if cleared:
                    session.cleared.append((at, cleared))
                    reset = True  # results already in context change: take the context whole
            position[uuid] = at
            at += 1
            last = uuid
            counts.append(count)
            offsets.append(node.offset)
            node_items = node.items
            if node_items:
                items.extend(node_items)
                count += len(node_items)
        chain.extend(walked)
        if compaction is not None:
            reset = True
        return (list(items) if reset else items[start:]), reset, compaction

    def _let_go(self, session: _Session, keep: int, walked: set[str]) -> None:
        """A cut at ``keep``: the links it removes, and every link off the chain no walk is on, to their lines.

        The plain links cut (their items are slices of the chain's) get no node: their uuid and
        line offset go to ``freed``. So do the links off the chain, which a cut leaves behind (the
        end of an abandoned branch, the lines after a compacted chain's last call, a chain's
        first link): any could be walked again, none is on the walk being made (``walked``).
        Compaction and microcompaction links keep their small nodes (a compaction's line
        number, the cleared ids). The tool calls among the items let go are forgotten by
        ``_tools`` and found again by their line (``_freed_calls``) when a result names one.
        """
        chain, counts, offsets, items = session.chain, session.counts, session.offsets, session.items
        nodes = session.nodes
        uuids: list[str] = []
        lines: list[int] = []
        call_ids: list[str] = []
        call_lines: list[int] = []
        let_go = self._tools.let_go
        for i in range(keep, len(chain)):
            end = counts[i + 1] if i + 1 < len(counts) else len(items)
            if end > counts[i]:
                ids = let_go(items[counts[i]:end], offsets[i])
                call_ids.extend(ids)
                call_lines.extend([offsets[i]] * len(ids))
            if chain[i] not in nodes:
                uuids.append(chain[i])
                lines.append(offsets[i])
        position = session.position
        for uuid, node in list(nodes.items()):
            if uuid in walked or node.offset < 0 or node.compaction is not None or node.cleared:
                continue
            if position.get(uuid, keep) >= keep:  # not on the part of the chain the cut keeps
                del nodes[uuid]
                uuids.append(uuid)
                lines.append(node.offset)
                if node.items:
                    ids = let_go(node.items, node.offset)
                    call_ids.extend(ids)
                    call_lines.extend([node.offset] * len(ids))
        session.freed.add(uuids, lines)
        if call_ids:
            self._free_calls(call_ids, call_lines)

    def _free_calls(self, call_ids: list[str], lines: list[int]) -> None:
        """Tool calls no note stands for any more, found again by their lines (``_freed_call``)."""
        if self._freed_calls is None:
            self._freed_calls = LinkOffsets()
        self._freed_calls.add(call_ids, lines)

    def _freed_call(self, call_id: Any) -> tuple[str, str, str | None] | None:
        """What ``_tools`` noted for a result's call as its line is read, when the note standing is not it.

        The note standing is the latest call line of that id; a line read again (``_restoring``)
        was first named after the latest before it: the lines ``_let_go`` gave up or a later call
        of the same id replaced (``_freed_calls``), read again. None: the standing note is it.
        """
        if not isinstance(call_id, str):
            return None
        note = self._tools.note(call_id)
        before = self.line_offset if self._restoring else None
        if note is not None and (before is None or note[3] < before):
            return None
        lines = self._lines
        assert lines is not None
        found = None
        freed = self._freed_calls.find(call_id) if self._freed_calls is not None else []
        for offset in freed:  # the latest line first: the note that stood
            if before is not None and offset >= before:
                continue
            record = lines.record(offset)
            message = record.get("message") if type(record) is dict else None
            if not isinstance(message, dict):
                continue
            for item_id, kind, block in _blocks(str(record.get("uuid")), message.get("content")):
                if kind in _CALL_BLOCKS:
                    block_id = block.get("id")
                    if (block_id if isinstance(block_id, str) else item_id) == call_id:
                        tool = str(block.get("name") or "unknown")  # the line's last block of the id noted last
                        found = (call_id, tool, _items.call_item(call_id, tool, block.get("input") or {})[1])
            if found is not None:
                break
        if freed:
            lines.close()
        if found is None and note is not None:
            return (call_id, "unknown", None)  # the only call of that id came after this line
        return found

    def _clear(self, session: _Session, items: Sequence[Item], added: list[Item],
               reset: bool) -> tuple[list[Item], list[Item], bool]:
        """The context with the results a microcompaction cleared replaced by their stand-in."""
        ids = frozenset().union(*(c for _, c in session.cleared))
        stubs = session.stubs
        out = []
        for item in items:
            if item.category is Category.RESULTS and item.source_call_id in ids:
                stub = stubs.get(item.id)
                if stub is None:
                    # One object per result: the ledger sees it unchanged from call to call.
                    stub = stubs[item.id] = _items.result_item(
                        item.id, item.label, CLEARED_RESULT_TEXT, item.source_call_id, item.reference)
                item = stub
            out.append(item)
        return out, (out if reset else added), reset

    # -- sessions -----------------------------------------------------------------

    def _session(self, record: Mapping[str, Any]) -> _Session:
        base = record.get("sessionId")
        # The usual link (a string sessionId, not a sidechain): its session by that key, as below.
        if type(base) is str and base and record.get("isSidechain") is not True:
            session = self._sessions.get(base)
            if session is not None:
                return session
        base = base if isinstance(base, str) and base else (self.name.rsplit(".", 1)[0] or "session")
        key, parent = base, None
        if record.get("isSidechain") is True:
            agent = record.get("agentId")
            key = f"{base}/agent-{agent}" if isinstance(agent, str) and agent else f"{base}/sidechain"
            parent = base
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(key, parent)
        return session

    # -- items ------------------------------------------------------------------

    def _assistant_items(self, uuid: str, message: Mapping[str, Any], line: int) -> tuple[Item, ...]:
        content = message.get("content")
        if isinstance(content, str):
            return (_items.text_item(f"{uuid}:0", content, "assistant"),) if content else ()
        if not isinstance(content, list):
            return ()
        out: list[Item] = []
        # _blocks and the text test written out (every assistant line comes here), a block's id
        # ``<uuid>:<index>`` built only where an item takes it (a tool call has its own).
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" or kind == "thinking":
                text = block.get(kind)
                if isinstance(text, str) and text:
                    item_id = f"{uuid}:{index}"
                    out.append(_items.text_item(item_id, text, "assistant") if kind == "text"
                               else _items.thinking_item(item_id, text))
            elif kind == "tool_use" or kind == "server_tool_use" or kind == "mcp_tool_use":
                call_id = block.get("id")
                if not isinstance(call_id, str):
                    call_id = f"{uuid}:{index}"
                name = block.get("name")
                tool = name if type(name) is str and name else str(name or "unknown")
                args = block.get("input") or {}
                if self._restoring:  # noted when first read; a later call of the same id stands
                    out.append(_items.call_item(call_id, tool, args)[0])
                    continue
                if self._lines is not None:
                    note = self._tools.note(call_id)
                    if note is not None and note[3] != self.line_offset:
                        # The same id written again (a copy, a retry): the line it replaces names
                        # the results read before this one, when they are read again (_freed_call).
                        self._free_calls([call_id], [note[3]])
                out.append(self._tools.call_item(call_id, tool, args, self.line_offset))
            else:
                out.extend(self._other_block(f"{uuid}:{index}", kind, block, "assistant", line))
        return tuple(out)

    def _user_items(self, uuid: str, record: Mapping[str, Any], message: Mapping[str, Any],
                    line: int) -> tuple[Item, ...]:
        content = message.get("content")
        summary = record.get("isCompactSummary") is True
        if isinstance(content, str):
            return tuple(_items.text_items(f"{uuid}:0", content, "user", summary=summary)) if content else ()
        if not isinstance(content, list):
            return ()
        out: list[Item] = []
        # _blocks written out (see _assistant_items); a tool result is the usual block.
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                body = block.get("content")
                use_id = block.get("tool_use_id")
                call = self._freed_call(use_id) if self._freed_calls is not None or self._restoring else None
                body_text = _items.result_text(body, line, self._new_types, self.problems)
                result = self._tools.result_items(use_id, body_text, lambda: f"{uuid}:{index}",  # noqa: B023 - called at once, or never
                                                  call)
                out.extend(result)
                if isinstance(body, list):
                    out.extend(_items.result_media(f"{uuid}:{index}", body, PROVIDER, result[0]))
            elif kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    out.extend(_items.text_items(f"{uuid}:{index}", text, "user", summary=summary))
            elif kind == "image" or kind == "document":
                out.extend(_items.media_items(f"{uuid}:{index}", block.get("source"), PROVIDER, "user", kind))
            else:
                out.extend(self._other_block(f"{uuid}:{index}", kind, block, "user", line))
        return tuple(out)

    def _other_block(self, item_id: str, kind: Any, block: dict[str, Any], role: str, line: int) -> list[Item]:
        """A block the loops above do not name: Anthropic's rarer types by the rule request bodies follow
        (``core.apis._builder.content``), one this version does not know counted as its JSON, said once."""
        name = kind if isinstance(kind, str) else "unknown"  # a list or a number names no type
        if name == "redacted_thinking":
            return [_items.encrypted_item(item_id, block.get("data"), "assistant/thinking", "thinking")]
        if name == "compaction":  # server-side compaction: the summary standing for what it replaced
            text = block.get("content")
            return _items.text_items(item_id, text, role, summary=True) if isinstance(text, str) and text else []
        if name.endswith("_tool_result"):
            # An MCP connector's or a server tool's result (web search, code execution...), in the
            # assistant turn: named after its call, as a tool_result is.
            body = block.get("content")
            mcp_or_text = name == "mcp_tool_result" or isinstance(body, str)
            text = _items.result_text(body, line, self._new_types, self.problems) if mcp_or_text else compact_json(body)
            use_id = block.get("tool_use_id")
            call = self._freed_call(use_id) if self._freed_calls is not None or self._restoring else None
            items = self._tools.result_items(use_id, text, lambda: item_id, call)
            if name == "mcp_tool_result" and isinstance(body, list):
                items.extend(_items.result_media(item_id, body, PROVIDER, items[0]))
            return items
        if name in _NO_CONTEXT_BLOCKS:
            return []
        if name not in _items.JSON_BLOCKS:
            note_new_content(name, line, self._new_types, self.problems, f"{role} content")
        return [_items.unknown_item(item_id, block, name, role)]

    def _attachment_items(self, uuid: str, attachment: Any) -> tuple[Item, ...]:
        if not isinstance(attachment, dict):
            return ()
        kind = str(attachment.get("type") or "attachment")
        pieces = []
        for key in ("content", "snippet", "addedLines", "prompt", "text"):
            value = attachment.get(key)
            if isinstance(value, str) and value:
                pieces.append(value)
            elif isinstance(value, list) and value:
                pieces.append("\n".join(v if isinstance(v, str) else dumps(v) for v in value))
        if not pieces:
            return ()
        text = "\n".join(pieces)
        item = _items.text_item(f"{uuid}:0", text, "user", label=kind)
        category = _ATTACHMENT_PARTS.get(kind, "environment")
        item.category = Category(category)
        item.part = category
        return (item,)


def _key_of(record: Mapping[str, Any], message: Mapping[str, Any]) -> str:
    """The key of the call an assistant line belongs to: its message and request ids as one string.

    The first id's length leads, so that the key stays one-to-one (``len:first`` then
    ``second``). Without either id, the line's uuid is its call's key.
    """
    message_id = message.get("id")
    request_id = record.get("requestId")
    if message_id is None and request_id is None:
        first, second = "uuid", str(record.get("uuid"))
    else:
        first, second = str(message_id), str(request_id)
    return f"{len(first)}:{first}{second}"


def _cleared_ids(record: Mapping[str, Any]) -> frozenset[str]:
    meta = record.get("microcompactMetadata")
    ids = meta.get("compactedToolIds") if isinstance(meta, dict) else None
    return frozenset(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else frozenset()


def _compaction(record: Mapping[str, Any], kind: str, parent: str | None, line: int) -> Compaction | None:
    """The compaction a record declares, if it is a compaction boundary.

    A boundary is a ``system`` line with ``subtype: compact_boundary``, or any
    link that starts a new root (``parentUuid: null``) while naming the chain
    it continues in ``logicalParentUuid`` (a boundary whose subtype a new
    version renamed, or a continuation file's first line). Its context starts
    anew: the chain is cut there whatever ``parentUuid`` says.
    """
    logical = record.get("logicalParentUuid")
    boundary = kind == "system" and record.get("subtype") == "compact_boundary"
    if not boundary and not (parent is None and isinstance(logical, str) and logical):
        return None
    meta = record.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    trigger = meta.get("trigger")
    pre_tokens = as_int(meta.get("preTokens")) if "preTokens" in meta else None
    return Compaction(
        trigger=CompactionTrigger(trigger) if trigger in ("auto", "manual") else CompactionTrigger.AUTO,
        pre_tokens=pre_tokens or None, line=line,
        logical_parent=logical if isinstance(logical, str) and logical else None)


def _blocks(uuid: str, content: Any) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """The object blocks of a list content, each with its item id ``<uuid>:<index>`` and type."""
    if isinstance(content, list):
        for index, block in enumerate(content):
            if isinstance(block, dict):
                yield f"{uuid}:{index}", block.get("type"), block

