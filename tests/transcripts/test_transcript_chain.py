"""Claude Code chains as 2.1.x writes them, through analyze, replay and watch alike (one reader stack).

One small session built by hand, tokenizer chars (ceil(chars / 4) per item), model ``m1`` (not
Claude: no proxy-encoding item, so the figures are the items' alone):

    u1  prompt "p" x 40                                   10 tokens
    a1  tool_use Read {"file_path":"a.py"} (20 chars)      5   call 0, reported 100, context [u1] = 10
    p1  progress            (parent a1)
    r1  tool_result "x" x 80 (parent p1)                  20
    s1  system turn_duration (parent r1)
    s2  system stop_hook_summary (parent s1)
    u2  prompt "q" x 40 (parent s2)                       10
    a2  text "done"                                           call 1, reported 200, context u1 a1 r1 u2 = 45
    u3  prompt "r" x 40 (parent s2: a rewind past u2/a2)  10
    a3  text "again"                                          call 2, reported 300, context u1 a1 r1 u3 = 45
    b1  compact_boundary, parentUuid null, logicalParentUuid a3, manual, preTokens 1000
    u4  isCompactSummary "s" x 80 (parent b1)             20 (summaries)
    u5  prompt "n" x 40 (parent u4)                       10
    a4  text "ok"                                             call 3, reported 400, context u4 u5 = 30, compacted
"""

from __future__ import annotations

from _paths import TESTS

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxscope.transcripts.follow import FollowedFile
from ctxscope.telemetry.replay import CallEmitter, replay_files
from ctxscope.report.analysis import analyze_file
from ctxscope.schema import INFERRED_PREFIX_LABEL, INFERRED_PREFIX_PART, Attr
from ctxscope.transcripts import TranscriptFile
from ctxscope.watch import Watcher, WatchState

SESSION = "chain-session"
CONTENT = [10, 45, 45, 30]  # each call's context, by hand (docstring)
REPORTED = [100, 200, 300, 400]
INFERRED = [0, 90, 90, 155]  # the system+tools prefix each call is given (see the analyze test)
ESTIMATED = [c + i for c, i in zip(CONTENT, INFERRED)]


def _rec(kind: str, uuid: str, parent: str | None, second: int, **extra) -> dict:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SESSION, "isSidechain": False,
            "version": "2.1.39", "timestamp": f"2026-02-11T10:00:{second:02d}.000Z", **extra}


def _user(uuid: str, parent: str | None, second: int, content, **extra) -> dict:
    return _rec("user", uuid, parent, second, message={"role": "user", "content": content}, **extra)


def _assistant(uuid: str, parent: str, second: int, n: int, content: list, reported: int) -> dict:
    return _rec("assistant", uuid, parent, second, requestId=f"req{n}",
                message={"id": f"msg{n}", "role": "assistant", "model": "m1", "content": content,
                         "usage": {"input_tokens": reported, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0, "output_tokens": 3}})


def records() -> list[dict]:
    return [
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        _user("u1", None, 1, "p" * 40),
        _assistant("a1", "u1", 2, 1, [{"type": "tool_use", "id": "t1", "name": "Read",
                                       "input": {"file_path": "a.py"}}], REPORTED[0]),
        _rec("progress", "p1", "a1", 3, data={"type": "hook_progress"}, toolUseID="t1"),
        _user("r1", "p1", 4, [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 80}],
              sourceToolAssistantUUID="a1"),
        _rec("system", "s1", "r1", 5, subtype="turn_duration", durationMs=1200),
        _rec("system", "s2", "s1", 6, subtype="stop_hook_summary", hookCount=1),
        _user("u2", "s2", 7, "q" * 40),
        _assistant("a2", "u2", 8, 2, [{"type": "text", "text": "done"}], REPORTED[1]),
        _user("u3", "s2", 9, "r" * 40),
        _assistant("a3", "u3", 10, 3, [{"type": "text", "text": "again"}], REPORTED[2]),
        _rec("system", "b1", None, 11, subtype="compact_boundary", content="Conversation compacted",
             logicalParentUuid="a3", compactMetadata={"trigger": "manual", "preTokens": 1000}),
        _user("u4", "b1", 12, "s" * 80, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        _user("u5", "u4", 13, "n" * 40),
        _assistant("a4", "u5", 14, 4, [{"type": "text", "text": "ok"}], REPORTED[3]),
    ]


def lines(recs: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in recs)


UNKNOWN_FIRST = b"".join(json.dumps({"type": f"future-kind-{i}", "note": "a record type of a later version"})
                         .encode() + b"\n" for i in range(3))
TRUNCATED_TAIL = b'{"type": "assistant", "uuid": "a9", "parentUuid": "a4", "mess'
# Each new type is said once (read as carrying no context, not an error), with its line.
SAID_NEW = [(n + 1, f"record type 'future-kind-{n}' is new to ctxscope") for n in range(3)]
VARIANTS = {
    "plain": lambda body: body,
    "unknown-leading-types": lambda body: UNKNOWN_FIRST + body,
    "bom": lambda body: b"\xef\xbb\xbf" + body,
    "truncated-last-line": lambda body: body + TRUNCATED_TAIL,
}


@pytest.fixture(params=sorted(VARIANTS))
def session_file(request, tmp_path) -> Path:
    path = tmp_path / "folder" / f"{request.param}.jsonl"
    path.parent.mkdir()
    path.write_bytes(VARIANTS[request.param](lines(records())))
    return path


def test_the_chain_runs_through_progress_and_system_links_and_a_rewind_drops_the_dead_branch(session_file):
    """Call contexts by hand: 10, 45 (through p1, s1, s2), 45 after the rewind (u2 out, u3 in), 30 compacted."""
    calls = list(TranscriptFile(str(session_file)).calls())
    assert [c.index for c in calls] == [0, 1, 2, 3]
    assert [sorted(i.id for i in c.items) for c in calls] == [
        ["u1:0"], ["result:t1", "t1", "u1:0", "u2:0"], ["result:t1", "t1", "u1:0", "u3:0"], ["u4:0", "u5:0"]]
    assert [c.reported_tokens for c in calls] == REPORTED
    assert calls[2].reset is True  # the rewind: u2 left the context


def test_a_compaction_with_logical_parent_is_declared_with_trigger_and_pre_tokens(session_file):
    """b1 (parentUuid null, logicalParentUuid a3): call 3 compacted, manual, 1000 tokens before."""
    compaction = list(TranscriptFile(str(session_file)).calls())[3].compaction
    assert compaction is not None
    assert (compaction.trigger.value, compaction.pre_tokens, compaction.logical_parent) == ("manual", 1000, "a3")


def test_a_root_link_naming_a_logical_parent_is_a_boundary_whatever_its_subtype(tmp_path):
    """A boundary whose subtype a later version renamed still cuts the chain and counts as a compaction."""
    recs = records()
    recs[11]["subtype"] = "compact_boundary_v2"
    del recs[11]["compactMetadata"]
    path = tmp_path / "renamed.jsonl"
    path.write_bytes(lines(recs))
    last = list(TranscriptFile(str(path)).calls())[3]
    assert sorted(i.id for i in last.items) == ["u4:0", "u5:0"]
    assert last.compaction is not None and last.compaction.pre_tokens is None


def test_analyze_counts_each_call_and_names_the_inferred_prefix(session_file):
    """Estimated = content + the prefix learned from the calls before (first call: none).

    Call 1: 100 - 10 = 90 (the one pair's offset). Call 2: the learned 155 is within the
    2,000-token move threshold of 90, so 90 stays. Call 3 follows a compaction: the
    first three calls' median offset (90, 155, 255) -> 155 stands (under half the
    declared 1,000 preTokens, so not history the file lacks).
    """
    result = analyze_file(str(session_file), tokenizer="chars")
    (session,) = result.sessions
    assert [r.estimated - r.inferred for r in session.rows] == CONTENT
    assert [r.inferred for r in session.rows] == INFERRED
    assert [r.reported for r in session.rows] == REPORTED
    assert [r.compaction for r in session.rows] == [None, None, None, "manual"]
    assert session.compactions == 1
    assert [(m.index, m.before, m.after) for m in session.prefix_moves] == [(3, 90, 155)]
    # The last call: 30 counted + 155 inferred = 185 of the 400 reported; the rest stays unattributed.
    assert session.parts[INFERRED_PREFIX_PART] == 155
    assert session.parts["unattributed"] == 400 - 185
    problems = [(p.line, p.message.split(":")[0]) for p in result.problems]
    if "truncated" in session_file.name:
        assert problems == [(16, "truncated last line")]
    elif "unknown" in session_file.name:
        assert problems == SAID_NEW
    else:
        assert problems == []
    assert INFERRED_PREFIX_LABEL == "system+tools (inferred from usage)"


def _spans(emitter_spans: InMemorySpanExporter) -> list:
    return sorted((s for s in emitter_spans.get_finished_spans() if s.name.startswith("chat")),
                  key=lambda s: s.start_time)


def _sink() -> tuple[CallEmitter, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    return CallEmitter.for_provider(tracers, tokenizer="chars"), exporter


def test_replay_sees_the_same_calls_and_contexts(session_file):
    """Four request spans, estimated as analyze estimates them: 10/45/45/30 of content plus the inferred prefix."""
    emitter, exporter = _sink()
    result = replay_files([str(session_file)], emitter)
    assert result.calls == 4
    spans = _spans(exporter)
    assert [s.attributes[Attr.ESTIMATED_TOKENS] for s in spans] == ESTIMATED
    assert [s.attributes[Attr.REPORTED_TOKENS] for s in spans] == REPORTED
    assert [s.name for s in exporter.get_finished_spans()].count("post-compaction") == 1
    analyzed = analyze_file(str(session_file), tokenizer="chars").sessions[0]
    assert [r.estimated for r in analyzed.rows] == ESTIMATED  # one pipeline: the same context, the same prefix
    assert [r.inferred for r in analyzed.rows] == INFERRED
    expected = [(16, "truncated last line")] if "truncated" in session_file.name else \
        SAID_NEW if "unknown" in session_file.name else []
    assert [(p.line, p.message.split(":")[0]) for _, p in result.problems] == expected


def test_watch_sees_the_same_calls_and_contexts(session_file, tmp_path):
    """A watch from the start emits the complete calls; a truncated last line waits, never a problem."""
    emitter, exporter = _sink()
    problems = []
    w = Watcher([str(session_file.parent)], emitter, WatchState.load(tmp_path / "state.json"), from_start=True,
                on_problem=lambda path, p: problems.append(p))
    w.scan()
    spans = _spans(exporter)
    assert [s.attributes[Attr.ESTIMATED_TOKENS] for s in spans] == ESTIMATED
    assert [s.attributes[Attr.REPORTED_TOKENS] for s in spans] == REPORTED
    # A last line without its newline may still be written: not an error yet.
    assert [(p.line, p.message.split(":")[0]) for p in problems] == \
        (SAID_NEW if "unknown" in session_file.name else [])


def test_a_follower_waits_while_only_unknown_record_types_were_written(tmp_path):
    """Detection reads past unknown types; with nothing else yet, a follower waits instead of refusing."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(UNKNOWN_FIRST)
    followed = FollowedFile(str(path))
    assert followed.read() == [] and not followed.unsupported and followed.problems == []  # not yet read
    with open(path, "ab") as handle:
        handle.write(lines(records()))
    assert [t.call.index for t in followed.read()] == [0, 1, 2, 3]


def test_a_microcompaction_clears_the_named_results_until_a_rewind_goes_before_it(tmp_path):
    """microcompact_boundary (compactedToolIds [t1]): result:t1 is sent as the 33-char stand-in (9 tokens).

    Call 2 context: u1 10 + t1 5 + stand-in 9 + u2 10 + "done" 1 + u9 10 = 45 (was 56 with the result).
    A rewind to s2 (before the boundary) brings the whole result back: u1 t1 r1 u3 = 45 with 20 for r1.
    """
    recs = records()[:9] + [
        _rec("system", "m1", "a2", 20, subtype="microcompact_boundary", content="Context microcompacted",
             microcompactMetadata={"trigger": "auto", "preTokens": 250, "tokensSaved": 11,
                                   "compactedToolIds": ["t1"], "clearedAttachmentUUIDs": []}),
        _user("u9", "m1", 21, "z" * 40),
        _assistant("a9", "u9", 22, 9, [{"type": "text", "text": "fine"}], 260),
        _user("u3", "s2", 23, "r" * 40),
        _assistant("a3", "u3", 24, 3, [{"type": "text", "text": "again"}], 300),
    ]
    path = tmp_path / "micro.jsonl"
    path.write_bytes(lines(recs))
    result = analyze_file(str(path), tokenizer="chars")
    (session,) = result.sessions
    assert [r.estimated - r.inferred for r in session.rows] == [10, 45, 45, 45]
    calls = list(TranscriptFile(str(path)).calls())
    stand_in = next(i for i in calls[2].items if i.id == "result:t1")
    assert (stand_in.chars, stand_in.text) == (33, "[Old tool result content cleared]")
    assert next(i for i in calls[3].items if i.id == "result:t1").chars == 80


def test_a_first_line_over_a_megabyte_is_still_sniffed_whole(tmp_path):
    """A pasted image can make the first prompt line several MB: detection reads the whole first line."""
    recs = records()
    recs[1]["message"]["content"] = [{"type": "text", "text": "p" * 40},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "A" * (3 << 20)}}]
    path = tmp_path / "big-first.jsonl"
    path.write_bytes(lines(recs[1:]))  # the big line first
    assert len(path.read_bytes().split(b"\n", 1)[0]) > 3 << 20
    source = TranscriptFile(str(path))
    assert [c.index for c in source.calls()] == [0, 1, 2, 3] and source.problems == []
    followed = FollowedFile(str(path))
    assert [t.call.index for t in followed.read()] == [0, 1, 2, 3]


def test_replay_counts_claude_content_with_the_same_proxy_as_analyze():
    """A real Claude Sonnet 4.5 session: every replayed estimate is analyze's (proxy and inferred prefix included)."""
    path = TESTS / "data" / "transcripts" / "claude_4c2ddfdc.jsonl"
    emitter, exporter = _sink()
    replay_files([str(path)], emitter)
    replayed = [s.attributes[Attr.ESTIMATED_TOKENS] for s in _spans(exporter)
                if s.attributes.get("gen_ai.conversation.id") == "4c2ddfdc-b619-4525-8d03-1950fb1b0257"]
    (session,) = [s for s in analyze_file(str(path), tokenizer="chars").sessions if not s.parent_session_id]
    assert len(replayed) == 7
    assert replayed == [r.estimated for r in session.rows]
    assert _spans(exporter)[0].attributes.get(Attr.CATEGORIES_PREFIX + "overhead", 0) > 0  # framing:proxy-encoding
