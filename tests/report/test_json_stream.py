"""write_json: the analyze --json document written in pieces is the document written whole."""

from __future__ import annotations

import json

import pytest

from ctxscope.report import json_report
from ctxscope.report.analysis import FileResult, SessionResult, analyze_file
from ctxscope.report.call_rows import CallRow
from ctxscope.report.json_report import dumps, files_json, write_json
from ctxscope.schema import Category


def _session_file(path, calls: int) -> str:
    """A Claude Code session of ``calls`` calls, each a prompt of 40 chars and an answer."""
    lines, parent = [], None
    for n in range(calls):
        user = {"type": "user", "uuid": f"u{n}", "parentUuid": parent, "sessionId": "s",
                "timestamp": f"2026-02-11T10:00:{n:02d}.000Z",
                "message": {"role": "user", "content": "é" + "p" * 39}}
        answer = {"type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}", "sessionId": "s",
                  "requestId": f"r{n}", "timestamp": f"2026-02-11T10:00:{n:02d}.500Z",
                  "message": {"id": f"m{n}", "role": "assistant", "model": "m1",
                              "content": [{"type": "text", "text": "ok"}],
                              "usage": {"input_tokens": 100 * (n + 1), "output_tokens": 1}}}
        lines += [json.dumps(user), json.dumps(answer)]
        parent = f"a{n}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _written(files) -> str:
    pieces: list[str] = []
    write_json(files, pieces.append)
    return "".join(pieces)


@pytest.mark.parametrize("chunk", [1, 2, 1024])
def test_pieces_make_the_whole_document_at_every_chunk_size(tmp_path, monkeypatch, chunk):
    """5 calls in chunks of 1, 2 and 1,024 rows: the same text as dumps(files_json(...)) and a newline."""
    monkeypatch.setattr(json_report, "GROWTH_CHUNK_ROWS", chunk)
    files = [analyze_file(_session_file(tmp_path / f"s{k}.jsonl", calls), tokenizer="chars")
             for k, calls in ((0, 5), (1, 1))]
    text = _written(files)
    assert text == dumps(files_json(files)) + "\n"
    doc = json.loads(text)
    assert [len(s["growth"]) for f in doc["files"] for s in f["sessions"]] == [5, 1]
    assert doc["files"][0]["sessions"][0]["growth"][4]["reported_tokens"] == 500


def test_a_session_without_rows_and_one_over_int64_are_written_as_before():
    """No rows: "growth": []; a reported count of 2**70 (orjson refuses it): the whole document one way."""
    empty = SessionResult("e", "x.jsonl", "claude-code-jsonl", "anthropic")
    huge = SessionResult("h", "x.jsonl", "claude-code-jsonl", "anthropic")
    huge.rows.append(CallRow(0, 1, None, "m1", 10, 2 ** 70, 0, {Category.PROMPTS: 10}, 0, None, 10))
    for sessions in ([empty], [empty, huge]):
        files = [FileResult("x.jsonl", "claude-code-jsonl", 1, [], sessions)]
        assert _written(files) == dumps(files_json(files)) + "\n"
    assert '"growth": []' in _written([FileResult("x.jsonl", None, 0, [], [empty])])
