"""What a compaction cuts off leaves memory, and a rewind back into it still gets the same context.

Tokenizer chars (ceil(chars / 4) an item), model m1 (no proxy item):

    u1  prompt "p" x 40                         10
    a1  text "done" (4 chars)                    1   call 0: u1 = 10
    u2  prompt "q" x 40 (parent a1)             10
    a2  text "more"                              1   call 1: u1 a1 u2 = 21
    b   compact_boundary (parentUuid null, logicalParentUuid a2)
    s   summary "s" x 40 (parent b)             10
    a3  text "again" (parent s)                      call 2, the compaction: s = 10
    u4  prompt "r" x 40 (parent a2: a rewind to before the compaction)
    a4  text "ok" (parent u4)                        call 3: u1 a1 u2 a2 u4 = 10 + 1 + 10 + 1 + 10 = 32

Items the reader holds as each call is handed out (the call's own line, read
just now, is one of them): call 1, u1 a1 u2 and a2 = 4. Call 2, from the file:
s and a3 = 2, with a1 and u2 (cut from the chain), u1 (the chain's first link)
and a2 (left behind) let go to the file, 4 links; fed record by record (no file
to read again) the reader keeps u1 a1 u2 a2 too: 6. Call 3: u1 a1 u2 a2 u4 and
a4 = 6, s and a3 let go as well (6 links: the compaction line keeps its node).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ctxscope.report.analysis import analyze_file
from ctxscope.transcripts import TranscriptFile, make_reader

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"


def _user(uuid: str, parent: str | None, text: str, **extra: object) -> dict:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "message": {"role": "user", "content": text}, **extra}


def _assistant(uuid: str, parent: str, n: int, text: str) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "requestId": f"r{n}",
            "message": {"id": f"m{n}", "role": "assistant", "model": "m1",
                        "content": [{"type": "text", "text": text}]}}


RECORDS = [
    _user("u1", None, "p" * 40), _assistant("a1", "u1", 0, "done"),
    _user("u2", "a1", "q" * 40), _assistant("a2", "u2", 1, "more"),
    {"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": None,
     "logicalParentUuid": "a2", "sessionId": "s", "compactMetadata": {"trigger": "auto", "preTokens": 22}},
    _user("s", "b", "s" * 40, isCompactSummary=True), _assistant("a3", "s", 2, "again"),
    _user("u4", "a2", "r" * 40), _assistant("a4", "u4", 3, "ok"),
]


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_a_rewind_into_links_a_compaction_freed_gets_them_back(tmp_path):
    session = analyze_file(_write(tmp_path / "s.jsonl", RECORDS), tokenizer="chars").sessions[0]
    assert [r.estimated - r.inferred for r in session.rows] == [10, 21, 10, 32]
    assert [r.compaction for r in session.rows] == [None, None, "auto", None]


def test_the_compaction_leaves_only_the_summary_in_memory(tmp_path):
    source = TranscriptFile(_write(tmp_path / "s.jsonl", RECORDS))
    held = {}
    for call in source.calls():
        held[call.index] = source.reader.held("s")
    assert held[1] == (4, 0)
    assert held[2] == (2, 4)
    # The rewind parsed u1, a1, u2 and a2 again from the file.
    assert held[3] == (6, 6)


def test_fed_without_a_file_the_reader_keeps_every_link():
    reader = make_reader("claude-code", "s.jsonl")
    contexts = {}
    for line, record in enumerate(RECORDS, 1):
        for call in reader.feed(record, line):
            contexts[call.index] = [item.id for item in call.items]
            if call.index == 2:
                assert reader.held("s") == (6, 0)
    assert contexts[3] == ["u1:0", "a1:0", "u2:0", "a2:0", "u4:0"]


def _calls(calls) -> list[tuple]:
    return [(c.index, c.reset, c.line, c.model, c.compaction,
             [(i.id, i.category, i.part, i.chars, i.digest, i.reference, i.label, i.source_call_id)
              for i in c.items]) for c in calls]


def _fed(path: str) -> list[tuple]:
    reader = make_reader("claude-code", os.path.basename(path))
    out = []
    with open(path, "rb") as handle:
        for line, raw in enumerate(handle, 1):
            if raw.strip():
                out.extend(reader.feed(json.loads(raw), line))
    return _calls(out)


def test_real_files_with_compactions_and_rewinds_give_the_calls_of_a_reader_that_keeps_everything():
    """stage0 (2.1.80: line 22 walks back before the compaction of line 21, line 29 rewinds to u1)."""
    for name in ("claude_stage0_small_v2.1.80.jsonl", "claude_258c7280_spotter_compaction.jsonl",
                 "claude_624a4a58_compaction.jsonl"):
        path = str(DATA / name)
        source = TranscriptFile(path)
        assert _calls(source.calls()) == _fed(path), name


def test_a_file_changed_under_the_reader_is_said_not_read_wrong(tmp_path):
    path = tmp_path / "s.jsonl"
    _write(path, RECORDS[:7])
    source = TranscriptFile(str(path))
    assert len(list(source.poll())) == 3
    # Rewritten in place, the same length: the line of a2 (let go at call 2) now holds another uuid.
    text = path.read_text(encoding="utf-8").replace('"uuid": "a2"', '"uuid": "z2"')
    path.write_text(text + json.dumps(RECORDS[7]) + "\n" + json.dumps(RECORDS[8]) + "\n", encoding="utf-8")
    calls = list(source.poll(final=True))
    # Call 3 goes with what is left of its chain (u4), and the change is said once.
    assert [(c.index, [i.id for i in c.items]) for c in calls] == [(3, ["u4:0"])]
    assert [p.message for p in source.problems if "no longer where it was read" in p.message] == [
        "link a2 is no longer where it was read (the file changed): "
        "a call walking back into it goes without what it held"]


def _tool_use(uuid: str, parent: str, n: int, call_id: str, path: str) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "requestId": f"r{n}",
            "message": {"id": f"m{n}", "role": "assistant", "model": "m1", "content": [
                {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}]}}


def _result(uuid: str, parent: str, call_id: str, text: str) -> dict:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]}}


def test_a_result_written_after_the_compaction_for_a_call_it_freed_is_named_after_that_call(tmp_path):
    """t1 (Read src/app.py, called at a1) is answered again after the compaction, by a rewind to a1."""
    records = [
        _user("u1", None, "p" * 40), _tool_use("a1", "u1", 0, "t1", "src/app.py"),
        _result("u2", "a1", "t1", "x" * 40), _assistant("a2", "u2", 1, "more"),
        RECORDS[4], _user("s", "b", "s" * 40, isCompactSummary=True), _assistant("a3", "s", 2, "again"),
        _result("u3", "a1", "t1", "y" * 40), _assistant("a4", "u3", 3, "ok"),
    ]
    path = _write(tmp_path / "s.jsonl", records)
    calls = list(TranscriptFile(path).calls())
    last = calls[3].items
    assert [i.id for i in last] == ["u1:0", "t1", "result:t1"]
    result = last[2]
    assert (result.label, result.source_call_id, result.reference) == ("Read", "t1", last[1].reference)
    assert result.reference is not None and "src/app.py" in result.reference
    assert _calls(calls) == _fed(path)


def test_a_call_written_again_long_after_is_still_one_call(tmp_path):
    """4,200 calls (past twice the 2,048 keys kept as strings, older keys go to their lines), then call 0 again."""
    records = [_user("u0", None, "hi")]
    parent = "u0"
    for n in range(4200):
        records.append(_assistant(f"a{n}", parent, n, "ok"))
        parent = f"a{n}"
    records.append(records[1])  # a resumed session writes call 0 again: same uuid, message and request ids
    records.append(_assistant("b", parent, 0, "ok"))  # another line of call 0's response
    path = _write(tmp_path / "s.jsonl", records)
    assert len(list(TranscriptFile(path).calls())) == 4200
    reader = make_reader("claude-code", "s.jsonl")
    assert sum(len(reader.feed(r, i)) for i, r in enumerate(records, 1)) == 4200


def test_a_file_replaced_under_the_reader_is_not_read_for_its_freed_links(tmp_path):
    """The same bytes under a new inode: not the file the offsets were taken in, so nothing is read from it."""
    path = tmp_path / "s.jsonl"
    _write(path, RECORDS[:7])
    source = TranscriptFile(str(path))
    assert len(list(source.poll())) == 3
    copy = tmp_path / "copy.jsonl"
    copy.write_text(path.read_text(encoding="utf-8") + json.dumps(RECORDS[7]) + "\n" + json.dumps(RECORDS[8]) + "\n",
                    encoding="utf-8")
    os.replace(copy, path)  # both existed at once: another inode
    calls = list(source.poll(final=True))
    assert [(c.index, [i.id for i in c.items]) for c in calls] == [(3, ["u4:0"])]
    assert sum("no longer where it was read" in p.message for p in source.problems) == 1


def _bash(uuid: str, parent: str, n: int, call_id: str, command: str) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "requestId": f"r{n}",
            "message": {"id": f"m{n}", "role": "assistant", "model": "m1", "content": [
                {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}]}}


def test_a_result_read_again_is_named_after_the_call_before_its_line_not_a_later_one_of_the_same_id(tmp_path):
    """t1 is Read at a1 and answered at u2; after the compaction a3 writes a Bash call under the same id t1.

    The rewind (u4, parent a2) reads u2 again: its result was named Read when first read (the call
    before it), and stays so; a3's Bash note, written after u2, does not rename it.
    """
    records = [
        _user("u1", None, "p" * 40), _tool_use("a1", "u1", 0, "t1", "src/app.py"),
        _result("u2", "a1", "t1", "x" * 40), _assistant("a2", "u2", 1, "more"),
        RECORDS[4], _user("s", "b", "s" * 40, isCompactSummary=True), _bash("a3", "s", 2, "t1", "ls"),
        _user("u4", "a2", "r" * 40), _assistant("a4", "u4", 3, "ok"),
    ]
    path = _write(tmp_path / "s.jsonl", records)
    calls = list(TranscriptFile(path).calls())
    last = calls[3].items
    assert [i.id for i in last] == ["u1:0", "t1", "result:t1", "a2:0", "u4:0"]
    call, result = last[1], last[2]
    assert (call.label, result.label, result.part) == ("Read", "Read", "results/Read")
    assert result.reference == call.reference and "src/app.py" in str(result.reference)
    assert _calls(calls) == _fed(path)


def test_a_result_read_again_whose_only_call_came_after_it_stays_unknown(tmp_path):
    """u2 answers t9 before any call t9 is written (a3, after the compaction): unknown when first read, and again."""
    records = [
        _user("u1", None, "p" * 40), _assistant("a1", "u1", 0, "done"),
        _result("u2", "a1", "t9", "x" * 40), _assistant("a2", "u2", 1, "more"),
        RECORDS[4], _user("s", "b", "s" * 40, isCompactSummary=True), _bash("a3", "s", 2, "t9", "ls"),
        _user("u4", "a2", "r" * 40), _assistant("a4", "u4", 3, "ok"),
    ]
    path = _write(tmp_path / "s.jsonl", records)
    calls = list(TranscriptFile(path).calls())
    result = calls[3].items[2]
    assert (result.id, result.label, result.reference) == ("result:t9", "unknown", None)
    assert _calls(calls) == _fed(path)


def test_a_byte_order_mark_and_crlf_line_ends_do_not_change_what_a_freed_link_reads_back(tmp_path):
    """RECORDS with a BOM before u1 (the first line, let go at the compaction) and CRLF ends: the same contexts."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\r\n" for r in RECORDS))
    session = analyze_file(str(path), tokenizer="chars").sessions[0]
    assert [r.estimated - r.inferred for r in session.rows] == [10, 21, 10, 32]
    calls = list(TranscriptFile(str(path)).calls())
    assert [i.id for i in calls[3].items] == ["u1:0", "a1:0", "u2:0", "a2:0", "u4:0"]


def test_a_followed_file_polled_as_it_grows_reads_freed_links_back_and_keeps_no_handle_open(tmp_path):
    """Written up to the compaction's call, polled; the rewind appended half a line at a time, polled after each."""
    path = tmp_path / "s.jsonl"
    _write(path, RECORDS[:7])
    source = TranscriptFile(str(path), documents=False)
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    assert [c.index for c in source.poll()] == [0, 1, 2]
    tail = "".join(json.dumps(r) + "\n" for r in RECORDS[7:])
    got = []
    for i in range(0, len(tail), len(tail) // 4 + 1):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(tail[i:i + len(tail) // 4 + 1])
        got.extend(source.poll())
    assert [(c.index, [i.id for i in c.items]) for c in got] == [(3, ["u1:0", "a1:0", "u2:0", "a2:0", "u4:0"])]
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds  # the reads back closed their handle


def test_a_call_key_the_filter_lets_through_is_read_back_and_another_call_is_not_dropped(tmp_path, monkeypatch):
    """Every retired key a candidate (a filter saying "maybe" for all): each new call's line is read, none matches."""
    from ctxscope.transcripts import claude_code, spill

    monkeypatch.setattr(claude_code, "_RECENT_CALLS", 2)
    monkeypatch.setattr(spill.KeyOffsets, "find", lambda self, key: sorted(self._index._offsets, reverse=True))
    records = [_user("u0", None, "hi")]
    parent = "u0"
    for n in range(12):
        records.append(_assistant(f"a{n}", parent, n, "ok"))
        parent = f"a{n}"
    records.append(records[1])  # call 0 again: retired (past 2 x 2 keys), its line read back and matched
    path = _write(tmp_path / "s.jsonl", records)
    assert [c.index for c in TranscriptFile(path).calls()] == list(range(12))


def test_a_rewind_in_one_session_leaves_another_sessions_note_of_the_same_one_character_id(tmp_path):
    """Call id "x" is Read in session A (a1) and Bash in session B (b1, read after). A's rewind (a2) frees a1.

    B's result for x (w2) is named Bash, after b1: a1's letting go takes only the note a1 made, told
    by its line (a parser that shares one-character strings, as json.loads does, gives both lines one "x").
    """
    def tag(record: dict, session: str) -> dict:
        return {**record, "sessionId": session}

    records = [
        tag(_user("u1", None, "p" * 40), "A"), tag(_tool_use("a1", "u1", 0, "x", "src/app.py"), "A"),
        tag(_user("v1", None, "q" * 40), "B"), tag(_bash("b1", "v1", 1, "x", "ls"), "B"),
        tag(_user("u2", "u1", "r" * 40), "A"), tag(_assistant("a2", "u2", 2, "ok"), "A"),
        tag(_result("w2", "b1", "x", "y" * 40), "B"), tag(_assistant("b2", "w2", 3, "ok"), "B"),
    ]
    path = _write(tmp_path / "s.jsonl", records)
    calls = list(TranscriptFile(path).calls())
    assert [(c.session_id, c.index) for c in calls] == [("A", 0), ("B", 0), ("A", 1), ("B", 1)]
    items = calls[3].items
    assert [i.id for i in items] == ["v1:0", "x", "result:x"]
    assert (items[1].label, items[2].label, items[2].reference) == ("Bash", "Bash", items[1].reference)
    assert _calls(calls) == _fed(path)
