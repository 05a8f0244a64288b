"""Codex rollout reader: calls, reported input, token_count dedupe, compaction."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CORPUS, DATA, requires_corpus

from ctxscope.schema import Category
from ctxscope.transcripts import TranscriptFile

TURNS = DATA / "transcripts" / "codex_turn-2.jsonl"


def test_two_turns_are_two_calls_with_last_token_usage():
    """turn-2.jsonl: two calls whose reported input is last_token_usage.input_tokens (1,024 and 1,100)."""
    calls = list(TranscriptFile(str(TURNS)).calls())
    assert [c.reported_tokens for c in calls] == [1024, 1100]
    assert calls[0].window_tokens == 258400


def test_repeated_token_count_is_counted_once(tmp_path: Path):
    """A token_count written twice (same total_token_usage) does not make or re-price a call."""
    lines = TURNS.read_text().splitlines(keepends=True)
    doubled = lines[:12] + [lines[11]] + lines[12:]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(doubled))
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.reported_tokens for c in calls] == [1024, 1100]


def test_compacted_replaces_the_context(tmp_path: Path):
    """After `compacted`, the next call's context is the base instructions and the replacement history."""
    def rec(kind, payload):
        return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload})

    def msg(role, text):
        return rec("response_item", {"type": "message", "role": role,
                                     "content": [{"type": "input_text", "text": text}]})

    lines = [rec("session_meta", {"id": "s1", "base_instructions": {"text": "You are Codex."}}),
             msg("user", "a" * 400), msg("assistant", "b" * 400), msg("user", "next"), msg("assistant", "ok"),
             rec("compacted", {"message": "", "replacement_history": [
                 {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "summary of work"}]}]}),
             msg("user", "go on"), msg("assistant", "done")]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == 3
    last = calls[-1]
    assert last.compaction is not None and last.reset
    assert [i.text for i in last.items] == ["You are Codex.", "summary of work", "go on"]
    assert last.items[0].category is Category.SYSTEM


@requires_corpus
def test_real_rollout_has_one_call_per_distinct_token_count():
    """The 0.125 rollout: 66 calls, each priced by a token_count with a new total (first: 18,703)."""
    path = CORPUS / "codex" / "codemie" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    totals = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        if payload.get("type") == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]
            if not totals or totals[-1] != total:
                totals.append(total)
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == 66 == len(totals)
    assert calls[0].reported_tokens == 18703 and calls[1].reported_tokens == 18911


def test_byte_order_mark_and_crlf_lines(tmp_path: Path):
    """A file saved with a BOM and CRLF line ends reads as the original: the same two calls."""
    text = TURNS.read_text().replace("\n", "\r\n")
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    source = TranscriptFile(str(path))
    assert [c.reported_tokens for c in source.calls()] == [1024, 1100]
    assert source.problems == []


def test_subagent_rollout_names_its_parent(tmp_path: Path):
    """A rollout whose session_meta has source.subagent and parent_thread_id is a session with that parent."""
    lines = TURNS.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["payload"].update({"id": "child", "parent_thread_id": "parent-thread",
                            "source": {"subagent": {"thread_spawn": {"parent_thread_id": "parent-thread"}}}})
    path = tmp_path / "child.jsonl"
    path.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    calls = list(TranscriptFile(str(path)).calls())
    assert {(c.session_id, c.parent_session_id) for c in calls} == {("child", "parent-thread")}


def _rollout(tmp_path: Path, items: list[dict], name: str = "r.jsonl") -> TranscriptFile:
    """A rollout of response items after a session_meta, no token_count (calls priced by nothing)."""
    lines = [{"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}}]
    lines += [{"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": p} for p in items]
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return TranscriptFile(str(path))


def _user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_unknown_item_inside_an_output_run_neither_splits_the_call_nor_is_dropped(tmp_path: Path):
    """reasoning, an unknown item, a function call: one call, not two (the unknown type used to end the
    run); the unknown item counted as its compact JSON (26 chars) in assistant/text, said once on line 4."""
    unknown = {"type": "zz_future", "x": 1}  # compact JSON: {"type":"zz_future","x":1}
    source = _rollout(tmp_path, [
        _user("hi"),
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        unknown,
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        unknown,
        _user("more"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ])
    calls = list(source.calls())
    assert len(calls) == 2
    first, second = calls
    assert [i.text for i in first.items] == ["hi"]
    counted = [i for i in second.items if i.label == "zz_future"]
    assert [(i.part, i.chars) for i in counted] == [("assistant/text", 26), ("prompts/text", 26)]
    assert [(p.line, p.message) for p in source.problems] == [
        (4, "content type 'zz_future' is new to ctxscope: counted as its JSON in assistant content (said once a file)")]


def test_ghost_snapshot_is_not_context_and_does_not_split(tmp_path: Path):
    """Codex's /undo snapshot between two output items: no item, no problem, one call."""
    source = _rollout(tmp_path, [
        _user("hi"),
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "ghost_snapshot", "ghost_commit": {"id": "abc", "parent": "def"}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        _user("next"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
    ])
    calls = list(source.calls())
    assert [[i.text for i in c.items] for c in calls] == [["hi"], ["hi", "think", "done", "next"]]
    assert source.problems == []


def test_agent_message_compaction_and_unnamed_tool_types(tmp_path: Path):
    """Codex 0.146's items, and tool types by their names' ending, as request bodies read them:
    an agent_message's text is results/agent_message (12 chars); a ``*_call`` is a call (its own name)
    that starts a call, its ``*_call_output`` the result named after it; a compaction in a replacement
    history is summaries at 2 tokens (12 base64 chars decode to 8 bytes, 4 a token)."""
    _rollout(tmp_path, [
        {"type": "agent_message", "author": "a", "recipient": "b",
         "content": [{"type": "input_text", "text": "from agent b"}]},
        {"type": "zz_search_call", "call_id": "z1", "status": "completed", "action": {"q": "x"}},
        {"type": "zz_search_call_output", "call_id": "z1", "output": "found"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ])
    path = tmp_path / "r.jsonl"
    history = [
        _user("kept"), {"type": "compaction", "encrypted_content": "QUJDREVGR0g="},
        {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}]
    compacted = {"timestamp": "2026-01-01T00:00:02Z", "type": "compacted",
                 "payload": {"message": "", "replacement_history": history}}
    after = [{"timestamp": "2026-01-01T00:00:03Z", "type": "response_item", "payload": p}
             for p in (_user("go on"), {"type": "message", "role": "assistant",
                                         "content": [{"type": "output_text", "text": "ok"}]})]
    with path.open("a") as f:
        f.write("".join(json.dumps(line) + "\n" for line in (compacted, *after)))
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == 3
    assert [(i.part, i.label, i.chars) for i in calls[0].items] == [("results/agent_message", "agent_message", 12)]
    result = calls[1].items[-1]
    assert (result.part, result.label, result.text, result.source_call_id) == ("results/zz_search", "zz_search",
                                                                              "found", "z1")
    assert calls[1].items[1].part == "assistant/calls/zz_search"
    summary = [i for i in calls[2].items if i.category is Category.SUMMARIES]
    assert [(i.part, i.chars, i.fixed_tokens) for i in summary] == [("summaries", 0, 2)]
    assert [i.text for i in calls[2].items if i.category is not Category.SUMMARIES] == ["kept", "go on"]


def test_a_tool_outputs_blocks_other_than_text_are_counted_not_dropped(tmp_path: Path):
    """A function_call_output's list: its input_text (2 chars), a type new to ctxscope as its compact
    JSON (26 chars, said once with its line: 4, after the session_meta) and a block whose type is a
    list, which names no type (its JSON, 14 chars, said as 'unknown'): one result of 2 + 1 + 26 + 1 + 14
    = 44 chars. The reader used to count only the text's 2."""
    source = _rollout(tmp_path, [
        _user("hi"),
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "ok"}, {"type": "zz_output", "n": 7}, {"type": ["x"]}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ])
    calls = list(source.calls())
    assert len(calls) == 2
    results = [(i.id, i.part, i.chars) for i in calls[1].items if i.category is Category.RESULTS]
    assert results == [("result:c1", "results/shell", 44)]
    assert [(p.line, p.message) for p in source.problems] == [
        (4, "content type 'zz_output' is new to ctxscope: counted as its JSON in a tool result (said once a file)"),
        (4, "content type 'unknown' is new to ctxscope: counted as its JSON in a tool result (said once a file)")]


def test_a_tool_output_written_as_one_content_item_counts_its_text(tmp_path: Path):
    """Codex 0.146 writes a function_call_output's output as one input_text item, not a list (corpus
    stage0-codex-small-cli0.146, line 11): its text counts (6 chars), not the item's JSON (69, as it was counted)."""
    item = {"type": "input_text", "text": "a.txt\n", "detail": None, "image_url": None}
    source = _rollout(tmp_path, [
        _user("hi"),
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": item},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ])
    calls = list(source.calls())
    assert [(i.id, i.chars) for i in calls[1].items if i.category is Category.RESULTS] == [("result:c1", 6)]
    assert source.problems == []
