"""Codex rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) -> calls.

Each line is ``{timestamp, type, payload}``. ``session_meta`` carries the base
instructions (the system prompt, so Codex transcripts show it),
``turn_context`` the model, ``response_item`` the conversation items,
``event_msg`` ``token_count`` the usage, ``compacted`` a compaction with its
``replacement_history`` (the new context).

A call is the run of output items (reasoning, assistant message, tool calls)
that follows input items: its context is every item before the run. The
``token_count`` after it gives its reported input (``last_token_usage.
input_tokens``, cached tokens included); some CLI versions write each
``token_count`` twice, so one whose ``total_token_usage`` did not change is
dropped. Without ``token_count`` (some versions) calls have no reported input.
"""

from __future__ import annotations

from typing import Any, Mapping

from ctxscope.core.diff import ItemRun

from ctxscope.core.observation import Usage
from ctxscope.schema import CompactionTrigger, Item
from ctxscope.transcripts import _items
from ctxscope.transcripts.model import (FORMAT_CODEX, Compaction, Problem, TranscriptCall, as_int, dumps,
                    note_new_content, note_new_type, parse_timestamp_ns, record_type)

PROVIDER = "openai"
_OUTPUT_TYPES = {"reasoning", "function_call", "custom_tool_call", "local_shell_call",
                 "web_search_call", "tool_search_call", "image_generation_call"}
_RESULT_TYPES = {"function_call_output", "custom_tool_call_output", "tool_search_output",
                 "local_shell_call_output"}
# Input items besides messages and results: another agent's message to this one (Codex 0.146's
# multi-agent threads: ``author``, ``recipient``, input_text content) and a remote compaction's
# encrypted summary (``compaction``, once ``compaction_summary``).
_INPUT_TYPES = {"agent_message", "compaction", "compaction_summary"}
# Items a rollout records that never reach the model: the harness's git snapshot for /undo
# (Codex filters it out of every prompt).
_HARNESS_TYPES = {"ghost_snapshot"}
# Top-level record types this reader knows: those it reads, the older rollouts' items, and those seen
# (../shared/corpus) that carry no context. Others come with new versions: skipped, said once a file.
KNOWN_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted", "message",
                         "world_state", "inter_agent_communication_metadata"} | _OUTPUT_TYPES | _RESULT_TYPES)


class CodexReader:
    """Incremental reader of one rollout file (one session)."""

    format = FORMAT_CODEX

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.records = 0
        self.problems: list[Problem] = []
        self.session_id = name.rsplit(".", 1)[0] or "codex"
        self.parent_session_id: str | None = None
        self._model: str | None = None
        self._window: int | None = None
        self._items: list[Item] = []
        self._since_call: list[Item] = []  # items added since the previous call's context
        self._reset = True
        self._in_output = False
        self._pending: TranscriptCall | None = None
        self._last_total: Any = None
        self._compaction: Compaction | None = None
        self._tools = _items.ToolCalls()
        self._calls = 0
        self._counter = 0
        self._new_types: set[str] = set()

    def feed(self, record: Mapping[str, Any], line: int) -> list[TranscriptCall]:
        kind = record_type(record, line, self.problems)
        if kind is None:
            return []
        self.records += 1
        if kind not in KNOWN_TYPES:
            note_new_type(kind, line, self._new_types, self.problems)
        payload = record.get("payload")
        if payload is None and kind in _OUTPUT_TYPES | _RESULT_TYPES | {"message"}:
            payload, kind = record, "response_item"  # the older rollout: items at top level
        if not isinstance(payload, dict):
            return []
        timestamp = parse_timestamp_ns(record.get("timestamp"))
        if kind == "session_meta":
            return self._session_meta(payload)
        if kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str):
                self._model = model
            return []
        if kind == "response_item":
            return self._response_item(payload, line, timestamp)
        if kind == "event_msg":
            if payload.get("type") == "token_count":
                return self._token_count(payload)
            return []
        if kind == "compacted":
            return self._compacted(payload, line)
        return []

    @property
    def held_line(self) -> int | None:
        """The first line of the call waiting for its ``token_count`` (None: none waits).

        A follower that saves where it stopped must not save past this line,
        or a restart would never see the call again (``watch``).
        """
        return self._pending.line if self._pending is not None else None

    def finish(self) -> list[TranscriptCall]:
        out = [self._pending] if self._pending is not None else []
        self._pending = None
        return out

    # -- records ---------------------------------------------------------------

    def _session_meta(self, payload: Mapping[str, Any]) -> list[TranscriptCall]:
        if self._calls or self._items:
            return []  # a later meta (a resumed or forked thread) keeps the first identity
        session_id = payload.get("id")
        if isinstance(session_id, str) and session_id:
            self.session_id = session_id
        # A subagent's rollout (source.subagent, parent_thread_id) is a session of its own.
        parent = payload.get("parent_thread_id")
        source = payload.get("source")
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict) and not isinstance(parent, str):
            spawn = source["subagent"].get("thread_spawn")
            parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        if isinstance(parent, str) and parent:
            self.parent_session_id = parent
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base if isinstance(base, str) else None
        if isinstance(text, str) and text:
            for item in _items.text_items("base_instructions", text, "system", label="base_instructions"):
                self._add(item)
        return []

    def _response_item(self, payload: Mapping[str, Any], line: int, timestamp: int | None) -> list[TranscriptCall]:
        kind = payload.get("type")
        kind = kind if isinstance(kind, str) else None
        side = _side(kind, payload.get("role"))
        out: list[TranscriptCall] = []
        if side is None:
            # Neither side of a call: it neither starts nor ends a run of output items.
            self._unknown(payload, kind, line, "assistant" if self._in_output else "user")
            return out
        if side and not self._in_output:
            out.extend(self._start_call(line, timestamp))
        self._in_output = side
        for item in self._convert(payload, line):
            self._add(item)
        return out

    def _start_call(self, line: int, timestamp: int | None) -> list[TranscriptCall]:
        out = self.finish()
        reset = self._reset or self._calls == 0
        self._pending = TranscriptCall(
            # A run of the list (O(1)): it is only appended to, a compaction starts a new one.
            session_id=self.session_id, index=self._calls, items=ItemRun(self._items),
            added=list(self._items) if reset else self._since_call, reset=reset, provider=PROVIDER,
            model=self._model, compaction=self._compaction, timestamp_ns=timestamp, line=line,
            parent_session_id=self.parent_session_id, window_tokens=self._window)
        self._calls += 1
        self._since_call = []
        self._reset = False
        self._compaction = None
        return out

    def _token_count(self, payload: Mapping[str, Any]) -> list[TranscriptCall]:
        info = payload.get("info")
        if not isinstance(info, dict):
            return []
        window = info.get("model_context_window")
        if isinstance(window, int) and window > 0:
            self._window = window
        total = info.get("total_token_usage")
        last = info.get("last_token_usage")
        if not isinstance(last, dict) or total == self._last_total:
            return []  # the same count written twice
        self._last_total = total
        if self._pending is None:
            return []
        inputs = as_int(last.get("input_tokens"))
        self._pending.usage = Usage(input_tokens=inputs, output_tokens=as_int(last.get("output_tokens")),
                                    cache_read_input_tokens=as_int(last.get("cached_input_tokens")),
                                    reported_input=inputs)
        if self._window is not None:
            self._pending.window_tokens = self._window
        return self.finish()

    def _compacted(self, payload: Mapping[str, Any], line: int) -> list[TranscriptCall]:
        out = self.finish()
        history = payload.get("replacement_history")
        kept = [i for i in self._items if i.id.startswith("base_instructions")]
        self._items = kept
        self._since_call = []
        if isinstance(history, list):
            for entry in history:
                if not isinstance(entry, dict):
                    continue
                kind = entry.get("type")
                if isinstance(kind, str) and _side(kind, entry.get("role")) is None:
                    self._unknown(entry, kind, line, "user")
                    continue
                for item in self._convert(entry, line, summary=True):
                    self._add(item)
        message = payload.get("message")
        if isinstance(message, str) and message:
            self._add(_items.text_item(self._next_id("summary"), message, "user", summary=True))
        self._reset = True
        self._in_output = False
        self._compaction = Compaction(trigger=CompactionTrigger.AUTO, line=line)
        return out

    # -- items -------------------------------------------------------------------

    def _add(self, item: Item) -> None:
        self._items.append(item)
        self._since_call.append(item)

    def _unknown(self, payload: Mapping[str, Any], kind: str | None, line: int, role: str) -> None:
        """An item on neither side of a call: the harness's own (not context), or one of a type this
        version does not know, counted as its JSON in ``role``'s part and said once a file."""
        if kind in _HARNESS_TYPES:
            return
        name = str(kind)
        note_new_content(name, line, self._new_types, self.problems, f"{role} content")
        self._add(_items.unknown_item(self._next_id("item"), payload, name, role))

    def _result(self, call_id: Any, output: Any, line: int) -> list[Item]:
        """A tool's output: its text (:func:`_items.block_text`, a block type new to ctxscope said once)
        and its images (:func:`_items.result_media`)."""
        text = _items.result_text(output, line, self._new_types, self.problems)
        items = self._tools.result_items(call_id, text, lambda: self._next_id("result"))
        items.extend(_items.result_media(items[0].id, output, PROVIDER, items[0], self._model))
        return items

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}:{self._counter}"

    def _convert(self, payload: Mapping[str, Any], line: int, summary: bool = False) -> list[Item]:
        kind = payload.get("type")
        kind = kind if isinstance(kind, str) else None
        if kind == "message" or (kind is None and isinstance(payload.get("role"), str)):
            role = payload.get("role")
            role = role if isinstance(role, str) else "user"
            content = payload.get("content")
            out: list[Item] = []
            if isinstance(content, str):
                content = [{"type": "input_text", "text": content}]
            if not isinstance(content, list):
                return []
            for block in content:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                text = block.get("text")
                if isinstance(text, str) and text:
                    # A summary in a replacement history is the user message Codex wrote for it.
                    is_summary = (summary and role == "user"
                                  and text.lstrip().startswith(("Another language model", "<summary")))
                    out.extend(_items.text_items(self._next_id(role), text, role, summary=is_summary))
                elif btype in ("input_image", "image"):
                    out.append(_items.image_item(self._next_id("image"), block.get("image_url"), PROVIDER, "user",
                                                 model=self._model))
            return out
        if kind == "reasoning":
            texts: list[str] = []
            for key in ("summary", "content"):
                value = payload.get(key)
                if isinstance(value, list):
                    texts.extend(v["text"] for v in value if isinstance(v, dict) and isinstance(v.get("text"), str))
            text = "\n".join(t for t in texts if t)
            return [_items.thinking_item(self._next_id("reasoning"), text)] if text else []
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            name = str(payload.get("name") or ("shell" if kind == "local_shell_call" else "unknown"))
            args = payload.get("arguments", payload.get("input", payload.get("action")))
            call_id = payload.get("call_id") or payload.get("id")
            call_id = call_id if isinstance(call_id, str) else self._next_id("call")
            return [self._tools.call_item(call_id, name, args if args is not None else {})]
        if kind in _RESULT_TYPES:
            output = payload.get("output")
            if isinstance(output, dict):
                # {"content": ...}, or one content item written alone (Codex 0.146: an input_text)
                output = output["content"] if "content" in output else [output] if "type" in output else output
            return self._result(payload.get("call_id"), output, line)
        if kind in ("web_search_call", "tool_search_call", "image_generation_call"):
            action = payload.get("action")
            text = dumps(action) if action is not None else ""
            if not text:
                return []
            item, _ = _items.call_item(self._next_id(kind), kind, action)
            return [item]
        if kind == "agent_message":
            # Another agent's words delivered to this one: a result of its work, as a subagent's
            # report is a result in Claude Code (results/agent_message).
            text = _items.block_text(payload.get("content"))
            if not text:
                return []
            return [_items.result_item(self._next_id("agent_message"), "agent_message", text, None, None)]
        if kind in ("compaction", "compaction_summary"):
            # A remote compaction's summary, encrypted: counted by its size, as in request bodies.
            return [_items.encrypted_item(self._next_id("summary"), payload.get("encrypted_content"), "summaries",
                                          "summary")]
        if kind is not None and kind.endswith("_output"):
            # A tool's output of a type this version does not name (``*_call_output``...): a result.
            return self._result(payload.get("call_id"), payload.get("output"), line)
        if kind is not None and kind.endswith("_call"):
            # A hosted or local tool call this version does not name: its arguments, as in request bodies.
            args = {k: v for k, v in payload.items() if k not in ("type", "id", "call_id", "status")}
            call_id = payload.get("call_id") or payload.get("id")
            call_id = call_id if isinstance(call_id, str) else self._next_id("call")
            return [self._tools.call_item(call_id, kind[: -len("_call")], args.get("action", args))]
        return []


def _side(kind: str | None, role: Any) -> bool | None:
    """Which side of a model call a response item is on: True output, False input, None neither.

    By name where this version does not know the type, as request bodies read them: ``*_output`` is a
    tool's output (input), ``*_call`` a tool call (output). None: the harness's own record, or a type
    with neither ending, which cannot say where a call starts.
    """
    if kind == "message" or (kind is None and isinstance(role, str)):
        return role == "assistant"
    if kind is None:
        return False  # an item without a type: input, and nothing in it is read (as before)
    if kind in _OUTPUT_TYPES:
        return True
    if kind in _RESULT_TYPES or kind in _INPUT_TYPES:
        return False
    if kind in _HARNESS_TYPES:
        return None
    if kind.endswith("_output"):
        return False
    if kind.endswith("_call"):
        return True
    return None
