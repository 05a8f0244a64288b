"""Claude Code reader on real sessions: calls, reported input, compaction, branches, subagents."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CORPUS, DATA, requires_corpus

from ctxscope.schema import Category, CompactionTrigger
from ctxscope.transcripts import TranscriptFile
from ctxscope.report.analysis import analyze_file

MAIN = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"
AGENT = DATA / "transcripts" / "claude_agent-36541525.jsonl"


def test_one_call_per_message_id_and_request_id():
    """The 7 responses of the session are 7 calls, though the first is written over 4 lines."""
    calls = list(TranscriptFile(str(MAIN)).calls())
    assert [c.line for c in calls] == [3, 13, 16, 18, 20, 23, 25]


def test_reported_input_is_input_plus_cache_creation_plus_cache_read():
    """Call 1: 3 + 35,066 + 0; call 2: 7 + 570 + 35,089 (SPEC section 4)."""
    calls = list(TranscriptFile(str(MAIN)).calls())
    assert calls[0].reported_tokens == 35069
    assert calls[1].reported_tokens == 35666
    assert calls[-1].reported_tokens == 6 + 132 + 36388


def test_second_call_context_holds_the_first_response_and_its_three_results():
    """Call 2 sees the prompt, the text and 3 Write calls of response 1, and their 3 results."""
    calls = list(TranscriptFile(str(MAIN)).calls())
    second = calls[1]
    kinds = [i.category for i in second.items]
    assert kinds.count(Category.RESULTS) == 3
    assert [i.part for i in second.items if i.category is Category.ASSISTANT].count("assistant/calls/Write") == 3
    assert not second.reset and len(second.added) == len(second.items) - len(calls[0].items)


def test_subagent_file_is_a_session_of_its_own():
    """The agent file's one call (3 + 16,976) is its own session, with the parent named, never added to it."""
    calls = list(TranscriptFile(str(AGENT)).calls())
    assert len(calls) == 1
    assert calls[0].session_id == "4c2ddfdc-b619-4525-8d03-1950fb1b0257/agent-36541525"
    assert calls[0].parent_session_id == "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
    assert calls[0].reported_tokens == 16979


def _line(**record):
    return json.dumps(record) + "\n"


def _user(uuid, parent, text):
    return _line(type="user", uuid=uuid, parentUuid=parent, sessionId="s",
                 message={"role": "user", "content": text})


def _assistant(uuid, parent, mid, text, tokens):
    return _line(type="assistant", uuid=uuid, parentUuid=parent, sessionId="s", requestId="r" + mid,
                 message={"id": mid, "role": "assistant", "model": "claude-x",
                          "content": [{"type": "text", "text": text}],
                          "usage": {"input_tokens": tokens, "cache_creation_input_tokens": 0,
                                    "cache_read_input_tokens": 0}})


def _response_line(uuid, parent, message_id, request_id):
    return _line(type="assistant", uuid=uuid, parentUuid=parent, sessionId="s", requestId=request_id,
                 message={"id": message_id, "role": "assistant", "model": "claude-x",
                          "content": [{"type": "text", "text": uuid}]})


def test_a_call_is_its_two_ids_whatever_the_line_before(tmp_path: Path):
    """Calls at lines 2, 4, 6: m1/r1's later lines (3, 5) start none, nor "7"/q after 7/q; m1/r2 does."""
    path = tmp_path / "s.jsonl"
    path.write_text(_user("u1", None, "first") + _response_line("a1", "u1", "m1", "r1")
                    + _response_line("a2", "a1", "m1", "r1") + _response_line("a3", "a2", "m1", "r2")
                    + _response_line("a4", "a3", "m1", "r1") + _response_line("a5", "a4", 7, "q")
                    + _response_line("a6", "a5", "7", "q"))
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.line for c in calls] == [2, 4, 6]
    assert [len(c.items) for c in calls] == [1, 3, 5]


def _idless_line(uuid, parent):
    return _line(type="assistant", uuid=uuid, parentUuid=parent, sessionId="s",
                 message={"role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": uuid}]})


def test_lines_without_ids_are_a_call_each_even_one_after_another(tmp_path: Path):
    """No message id, no requestId: the uuid is the key, so x1, x2 and x3 (lines 2, 3, 5) are 3 calls
    of 1, 2 and 4 items (u1; u1 x1; u1 x1 x2 u2), none taken for a later line of the one before."""
    path = tmp_path / "s.jsonl"
    path.write_text(_user("u1", None, "first") + _idless_line("x1", "u1") + _idless_line("x2", "x1")
                    + _user("u2", "x2", "second") + _idless_line("x3", "u2"))
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.line for c in calls] == [2, 3, 5]
    assert [len(c.items) for c in calls] == [1, 2, 4]


def test_a_later_line_of_a_retired_call_or_after_a_user_line_starts_no_call(tmp_path: Path, monkeypatch):
    """Keys past 2 x 2 retire: m0/r0 at line 9 is retired (read back) and m5/r5 at line 10 follows a
    user line; neither is a call: calls at lines 2-7 and 11, the last with 10 items (u1 a0-a5 u2 a6 a7)."""
    from ctxscope.transcripts import claude_code

    monkeypatch.setattr(claude_code, "_RECENT_CALLS", 2)
    text = _user("u1", None, "first")
    parent = "u1"
    for n in range(6):
        text += _response_line(f"a{n}", parent, f"m{n}", f"r{n}")
        parent = f"a{n}"
    text += (_user("u2", "a5", "a result") + _response_line("a6", "u2", "m0", "r0")
             + _response_line("a7", "a6", "m5", "r5") + _response_line("a8", "a7", "m6", "r6"))
    path = tmp_path / "s.jsonl"
    path.write_text(text)
    calls = list(TranscriptFile(str(path)).calls())
    assert [c.line for c in calls] == [2, 3, 4, 5, 6, 7, 11]
    assert len(calls[-1].items) == 10


def test_rewind_takes_the_live_chain_not_the_abandoned_branch(tmp_path: Path):
    """After a rewind to u1, the third call's context is u1, a1, u3: the branch u2/a2 is gone."""
    path = tmp_path / "s.jsonl"
    path.write_text(_user("u1", None, "first") + _assistant("a1", "u1", "m1", "one", 10)
                    + _user("u2", "a1", "abandoned") + _assistant("a2", "u2", "m2", "two", 20)
                    + _user("u3", "a1", "edited") + _assistant("a3", "u3", "m3", "three", 15))
    calls = list(TranscriptFile(str(path)).calls())
    assert [len(c.items) for c in calls] == [1, 3, 3]
    assert calls[2].reset
    assert [i.text for i in calls[2].items] == ["first", "one", "edited"]


@requires_corpus
def test_compaction_boundary_starts_a_new_context():
    """session-624a4a58: 55 calls; call 37 (line 160) follows the auto compaction of 155,979 tokens."""
    path = CORPUS / "claude" / "codemie" / "session-624a4a58.jsonl"
    calls = list(TranscriptFile(str(path)).calls())
    assert len(calls) == 55
    compacted = [c for c in calls if c.compaction is not None]
    assert len(compacted) == 1
    call = compacted[0]
    assert (call.index, call.line) == (37, 160)
    assert call.compaction.trigger is CompactionTrigger.AUTO and call.compaction.pre_tokens == 155979
    assert call.reported_tokens == 10 + 13277 + 23254
    assert [i.category for i in call.items] == [Category.SUMMARIES]


@requires_corpus
def test_file_read_three_times_flags_the_two_earlier_copies():
    """9e953218: vercel.json is read 3 times in the live context: the 2 earlier copies are waste."""
    path = (CORPUS / "claude" / "claude-code-log" / "real_projects" / "-Users-dain-workspace-danieldemmel-me-next"
            / "9e953218-585f-4692-89df-9e0747a31c68.jsonl")
    result = analyze_file(str(path), tokenizer="chars")
    session = result.sessions[0]
    assert len(session.rows) == 101
    ref = "Read:file_path=/Users/dain/workspace/danieldemmel.me-next/vercel.json"
    flagged = [f for f in session.waste.findings if f.reference == ref and f.kind in ("duplicate", "stale")]
    assert sum(f.count for f in flagged) == 2


@requires_corpus
def test_subagents_folder_sessions_are_separate():
    """ef958aa1 (2.1.x layout): each subagents/agent-*.jsonl is a session of its own with the parent named."""
    base = CORPUS / "claude" / "claude-code-log" / "real_projects" / "-experiments-worktrees"
    parent = analyze_file(str(base / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"), tokenizer="chars")
    agents = sorted((base / "ef958aa1-0e93-49f0-bb71-150f63befcd1" / "subagents").glob("agent-*.jsonl"))
    assert len(agents) == 6
    parent_id = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    assert [s.session_id for s in parent.sessions] == [parent_id]
    for agent in agents:
        result = analyze_file(str(agent), tokenizer="chars")
        # One session per file: <parent>/<file stem>, naming the parent.
        assert [(s.session_id, s.parent_session_id) for s in result.sessions] == [
            (f"{parent_id}/{agent.stem}", parent_id)]


def test_poll_resumes_from_the_byte_offset(tmp_path: Path):
    """A growing file: a half-written line waits; the next poll takes it and only the new calls come out."""
    lines = MAIN.read_bytes().splitlines(keepends=True)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:12]) + lines[12][:50])  # calls at lines 3 and 13: line 13 half-written
    source = TranscriptFile(str(path))
    first = [c.line for c in source.poll()]
    assert first == [3] and source.offset == len(b"".join(lines[:12]))
    path.write_bytes(b"".join(lines))
    second = [c.line for c in source.poll()]
    assert second == [13, 16, 18, 20, 23, 25]
    assert source.problems == []


def test_stdlib_json_fallback_gives_the_same_calls():
    """Without orjson (the `fast` extra) the reader parses with json and finds the same 7 calls."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['orjson'] = None\n"
            "from ctxscope.transcripts import TranscriptFile\n"
            f"print([c.reported_tokens for c in TranscriptFile({str(MAIN)!r}).calls()])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = [c.reported_tokens for c in TranscriptFile(str(MAIN)).calls()]
    assert out.strip() == str(expected)


@requires_corpus
def test_whole_corpus_reads_without_errors_beyond_the_known_bad_files():
    """Every JSONL of the corpus: no exception; problems only in empty files, edge cases and non-transcripts."""
    bad = {}
    for path in sorted(CORPUS.rglob("*.jsonl")):
        result = analyze_file(str(path), tokenizer="chars")
        if result.problems:
            bad[path.name] = [p.message.split(":")[0] for p in result.problems]
    for name, messages in bad.items():
        not_transcripts = ("edge_cases.jsonl", "journal.jsonl", "expected-conversation.jsonl", "expected-metrics.jsonl")
        assert name in not_transcripts or messages == ["empty file"], (name, messages)


def test_ledger_snapshot_is_transcript_observed_partial_with_unattributed():
    """observe_call: stage transcript-observed, coverage partial; unattributed = reported - estimated."""
    from ctxscope.core.ledger import SessionLedger
    from ctxscope.schema import Coverage, Stage
    from ctxscope.core.tokens import CharsCounter
    from ctxscope.transcripts import observe_call

    ledger = SessionLedger("s", counter=CharsCounter())
    snapshot = None
    for call in TranscriptFile(str(MAIN)).calls():
        snapshot = observe_call(ledger, call)
    ann = snapshot.annotation
    assert ann.stage is Stage.TRANSCRIPT_OBSERVED and ann.coverage is Coverage.PARTIAL
    assert ann.reported_tokens == 36526
    calibrated = snapshot.calibrated()
    assert calibrated[Category.UNATTRIBUTED] == 36526 - ann.estimated_tokens > 0
    assert sum(calibrated.values()) == 36526


def test_rarer_and_unknown_blocks_are_counted_by_the_request_body_rule(tmp_path: Path):
    """Blocks the reader used to drop in silence: redacted thinking (12 base64 chars, 8 bytes: 2 tokens),
    a server tool's result named after its call (its content's compact JSON, 52 chars), a type this
    version does not know as its compact JSON in its role's part (25 and 24 chars), said once a file and
    type with its line; Claude Code's model-fallback marker is no context and not said."""
    zz = {"type": "zz_block", "v": 1}
    assistant = _line(type="assistant", uuid="a1", parentUuid="u1", sessionId="s", requestId="r1", message={
        "id": "m1", "role": "assistant", "model": "claude-x", "content": [
            {"type": "redacted_thinking", "data": "QUJDREVGR0g="},
            {"type": "server_tool_use", "id": "st1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "st1",
             "content": [{"type": "web_search_result", "url": "u", "title": "t"}]},
            {"type": "fallback", "from": {"model": "a"}, "to": {"model": "b"}},
            zz, zz]})
    user = _line(type="user", uuid="u2", parentUuid="a1", sessionId="s", message={
        "role": "user", "content": [{"type": "zz_user", "v": 2}, {"type": "text", "text": "next"}]})
    path = tmp_path / "s.jsonl"
    path.write_text(_user("u1", None, "first") + assistant + user + _assistant("a2", "u2", "m2", "done", 100))
    source = TranscriptFile(str(path))
    calls = list(source.calls())
    assert len(calls) == 2
    got = [(i.part, i.chars, i.fixed_tokens) for i in calls[1].items]
    assert got == [("prompts/text", 5, None), ("assistant/thinking", 0, 2), ("assistant/calls/web_search", 13, None),
                   ("results/web_search", 52, None), ("assistant/text", 25, None), ("assistant/text", 25, None),
                   ("prompts/text", 24, None), ("prompts/text", 4, None)]
    assert calls[1].items[3].source_call_id == "st1"
    assert [(p.line, p.message) for p in source.problems] == [
        (2, "content type 'zz_block' is new to ctxscope: counted as its JSON in assistant content (said once a file)"),
        (3, "content type 'zz_user' is new to ctxscope: counted as its JSON in user content (said once a file)")]


def _png_b64(width: int, height: int) -> str:
    """A PNG's signature and IHDR chunk: all an image's size is read from (ctxscope.core.media)."""
    import base64
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk).decode()


def test_a_tool_results_blocks_other_than_text_are_counted_not_dropped(tmp_path: Path):
    """A tool result's list: its text (7 chars), a deferred tool's ``tool_reference`` as its compact JSON
    (50 chars, not said: an API type) and a type new to ctxscope as its JSON (23 chars, said once with its
    line), one result of 7 + 1 + 50 + 1 + 23 = 82 chars; its image (150 x 100 px: 150 * 100 / 750 = 20
    tokens) an item of its own, named after the call as request bodies name it (it was results/media). The
    reader used to count 7 chars and the image."""
    call = _line(type="assistant", uuid="a1", parentUuid="u1", sessionId="s", requestId="r1", message={
        "id": "m1", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "task"}}]})
    result = _line(type="user", uuid="u2", parentUuid="a1", sessionId="s", message={
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "found 2"},
            {"type": "tool_reference", "tool_name": "TaskCreate"},
            {"type": "zz_res", "v": 3},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png_b64(150, 100)}},
        ]}]})
    path = tmp_path / "s.jsonl"
    path.write_text(_user("u1", None, "first") + call + result + _assistant("a2", "u2", "m2", "done", 100))
    source = TranscriptFile(str(path))
    calls = list(source.calls())
    assert len(calls) == 2
    results = [(i.id, i.part, i.chars, i.fixed_tokens) for i in calls[1].items if i.category is Category.RESULTS]
    assert results == [("result:t1", "results/ToolSearch", 82, None), ("u2:0:3", "results/ToolSearch", 0, 20)]
    assert [(p.line, p.message) for p in source.problems] == [
        (3, "content type 'zz_res' is new to ctxscope: counted as its JSON in a tool result (said once a file)")]
